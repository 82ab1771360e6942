#!/usr/bin/python3
"""Judge the console log of a kernel boot test (tests/kernel/boot-selftests).

    parse-console.py CONSOLE.LOG
    parse-console.py --kvm-mode CONSOLE.LOG

The second form prints the line in which KVM says it initialised (and the
mode) and fails without one: the boot tests that only need that ask here,
so that every mode is recognised in one place.

Passes (exit 0) when:
  - KVM initialised, in a mode that the log names (VHE, nVHE, hVHE,
    protected nVHE);
  - init ran every command of its script and reached DONE;
  - twed_test exited 0 with a complete TAP plan and no failure, and its
    skips, if any, are all on the FEAT_TWED-absent path (the capability
    reads 0 and each skip gives that reason) or under a kvm-arm.twed_max=
    on the kernel command line below the values of the skipped case;
  - every other selftest exited 0.
Prints one line per selftest and a summary; on failure, the reasons.
"""
import re
import sys

# "VHE+NV2" on a host booted with kvm-arm.mode=nested
KVM_INIT = re.compile(r"kvm \[\d+\]: ((?:Protected |Hyp )?(?:h|n)?VHE(?:\+NV2?)?) mode initialized successfully")
RUN = re.compile(r'^TWED-INIT: RUN (.*)$')
END = re.compile(r'^TWED-INIT: (EXIT|SIGNAL|TIMEOUT) (-?\d+) (.*?)(?: \([\d.]+s\))?$')
DONE = re.compile(r'^TWED-INIT: DONE (\d+) of (\d+) failed')
TAP = re.compile(r'^(not )?ok (\d+) (.*)$')
PLAN = re.compile(r'^1\.\.(\d+)$')
CAP = re.compile(r'^# KVM_CAP_ARM_TWED = (0x[0-9a-f]+|0) \(system\)')
ABSENT_REASON = 'FEAT_TWED not implemented'
CEILING_SKIP = re.compile(r"kvm-arm\.twed_max=(\d+) is below the case's (\d+)")
CEILING_OFF_SKIP = 'kvm-arm.twed_max=off allows no TWED'
CMDLINE_MAX = re.compile(r'Kernel command line:.*\bkvm-arm\.twed_max=(\S+)')
# Kernel messages may interleave with a program's output on the console.
KMSG = re.compile(r'^\[\s*\d+\.\d+\] ')
# At most this many diagnostics are quoted with a failed case.
MAX_NOTES = 8


def ceiling_skip(desc, twed_max):
    """True for a skip that the booted kvm-arm.twed_max= explains."""
    if twed_max is None:
        return False
    booted = int(twed_max) if twed_max.isdigit() and int(twed_max) <= 15 else -1
    if booted < 0:
        return CEILING_OFF_SKIP in desc
    m = CEILING_SKIP.search(desc)
    return bool(m) and int(m.group(1)) == booted and booted < int(m.group(2))


def judge_twed_test(lines, errors, twed_max=None):
    plan, results, cap = None, [], None
    # The diagnostics ("# ...") printed since the previous result: what a
    # failed case measured, quoted with it.
    notes = []
    for line in lines:
        if m := PLAN.match(line):
            plan = int(m.group(1))
        elif m := TAP.match(line):
            results.append((m.group(1) is None, int(m.group(2)), m.group(3)))
            if m.group(1):
                errors.append(f'twed_test: not ok {m.group(3)}')
                errors.extend(f'    {n}' for n in notes[-MAX_NOTES:])
            notes = []
        elif m := CAP.match(line):
            cap = int(m.group(1), 16)
        elif line.startswith('# '):
            notes.append(line)
    passed = sum(1 for ok, _, d in results if ok and '# SKIP' not in d)
    skipped = [d for ok, _, d in results if ok and '# SKIP' in d]
    failed = [d for ok, _, d in results if not ok]
    if plan is None:
        errors.append('twed_test: no TAP plan')
    elif len(results) != plan:
        errors.append(f'twed_test: {len(results)} results for a plan of {plan}')
    if cap is None:
        errors.append('twed_test: did not report KVM_CAP_ARM_TWED')
    path = 'FEAT_TWED absent' if cap == 0 else 'FEAT_TWED present'
    for d in skipped:
        if (cap != 0 or ABSENT_REASON not in d) and not ceiling_skip(d, twed_max):
            errors.append(f'twed_test: skip outside the FEAT_TWED-absent path: {d}')
    summary = (f'twed_test: {path} (KVM_CAP_ARM_TWED = {cap:#x}), ' if cap is not None else 'twed_test: ') + \
        f'{passed} passed, {len(failed)} failed, {len(skipped)} skipped of {plan}'
    return summary


def main(path):
    with open(path, errors='replace') as f:
        text = f.read().replace('\r', '')
    lines = text.split('\n')
    errors = []

    m = CMDLINE_MAX.search(text)
    twed_max = m.group(1) if m else None
    kvm = KVM_INIT.search(text)
    if kvm:
        print(f'KVM initialised: {kvm.group(1)}')
    else:
        errors.append('no "kvm [...]: ... VHE mode initialized successfully" line')
        for line in lines:
            if re.search(r'\bkvm \[', line):
                print(f'  {line}')

    # Split the log into the commands init ran.
    runs, current = [], None
    for line in lines:
        if m := RUN.match(line):
            current = {'cmd': m.group(1), 'out': [], 'end': None}
            runs.append(current)
        elif (m := END.match(line)) and current is not None:
            current['end'] = (m.group(1), int(m.group(2)))
            current = None
        elif current is not None and not KMSG.match(line):
            current['out'].append(line)

    done = any(DONE.match(line) for line in lines)
    if not runs:
        errors.append('init ran no command')
    if not done:
        errors.append('init did not reach DONE (crash, hang or timeout)')

    saw_twed = False
    for run in runs:
        name = run['cmd'].split()[0].rsplit('/', 1)[-1]
        end = run['end']
        status = 'unfinished' if end is None else \
            ('exit %d' % end[1] if end[0] == 'EXIT' else f'{end[0].lower()} {end[1]}')
        if name == 'twed_test':
            saw_twed = True
            print(judge_twed_test(run['out'], errors, twed_max))
        totals = [line for line in run['out'] if line.startswith('# Totals:')]
        print(f'{run["cmd"]}: {status}' + (f' ({totals[-1][2:]})' if totals else ''))
        if end is None or end[0] != 'EXIT' or end[1] != 0:
            errors.append(f'{run["cmd"]}: {status}')
    if not saw_twed:
        errors.append('twed_test did not run')

    if errors:
        print('FAILED:')
        for e in errors:
            print(f'  {e}')
        return 1
    print(f'PASSED: {len(runs)} programs')
    return 0


def kvm_mode(path):
    with open(path, errors='replace') as f:
        kvm = KVM_INIT.search(f.read())
    if not kvm:
        return 1
    print(kvm.group(0))
    return 0


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--kvm-mode':
        sys.exit(kvm_mode(sys.argv[2]))
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
