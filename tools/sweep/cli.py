# SPDX-License-Identifier: GPL-2.0-or-later
"""twed-sweep: measure TWED settings against workloads and overcommit on
libvirt hosts, and report the evidence."""

import argparse
import json
import os
import sys

from . import matrix as matrix_mod
from . import report, runner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRESETS = os.path.join(ROOT, "tools", "sweep", "presets")

EPILOG = """\
MATRIX is a JSON file or the name of a preset (tools/sweep/presets/):
  {presets}
Exit status: 0 all runs have results, 1 some runs failed (their attempts are
kept in OUT/failed/; run again to retry them), 2 invalid input (nothing ran).
"""


def presets():
    return sorted(f[:-5] for f in os.listdir(PRESETS) if f.endswith(".json"))


def resolve(name):
    if os.path.exists(name) or os.sep in name or name.endswith(".json"):
        return name
    return os.path.join(PRESETS, name + ".json")


def load_matrix(args):
    return matrix_mod.load_parts(resolve(args.matrix), repetitions=args.repetitions,
                                 hosts=args.host or None)


def preset_name(args, parts):
    if len(parts) == 1:
        return parts[0].name
    base = os.path.basename(resolve(args.matrix))
    return base[:-len(".json")] if base.endswith(".json") else base


def cmd_check(args):
    for m in load_matrix(args):
        plan = runner.Runner(m, args.out or ".", ROOT, args.stack).plan()
        how = (f"sessions of {len(m.settings)} settings, one boot each"
               if m.session.enabled else "a fresh guest each")
        print(f"{m.source}: {m.name}: valid; {len(plan)} runs "
              f"({len(m.hosts)} hosts x {len(m.overcommit)} ratios x {len(m.workloads)} workloads "
              f"x {len(m.settings)} settings x {m.repetitions} repetitions; {how})")
    return 0


def cmd_run(args):
    parts = load_matrix(args)
    out = args.out or os.path.join(os.getcwd(), f"twed-sweep-{preset_name(args, parts)}")
    if len(parts) == 1:
        return run_part(args, parts[0], out)
    rc = 0
    for m in parts:
        rc = max(rc, run_part(args, m, os.path.join(out, m.name)))
    report.write_combined(out, [m.name for m in parts])
    runner.log(f"report: {os.path.join(out, 'report.md')}")
    return rc


def run_part(args, m, out):
    os.makedirs(out, exist_ok=True)
    saved = os.path.join(out, "matrix.json")
    if os.path.exists(saved):
        with open(saved, encoding="utf-8") as f:
            old = json.load(f)
        # Resuming with another matrix would mix incomparable results.
        new = m.to_json()
        if {k: v for k, v in old.items() if k not in ("repetitions", "hosts")} != \
           {k: v for k, v in new.items() if k not in ("repetitions", "hosts")}:
            print(f"twed-sweep: {out} holds a sweep of another matrix; use another --out",
                  file=sys.stderr)
            return 2
    r = runner.Runner(m, out, ROOT, args.stack, args.boot_timeout, args.run_timeout)
    if args.dry_run:
        r.run_all(dry_run=True)
        return 0
    problems = r.preflight()
    if problems:
        for p in problems:
            print(f"twed-sweep: {p}", file=sys.stderr)
        return 2
    runner.write_json(saved, m.to_json())
    r.describe_hosts()
    done, skipped, failed = r.run_all()
    runner.log(f"{done} runs done, {skipped} already had results, {failed} failed")
    report.write_report(out)
    runner.log(f"report: {os.path.join(out, 'report.md')}")
    return 1 if failed else 0


def cmd_report(args):
    parts = sorted(d for d in os.listdir(args.out_dir)
                   if os.path.exists(os.path.join(args.out_dir, d, "matrix.json")))
    if not os.path.exists(os.path.join(args.out_dir, "matrix.json")) and parts:
        for d in parts:
            report.write_report(os.path.join(args.out_dir, d))
        report.write_combined(args.out_dir, parts)
    else:
        report.write_report(args.out_dir)
    print(os.path.join(args.out_dir, "report.md"))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="twed-sweep", description=__doc__,
        epilog=EPILOG.format(presets=", ".join(presets())),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    def matrix_args(p):
        p.add_argument("matrix", help="matrix file or preset name")
        p.add_argument("--repetitions", type=int,
                       help=f"override the matrix's (which must be >= {matrix_mod.MIN_REPETITIONS}); "
                            "lower only for quick checks")
        p.add_argument("--host", action="append",
                       help="cluster host name or libvirt URI, replaces the matrix's hosts "
                            "(repeatable)")
        p.add_argument("-o", "--out", help="output directory (default ./twed-sweep-NAME)")
        p.add_argument("--stack", default=os.environ.get("TWED_STACK", os.path.join(ROOT, "build", "stack")),
                       help="stack build directory, for virsh (default $TWED_STACK or build/stack)")

    p = sub.add_parser("run", help="run (or resume) a sweep, then write the report")
    matrix_args(p)
    p.add_argument("--dry-run", action="store_true", help="list the runs still to do")
    p.add_argument("--boot-timeout", type=int, default=240, help="seconds for a guest to boot")
    p.add_argument("--run-timeout", type=int, default=1800, help="seconds for a workload")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("check", help="validate a matrix and count its runs")
    matrix_args(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("report", help="remake the outputs from a sweep's raw results")
    p.add_argument("out_dir")
    p.set_defaults(func=cmd_report)

    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except matrix_mod.MatrixError as e:
        print(f"twed-sweep: error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"twed-sweep: error: {e}", file=sys.stderr)
        return 2
