# SPDX-License-Identifier: GPL-2.0-or-later
"""Sessions: one guest booted per repetition, every setting of the matrix
applied live in turn between runs of the workload (matrix "session").

Why: a fresh guest per setting costs a boot each (most of a short run's
time on the emulated cluster), and the settings of one repetition then
see the same guest, the same host and the same neighbour.

How a session goes:

1. An optional neighbour guest (matrix "neighbour") starts on the same
   pCPUs and runs its workload in a loop (twed.guest=loop,...), each
   round printing a result line.
2. The guest runs a script (base64 on its command line, decoded by the
   guest's busybox): for each segment, print WAIT i, sleep the gap, (for
   the segments under twedd: run the workload unmeasured for the warm-up,
   under twedd), print BEGIN i, run the workload, print END i STATUS.
3. At WAIT i the host applies setting i live (twedtune; for auto the
   guest goes to off, and twedd starts with a policy of mode auto over
   this guest only when the guest prints WARM i and begins the warm-up;
   a fixed:D@twedd setting goes to D, and twedd starts in the same way
   with a policy that keeps D, the control of twedd's own cost;
   a first window at off measured while the guest idles in the gap would
   not be the workload's), takes the first `virsh domstats --vcpu` sample
   while the guest idles in the gap, and checks that BEGIN i has not been
   printed yet (else the gap was too short and the segment fails).  The
   second sample is at END.  Under twedd the first is at BEGIN (the guest
   idles a second after it), and domstats is sampled every second from
   WAIT to END (delay and WFE exits over time, for the plot).
4. Each segment is written as an ordinary result file of the matrix, so
   report.py reads sessions and single runs alike.

The settings' order rotates by repetition so that no setting always runs
first after boot.
"""

import base64
import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from . import runner, workloads

NEIGHBOUR_NAME = "twed-sweep-nb"
WAIT_MARK = "TWED-SWEEP: WAIT"
WARM_MARK = "TWED-SWEEP: WARM"
SAMPLE_SECONDS = 1.0
STALL_SECONDS = 8
# The kernel's per-vCPU stats kept with each sample under twedd.
PER_VCPU_STATS = ("exits", "wfe_exit_stat", "wfi_exit_stat", "halt_wakeup")


def session_script(argv, segments, gap, twedd_indices, warmup_argv):
    """The guest's script: plain sh, run through eval after base64 -d."""
    # The segments under twedd (auto, fixed:D@twedd): the warm-up under
    # twedd, and a second idle after BEGIN so that the host's first stats
    # sample lands before the run.
    which = "|".join(str(i) for i in twedd_indices)
    warm = (f"case $i in {which}) echo {WARM_MARK} $i; {' '.join(warmup_argv)} >/dev/null;; esac; "
            if twedd_indices else "")
    settle = f"case $i in {which}) sleep 1;; esac; " if twedd_indices else ""
    return (f"for i in $(seq 1 {segments}); do echo {WAIT_MARK} $i; sleep {gap}; {warm}"
            f"echo {runner.BEGIN_MARK} $i; {settle}{' '.join(argv)}; echo {runner.END_MARK} $i $?; done; "
            "sleep 86400")


def session_cmdline(script):
    """twed.guest= value: no spaces, commas or quotes survive the kernel
    command line and guest-boot; base64 carries the script through."""
    b64 = base64.b64encode(script.encode()).decode()
    outer = f"eval${{IFS}}$(echo${{IFS}}{b64}|base64${{IFS}}-d)"
    return "/bin/sh,-c," + outer


def with_seconds(args, seconds):
    out = list(args)
    if "--seconds" in out:
        out[out.index("--seconds") + 1] = str(seconds)
    else:
        out += ["--seconds", str(seconds)]
    return out


