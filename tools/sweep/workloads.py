# SPDX-License-Identifier: GPL-2.0-or-later
"""The guest workloads a sweep can run, and how to read their results.

lockstress, fault and fscopy (workloads/) print one line of
key=value pairs starting with their name; cyclictest (rt-tests) prints one
"T:" line per measuring thread, summarised here over the threads.
"""

import re


def parse_key_values(line):
    """'name k=v k=v' -> {k: float or str}"""
    out = {}
    for word in line.split()[1:]:
        if "=" not in word:
            continue
        k, v = word.split("=", 1)
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


class KeyValueWorkload:
    """A workload of workloads/: one result line 'NAME k=v ...'."""

    def __init__(self, name, primary, higher_is_better, unit, options):
        self.name = name
        self.primary = primary
        self.higher_is_better = higher_is_better
        self.unit = unit
        self.options = options  # option -> check(value) -> problem or None

    def command(self, args):
        return [f"/bin/{self.name}"] + list(args)

    def check_args(self, args):
        if len(args) % 2:
            return f"{self.name} takes '--option value' pairs"
        for opt, value in zip(args[::2], args[1::2]):
            if opt not in self.options:
                return f"{self.name} has no option '{opt}' (it has " + \
                    ", ".join(sorted(self.options)) + ")"
            problem = self.options[opt](value)
            if problem:
                return f"{opt}: {problem}"
        return None

    def parse(self, lines):
        """The metrics of the last result line among LINES, or None."""
        result = None
        for line in lines:
            if line.startswith(self.name + " ") and "=" in line:
                result = line.strip()
        if result is None:
            return None
        metrics = {k: v for k, v in parse_key_values(result).items()
                   if isinstance(v, float)}
        if self.primary not in metrics:
            return None
        return {"line": result, "metrics": metrics}


class Cyclictest:
    """cyclictest in quiet mode: 'T: 0 ( 98) P:80 I:1000 C: 2982 Min: 27
    Act: 117 Avg: 117 Max: 3664' per thread, in microseconds."""

    name = "cyclictest"
    primary = "max_us"
    higher_is_better = False
    unit = "µs"
    _THREAD = re.compile(r"^T:\s*(\d+).*?C:\s*(\d+)\s+Min:\s*(\d+)\s+Act:\s*(\d+)"
                         r"\s+Avg:\s*(\d+)\s+Max:\s*(\d+)")
    # Options that change what is measured, and the ones the harness sets
    # itself (-q quiet summary, -m locked memory, -S one thread per CPU,
    # -d0 equal intervals).
    _ALLOWED = {"-D", "--duration", "-i", "--interval", "-p", "--priority",
                "-l", "--loops"}

    def command(self, args):
        return ["/bin/cyclictest", "-q", "-m", "-S", "-d", "0"] + list(args)

    def check_args(self, args):
        if len(args) % 2:
            return "cyclictest takes '--option value' pairs here"
        opts = args[::2]
        for opt, value in zip(opts, args[1::2]):
            if opt not in self._ALLOWED:
                return f"cyclictest option '{opt}' is not supported here (use " + \
                    ", ".join(sorted(self._ALLOWED)) + ")"
            if not re.fullmatch(r"[0-9]+[smhd]?", value):
                return f"{opt}: '{value}' is not a number"
        if not {"-D", "--duration", "-l", "--loops"} & set(opts):
            return "cyclictest needs -D (duration) or -l (loops): it would run forever"
        return None

    @classmethod
    def summarise(cls, lines):
        """Min of Min, mean of Avg, max of Max over the threads, in µs."""
        threads = []
        for line in lines:
            m = cls._THREAD.match(line.strip())
            if m:
                threads.append([int(x) for x in m.groups()])
        if not threads:
            return None
        return {
            "threads": float(len(threads)),
            "cycles": float(sum(t[1] for t in threads)),
            "min_us": float(min(t[2] for t in threads)),
            "avg_us": sum(t[4] for t in threads) / len(threads),
            "max_us": float(max(t[5] for t in threads)),
        }

    def parse(self, lines):
        metrics = self.summarise(lines)
        if metrics is None:
            return None
        summary = "cyclictest " + " ".join(f"{k}={v:g}" for k, v in metrics.items())
        return {"line": summary, "metrics": metrics}


def _whole(lo, hi):
    def check(value):
        if not re.fullmatch(r"[0-9]+", value) or not lo <= int(value) <= hi:
            return f"'{value}' is not a whole number in {lo}..{hi}"
        return None
    return check


def _one_of(*choices):
    def check(value):
        if value not in choices:
            return f"'{value}' is not " + ", ".join(choices)
        return None
    return check


KNOWN = {
    "lockstress": KeyValueWorkload(
        "lockstress", "acq_per_s", True, "acquisitions/s",
        {"--threads": _whole(1, 1024), "--seconds": _whole(1, 86400),
         "--hold": _whole(1, 100000000), "--think": _whole(1, 100000000)}),
    "fault": KeyValueWorkload(
        "fault", "ns_per_touch", False, "ns/touch",
        {"--mode": _one_of("read", "write", "read_write"),
         "--size": _whole(1, 1 << 20), "--stride": _whole(1, 1 << 30)}),
    "fscopy": KeyValueWorkload(
        "fscopy", "kb_per_s", True, "KB/s",
        {"--preset": _one_of("fstime", "fsbuffer", "fsdisk"),
         "--buffer": _whole(1, 1 << 20), "--blocks": _whole(1, 1 << 30),
         "--seconds": _whole(1, 86400)}),
    "cyclictest": Cyclictest(),
}
