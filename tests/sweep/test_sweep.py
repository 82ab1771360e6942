#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Unit tests of twed-sweep (tools/sweep/), without a cluster: statistics,
result parsing, matrix validation, and the outputs made from the recorded
raw results in fixtures/short-sweep/ (a real run on the emulated cluster
of short-sweep.json as it was then, with a fault workload beside
lockstress and a guest booted per run)."""

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("TWED_ROOT") or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from sweep import cli, matrix, report, runner, stats, workloads  # noqa: E402

FIXTURE = os.path.join(HERE, "fixtures", "short-sweep")
TWED_SWEEP = os.path.join(ROOT, "tools", "twed-sweep")

GOOD = {
    "name": "t",
    "hosts": ["host-b"],
    "guest": {"vcpus": 4},
    "overcommit": ["1:1", "2:1", "4:1", "unpinned"],
    "twed": ["off", "fixed:3", {"mode": "dynamic", "delay": 1, "min": 0, "max": 6}],
    "workloads": [{"name": "lockstress", "args": ["--seconds", "5"]}],
}


class Stats(unittest.TestCase):
    def test_quantiles_interpolate(self):
        self.assertEqual(stats.quantile([1, 2, 3, 4], 0.5), 2.5)
        self.assertEqual(stats.quantile([4, 1, 3, 2], 0.25), 1.75)
        self.assertEqual(stats.quantile([7], 0.75), 7)

    def test_summary(self):
        s = stats.summary([10, 30, 20, 40, 1000])
        self.assertEqual(s["n"], 5)
        self.assertEqual(s["median"], 30)
        self.assertEqual((s["q1"], s["q3"], s["iqr"]), (20, 40, 20))
        self.assertEqual((s["min"], s["max"]), (10, 1000))
        self.assertEqual(s["mean"], 220)

    def test_summary_ignores_missing(self):
        self.assertIsNone(stats.summary([]))
        self.assertIsNone(stats.summary([None]))
        self.assertEqual(stats.summary([None, 5])["median"], 5)

    def test_change(self):
        self.assertAlmostEqual(stats.change_percent(110, 100), 10.0)
        self.assertAlmostEqual(stats.change_percent(36, 100), -64.0)
        self.assertIsNone(stats.change_percent(5, 0))
        self.assertIsNone(stats.change_percent(5, None))
        self.assertEqual(stats.ratio(10, 5), 2)


class Bootstrap(unittest.TestCase):
    def test_overlapping_samples_show_no_difference(self):
        off = [26.6, 12.2, 38.5, 20.1, 30.0]
        other = [17.8, 35.0, 14.0, 29.0, 24.0]
        ci = stats.bootstrap_median_diff(off, other)
        self.assertLessEqual(ci["lo"], 0)
        self.assertGreaterEqual(ci["hi"], 0)
        self.assertEqual(stats.verdict(ci), "no difference shown")

    def test_separated_samples_show_the_direction(self):
        off = [575, 560, 590, 580, 570]
        fixed = [99, 101, 97, 110, 95]
        ci = stats.bootstrap_median_diff(off, fixed)
        self.assertLess(ci["hi"], 0)
        self.assertEqual(stats.verdict(ci), "lower")
        self.assertEqual(stats.verdict(stats.bootstrap_median_diff(fixed, off)), "higher")
        self.assertAlmostEqual(ci["diff"], 99 - 575)

    def test_relative_interval_stays_above_minus_100(self):
        # Exits that almost vanish against an off that spreads widely: the
        # difference over off's median would put the interval's lower end
        # below -100 %; the resampled ratio cannot.
        off = [153, 116, 195, 160, 140]
        fixed = [4, 0, 9, 3, 5]
        ci = stats.bootstrap_median_diff(off, fixed)
        change, lo, hi = stats.change_interval(ci, stats.median(off))
        self.assertGreaterEqual(lo, -100)
        self.assertLess(hi, 0)
        self.assertLess(lo, change)
        self.assertAlmostEqual(change, (4 / 153 - 1) * 100)
        self.assertEqual(stats.verdict(ci), "lower")

    def test_zero_base_falls_back_to_the_difference(self):
        ci = stats.bootstrap_median_diff([0, 0, 0, 1, 0], [3, 4, 5, 4, 4])
        self.assertIsNone(ci["change_lo"])
        self.assertEqual(stats.change_interval(ci, 0), (None, None, None))
        self.assertEqual(stats.verdict(ci), "higher")

    def test_reproducible_and_needs_two_runs(self):
        a, b = [1, 2, 3, 4, 5], [2, 3, 4, 5, 9]
        self.assertEqual(stats.bootstrap_median_diff(a, b), stats.bootstrap_median_diff(a, b))
        self.assertIsNone(stats.bootstrap_median_diff([1], b))
        self.assertEqual(stats.verdict(None), "too few runs")


class Workloads(unittest.TestCase):
    def test_lockstress_line(self):
        r = workloads.KNOWN["lockstress"].parse([
            "noise",
            "lockstress threads=4 seconds=3.00 acquisitions=374942 acq_per_s=124782 "
            "wait_p50_ns=191 wait_p90_ns=191 wait_p99_ns=799 wait_max_ns=633032067"])
        self.assertEqual(r["metrics"]["acq_per_s"], 124782)
        self.assertEqual(r["metrics"]["wait_p99_ns"], 799)

    def test_fault_and_fscopy_lines(self):
        f = workloads.KNOWN["fault"].parse([
            "fault mode=write size_mib=16 stride=4096 touches=4096 seconds=1.03 ns_per_touch=251730.5"])
        self.assertEqual(f["metrics"]["ns_per_touch"], 251730.5)
        self.assertNotIn("mode", f["metrics"])
        c = workloads.KNOWN["fscopy"].parse([
            "fscopy preset=fstime buffer=1024 blocks=2000 seconds=10.001 kb_copied=51200 kb_per_s=5119"])
        self.assertEqual(c["metrics"]["kb_per_s"], 5119)

    def test_missing_result(self):
        self.assertIsNone(workloads.KNOWN["lockstress"].parse(["lockstress: bad option"]))
        self.assertIsNone(workloads.KNOWN["cyclictest"].parse(["WARN: nothing"]))

    def test_cyclictest_summary(self):
        r = workloads.KNOWN["cyclictest"].parse([
            "WARN: stat /dev/cpu_dma_latency failed: No such file or directory",
            "T: 0 (   70) P:80 I:1000 C:   1159 Min:    101 Act:12392 Avg: 2052 Max:   99650",
            "T: 1 (   71) P:80 I:1000 C:    654 Min:     67 Act: 6050 Avg: 2180 Max:   69563",
        ])
        m = r["metrics"]
        self.assertEqual((m["threads"], m["min_us"], m["max_us"], m["avg_us"]), (2, 67, 99650, 2116))
        self.assertEqual(m["cycles"], 1813)

    def test_argument_checks(self):
        self.assertIsNone(workloads.KNOWN["fault"].check_args(["--mode", "read", "--size", "16"]))
        self.assertIn("read_write", workloads.KNOWN["fault"].check_args(["--mode", "exec"]))
        self.assertIn("no option", workloads.KNOWN["lockstress"].check_args(["--spin", "1"]))
        self.assertIn("forever", workloads.KNOWN["cyclictest"].check_args(["-i", "1000"]))


class Runner(unittest.TestCase):
    DOMSTATS = """Domain: 'twed-sweep'
  vcpu.current=2
  vcpu.0.state=1
  vcpu.0.wfe_exit_stat.sum=10
  vcpu.0.twed_delay.cur=4
  vcpu.0.twed_grow.sum=3
  vcpu.0.blocking.cur=no
  vcpu.1.wfe_exit_stat.sum=5
  vcpu.1.twed_delay.cur=6
  vcpu.1.twed_grow.sum=1