class SessionRunner:
    def __init__(self, base):
        self.base = base          # runner.Runner: paths, hosts, helpers
        self.m = base.matrix

    def order(self, rep):
        s = list(self.m.settings)
        k = (rep - 1) % len(s)
        return s[k:] + s[:k]

    def sessions(self):
        for rep in range(1, self.m.repetitions + 1):
            for h in self.m.hosts:
                for oc in self.m.overcommit:
                    for wl in self.m.workloads:
                        yield h, oc, wl, rep

    def run_all(self, dry_run=False):
        done = failed = skipped = 0
        plan = list(self.sessions())
        for n, (h, oc, wl, rep) in enumerate(plan, 1):
            todo = [s for s in self.order(rep)
                    if not os.path.exists(self.base.raw_path(h, oc, wl, s, rep))]
            what = f"[session {n}/{len(plan)}] {h.name} {oc.label} {wl.label} rep {rep}"
            if not todo:
                skipped += len(self.m.settings)
                continue
            if dry_run:
                runner.log(f"{what}: would run {len(todo)} setting(s)")
                continue
            runner.log(f"{what}: {len(todo)} setting(s)")
            t0 = time.monotonic()
            try:
                d, f = self.run_session(self.base.hosts[h.name], h, oc, wl, rep, todo)
            except (runner.RunError, subprocess.TimeoutExpired) as e:
                runner.log(f"{what}: FAILED: {e}")
                failed += len(todo)
                continue
            done += d
            failed += f
            runner.log(f"{what}: {d} done, {f} failed ({time.monotonic() - t0:.0f} s)")
        return done, skipped, failed

    # --- one session ----------------------------------------------------

    def _console(self, host, name):
        return host.sh(f"cat /var/log/twed/{name}.console 2>/dev/null", check=False)

    def _cleanup(self, host):
        for name in (runner.GUEST_NAME, NEIGHBOUR_NAME):
            host.virsh("destroy", name, check=False)
            host.virsh("undefine", name, check=False)

    def _define_start(self, host, name, vcpus, pinning, cmdline, paused=False):
        host.sh(f"mkdir -p /var/log/twed; rm -f /var/log/twed/{name}.console")
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(runner.guest_xml(name, vcpus, self.m.memory_mib, pinning, cmdline))
            xml = f.name
        try:
            host.virsh("define", xml)
            host.virsh("start", *(["--paused"] if paused else []), name)
        finally:
            os.unlink(xml)

    def _wait(self, host, mark, timeout, sample=None, line=None):
        """Polls the guest console until MARK starts a line (or until a
        whole line, newline included, matches the regular expression
        LINE); calls SAMPLE() about every SAMPLE_SECONDS meanwhile."""
        deadline = time.monotonic() + timeout
        next_sample = 0.0
        found = re.compile(rf"^{line}\r?\n" if line else rf"^{re.escape(mark)}\b", re.M)
        while True:
            now = time.monotonic()
            if sample and now >= next_sample:
                sample()
                next_sample = now + SAMPLE_SECONDS
            text = self._console(host, runner.GUEST_NAME)
            if found.search(text):
                return text
            state = host.virsh("domstate", runner.GUEST_NAME, check=False).strip()
            if state and state not in ("running", "paused"):
                raise runner.RunError(f"the guest is {state} before '{mark}'")
            if time.monotonic() > deadline:
                raise runner.RunError(f"no '{mark}' on the guest console within {timeout} s; it ends:\n"
                                      + "\n".join(text.splitlines()[-10:]))
            time.sleep(runner.POLL_SECONDS)

    def _start_twedd(self, host, spec, setting, workdir):
        """twedd over this host with one policy: mode auto (or the fixed
        delay of a fixed:D@twedd setting) for the sweep's guest, off for
        everything else (the neighbour)."""
        pdir = os.path.join(workdir, "policies.d")
        os.makedirs(pdir, exist_ok=True)
        s = self.m.session
        if setting.mode == "auto":
            band = {"mode": "auto", "min": setting.min, "max": setting.max}
        else:
            band = {"mode": "fixed", "delay": setting.delay}
        auto = {"version": 1, "name": "sweep-auto", "priority": 10,
                "match": {"domains": [runner.GUEST_NAME]},
                "beyond": band,
                "allow_long_delays": setting.max > 5,
                "auto": {"dwell_seconds": s.auto_dwell_seconds,
                         "stale_seconds": max(10, 5 * s.auto_dwell_seconds),
                         "cooldown_seconds": 6 * s.auto_dwell_seconds}}
        others = {"version": 1, "name": "sweep-others", "beyond": {"mode": "off"}}
        for doc in (auto, others):
            with open(os.path.join(pdir, doc["name"] + ".json"), "w") as f:
                json.dump(doc, f)
        conf = os.path.join(workdir, "twed.conf")
        with open(conf, "w") as f:
            f.write("[twed]\n")
        uri = spec.uri or subprocess.run(
            [os.path.join(self.base.root, "tools", "cluster"), "uri", spec.name],
            capture_output=True, text=True, check=True).stdout.strip()
        twedd = os.path.join(self.base.stack, "plugin", "twedd", "twedd")
        if not os.access(twedd, os.X_OK):
            raise runner.RunError(f"{twedd} is missing: build the plugin (tools/stack build plugin)")
        env = dict(os.environ)
        lib = os.path.join(self.base.stack, "libvirt", "src")
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        log = open(os.path.join(workdir, "twedd.log"), "w")
        p = subprocess.Popen([twedd, "--config", conf, "-P", pdir, "-c", f"{spec.name}={uri}",
                              "-i", str(s.auto_interval_seconds), "--log-format", "json",
                              # the decisions that kept a setting, with their reasons
                              "--debug"],
                             stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        log.close()
        return p

    def _stop_twedd(self, p):
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def _neighbour_results(self, host, begin_len, end_text):
        nb = self.m.neighbour
        if not nb:
            return None
        kind = workloads.KNOWN[nb.workload.name]
        lines = end_text.splitlines()[begin_len:]
        values = []
        for line in lines:
            r = kind.parse([line])
            if r:
                values.append(r["metrics"][kind.primary])
        return {"lines": len(values), "values": values,
                "metrics": {kind.primary: statistics.median(values)} if values else {}}

    def run_session(self, host, spec, oc, wl, rep, todo):
        m = self.m
        s = m.session
        kind = workloads.KNOWN[wl.name]
        argv = kind.command(wl.args)
        order = self.order(rep)
        twedd_indices = [i for i, st in enumerate(order, 1) if st.under_twedd]
        warm_argv = kind.command(with_seconds(wl.args, s.auto_warmup_seconds)) if twedd_indices else []
        script = session_script(argv, len(order), s.gap_seconds, twedd_indices, warm_argv)
        pinning = oc.pinning(m.vcpus)
        self._cleanup(host)
        workdir = tempfile.mkdtemp(prefix="twed-sweep-auto-")
        twedd = None
        done = failed = 0
        try:
            if m.neighbour:
                nb = m.neighbour
                nb_pins = [pinning[i % len(pinning)] for i in range(nb.vcpus)] if pinning else None
                nb_cmd = "loop," + ",".join(workloads.KNOWN[nb.workload.name].command(nb.workload.args))
                self._define_start(host, NEIGHBOUR_NAME, nb.vcpus, nb_pins, nb_cmd)
            self._define_start(host, runner.GUEST_NAME, m.vcpus, pinning, session_cmdline(script), paused=True)
            host.virsh("resume", runner.GUEST_NAME)
            for i, setting in enumerate(order, 1):
                timeout = self.base.boot_timeout if i == 1 else self.base.run_timeout
                self._wait(host, f"{WAIT_MARK} {i}", timeout)
                self._stop_twedd(twedd)
                twedd = None
                started = datetime.datetime.now(datetime.timezone.utc)
                host.virsh("twedtune", runner.GUEST_NAME, "--live", *setting.twedtune_args())
                applied = runner.parse_twedtune(host.virsh("twedtune", runner.GUEST_NAME, "--live"))
                want = "off" if setting.mode == "auto" else setting.mode
                if applied.get("mode") != want or (want != "off" and applied.get("delay") != setting.delay):
                    raise runner.RunError(f"twedtune reads back {applied}, not {setting.to_json()}")
                series = []
                kicks = []
                t0 = time.monotonic()

                def sample():
                    st = runner.parse_domstats(host.virsh("domstats", "--vcpu", runner.GUEST_NAME))
                    series.append({"t": round(time.monotonic() - t0, 2),
                                   "wfe_exit_stat": st["sum"].get("wfe_exit_stat"),
                                   "exits": st["sum"].get("exits"),
                                   "twed_delay": st["cur"].get("twed_delay"),
                                   # Which vCPU ran, trapped or slept: a stretch
                                   # without WFE exits is told apart by them.
                                   "vcpus": {k: st["per"][k] for k in PER_VCPU_STATS if k in st["per"]}})
                    # On the emulated cluster a guest has been seen to stop
                    # (no exit at all for 100 s) after a live change in the
                    # middle of its lockstress.  Setting the same values again
                    # kicks its vCPUs (KVM_ENABLE_CAP requests every vCPU);
                    # each kick is kept with the result.
                    still = [p for p in series if series[-1]["t"] - p["t"] <= STALL_SECONDS]
                    if (series[-1]["t"] >= STALL_SECONDS and len(still) < len(series) and
                            still[0]["exits"] == series[-1]["exits"] and
                            (not kicks or series[-1]["t"] - kicks[-1]["t"] > STALL_SECONDS)):
                        cur = runner.parse_twedtune(host.virsh("twedtune", runner.GUEST_NAME, "--live"))
                        args = ["--mode", cur.get("mode", "off")]
                        if cur.get("mode") in ("fixed", "dynamic"):
                            args += ["--delay", str(cur.get("delay", 0))]
                        host.virsh("twedtune", runner.GUEST_NAME, "--live", *args, check=False)
                        kicks.append({"t": series[-1]["t"], "setting": cur})
                        runner.log(f"  {setting.label}: no exit for {STALL_SECONDS} s: "
                                   f"kicked the vCPUs ({cur})")
                if setting.under_twedd:
                    self._wait(host, f"{WARM_MARK} {i}", self.base.run_timeout, sample)
                    twedd = self._start_twedd(host, spec, setting, workdir)
                else:
                    # The guest idles in the gap: the run starts after BEGIN,
                    # which must not be there yet.
                    before = runner.parse_domstats(host.virsh("domstats", "--vcpu", runner.GUEST_NAME))
                text = self._console(host, runner.GUEST_NAME)
                if re.search(rf"^{re.escape(runner.BEGIN_MARK)} {i}\b", text, re.M):
                    failed += 1
                    runner.log(f"segment {i} ({setting.label}): applied after the workload began; "
                               f"gap_seconds {s.gap_seconds} is too short here")
                    continue
                text = self._wait(host, f"{runner.BEGIN_MARK} {i}", self.base.run_timeout,
                                  sample if setting.under_twedd else None)
                if setting.under_twedd:
                    before = runner.parse_domstats(host.virsh("domstats", "--vcpu", runner.GUEST_NAME))
                nb_begin = len(self._console(host, NEIGHBOUR_NAME).splitlines()) if m.neighbour else 0
                # The whole END line: the console may hold "END i" before
                # the status that follows it on the line.
                text = self._wait(host, f"{runner.END_MARK} {i}", self.base.run_timeout,
                                  sample if setting.under_twedd else None,
                                  line=rf"{re.escape(runner.END_MARK)} {i} \d+")
                after = runner.parse_domstats(host.virsh("domstats", "--vcpu", runner.GUEST_NAME))
                nb_text = self._console(host, NEIGHBOUR_NAME) if m.neighbour else ""
                finished = datetime.datetime.now(datetime.timezone.utc)
                lines = text.splitlines()
                b = max(k for k, l in enumerate(lines) if l.strip() == f"{runner.BEGIN_MARK} {i}")
                e = max(k for k, l in enumerate(lines)
                        if re.fullmatch(rf"{re.escape(runner.END_MARK)} {i} \d+", l.strip()))
                status = int(lines[e].split()[-1])
                result = kind.parse(lines[b + 1:e])
                if status != 0 or result is None:
                    failed += 1
                    runner.log(f"segment {i} ({setting.label}): {' '.join(argv)} exited {status}"
                               + ("" if result else ", no result line"))
                    continue
                record = {
                    "format": 1, "matrix": m.name, "host": spec.name, "overcommit": oc.label,
                    "setting": setting.to_json(), "workload": wl.to_json(), "repetition": rep,
                    "started": started.isoformat(timespec="seconds"),
                    "finished": finished.isoformat(timespec="seconds"),
                    "guest": {"name": runner.GUEST_NAME, "vcpus": m.vcpus, "memory_mib": m.memory_mib,
                              "pinning": pinning, "session_segment": i},
                    "twed_applied": applied, "result": result, "exit_status": status,
                    "vcpu_stats": {"before": before, "after": after,
                                   "delta": runner.stats_delta(before, after)},
                    "host_latency": None,
                    "console": "\n".join(lines[b:e + 1]),
                }
                if m.neighbour:
                    record["neighbour"] = self._neighbour_results(host, nb_begin, nb_text)
                if setting.under_twedd:
                    # "auto" for auto's plots; "twedd" for the control.
                    record["auto" if setting.mode == "auto" else "twedd"] = {
                        "series": series, "kicks": kicks, "twedd_log": self._twedd_decisions(workdir)}
                path = self.base.raw_path(spec, oc, wl, setting, rep)
                if setting in todo:
                    runner.write_json(path, record)
                    done += 1
                primary = kind.primary
                runner.log(f"  {setting.label}: {primary}={result['metrics'][primary]:g} "
                           f"wfe_exit_stat={record['vcpu_stats']['delta'].get('wfe_exit_stat')}")
        finally:
            self._stop_twedd(twedd)
            self._cleanup(host)
            shutil.rmtree(workdir, ignore_errors=True)
        return done, failed

    def _twedd_decisions(self, workdir):
        """twedd's changes, and the decisions that kept a setting, with their
        reasons, from its JSON log lines (--debug)."""
        out = []
        try:
            with open(os.path.join(workdir, "twedd.log"), encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        ev = json.loads(line)
                    except ValueError:
                        continue
                    msg = ev.get("message") or ""
                    if msg.startswith("TWED "):
                        out.append(f"{ev.get('ts', '')} {ev.get('domain', '')}: {msg}")
        except OSError:
            pass
        return out
