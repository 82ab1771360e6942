# SPDX-License-Identifier: GPL-2.0-or-later
"""The sweep matrix: a JSON file naming the TWED settings, overcommit
ratios, workloads, repetitions and hosts of a sweep.

Validation is strict and happens before anything runs: every error names
the file, the JSON path of the offending value and what is wrong with it,
so a typo in a matrix never costs an hour of runs.
"""

import json
import re

from . import workloads

MIN_REPETITIONS = 5
DEFAULT_MEMORY_MIB = 96
TWEDEL_MAX = 15

# Arguments end up on the guest kernel command line, inside a shell
# script whose words are separated by ${IFS} (see runner.guest_cmdline):
# anything that a shell or the kernel's parameter parser would interpret
# is refused.
_SAFE_ARG = re.compile(r"^[A-Za-z0-9_./=:+-]+$")
_SAFE_LABEL = re.compile(r"^[A-Za-z0-9_.+-]+$")
_RATIO = re.compile(r"^([1-9][0-9]*):1$")
_URI = re.compile(r"^[a-z][a-z0-9+]*://")


class MatrixError(Exception):
    """A matrix file is not valid; str() names file, JSON path and reason."""

    def __init__(self, source, path, message):
        self.source = source
        self.path = path
        self.message = message
        super().__init__(f"{source}: {path}: {message}")


class Setting:
    """One TWED setting as twedtune takes it.  A fixed setting may run
    under twedd (twedd=True): the delay set as for any fixed setting, and
    twedd beside the guest as for auto, with a policy that keeps that
    delay, through the same warm-up: the control that tells twedd's own
    cost on the host from what auto's decisions do."""

    def __init__(self, mode, delay=0, min_=0, max_=0, label=None, twedd=False):
        self.mode = mode
        self.delay = delay
        self.min = min_
        self.max = max_
        self.twedd = twedd
        self.label = label or self.default_label()

    @property
    def under_twedd(self):
        """twedd runs beside the guest during this setting's segment."""
        return self.mode == "auto" or self.twedd

    def default_label(self):
        if self.mode == "off":
            return "off"
        if self.mode == "fixed":
            return f"fixed-{self.delay}" + ("-twedd" if self.twedd else "")
        if self.mode == "auto":
            return f"auto-{self.min}-{self.max}"
        return f"dynamic-{self.delay}-{self.min}-{self.max}"

    def twedtune_args(self):
        # auto: the VM starts at off and twedd's controller moves it.
        if self.mode == "auto":
            return ["--mode", "off"]
        args = ["--mode", self.mode]
        if self.mode in ("fixed", "dynamic"):
            args += ["--delay", str(self.delay)]
        if self.mode == "dynamic":
            args += ["--min", str(self.min), "--max", str(self.max)]
        elif self.mode == "fixed":
            # As the plugin sends it (interfaces.md section 4): bounds
            # stored by an earlier setting of the session (twedd's fixed
            # steps under auto) would refuse a delay outside them.
            args += ["--min", str(self.delay), "--max", str(self.delay)]
        return args

    def to_json(self):
        d = {"label": self.label, "mode": self.mode}
        if self.mode in ("fixed", "dynamic"):
            d["delay"] = self.delay
        if self.mode in ("dynamic", "auto"):
            d["min"], d["max"] = self.min, self.max
        if self.twedd:
            d["under_twedd"] = True
        return d