"""

    def test_domstats_sum_over_vcpus(self):
        s = runner.parse_domstats(self.DOMSTATS)
        self.assertEqual(s["sum"], {"wfe_exit_stat": 15, "twed_grow": 4})
        self.assertEqual(s["cur"], {"twed_delay": [4, 6]})
        self.assertEqual(s["per"], {"wfe_exit_stat": [10, 5], "twed_grow": [3, 1]})

    def test_deltas(self):
        before = runner.parse_domstats(self.DOMSTATS)
        after = runner.parse_domstats(self.DOMSTATS.replace("sum=10", "sum=110"))
        d = runner.stats_delta(before, after)
        self.assertEqual(d["wfe_exit_stat"], 100)
        self.assertEqual(d["twed_grow"], 0)
        self.assertEqual(d["twed_delay_mean"], 5)

    def test_guest_cmdline_is_one_word_per_guest_boot(self):
        c = runner.guest_cmdline(["/bin/fault", "--mode", "write", "--size", "16"])
        self.assertTrue(c.startswith("/bin/sh,-c,"))
        script = c[len("/bin/sh,-c,"):]
        self.assertNotIn(" ", c)
        self.assertNotIn(",", script)
        self.assertIn("/bin/fault${IFS}--mode${IFS}write", script)
        # What sh runs, once ${IFS} is expanded:
        self.assertIn(runner.BEGIN_MARK, script.replace("${IFS}", " "))
        self.assertIn(runner.END_MARK + " $?", script.replace("${IFS}", " "))

    def test_guest_xml_pins(self):
        oc = matrix.Overcommit(2)
        self.assertEqual(oc.pinning(4), [0, 0, 1, 1])
        self.assertEqual(matrix.Overcommit(4).pinning(4), [0, 0, 0, 0])
        self.assertIsNone(matrix.Overcommit(None).pinning(4))
        xml = runner.guest_xml("g", 4, 96, oc.pinning(4), "idle")
        self.assertIn("<vcpupin vcpu='3' cpuset='1'/>", xml)
        self.assertNotIn("<twed", xml)

    def test_twedtune_readback(self):
        self.assertEqual(runner.parse_twedtune("mode           : dynamic\ndelay          : 1\n"
                                               "min            : 0\nmax            : 6\n"),
                         {"mode": "dynamic", "delay": 1, "min": 0, "max": 6})

    def test_cpu_kind(self):
        self.assertEqual(runner.classify_cpu({"cpu_implementer": "0x00"})["cpu_kind"], "emulated")
        self.assertEqual(runner.classify_cpu({"cpu_implementer": "0x41",
                                              "dt_compatible": "linux,dummy-virt"})["cpu_kind"], "virtual")
        self.assertEqual(runner.classify_cpu({"cpu_implementer": "0x41"})["cpu_kind"], "real")

    def test_session_script_survives_the_command_line(self):
        import base64
        from sweep import session
        script = session.session_script(["/bin/lockstress", "--seconds", "2"], 11, 2, [4, 11],
                                        ["/bin/lockstress", "--seconds", "15"])
        cmd = session.session_cmdline(script)
        # guest-boot splits at commas: /bin/sh, -c and one word; nothing
        # the kernel command line or sed's [^ ]* would cut.
        words = cmd.split(",")
        self.assertEqual(words[:2], ["/bin/sh", "-c"])
        self.assertEqual(len(words), 3)
        self.assertNotRegex(words[2], r"[ \"']")
        b64 = words[2].split("echo${IFS}")[1].split("|")[0]
        self.assertEqual(base64.b64decode(b64).decode(), script)
        self.assertIn("case $i in 4|11) echo TWED-SWEEP: WARM $i; /bin/lockstress --seconds 15 >/dev/null;; esac;", script)
        self.assertIn("case $i in 4|11) sleep 1;; esac;", script)
        self.assertNotIn("WARM", session.session_script(["/bin/true"], 3, 2, [], []))
        self.assertEqual(session.with_seconds(["--threads", "1"], 3), ["--threads", "1", "--seconds", "3"])

    def test_plan_interleaves_settings(self):
        m = matrix.parse(json.dumps(GOOD), "good.json")
        plan = runner.Runner(m, "/nonexistent", ROOT, "/nonexistent").plan()
        self.assertEqual(len(plan), 1 * 4 * 1 * 3 * 5)
        self.assertEqual([p[3].label for p in plan[:3]], ["off", "fixed-3", "dynamic-1-0-6"])
        self.assertEqual({p[4] for p in plan[:12]}, {1})


class Matrix(unittest.TestCase):
    def bad(self, change, path, words):
        doc = json.loads(json.dumps(GOOD))
        change(doc)
        with self.assertRaises(matrix.MatrixError) as cm:
            matrix.parse(json.dumps(doc), "bad.json")
        msg = str(cm.exception)
        self.assertTrue(msg.startswith(f"bad.json: {path}: "), msg)
        self.assertIn(words, msg)

    def test_good(self):
        m = matrix.parse(json.dumps(GOOD), "good.json")
        self.assertEqual([s.label for s in m.settings], ["off", "fixed-3", "dynamic-1-0-6"])
        self.assertEqual(m.settings[1].twedtune_args(),
                         ["--mode", "fixed", "--delay", "3", "--min", "3", "--max", "3"])
        self.assertEqual(m.settings[2].twedtune_args(),
                         ["--mode", "dynamic", "--delay", "1", "--min", "0", "--max", "6"])
        self.assertEqual(m.repetitions, matrix.MIN_REPETITIONS)
        self.assertEqual(m.baseline().label, "off")
        self.assertEqual(m.hosts[0].name, "host-b")
        self.assertTrue(m.hosts[0].is_cluster)

    def test_closed_loop_preset(self):
        parts = matrix.load_parts(cli.resolve("closed-loop"))
        self.assertEqual([m.name for m in parts], ["lock-2v-1p", "lock-4v-2p", "mixed"])
        for m in parts:
            self.assertTrue(m.session.enabled)
            self.assertGreaterEqual(m.repetitions, matrix.MIN_REPETITIONS)
            labels = [s.label for s in m.settings]
            self.assertEqual(labels[0], "off")
            self.assertIn("auto-6-14", labels)
            self.assertIn("dynamic-4-0-15", labels)
            # the whole fixed ladder: the best fixed setting is what auto is held to
            self.assertEqual([s.label for s in m.settings if s.mode == "fixed" and not s.twedd],
                             [f"fixed-{d}" for d in range(15)])
            # and the control of twedd's own cost
            control = [s for s in m.settings if s.twedd]
            self.assertEqual([(s.label, s.delay, s.under_twedd) for s in control],
                             [("fixed-9-twedd", 9, True)])
            self.assertEqual(control[0].twedtune_args(), ["--mode", "fixed", "--delay", "9", "--min", "9", "--max", "9"])
            self.assertEqual(m.settings[-1].twedtune_args(), ["--mode", "off"])
        self.assertEqual((parts[1].vcpus, parts[1].overcommit[0].pinning(4)), (4, [0, 0, 1, 1]))
        self.assertIsNone(parts[0].neighbour)
        self.assertEqual(parts[2].neighbour.workload.name, "lockstress")

    def test_auto_needs_a_session(self):
        doc = dict(GOOD, twed=["off", "auto:6,14"])
        with self.assertRaisesRegex(matrix.MatrixError, "session"):
            matrix.parse(json.dumps(doc), "t.json")
        doc["session"] = {"enabled": True}
        m = matrix.parse(json.dumps(doc), "t.json")
        self.assertEqual(m.settings[1].to_json(), {"label": "auto-6-14", "mode": "auto", "min": 6, "max": 14})
        with self.assertRaisesRegex(matrix.MatrixError, "min <= max"):
            matrix.parse(json.dumps(dict(doc, twed=["auto:9,3"])), "t.json")

    def test_fixed_under_twedd(self):
        doc = dict(GOOD, twed=["off", "fixed:9@twedd"])
        with self.assertRaisesRegex(matrix.MatrixError, "session"):
            matrix.parse(json.dumps(doc), "t.json")
        doc["session"] = {"enabled": True}
        m = matrix.parse(json.dumps(doc), "t.json")
        self.assertEqual(m.settings[1].to_json(),
                         {"label": "fixed-9-twedd", "mode": "fixed", "delay": 9, "under_twedd": True})
        self.assertTrue(m.settings[1].under_twedd)
        self.assertFalse(m.settings[0].under_twedd)
        # the object form round-trips, and says what is wrong
        again = matrix.parse(json.dumps(dict(doc, twed=[m.settings[1].to_json()])), "t.json")
        self.assertEqual(again.settings[0].label, "fixed-9-twedd")
        with self.assertRaisesRegex(matrix.MatrixError, r"\$\.twed\[0\]\.under_twedd: must be a boolean"):
            matrix.parse(json.dumps(dict(doc, twed=[{"mode": "fixed", "delay": 9, "under_twedd": "yes"}])), "t.json")
        with self.assertRaisesRegex(matrix.MatrixError, "is not off, fixed:D, fixed:D@twedd"):
            matrix.parse(json.dumps(dict(doc, twed=["dynamic:4,0,15@twedd"])), "t.json")

    def test_presets_are_valid(self):
        for name in ("rfc-2020", "icache-2017", "oversubscribed"):
            m = matrix.load(cli.resolve(name))
            self.assertGreaterEqual(m.repetitions, 5)
        rfc = matrix.load(cli.resolve("rfc-2020"))
        self.assertEqual([s.label for s in rfc.settings],
                         ["off"] + [f"fixed-{d}" for d in range(8)])
        self.assertEqual((rfc.vcpus, [o.label for o in rfc.overcommit]), (4, ["2:1"]))
        self.assertTrue(matrix.load(os.path.join(HERE, "short-sweep.json")))

    def test_not_json(self):
        with self.assertRaises(matrix.MatrixError) as cm:
            matrix.parse('{"twed": [}', "broken.json")
        self.assertIn("broken.json: line 1 column", str(cm.exception))

    def test_bad_inputs(self):
        self.bad(lambda d: d.pop("twed"), "$", "missing member 'twed'")
        self.bad(lambda d: d.update(colour="red"), "$.colour", "unknown member")
        self.bad(lambda d: d["twed"].append("fixed:16"), "$.twed[3].delay", "out of range 0..15")
        self.bad(lambda d: d["twed"].append("fast"), "$.twed[3]", "is not off, fixed:D")
        self.bad(lambda d: d["twed"].append({"mode": "dynamic", "delay": 1, "min": 2, "max": 6}),
                 "$.twed[3]", "min <= delay <= max")
        self.bad(lambda d: d["twed"].append({"mode": "fixed", "delay": "3"}),
                 "$.twed[3].delay", "must be an integer, not a string")
        self.bad(lambda d: d["twed"].append({"mode": "fixed", "delay": True}),
                 "$.twed[3].delay", "not a boolean")
        self.bad(lambda d: d["twed"].append({"mode": "turbo"}), "$.twed[3].mode", "'turbo'")
        self.bad(lambda d: d["twed"].append("off"), "$.twed[3]", "repeats $.twed[0]")
        self.bad(lambda d: d["overcommit"].append("3:1"), "$.overcommit[4]", "do not spread evenly")
        self.bad(lambda d: d["overcommit"].append("2:2"), "$.overcommit[4]", "is not 'N:1'")
        self.bad(lambda d: d["workloads"].append({"name": "stream"}), "$.workloads[1].name",
                 "unknown workload 'stream'")
        self.bad(lambda d: d["workloads"][0]["args"].append("x;reboot"), "$.workloads[0].args[2]",
                 "may only hold")
        self.bad(lambda d: d["workloads"][0].update(args=["--seconds", "0"]), "$.workloads[0].args",
                 "--seconds: '0'")
        self.bad(lambda d: d.update(repetitions=3), "$.repetitions", "out of range 5..")
        self.bad(lambda d: d.update(hosts=[]), "$.hosts", "at least one host")
        self.bad(lambda d: d.update(hosts=["qemu+tcp://h/system"]), "$.hosts[0]", "needs 'shell'")
        self.bad(lambda d: d["guest"].update(vcpus=0), "$.guest.vcpus", "out of range")

    def test_command_line_overrides(self):
        m = matrix.parse(json.dumps(GOOD), "good.json", repetitions=2,
                         hosts=["host-a", {"uri": "qemu+ssh://root@h/system", "shell": ["ssh", "root@h"]}])
        self.assertEqual(m.repetitions, 2)
        self.assertEqual([h.name for h in m.hosts], ["host-a", "root_h_system"])


class CommandLine(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([TWED_SWEEP] + list(args), capture_output=True, text=True, timeout=60)

    def test_bad_matrix_exits_2_and_runs_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "m.json")
            doc = dict(GOOD, twed=["off", "fixed:99"])
            with open(path, "w") as f:
                json.dump(doc, f)
            out = os.path.join(tmp, "out")
            p = self.run_tool("run", path, "--out", out)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"{path}: $.twed[1].delay: 99 is out of range 0..15", p.stderr)
            self.assertFalse(os.path.exists(out))

    def test_check_counts_runs(self):
        p = self.run_tool("check", "rfc-2020")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("135 runs", p.stdout)

    def test_missing_file(self):
        p = self.run_tool("check", "/nonexistent/m.json")
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent/m.json: $: cannot read", p.stderr)


class QuietStretches(unittest.TestCase):
    """Sessions under twedd: stretches without a WFE trap exit."""

    SERIES = [{"t": 0, "wfe_exit_stat": 1, "twed_delay": [0, 0]},
              {"t": 1, "wfe_exit_stat": 5, "twed_delay": [6, 6]},
              {"t": 2, "wfe_exit_stat": 5, "twed_delay": [6, 6]},
              {"t": 12, "wfe_exit_stat": 5, "twed_delay": [0, 6]},
              {"t": 13, "wfe_exit_stat": 9, "twed_delay": [6, 6]},
              {"t": 17, "wfe_exit_stat": 9, "twed_delay": [6, 6]},
              {"t": 18, "wfe_exit_stat": None, "twed_delay": [6, 6]},
              {"t": 30, "wfe_exit_stat": None, "twed_delay": [6, 6]},
              {"t": 31, "wfe_exit_stat": 12, "twed_delay": [7, 7]},
              {"t": 45, "wfe_exit_stat": 12, "twed_delay": [0, 7]}]

    def test_stretches(self):
        # 1..12 s quiet; 13..17 too short; the samples without the stat
        # are no evidence either way; 31..45 runs to the end.
        self.assertEqual(report.quiet_stretches(self.SERIES),
                         [(1, 12, [0, 6]), (31, 45, [0, 7])])
        self.assertEqual(report.quiet_stretches(self.SERIES, 12), [(31, 45, [0, 7])])
        self.assertEqual(report.quiet_stretches(self.SERIES[:2]), [])

    def test_section(self):
        class Points:
            points = {("host-b", "2:1", "lockstress", "auto-6-14"): [
                {"repetition": 2, "auto": {"series": self.SERIES}},
                {"repetition": 1, "auto": {"series": self.SERIES[:3]}}],
                ("host-b", "2:1", "lockstress", "fixed-9-twedd"): [
                {"repetition": 1, "twedd": {"series": self.SERIES[4:6]}}]}
        text = report.write_quiet(Points())
        self.assertIn("| host-b | 2:1 | auto-6-14 | 2 | 1–12 s | 11 s | [0, 6] |", text)
        self.assertIn("| host-b | 2:1 | auto-6-14 | 2 | 31–45 s | 14 s | [0, 7] |", text)
        self.assertEqual(text.count("| host-b |"), 2)
        Points.points = {k: v for k, v in Points.points.items() if k[3] == "fixed-9-twedd"}
        self.assertTrue(report.write_quiet(Points()).endswith("\nNone.\n"))


class Report(unittest.TestCase):
    """Outputs from the recorded raw results of fixtures/short-sweep."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.out = os.path.join(cls.tmp, "sweep")
        shutil.copytree(FIXTURE, cls.out)
        with redirect_stderr(io.StringIO()):
            cls.sweep = report.write_report(cls.out)
        with open(os.path.join(cls.out, "table.md"), encoding="utf-8") as f:
            cls.table = f.read()
        with open(os.path.join(cls.out, "report.md"), encoding="utf-8") as f:
            cls.report = f.read()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def raw_values(self, ratio, workload, setting, metric):
        vals = []
        for r in report.load_runs(self.out):
            if (r["overcommit"], r["workload"]["label"], r["setting"]["label"]) == (ratio, workload, setting):
                vals.append(report.run_metrics(r)[metric])
        return vals

    def test_every_run_is_loaded(self):
        self.assertEqual(len(self.sweep.runs), 16)

    def test_csv_has_a_row_per_run_and_metric(self):
        with open(os.path.join(self.out, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        expected = sum(len(report.run_metrics(r)) for r in self.sweep.runs)
        self.assertEqual(len(rows), expected)
        self.assertIn("vcpu.wfe_exit_stat", {r["metric"] for r in rows})
        with open(os.path.join(self.out, "results.json")) as f:
            self.assertEqual(len(json.load(f)), 16)

    def test_summary_matches_raw(self):
        with open(os.path.join(self.out, "summary.csv"), newline="") as f:
            rows = {(r["overcommit"], r["workload"], r["setting"], r["metric"]): r
                    for r in csv.DictReader(f)}
        for setting in ("off", "fixed-10"):
            vals = self.raw_values("2:1", "lockstress", setting, "vcpu.wfe_exit_stat")
            row = rows[("2:1", "lockstress", setting, "vcpu.wfe_exit_stat")]
            self.assertAlmostEqual(float(row["median"]), stats.quantile(vals, 0.5))
            self.assertEqual(int(row["n"]), len(vals))
        off = stats.quantile(self.raw_values("2:1", "lockstress", "off", "workload.acq_per_s"), 0.5)
        fixed = stats.quantile(self.raw_values("2:1", "lockstress", "fixed-10", "workload.acq_per_s"), 0.5)
        row = rows[("2:1", "lockstress", "fixed-10", "workload.acq_per_s")]
        self.assertAlmostEqual(float(row["change_vs_off_percent"]), (fixed - off) / off * 100, places=2)
        self.assertEqual(rows[("2:1", "lockstress", "off", "workload.acq_per_s")]["change_vs_off_percent"], "")

    def test_table_layout(self):
        self.assertIn("### host-b, overcommit 2:1", self.table)
        self.assertIn("| setting | lockstress — acq_per_s (acquisitions/s) | "
                      "fault-write-16M — ns_per_touch (ns/touch) |", self.table)
        rows = [l for l in self.table.splitlines() if l.startswith("| fixed-10 |")]
        self.assertEqual(len(rows), 6)  # 2 ratios x (workload, WFE, host latency)
        self.assertTrue(all(" %" in r for r in rows))

    def test_report_states_machine_and_method(self):
        for words in ("## Machine", "uname: `Linux host-b", "aarch64", "2 cores",
                      "CPU kind: **emulated**", "NOT hardware performance",
                      "## Method", "twedtune --live --config", "cyclictest", "IQR"):
            self.assertIn(words, self.report)

    @unittest.skipUnless(shutil.which("gnuplot"), "gnuplot is not installed")
    def test_versus_off_has_intervals_and_verdicts(self):
        with open(os.path.join(self.out, "versus-off.md"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("95 % CI of the change", text)
        self.assertIn("Spread of `off`", text)
        self.assertRegex(text, r"\| fixed-10 \|.*\| (no difference shown|higher|lower) \|")
        self.assertIn("Versus off, with confidence intervals", self.report)

    def test_auto_against_best_fixed(self):
        # The fixture's fixed-10 runs relabelled as an auto setting: the
        # best fixed setting is then fixed-10 itself, and the difference
        # 0 with an interval around it.
        tmp = tempfile.mkdtemp()
        try:
            out = os.path.join(tmp, "s")
            shutil.copytree(FIXTURE, out)
            with open(os.path.join(out, "matrix.json"), encoding="utf-8") as f:
                m = json.load(f)
            src = os.path.join(out, "raw", "host-b", "2to1", "lockstress")

            def add_setting(setting, scale=1):
                """SETTING in the matrix, with the fixture's fixed-10 runs as
                its runs (their figures times SCALE)."""
                m["twed"].append(setting)
                with open(os.path.join(out, "matrix.json"), "w", encoding="utf-8") as f:
                    json.dump(m, f)
                runs = os.path.join(src, setting["label"])
                shutil.copytree(os.path.join(src, "fixed-10"), runs)
                for name in os.listdir(runs):
                    path = os.path.join(runs, name)
                    with open(path, encoding="utf-8") as f:
                        r = json.load(f)
                    r["setting"] = setting
                    r["result"]["metrics"] = {k: v * scale for k, v in r["result"]["metrics"].items()}
                    with open(path, "w", encoding="utf-8") as f:
                        json.dump(r, f)

            add_setting({"label": "auto-6-14", "mode": "auto", "min": 6, "max": 14})
            text = report.versus_best_fixed(report.Sweep(out), "host-b", "2:1", "lockstress")
            self.assertIn("by the median of all runs: `fixed-10`", text)
            self.assertIn("`auto-6-14` versus the best fixed setting on the other repetitions "
                          "(`fixed-10` in 2 of 2)", text)
            self.assertIn("+0.0 %", text)
            self.assertIn("no difference shown", text)
            # A control under twedd (the fixture's fixed-10 runs again, with
            # figures a thousand times higher): never the best fixed
            # setting, compared with auto and with fixed-10.
            add_setting({"label": "fixed-10-twedd", "mode": "fixed", "delay": 10, "under_twedd": True}, 1000)
            text = report.versus_best_fixed(report.Sweep(out), "host-b", "2:1", "lockstress")
            self.assertIn("(`fixed-10` in 2 of 2)", text)
            self.assertIn("`auto-6-14` versus the fixed control under twedd `fixed-10-twedd`", text)
            self.assertIn("`fixed-10-twedd` versus the same delay without twedd (twedd's own cost) `fixed-10`", text)
        finally:
            shutil.rmtree(tmp)

    def test_best_fixed_is_chosen_without_the_compared_run(self):
        # fixed-a has the best median of all five runs (12 against 11), but
        # on the runs without repetition 3, 4 or 5 its median is 10.5:
        # those repetitions are compared with fixed-b, chosen without them.
        runs = {"fixed-a": {1: 9, 2: 9, 3: 12, 4: 12, 5: 12},
                "fixed-b": {1: 11, 2: 11, 3: 11, 4: 11, 5: 11}}

        class Table:
            @staticmethod
            def values_by_repetition(host, ratio, wl, setting, metric):
                return runs[setting]

        chosen = report.held_out_best(Table, "h", "2:1", "w", list(runs), "m", True)
        self.assertEqual(chosen, {1: "fixed-a", 2: "fixed-a", 3: "fixed-b", 4: "fixed-b", 5: "fixed-b"})
        # lower is better: fixed-a's 9s decide where they are not held out
        chosen = report.held_out_best(Table, "h", "2:1", "w", list(runs), "m", False)
        self.assertEqual(chosen, {1: "fixed-b", 2: "fixed-b", 3: "fixed-a", 4: "fixed-a", 5: "fixed-a"})

    def test_plots(self):
        for wl in ("lockstress", "fault-write-16M"):
            with open(os.path.join(self.out, "plots", f"{wl}.png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertIn(f"![{wl}.png](plots/{wl}.png)", self.report)

    def test_report_is_reproducible(self):
        with open(os.path.join(self.out, "table.md"), encoding="utf-8") as f:
            first = f.read()
        with redirect_stderr(io.StringIO()):
            report.write_report(self.out)
        with open(os.path.join(self.out, "table.md"), encoding="utf-8") as f:
            self.assertEqual(f.read(), first)


if __name__ == "__main__":
    unittest.main(verbosity=2)
