# SPDX-License-Identifier: GPL-2.0-or-later
"""Outputs of a sweep, made from its raw results only (OUT/raw/**.json,
OUT/matrix.json, OUT/hosts/*.json), so they can be remade at any time:

  results.csv    one row per run and metric (long format)
  results.json   every run, as recorded, without the console
  summary.csv    one row per host, ratio, workload, setting and metric
  table.md       the seed-style table: setting x workload, median, IQR,
                 min-max, change versus off
  plots/*.png    one plot per workload (gnuplot)
  report.md      machine, method, tables, plots
"""

import csv
import glob
import json
import os
import shutil
import subprocess
from collections import Counter

from . import stats, workloads

# Kernel stats shown in the tables besides the workload's own figure.
VCPU_STATS = ["wfe_exit_stat", "twed_grow", "twed_shrink", "twed_delay_mean"]


def load_runs(out_dir):
    runs = []
    for path in sorted(glob.glob(os.path.join(out_dir, "raw", "**", "*.json"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            run = json.load(f)
        run["_path"] = os.path.relpath(path, out_dir)
        runs.append(run)
    return runs


def load_json(path, default=None):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return default


def run_metrics(run):
    """{metric name: value} of one run: the workload's figures, the vCPU
    stat deltas and the host's scheduler latency."""
    out = {}
    for k, v in run["result"]["metrics"].items():
        out[f"workload.{k}"] = v
    for k, v in run["vcpu_stats"]["delta"].items():
        out[f"vcpu.{k}"] = v
    hl = run.get("host_latency") or {}
    for k, v in (hl.get("metrics") or {}).items():
        out[f"host_latency.{k}"] = v
    nb = run.get("neighbour") or {}
    for k, v in (nb.get("metrics") or {}).items():
        out[f"neighbour.{k}"] = v
    return out


class Sweep:
    """The raw results grouped by point: (host, ratio, workload, setting)."""

    def __init__(self, out_dir):
        self.out = out_dir
        self.matrix = load_json(os.path.join(out_dir, "matrix.json"))
        if self.matrix is None:
            raise FileNotFoundError(f"{out_dir}/matrix.json is missing: not a sweep directory")
        self.runs = load_runs(out_dir)
        self.settings = [s["label"] for s in self.matrix["twed"]]
        self.setting_by_label = {s["label"]: s for s in self.matrix["twed"]}
        self.workloads = [w["label"] for w in self.matrix["workloads"]]
        self.workload_name = {w["label"]: w["name"] for w in self.matrix["workloads"]}
        self.ratios = list(self.matrix["overcommit"])
        self.hosts = [h["name"] for h in self.matrix["hosts"]]
        # Hosts and ratios also from the raw data: a report of a sweep whose
        # matrix was narrowed later still shows every result.
        for r in self.runs:
            if r["host"] not in self.hosts:
                self.hosts.append(r["host"])
            if r["overcommit"] not in self.ratios:
                self.ratios.append(r["overcommit"])
        self.baseline = next((s["label"] for s in self.matrix["twed"] if s["mode"] == "off"), None)
        self.points = {}
        for r in self.runs:
            key = (r["host"], r["overcommit"], r["workload"]["label"], r["setting"]["label"])
            self.points.setdefault(key, []).append(r)

    def values(self, host, ratio, workload, setting, metric):
        return [run_metrics(r).get(metric) for r in self.points.get((host, ratio, workload, setting), [])]

    def values_by_repetition(self, host, ratio, workload, setting, metric):
        """{repetition: value} of one point's runs that have METRIC."""
        out = {}
        for r in self.points.get((host, ratio, workload, setting), []):
            v = run_metrics(r).get(metric)
            if v is not None:
                out[r["repetition"]] = v
        return out

    def summary(self, host, ratio, workload, setting, metric):
        return stats.summary(self.values(host, ratio, workload, setting, metric))

    def primary(self, workload):
        kind = workloads.KNOWN[self.workload_name[workload]]
        return f"workload.{kind.primary}", kind

    def blocks(self):
        """(host, ratio) pairs that have results, in matrix order."""
        return [(h, r) for h in self.hosts for r in self.ratios
                if any(k[0] == h and k[1] == r for k in self.points)]


def fmt(v, digits=3):
    if v is None:
        return "–"
    if abs(v) >= 1000 or v == int(v):
        return f"{v:,.0f}".replace(",", "\u2009")
    return f"{v:.{digits}g}"


def fmt_change(p):
    return "–" if p is None else f"{p:+.1f} %"


def cell(sweep, host, ratio, workload, setting, metric):
    s = sweep.summary(host, ratio, workload, setting, metric)
    if s is None:
        return "no data"
    text = f"{fmt(s['median'])} (IQR {fmt(s['iqr'])}; {fmt(s['min'])}–{fmt(s['max'])}; n={s['n']})"
    if sweep.baseline and setting != sweep.baseline:
        base = sweep.summary(host, ratio, workload, sweep.baseline, metric)
        text += f" {fmt_change(stats.change_percent(s['median'], base and base['median']))}"
    return text


def seed_table(sweep, host, ratio, metric_of):
    """Markdown: one row per setting, one column per workload."""
    heads = []
    for w in sweep.workloads:
        metric, unit = metric_of(w)
        heads.append(f"{w} — {metric.split('.', 1)[1]} ({unit})")
    lines = ["| setting | " + " | ".join(heads) + " |",
             "|---" * (len(heads) + 1) + "|"]
    for s in sweep.settings:
        cells = [cell(sweep, host, ratio, w, s, metric_of(w)[0]) for w in sweep.workloads]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_csvs(sweep):
    with open(os.path.join(sweep.out, "results.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["host", "overcommit", "workload", "workload_name", "setting", "mode",
                    "delay", "min", "max", "repetition", "metric", "value", "raw_file"])
        for r in sweep.runs:
            s = r["setting"]
            for metric, value in sorted(run_metrics(r).items()):
                w.writerow([r["host"], r["overcommit"], r["workload"]["label"], r["workload"]["name"],
                            s["label"], s["mode"], s.get("delay", ""), s.get("min", ""),
                            s.get("max", ""), r["repetition"], metric, value, r["_path"]])
    with open(os.path.join(sweep.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump([{k: v for k, v in r.items() if k not in ("console",)} for r in sweep.runs],
                  f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(sweep.out, "summary.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["host", "overcommit", "workload", "setting", "metric", "n", "median", "q1",
                    "q3", "iqr", "min", "max", "mean", "change_vs_off_percent"])
        for (host, ratio) in sweep.blocks():
            for wl in sweep.workloads:
                metrics = sorted({m for s in sweep.settings
                                  for r in sweep.points.get((host, ratio, wl, s), [])
                                  for m in run_metrics(r)})
                for s in sweep.settings:
                    for m in metrics:
                        summ = sweep.summary(host, ratio, wl, s, m)
                        if summ is None:
                            continue
                        base = sweep.summary(host, ratio, wl, sweep.baseline, m) \
                            if sweep.baseline and s != sweep.baseline else None
                        change = stats.change_percent(summ["median"], base and base["median"])
                        w.writerow([host, ratio, wl, s, m, summ["n"]] +
                                   [summ[k] for k in ("median", "q1", "q3", "iqr", "min", "max", "mean")] +
                                   ["" if change is None else round(change, 3)])


def write_table(sweep):
    parts = []
    for host, ratio in sweep.blocks():
        parts.append(f"### {host}, overcommit {ratio}\n")
        parts.append("Workload figures:\n")
        parts.append(seed_table(sweep, host, ratio,
                                lambda w: (sweep.primary(w)[0], sweep.primary(w)[1].unit)))
        parts.append("\nWFE trap exits during the workload (all vCPUs):\n")
        parts.append(seed_table(sweep, host, ratio, lambda w: ("vcpu.wfe_exit_stat", "exits")))
        parts.append("\nHost scheduler latency while the workload runs (cyclictest, max over CPUs):\n")
        parts.append(seed_table(sweep, host, ratio, lambda w: ("host_latency.max_us", "µs")))
        parts.append("")
    text = "\n".join(parts)
    with open(os.path.join(sweep.out, "table.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return text


def versus_off(sweep, host, ratio, wl, metric, unit):
    """Markdown: each setting against off, with the bootstrap 95 %
    confidence interval of the difference of the medians."""
    base = sweep.values(host, ratio, wl, sweep.baseline, metric)
    bs = stats.summary(base)
    if bs is None:
        return None
    lines = ["| setting | median | change | 95 % CI of the change | verdict |",
             "|---|---|---|---|---|"]
    for s in sweep.settings:
        vals = sweep.values(host, ratio, wl, s, metric)
        summ = stats.summary(vals)
        if summ is None:
            continue
        if s == sweep.baseline:
            lines.append(f"| {s} | {fmt(summ['median'])} {unit} | (reference) | – | – |")
            continue
        ci = stats.bootstrap_median_diff(base, vals)
        if ci is None:
            ci_text = "–"
        else:
            _, lo, hi = stats.change_interval(ci, bs["median"])
            ci_text = f"{fmt_change(lo)} … {fmt_change(hi)}"
        lines.append(f"| {s} | {fmt(summ['median'])} {unit} | "
                     f"{fmt_change(stats.change_percent(summ['median'], bs['median']))} | "
                     f"{ci_text} | {stats.verdict(ci)} |")
    rel = stats.change_percent(bs["median"] + bs["iqr"], bs["median"])
    spread = (f"Spread of `{sweep.baseline}` over {bs['n']} runs: IQR {fmt(bs['iqr'])} "
              f"({'–' if rel is None else f'{rel:.1f} %'} of its median), "
              f"range {fmt(bs['min'])}–{fmt(bs['max'])}.")
    return "\n".join(lines) + "\n\n" + spread + "\n"


def setting_kind(s):
    """A setting's kind in the matrix JSON: its mode, or "fixed@twedd" for
    the control of twedd's own cost (a fixed delay with twedd beside it)."""
    return "fixed@twedd" if s.get("under_twedd") else s["mode"]


def held_out_best(sweep, host, ratio, wl, fixed, metric, higher_is_better):
    """Leave one repetition out: for each repetition R, the fixed setting
    whose median of METRIC is best over the other repetitions.  Picked on
    the runs it is then compared on, the best of many noisy medians is the
    one its own noise favoured most, and anything compared with it looks
    worse than it is.  {repetition: setting label}."""
    by_rep = {s: sweep.values_by_repetition(host, ratio, wl, s, metric) for s in fixed}
    reps = sorted({r for runs in by_rep.values() for r in runs})
    pick = max if higher_is_better else min
    out = {}
    for held in reps:
        medians = {s: stats.summary([v for r, v in runs.items() if r != held])
                   for s, runs in by_rep.items()}
        medians = {s: m["median"] for s, m in medians.items() if m is not None}
        if medians:
            out[held] = pick(medians, key=medians.get)
    return out


def versus_best_fixed(sweep, host, ratio, wl):
    """auto against the best fixed setting on the workload and, if there
    is one, on the neighbour's figure: the difference with its 95 %
    interval.  Each repetition of the best fixed setting is the setting
    that is best on the other repetitions (held_out_best()).  With a
    fixed:D@twedd control, also auto against it and the control against
    fixed:D alone: what twedd's own polling costs on this host."""
    metric, kind = sweep.primary(wl)
    settings = sweep.setting_by_label
    kinds = {label: setting_kind(s) for label, s in settings.items()}
    measured = [s for s in sweep.settings if stats.summary(sweep.values(host, ratio, wl, s, metric))]
    fixed = [s for s in measured if kinds.get(s) == "fixed"]
    autos = [s for s in measured if kinds.get(s) == "auto"]
    controls = [s for s in measured if kinds.get(s) == "fixed@twedd"]
    if not fixed or not autos:
        return ""
    pick = max if kind.higher_is_better else min
    overall = pick(fixed, key=lambda s: stats.summary(sweep.values(host, ratio, wl, s, metric))["median"])
    chosen = held_out_best(sweep, host, ratio, wl, fixed, metric, kind.higher_is_better)
    picked = ", ".join(f"`{s}` in {n} of {len(chosen)}"
                       for s, n in sorted(Counter(chosen.values()).items(), key=lambda i: (-i[1], i[0])))
    nb = (sweep.matrix.get("neighbour") or {}).get("workload")
    checks = [(metric, f"{wl} {kind.primary}")]
    if nb:
        checks.append((f"neighbour.{workloads.KNOWN[nb['name']].primary}", f"neighbour {nb['label']}"))

    def best_values(m):
        runs = {s: sweep.values_by_repetition(host, ratio, wl, s, m) for s in set(chosen.values())}
        return [runs[s].get(r) for r, s in sorted(chosen.items())]

    def label_values(label):
        return lambda m: sweep.values(host, ratio, wl, label, m)

    # (compared, the values it is compared with for a metric, what those are)
    pairs = [(a, best_values, f"the best fixed setting on the other repetitions ({picked})")
             for a in autos]
    for c in controls:
        pairs += [(a, label_values(c), f"the fixed control under twedd `{c}`") for a in autos]
        plain = [f for f in fixed if settings[f].get("delay") == settings[c].get("delay")]
        pairs += [(c, label_values(f), f"the same delay without twedd (twedd's own cost) `{f}`")
                  for f in plain]
    lines = [f"The best fixed setting by the median of all runs: `{overall}`. auto is compared "
             "with, for each repetition, the fixed setting that is best on the other "
             "repetitions, so that no setting is chosen on the runs it is compared on.\n"]
    for new, base_of, against in pairs:
        for m, title in checks:
            base = base_of(m)
            ci = stats.bootstrap_median_diff(base, sweep.values(host, ratio, wl, new, m))
            bm = stats.summary(base)
            if ci is None or bm is None:
                continue
            change, lo, hi = stats.change_interval(ci, bm["median"])
            lines.append(f"- `{new}` versus {against}, {title}: "
                         f"{fmt_change(change)} (95 % CI {fmt_change(lo)} … "
                         f"{fmt_change(hi)}): {stats.verdict(ci)}")
    return "\n".join(lines) + "\n" if len(lines) > 1 else ""


def write_versus_off(sweep):
    if not sweep.baseline:
        return ""
    parts = []
    for host, ratio in sweep.blocks():
        for wl in sweep.workloads:
            metric, kind = sweep.primary(wl)
            metrics = [(metric, kind.unit, f"{wl}: {kind.primary}")]
            nb = (sweep.matrix.get("neighbour") or {}).get("workload")
            if nb:
                nk = workloads.KNOWN[nb["name"]]
                metrics.append((f"neighbour.{nk.primary}", nk.unit,
                                f"neighbour ({nb['label']}): {nk.primary}"))
            metrics.append(("vcpu.wfe_exit_stat", "exits", f"{wl}: WFE trap exits (all vCPUs)"))
            for m, unit, title in metrics:
                t = versus_off(sweep, host, ratio, wl, m, unit)
                if t:
                    parts.append(f"#### {host}, {ratio}, {title}\n\n{t}")
            bf = versus_best_fixed(sweep, host, ratio, wl)
            if bf:
                parts.append(f"#### {host}, {ratio}, {wl}: auto against the best fixed setting\n\n{bf}")
    text = "\n".join(parts)
    with open(os.path.join(sweep.out, "versus-off.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    return text


# A session under twedd runs lockstress-like work on every vCPU: a few
# seconds without one WFE trap exit is noise, this long is a guest that
# stopped contending (a vCPU blocked or starved) while twedd went on
# deciding, which its figures must not hide.
QUIET_SECONDS = 8


def quiet_stretches(series, min_seconds=QUIET_SECONDS):
    """The stretches of SERIES (samples with t, wfe_exit_stat, twed_delay)
    without a WFE trap exit, MIN_SECONDS or longer: (from, to, twed_delay
    at the end) each.  A sample without the stat ends a stretch."""
    out = []
    first = last = None
    for a, b in zip(series, series[1:]):
        if a.get("wfe_exit_stat") is not None and a.get("wfe_exit_stat") == b.get("wfe_exit_stat"):
            first = first or a
            last = b
            continue
        if first and last["t"] - first["t"] >= min_seconds:
            out.append((first["t"], last["t"], last.get("twed_delay")))
        first = last = None
    if first and last["t"] - first["t"] >= min_seconds:
        out.append((first["t"], last["t"], last.get("twed_delay")))
    return out


def write_quiet(sweep):
    """The quiet stretches of every session under twedd, as a table."""
    rows = []
    for (host, ratio, wl, setting), runs in sorted(sweep.points.items()):
        for r in sorted(runs, key=lambda r: r["repetition"]):
            under = r.get("auto") or r.get("twedd")
            if not under or not under.get("series"):
                continue
            for t0, t1, delay in quiet_stretches(under["series"]):
                rows.append(f"| {host} | {ratio} | {setting} | {r['repetition']} | {t0:.0f}–{t1:.0f} s | "
                            f"{t1 - t0:.0f} s | {delay} |")
    head = (f"Stretches of at least {QUIET_SECONDS} s without a single WFE trap exit in a session under "
            "twedd (its warm-up and run; seconds since the setting was applied), with each vCPU's "
            "twed_delay at the end (0: TWE clear, the vCPU had its pCPU to itself when last loaded). "
            "With the workload on every vCPU such a stretch is a guest that stopped contending, a vCPU "
            "blocked or starved, not a delay that saved every exit; twedd's decisions then were taken on it.\n")
    if not rows:
        return head + "\nNone.\n"
    return (head + "\n| host | overcommit | setting | rep | when | length | twed_delay |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def write_auto_plots(sweep):
    """Delay and WFE exits over time for the auto runs: one PNG per host,
    ratio and workload, one line per repetition."""
    plot_dir = os.path.join(sweep.out, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    gnuplot = shutil.which("gnuplot")
    made = []
    for (host, ratio, wl, setting), runs in sorted(sweep.points.items()):
        runs = [r for r in runs if r.get("auto") and r["auto"].get("series")]
        if not runs:
            continue
        base = f"auto-{host}-{ratio.replace(':', 'to')}-{wl}"
        dat = os.path.join(plot_dir, base + ".dat")
        with open(dat, "w", encoding="utf-8") as f:
            for r in sorted(runs, key=lambda r: r["repetition"]):
                f.write(f"# repetition {r['repetition']}: t_s max_twed_delay wfe_exits_per_s\n")
                prev = None
                for pt in r["auto"]["series"]:
                    d = pt.get("twed_delay") or []
                    # The highest over vCPUs: a vCPU that has its pCPU to
                    # itself at the sample reads 0 (WFE not trapped).
                    delay = max(d) if d else float("nan")
                    rate = "NaN"
                    if prev and pt.get("wfe_exit_stat") is not None and prev.get("wfe_exit_stat") is not None \
                            and pt["t"] > prev["t"]:
                        rate = repr((pt["wfe_exit_stat"] - prev["wfe_exit_stat"]) / (pt["t"] - prev["t"]))
                    f.write(f"{pt['t']} {delay} {rate}\n")
                    prev = pt
                f.write("\n\n")
        n = len(runs)
        plots = ", ".join(
            [f"'{base}.dat' index {i} using 1:2 with steps lw 2 title 'delay, rep {i + 1}'" for i in range(n)] +
            [f"'{base}.dat' index {i} using 1:3 axes x1y2 with linespoints dt 2 pt 7 ps 0.4 title 'exits/s, rep {i + 1}'"
             for i in range(n)])
        with open(os.path.join(plot_dir, base + ".gp"), "w", encoding="utf-8") as f:
            f.write(f"""set terminal pngcairo size 1000,560 noenhanced
set output '{base}.png'
set title "{setting} on {host} {ratio}, {wl}\\nTWEDEL (highest over vCPUs) and WFE trap exits per second"
set xlabel 'seconds since the setting was applied (warm-up, then the measured run)'
set ylabel 'twed_delay (TWEDEL)'
set y2label 'WFE trap exits/s'
set ytics nomirror
set y2tics
set yrange [-0.5:15.5]
set grid
set key outside right top
set datafile missing 'NaN'
plot {plots}
""")
        if gnuplot:
            p = subprocess.run([gnuplot, base + ".gp"], cwd=plot_dir, capture_output=True, text=True)
            if p.returncode == 0:
                made.append(os.path.join("plots", base + ".png"))
            else:
                print(f"twed-sweep: gnuplot failed for {base}: {p.stderr.strip()}")
    return made


def write_plots(sweep):
    """One PNG per workload: the median of its figure per setting, with
    the interquartile range as error bars, one line per host and ratio."""
    plot_dir = os.path.join(sweep.out, "plots")
    os.makedirs(plot_dir, exist_ok=True)
    gnuplot = shutil.which("gnuplot")
    made = []
    for wl in sweep.workloads:
        metric, kind = sweep.primary(wl)
        series = [(h, r) for h, r in sweep.blocks()
                  if any(sweep.points.get((h, r, wl, s)) for s in sweep.settings)]
        if not series:
            continue
        dat = os.path.join(plot_dir, f"{wl}.dat")
        with open(dat, "w", encoding="utf-8") as f:
            f.write("# index setting " + " ".join(f"{h}_{r}_median q1 q3" for h, r in series) + "\n")
            for i, s in enumerate(sweep.settings):
                row = [str(i), s]
                for h, r in series:
                    summ = sweep.summary(h, r, wl, s, metric)
                    row += ["NaN"] * 3 if summ is None else \
                        [repr(summ["median"]), repr(summ["q1"]), repr(summ["q3"])]
                f.write(" ".join(row) + "\n")
        better = "higher is better" if kind.higher_is_better else "lower is better"
        plots = ", ".join(
            f"'{os.path.basename(dat)}' using 1:{3 + 3 * j}:{4 + 3 * j}:{5 + 3 * j}:xtic(2) "
            f"with yerrorlines title '{h} {r}'"
            for j, (h, r) in enumerate(series))
        script = os.path.join(plot_dir, f"{wl}.gp")
        with open(script, "w", encoding="utf-8") as f:
            f.write(f"""set terminal pngcairo size 900,540 noenhanced
set output '{wl}.png'
set title '{wl}: median and interquartile range per TWED setting'
set xlabel 'TWED setting'
set ylabel '{kind.primary} ({kind.unit}, {better})'
set xtics rotate by -30
set grid ytics
set key outside right top
set offsets 0.3, 0.3, 0, 0
set datafile missing 'NaN'
plot {plots}
""")
        if gnuplot:
            p = subprocess.run([gnuplot, os.path.basename(script)], cwd=plot_dir,
                               capture_output=True, text=True)
            if p.returncode == 0:
                made.append(os.path.join("plots", f"{wl}.png"))
            else:
                print(f"twed-sweep: gnuplot failed for {wl}: {p.stderr.strip()}")
    return made, gnuplot is not None


def machine_section(sweep):
    lines = []
    hosts = {h: load_json(os.path.join(sweep.out, "hosts", f"{h}.json"), {}) for h in sweep.hosts}
    emulated = [h for h, i in hosts.items() if i.get("cpu_kind") == "emulated"]
    if emulated:
        lines.append(f"> **Emulated CPU ({', '.join(emulated)}).** These hosts are TCG guests "
                     "of QEMU (`-cpu max`): FEAT_TWED, WFE trapping and the timings are "
                     "emulated. The trap counts show the mechanism working; the times and "
                     "rates are NOT hardware performance and must not be quoted as such.\n")
    for h, i in hosts.items():
        lines.append(f"### {h}\n")
        if not i:
            lines.append("- not described (no hosts/ file)\n")
            continue
        if i.get("error"):
            lines.append(f"- could not be described: {i['error']}\n")
            continue
        tw = {True: "yes", False: "no", None: "unknown"}[i.get("twed_supported")]
        lines += [
            f"- uname: `{i.get('uname', '')}`",
            f"- kernel: {i.get('kernel', '')} (command line `{i.get('cmdline', '')}`)",
            f"- CPU: {i.get('cpu_model', '')}, MIDR_EL1 {i.get('midr_el1') or 'unreadable'}, "
            f"{i.get('cores', '?')} cores",
            f"- machine: {i.get('dt_model') or 'unknown'}",
            f"- CPU kind: **{i.get('cpu_kind', 'unknown')}** — {i.get('cpu_kind_reason', '')}",
            f"- TWED supported (domain capabilities): {tw}",
            "",
        ]
    ctl = load_json(os.path.join(sweep.out, "controller.json"))
    if ctl:
        lines += ["### The machine running twed-sweep\n",
                  f"- uname: `{ctl['uname']}`",
                  f"- CPU: {ctl['cpu_model']}, {ctl['cores']} cores",
                  "- On the emulated cluster this machine runs every emulated host, so "
                  "its load shapes all timings.", ""]
    return "\n".join(lines)


def session_text(m):
    sess = m.get("session") or {}
    if not sess.get("enabled"):
        return ""
    text = (f"- Sessions: one guest per repetition runs every setting in turn (order rotated by "
            f"repetition); each setting is applied live (`virsh twedtune --live`) in a "
            f"{sess['gap_seconds']} s pause before its run. `auto` runs twedd beside the guest "
            f"(policy mode auto, interval {sess['auto_interval_seconds']} s, dwell "
            f"{sess['auto_dwell_seconds']} s) from off, through a {sess['auto_warmup_seconds']} s "
            "unmeasured warm-up of the same workload, then the measured run; `virsh domstats` "
            "is sampled every second for the plot of delay and WFE exits.\n")
    controls = [t["label"] for t in m["twed"] if t.get("under_twedd")]
    if controls:
        text += ("- Control of twedd's own cost: " + ", ".join(f"`{c}`" for c in controls) +
                 " runs the fixed delay with twedd beside the guest exactly as for `auto` (same "
                 "warm-up, same polling interval, a policy that keeps the delay).\n")
    nb = m.get("neighbour")
    if nb:
        text += (f"- Neighbour: a second guest of {nb['vcpus']} vCPU(s) on the same pCPUs runs "
                 f"`{nb['workload']['name']} {' '.join(nb['workload']['args'])}` in a loop; its "
                 "figure per run is the median of its results completed during the run.\n")
    return text


def method_section(sweep):
    m = sweep.matrix
    hl = m.get("host_latency", {})
    wl_lines = "\n".join(f"  - `{w['label']}`: `{w['name']} {' '.join(w['args'])}`"
                         for w in m["workloads"])
    settings = ", ".join(f"`{s['label']}`" for s in m["twed"])
    return f"""- Guest: {m['guest']['vcpus']} vCPUs, {m['guest']['memory_mib']} MiB, the twed guest
  kernel and initramfs; overcommit by pinning vCPU i to pCPU ⌊i / N⌋ for N:1
  (each used pCPU carries N vCPUs), or no pinning (`unpinned`). Ratios: {', '.join(m['overcommit'])}.
- TWED settings: {settings}. Each is set through libvirt
  (`virsh twedtune --live --config`, i.e. virDomainSetTwedParameters) on the
  guest started paused, read back, then the guest is resumed.
- Workloads, run inside the guest:
{wl_lines}
{session_text(m)}- Each run is a fresh guest (unless sessions, above). Its init prints a BEGIN marker, idles, runs the
  workload, prints END and idles; the host samples `virsh domstats --vcpu` at
  BEGIN and END, and the kernel's stats (`wfe_exit_stat`, `twed_grow`,
  `twed_shrink`: deltas summed over vCPUs; `twed_delay`: mean over vCPUs at
  the end) cover the workload only.
- Host scheduler latency: `cyclictest -q -m -S -d 0 -p {hl.get('priority', 80)} -i {hl.get('interval_us', 1000)}`
  on the host from BEGIN to END ({'enabled' if hl.get('enabled', True) else 'disabled'});
  reported: max over CPUs, in µs.
- Repetitions: {m['repetitions']} per point; settings are interleaved within each
  repetition so that drift over the sweep spreads over all settings.
- Figures: median over repetitions, spread as interquartile range (type-7
  quantiles) and min–max; change = (median − median of `{sweep.baseline or 'off'}`) /
  median of `{sweep.baseline or 'off'}`. Raw results: `raw/` (one JSON per run,
  console included), `results.csv`, `results.json`; failed attempts: `failed/`.
"""


def write_report(out_dir):
    sweep = Sweep(out_dir)
    write_csvs(sweep)
    table = write_table(sweep)
    vs_off = write_versus_off(sweep)
    plots, have_gnuplot = write_plots(sweep)
    plots += write_auto_plots(sweep)
    failed = glob.glob(os.path.join(out_dir, "failed", "**", "*.json"), recursive=True)
    m = sweep.matrix
    expected = (len(m["hosts"]) * len(m["overcommit"]) * len(m["workloads"])
                * len(m["twed"]) * m["repetitions"])
    parts = [f"# twed sweep `{m['name']}`\n"]
    if m.get("description"):
        parts.append(m["description"] + "\n")
    parts.append(f"{len(sweep.runs)} of {expected} runs have results"
                 + (f"; {len(failed)} failed attempts are kept in `failed/`" if failed else "")
                 + ".\n")
    parts += ["## Machine\n", machine_section(sweep), "## Method\n", method_section(sweep),
              "## Results\n",
              "Cells: median (IQR; min–max; n) and the change of the median versus "
              f"`{sweep.baseline}`.\n" if sweep.baseline else
              "Cells: median (IQR; min–max; n); the matrix has no `off` setting to compare with.\n",
              table,
              "## Versus off, with confidence intervals\n",
              "Each setting against `off`: the difference of the medians with a 95 % "
              "percentile-bootstrap confidence interval (4000 resamples of each side) of the "
              "relative change: each resample's median against its resampled off's, so the "
              "interval never falls below -100 %. Where the interval includes 0 the verdict is "
              "\"no difference shown\": the runs cannot tell the setting from off.\n",
              vs_off or "No `off` runs to compare with.\n"]
    if any(r.get("auto") or r.get("twedd") for r in sweep.runs):
        parts += ["## Quiet stretches under twedd\n", write_quiet(sweep)]
    parts += ["## Plots\n"]
    if plots:
        parts += [f"![{os.path.basename(p)}]({p})\n" for p in plots]
    else:
        parts.append("No plots: " + ("gnuplot failed." if have_gnuplot else "gnuplot is not installed.") + "\n")
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    return sweep


def write_combined(out_dir, names):
    """A preset of several parts: one report over them, each part's
    versus-off tables and its plots."""
    parts = [f"# twed sweep `{os.path.basename(os.path.normpath(out_dir))}`\n",
             "Parts: " + ", ".join(f"[`{n}`]({n}/report.md)" for n in names) + ".\n"]
    for n in names:
        d = os.path.join(out_dir, n)
        try:
            with open(os.path.join(d, "versus-off.md"), encoding="utf-8") as f:
                vs = f.read()
        except FileNotFoundError:
            vs = "No results.\n"
        m = load_json(os.path.join(d, "matrix.json"), {})
        parts += [f"## {n}\n", (m.get("description") or "") + "\n", vs]
        pngs = sorted(glob.glob(os.path.join(d, "plots", "auto-*.png")))
        parts += [f"![{os.path.basename(p)}]({os.path.relpath(p, out_dir)})\n" for p in pngs]
    hosts = {}
    for n in names:
        for p in glob.glob(os.path.join(out_dir, n, "hosts", "*.json")):
            hosts[os.path.basename(p)[:-5]] = load_json(p, {})
    emulated = [h for h, i in hosts.items() if i.get("cpu_kind") == "emulated"]
    if emulated:
        parts.insert(1, f"> **Emulated CPU ({', '.join(sorted(emulated))}: "
                        f"{next(iter(hosts.values())).get('cpu_model', 'QEMU -cpu max')}).** "
                        "The timings are TCG emulation, NOT hardware performance.\n")
    with open(os.path.join(out_dir, "report.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