class Overcommit:
    """vCPUs per pCPU: pinned ratio N:1, or unpinned."""

    def __init__(self, ratio):
        self.ratio = ratio  # int, or None for unpinned

    @property
    def label(self):
        return "unpinned" if self.ratio is None else f"{self.ratio}:1"

    def pcpus_needed(self, vcpus):
        return 0 if self.ratio is None else vcpus // self.ratio

    def pinning(self, vcpus):
        """The pCPU of each vCPU: vCPUs fill pCPU 0 first, RATIO at a time,
        so every used pCPU carries exactly RATIO vCPUs; None if unpinned."""
        if self.ratio is None:
            return None
        return [i // self.ratio for i in range(vcpus)]


class Workload:
    def __init__(self, name, args, label):
        self.name = name
        self.args = args
        self.label = label

    def to_json(self):
        return {"label": self.label, "name": self.name, "args": self.args}


class HostSpec:
    """A cluster host (tools/cluster) by name, or any libvirt URI.

    A URI host needs `shell`, the argv prefix of a command that runs a
    shell command line on the host (e.g. ["ssh", "root@h"]): the guest
    console and cyclictest live there.
    """

    def __init__(self, name, uri=None, shell=None):
        self.name = name
        self.uri = uri
        self.shell = shell

    @property
    def is_cluster(self):
        return self.uri is None

    def to_json(self):
        d = {"name": self.name}
        if self.uri:
            d["uri"] = self.uri
        if self.shell:
            d["shell"] = self.shell
        return d


class HostLatency:
    def __init__(self, enabled=True, interval_us=1000, priority=80):
        self.enabled = enabled
        self.interval_us = interval_us
        self.priority = priority

    def to_json(self):
        return {"enabled": self.enabled, "interval_us": self.interval_us,
                "priority": self.priority}


class Session:
    """Keep one guest booted through every setting of a repetition: the
    settings are applied live between workload runs, so a repetition
    of the whole ladder costs one boot, and the settings of one
    repetition see the same guest and host state."""

    def __init__(self, enabled=False, gap_seconds=2, auto_warmup_seconds=20,
                 auto_dwell_seconds=2, auto_interval_seconds=1):
        self.enabled = enabled
        self.gap_seconds = gap_seconds
        self.auto_warmup_seconds = auto_warmup_seconds
        self.auto_dwell_seconds = auto_dwell_seconds
        self.auto_interval_seconds = auto_interval_seconds

    def to_json(self):
        return {"enabled": self.enabled, "gap_seconds": self.gap_seconds,
                "auto_warmup_seconds": self.auto_warmup_seconds,
                "auto_dwell_seconds": self.auto_dwell_seconds,
                "auto_interval_seconds": self.auto_interval_seconds}


class Neighbour:
    """A second guest on the same pCPUs, running a workload in a loop
    whose throughput is measured over each run of the first."""

    def __init__(self, vcpus, workload):
        self.vcpus = vcpus
        self.workload = workload

    def to_json(self):
        return {"vcpus": self.vcpus, "workload": self.workload.to_json()}


class Matrix:
    def __init__(self, source, name, description, hosts, vcpus, memory_mib,
                 settings, overcommit, workloads_, repetitions, host_latency,
                 session=None, neighbour=None):
        self.source = source
        self.name = name
        self.description = description
        self.hosts = hosts
        self.vcpus = vcpus
        self.memory_mib = memory_mib
        self.settings = settings
        self.overcommit = overcommit
        self.workloads = workloads_
        self.repetitions = repetitions
        self.host_latency = host_latency
        self.session = session or Session()
        self.neighbour = neighbour

    def baseline(self):
        """The setting changes are reported against: the first `off`."""
        for s in self.settings:
            if s.mode == "off":
                return s
        return None

    def to_json(self):
        return {
            "name": self.name,
            "description": self.description,
            "hosts": [h.to_json() for h in self.hosts],
            "guest": {"vcpus": self.vcpus, "memory_mib": self.memory_mib},
            "twed": [s.to_json() for s in self.settings],
            "overcommit": [o.label for o in self.overcommit],
            "workloads": [w.to_json() for w in self.workloads],
            "repetitions": self.repetitions,
            "host_latency": self.host_latency.to_json(),
            "session": self.session.to_json(),
            "neighbour": self.neighbour.to_json() if self.neighbour else None,
        }


# --- validation -------------------------------------------------------------

class _Checker:
    def __init__(self, source):
        self.source = source

    def fail(self, path, message):
        raise MatrixError(self.source, path, message)

    def type_(self, value, types, path, what):
        # bool is an int in Python; a JSON true is never a number here.
        if isinstance(value, bool) and bool not in types:
            self.fail(path, f"must be {what}, not a boolean")
        if not isinstance(value, types):
            self.fail(path, f"must be {what}, not {_json_type(value)}")
        return value

    def keys(self, obj, path, required, optional=()):
        for k in required:
            if k not in obj:
                self.fail(path, f"missing member '{k}'")
        allowed = set(required) | set(optional)
        for k in obj:
            if k not in allowed:
                self.fail(f"{path}.{k}", "unknown member (allowed: "
                          + ", ".join(sorted(allowed)) + ")")

    def int_range(self, value, path, lo, hi):
        self.type_(value, (int,), path, "an integer")
        if not lo <= value <= hi:
            self.fail(path, f"{value} is out of range {lo}..{hi}")
        return value

    def label(self, value, path):
        self.type_(value, (str,), path, "a string")
        if not _SAFE_LABEL.match(value):
            self.fail(path, f"'{value}' may only hold letters, digits and _.+-")
        return value

    def unique(self, items, path, what):
        seen = {}
        for i, label in enumerate(items):
            if label in seen:
                self.fail(f"{path}[{i}]", f"{what} '{label}' repeats {path}[{seen[label]}]")
            seen[label] = i


def _json_type(value):
    return {dict: "an object", list: "an array", str: "a string",
            int: "an integer", float: "a number", type(None): "null",
            bool: "a boolean"}.get(type(value), type(value).__name__)


def _parse_setting(c, value, path):
    """A setting: an object {mode, delay, min, max, label} or the short
    form of the kernel's kvm-arm.twed= parameter: off, fixed:D,
    dynamic:D,MIN,MAX; auto:MIN,MAX for twedd's closed loop, and
    fixed:D@twedd for a fixed delay with twedd running beside it."""
    if isinstance(value, str):
        m = re.fullmatch(r"off|fixed:(\d+)(@twedd)?|dynamic:(\d+),(\d+),(\d+)|auto:(\d+),(\d+)", value)
        if not m:
            c.fail(path, f"'{value}' is not off, fixed:D, fixed:D@twedd, dynamic:D,MIN,MAX or auto:MIN,MAX")
        if value == "off":
            value = {"mode": "off"}
        elif m.group(1) is not None:
            value = {"mode": "fixed", "delay": int(m.group(1))}
            if m.group(2):
                value["under_twedd"] = True
        elif m.group(6) is not None:
            value = {"mode": "auto", "min": int(m.group(6)), "max": int(m.group(7))}
        else:
            value = {"mode": "dynamic", "delay": int(m.group(3)),
                     "min": int(m.group(4)), "max": int(m.group(5))}
    c.type_(value, (dict,), path, "an object or a string like 'fixed:3'")
    mode = value.get("mode")
    if mode is not None:
        c.type_(mode, (str,), f"{path}.mode", "a string")
    if mode == "off":
        c.keys(value, path, ["mode"], ["label"])
        s = Setting("off")
    elif mode == "fixed":
        c.keys(value, path, ["mode", "delay"], ["label", "under_twedd"])
        d = c.int_range(value["delay"], f"{path}.delay", 0, TWEDEL_MAX)
        s = Setting("fixed", d, d, d,
                    twedd=c.type_(value.get("under_twedd", False), (bool,), f"{path}.under_twedd", "a boolean"))
    elif mode == "dynamic":
        c.keys(value, path, ["mode", "delay", "min", "max"], ["label"])
        d = c.int_range(value["delay"], f"{path}.delay", 0, TWEDEL_MAX)
        lo = c.int_range(value["min"], f"{path}.min", 0, TWEDEL_MAX)
        hi = c.int_range(value["max"], f"{path}.max", 0, TWEDEL_MAX)
        if not lo <= d <= hi:
            c.fail(path, f"needs min <= delay <= max, got min {lo}, delay {d}, max {hi}")
        s = Setting("dynamic", d, lo, hi)
    elif mode == "auto":
        # twedd's closed loop (policy mode auto) within [min, max].
        c.keys(value, path, ["mode", "min", "max"], ["label"])
        lo = c.int_range(value["min"], f"{path}.min", 0, TWEDEL_MAX)
        hi = c.int_range(value["max"], f"{path}.max", 0, TWEDEL_MAX)
        if lo > hi:
            c.fail(path, f"needs min <= max, got min {lo}, max {hi}")
        s = Setting("auto", lo, lo, hi)
    elif mode is None:
        c.fail(path, "missing member 'mode'")
    else:
        c.fail(f"{path}.mode", f"'{mode}' is not off, fixed, dynamic or auto")
    if "label" in value:
        s.label = c.label(value["label"], f"{path}.label")
    return s


def _parse_overcommit(c, value, path, vcpus):
    c.type_(value, (str,), path, "a string: 'N:1' or 'unpinned'")
    if value == "unpinned":
        return Overcommit(None)
    m = _RATIO.match(value)
    if not m:
        c.fail(path, f"'{value}' is not 'N:1' (vCPUs per pCPU) or 'unpinned'")
    ratio = int(m.group(1))
    if vcpus % ratio:
        c.fail(path, f"{vcpus} vCPUs (guest.vcpus) do not spread evenly at {value}")
    return Overcommit(ratio)


def _parse_workload(c, value, path):
    c.type_(value, (dict,), path, "an object")
    c.keys(value, path, ["name"], ["args", "label"])
    name = c.type_(value["name"], (str,), f"{path}.name", "a string")
    if name not in workloads.KNOWN:
        c.fail(f"{path}.name", f"unknown workload '{name}' (known: "
               + ", ".join(sorted(workloads.KNOWN)) + ")")
    args = value.get("args", [])
    c.type_(args, (list,), f"{path}.args", "an array of strings")
    for i, a in enumerate(args):
        c.type_(a, (str,), f"{path}.args[{i}]", "a string")
        if not _SAFE_ARG.match(a):
            c.fail(f"{path}.args[{i}]", f"'{a}' may only hold letters, digits and _./=:+-")
    problem = workloads.KNOWN[name].check_args(args)
    if problem:
        c.fail(f"{path}.args", problem)
    label = c.label(value["label"], f"{path}.label") if "label" in value else \
        "-".join([name] + [a.lstrip("-") for a in args])[:60]
    return Workload(name, list(args), label)


def _parse_host(c, value, path):
    if isinstance(value, str):
        value = {"uri": value} if _URI.match(value) else {"name": value}
    c.type_(value, (dict,), path, "a cluster host name, a libvirt URI or an object")
    c.keys(value, path, [], ["name", "uri", "shell"])
    if "name" not in value and "uri" not in value:
        c.fail(path, "needs 'name' (a cluster host) or 'uri'")
    uri = value.get("uri")
    if uri is not None:
        c.type_(uri, (str,), f"{path}.uri", "a string")
        if not _URI.match(uri):
            c.fail(f"{path}.uri", f"'{uri}' is not a libvirt URI")
        if "shell" not in value:
            c.fail(path, "a URI host needs 'shell' (e.g. [\"ssh\", \"root@host\"]) "
                   "to read guest consoles and run cyclictest")
    shell = value.get("shell")
    if shell is not None:
        c.type_(shell, (list,), f"{path}.shell", "an array of strings")
        if not shell:
            c.fail(f"{path}.shell", "must not be empty")
        for i, a in enumerate(shell):
            c.type_(a, (str,), f"{path}.shell[{i}]", "a string")
    name = value.get("name")
    if name is None:
        name = re.sub(r"[^A-Za-z0-9_.+-]+", "_", uri.split("://", 1)[1]).strip("_") or "host"
    else:
        c.label(name, f"{path}.name")
    return HostSpec(name, uri, shell)


def parse(text, source="<matrix>", repetitions=None, hosts=None):
    """Parse and validate a matrix.  REPETITIONS (from the command line)
    overrides the file's and may go below MIN_REPETITIONS; HOSTS (strings,
    from the command line) replace the file's."""
    c = _Checker(source)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise MatrixError(source, f"line {e.lineno} column {e.colno}", f"not JSON: {e.msg}")
    c.type_(doc, (dict,), "$", "an object")
    c.keys(doc, "$", ["twed", "overcommit", "workloads"],
           ["name", "description", "hosts", "guest", "repetitions", "host_latency",
            "session", "neighbour"])

    name = c.label(doc.get("name", "sweep"), "$.name")
    description = doc.get("description", "")
    c.type_(description, (str,), "$.description", "a string")

    guest = doc.get("guest", {})
    c.type_(guest, (dict,), "$.guest", "an object")
    c.keys(guest, "$.guest", [], ["vcpus", "memory_mib"])
    vcpus = c.int_range(guest.get("vcpus", 4), "$.guest.vcpus", 1, 512)
    memory = c.int_range(guest.get("memory_mib", DEFAULT_MEMORY_MIB), "$.guest.memory_mib", 32, 1 << 22)

    settings_doc = c.type_(doc["twed"], (list,), "$.twed", "an array")
    if not settings_doc:
        c.fail("$.twed", "needs at least one setting")
    settings = [_parse_setting(c, s, f"$.twed[{i}]") for i, s in enumerate(settings_doc)]
    c.unique([s.label for s in settings], "$.twed", "setting")

    oc_doc = c.type_(doc["overcommit"], (list,), "$.overcommit", "an array")
    if not oc_doc:
        c.fail("$.overcommit", "needs at least one ratio")
    overcommit = [_parse_overcommit(c, o, f"$.overcommit[{i}]", vcpus) for i, o in enumerate(oc_doc)]
    c.unique([o.label for o in overcommit], "$.overcommit", "ratio")

    wl_doc = c.type_(doc["workloads"], (list,), "$.workloads", "an array")
    if not wl_doc:
        c.fail("$.workloads", "needs at least one workload")
    wls = [_parse_workload(c, w, f"$.workloads[{i}]") for i, w in enumerate(wl_doc)]
    c.unique([w.label for w in wls], "$.workloads", "workload label")

    if "repetitions" in doc:
        reps = c.int_range(doc["repetitions"], "$.repetitions", MIN_REPETITIONS, 1000)
    else:
        reps = MIN_REPETITIONS
    if repetitions is not None:
        if not isinstance(repetitions, int) or repetitions < 1:
            raise MatrixError(source, "--repetitions", f"{repetitions!r} is not a positive integer")
        reps = repetitions

    if hosts:
        host_specs = [_parse_host(_Checker("--host"), h, f"--host[{i}]") for i, h in enumerate(hosts)]
    else:
        hosts_doc = c.type_(doc.get("hosts", []), (list,), "$.hosts", "an array")
        if not hosts_doc:
            c.fail("$.hosts", "needs at least one host (or give --host)")
        host_specs = [_parse_host(c, h, f"$.hosts[{i}]") for i, h in enumerate(hosts_doc)]
    c.unique([h.name for h in host_specs], "$.hosts", "host")

    hl = doc.get("host_latency", {})
    c.type_(hl, (dict,), "$.host_latency", "an object")
    c.keys(hl, "$.host_latency", [], ["enabled", "interval_us", "priority"])
    enabled = c.type_(hl.get("enabled", True), (bool,), "$.host_latency.enabled", "a boolean")
    host_latency = HostLatency(
        enabled,
        c.int_range(hl.get("interval_us", 1000), "$.host_latency.interval_us", 50, 1000000),
        c.int_range(hl.get("priority", 80), "$.host_latency.priority", 1, 99))

    sess = doc.get("session", {})
    c.type_(sess, (dict,), "$.session", "an object")
    c.keys(sess, "$.session", [], ["enabled", "gap_seconds", "auto_warmup_seconds",
                                    "auto_dwell_seconds", "auto_interval_seconds"])
    session = Session(
        c.type_(sess.get("enabled", False), (bool,), "$.session.enabled", "a boolean"),
        c.int_range(sess.get("gap_seconds", 2), "$.session.gap_seconds", 1, 60),
        c.int_range(sess.get("auto_warmup_seconds", 20), "$.session.auto_warmup_seconds", 0, 3600),
        c.int_range(sess.get("auto_dwell_seconds", 2), "$.session.auto_dwell_seconds", 1, 3600),
        c.int_range(sess.get("auto_interval_seconds", 1), "$.session.auto_interval_seconds", 1, 3600))
    if any(s.under_twedd for s in settings) and not session.enabled:
        c.fail("$.twed", "auto and @twedd settings need \"session\": {\"enabled\": true} (twedd runs beside the guest)")

    neighbour = None
    if doc.get("neighbour") is not None:
        nb = c.type_(doc["neighbour"], (dict,), "$.neighbour", "an object")
        c.keys(nb, "$.neighbour", ["workload"], ["vcpus"])
        nw = _parse_workload(c, nb["workload"], "$.neighbour.workload")
        neighbour = Neighbour(c.int_range(nb.get("vcpus", 1), "$.neighbour.vcpus", 1, 64), nw)
        if not session.enabled:
            c.fail("$.neighbour", "a neighbour needs \"session\": {\"enabled\": true}")

    return Matrix(source, name, description, host_specs, vcpus, memory, settings,
                  overcommit, wls, reps, host_latency, session, neighbour)


def parse_parts(text, source="<matrix>", repetitions=None, hosts=None):
    """A matrix file, or a preset of several (\"parts\": each a matrix
    whose members default to the preset's own): a list of Matrix, each
    reported in OUT/NAME/."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return [parse(text, source, repetitions, hosts)]
    if not isinstance(doc, dict) or "parts" not in doc:
        return [parse(text, source, repetitions, hosts)]
    c = _Checker(source)
    parts = c.type_(doc["parts"], (list,), "$.parts", "an array")
    if not parts:
        c.fail("$.parts", "needs at least one part")
    base = {k: v for k, v in doc.items() if k not in ("parts", "name", "description")}
    out = []
    for i, part in enumerate(parts):
        c.type_(part, (dict,), f"$.parts[{i}]", "an object")
        if "name" not in part:
            c.fail(f"$.parts[{i}]", "missing member 'name'")
        merged = dict(base)
        merged.update(part)
        try:
            out.append(parse(json.dumps(merged), f"{source} part {i}", repetitions, hosts))
        except MatrixError as e:
            raise MatrixError(source, f"$.parts[{i}] {e.path}", e.message)
    c.unique([m.name for m in out], "$.parts", "part")
    return out


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise MatrixError(path, "$", f"cannot read: {e.strerror}")


def load(path, repetitions=None, hosts=None):
    return parse(_read(path), path, repetitions, hosts)


def load_parts(path, repetitions=None, hosts=None):
    return parse_parts(_read(path), path, repetitions, hosts)
