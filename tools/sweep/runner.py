# SPDX-License-Identifier: GPL-2.0-or-later
"""Running a sweep: one guest per run, defined and started through
libvirt, TWED set through the libvirt API, the workload's result read from
the guest console, the kernel's per-vCPU stats and the host's scheduler
latency measured around the workload.

How one run goes, and why:

1. The guest is defined without <twed/> and started paused, so TWED is set
   through virDomainSetTwedParameters (virsh twedtune --live --config)
   before the first guest instruction runs; the live values are read
   back and kept with the result.
2. The guest's twed.guest= command is a shell line: print a BEGIN marker,
   sleep, run the workload, print END with its exit status, then sleep.
   The host samples `virsh domstats --vcpu` when it sees BEGIN (the guest
   has booted and sits idle in WFI, which is not the WFE being counted)
   and again when it sees END (the guest is idle again): the delta
   covers the workload and not the guest's boot or shutdown, which a
   guest that powers off right after its workload would not allow
   (domstats needs a running domain).
3. cyclictest runs on the host from BEGIN to END.
4. The guest is destroyed and undefined; the result is written atomically
   to its own file, so an interrupted sweep resumes where it stopped.
"""

import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from . import workloads

GUEST_NAME = "twed-sweep"
BEGIN_MARK = "TWED-SWEEP: BEGIN"
END_MARK = "TWED-SWEEP: END"
# The guest idles this long between BEGIN and the workload, so the host's
# first stats sample (polled every POLL_SECONDS) lands before it starts.
SETTLE_SECONDS = 3
POLL_SECONDS = 0.5
HOST_CYCLICTEST_OUT = "/tmp/twed-sweep-cyclictest.out"
HOST_CYCLICTEST_PID = "/tmp/twed-sweep-cyclictest.pid"


class RunError(Exception):
    pass


def log(msg):
    print(f"twed-sweep: {msg}", file=sys.stderr, flush=True)


# --- hosts ------------------------------------------------------------------

class Host:
    """virsh and a shell on one host: a tools/cluster host, or a libvirt
    URI plus a shell command (e.g. ssh)."""

    def __init__(self, spec, root, stack):
        self.spec = spec
        self.name = spec.name
        self.root = root
        self.stack = stack

    def _virsh_argv(self, args):
        if self.spec.is_cluster:
            return [os.path.join(self.root, "tools", "cluster"), "virsh", self.name] + list(args)
        return [os.path.join(self.stack, "libvirt", "tools", "virsh"), "-c", self.spec.uri] + list(args)

    def _env(self):
        env = dict(os.environ)
        env["TWED_STACK"] = self.stack
        if not self.spec.is_cluster:
            lib = os.path.join(self.stack, "libvirt", "src")
            env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        return env

    def virsh(self, *args, check=True, timeout=120):
        p = subprocess.run(self._virsh_argv(args), capture_output=True, text=True,
                           env=self._env(), timeout=timeout)
        if check and p.returncode != 0:
            raise RunError(f"{self.name}: virsh {' '.join(args)}: "
                           + (p.stderr.strip() or p.stdout.strip() or f"status {p.returncode}"))
        return p.stdout

    def sh(self, command, check=True, timeout=120):
        if self.spec.is_cluster:
            argv = [os.path.join(self.root, "tools", "cluster"), "sh", self.name, command]
        else:
            argv = list(self.spec.shell) + [command]
        p = subprocess.run(argv, capture_output=True, text=True, env=self._env(), timeout=timeout)
        if check and p.returncode != 0:
            raise RunError(f"{self.name}: shell command failed ({p.returncode}): {command}\n"
                           + p.stdout[-2000:] + p.stderr[-2000:])
        return p.stdout

    def pcpus(self):
        m = re.search(r"^CPU\(s\):\s*(\d+)", self.virsh("nodeinfo"), re.M)
        if not m:
            raise RunError(f"{self.name}: virsh nodeinfo shows no CPU count")
        return int(m.group(1))

    def twed_supported(self):
        caps = self.virsh("domcapabilities", "--virttype", "kvm", "--arch", "aarch64", check=False)
        m = re.search(r"<twed supported='(yes|no)'", caps)
        return None if not m else m.group(1) == "yes"


def describe_host(host):
    """What the report says about the machine: uname, CPU, cores, kernel,
    and whether its CPU is real or emulated."""
    info = {"name": host.name, "uri": host.spec.uri}
    script = ("uname -a; echo ---; uname -r; echo ---; nproc; echo ---; "
              "cat /proc/cpuinfo; echo ---; "
              "cat /sys/devices/system/cpu/cpu0/regs/identification/midr_el1 2>/dev/null; echo ---; "
              "tr '\\0' ' ' </proc/device-tree/compatible 2>/dev/null; echo ---; "
              "tr '\\0' ' ' </proc/device-tree/model 2>/dev/null; echo ---; "
              "cat /proc/cmdline")
    try:
        parts = host.sh(script, timeout=60).split("---\n")
    except (RunError, subprocess.TimeoutExpired) as e:
        info["error"] = str(e)
        return info
    parts += [""] * (8 - len(parts))
    info["uname"] = parts[0].strip()
    info["kernel"] = parts[1].strip()
    info["cores"] = parts[2].strip()
    cpuinfo = parts[3]
    info["midr_el1"] = parts[4].strip()
    info["dt_compatible"] = parts[5].strip()
    info["dt_model"] = parts[6].strip()
    info["cmdline"] = parts[7].strip()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    impl = re.search(r"^CPU implementer\s*:\s*(\S+)", cpuinfo, re.M)
    part = re.search(r"^CPU part\s*:\s*(\S+)", cpuinfo, re.M)
    info["cpu_implementer"] = impl.group(1) if impl else ""
    info["cpu_part"] = part.group(1) if part else ""
    info["cpu_model"] = model.group(1) if model else (
        f"Arm implementer {info['cpu_implementer']} part {info['cpu_part']}" if impl else "unknown")
    info["twed_supported"] = host.twed_supported()
    info.update(classify_cpu(info))
    return info


def classify_cpu(info):
    """Real or emulated.  QEMU's `-cpu max` under TCG reports implementer
    0x00, which Arm reserves for software use: no silicon has it."""
    impl = info.get("cpu_implementer", "").lower()
    compatible = info.get("dt_compatible", "")
    if impl in ("0x00", "0x0"):
        return {"cpu_kind": "emulated",
                "cpu_kind_reason": f"MIDR_EL1 {info.get('midr_el1') or '?'} has implementer 0x00 "
                                   "(QEMU's -cpu max, i.e. TCG emulation)"}
    if "linux,dummy-virt" in compatible:
        return {"cpu_kind": "virtual",
                "cpu_kind_reason": "a real CPU inside a QEMU virt machine (device tree "
                                   "'linux,dummy-virt'): nested virtualisation"}
    if impl:
        return {"cpu_kind": "real",
                "cpu_kind_reason": f"CPU implementer {impl}, part {info.get('cpu_part')}"}
    return {"cpu_kind": "unknown", "cpu_kind_reason": "no CPU implementer in /proc/cpuinfo"}


def describe_controller():
    """The machine twed-sweep itself runs on (it emulates the cluster)."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
            model = m.group(1) if m else model
    except OSError:
        pass
    u = os.uname()
    return {"uname": " ".join([u.sysname, u.nodename, u.release, u.version, u.machine]),
            "cpu_model": model, "cores": str(os.cpu_count())}


# --- guests -----------------------------------------------------------------

def guest_cmdline(argv, settle=SETTLE_SECONDS):
    """twed.guest= value: tools/hosts/hostimage/guest-boot splits it at commas
    and runs the words without a shell, so the script is one word for
    `sh -c` whose spaces are ${IFS}, which sh splits again after expanding
    it.  The trailing sleep keeps the guest up (idle) for the stats."""
    script = "; ".join([
        f"echo {BEGIN_MARK}",
        f"sleep {settle}",
        " ".join(argv),
        f"echo {END_MARK} $?",
        "sleep 86400",
    ])
    return "/bin/sh,-c," + script.replace("; ", ";").replace(" ", "${IFS}")


def guest_xml(name, vcpus, memory_mib, pinning, cmdline):
    """tools/hosts/guest-domain.xml (the guest of tests/e2e/lib.sh),
    without <twed/>: the sweep sets TWED through the API."""
    pins = "".join(f"    <vcpupin vcpu='{i}' cpuset='{p}'/>\n"
                   for i, p in enumerate(pinning or []))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "tools", "hosts", "guest-domain.xml")) as f:
        template = f.read()
    return (template.replace("@CPUTUNE@", pins)
            .replace("@NAME@", name)
            .replace("@MEMORY_MIB@", str(memory_mib))
            .replace("@VCPUS@", str(vcpus))
            .replace("@CMD@", cmdline))


def parse_domstats(text):
    """`virsh domstats --vcpu` -> {"sum": {stat: total over vCPUs},
    "per": {stat: [per-vCPU totals]}, "cur": {stat: [per-vCPU values]}}
    for the kernel's stats (vcpu.N.STAT.sum / .cur)."""
    pers, curs = {}, {}
    for line in text.splitlines():
        m = re.match(r"^\s*vcpu\.(\d+)\.([A-Za-z0-9_]+)\.(sum|cur)=(-?\d+)\s*$", line)
        if not m:
            continue
        vcpu, stat, kind, value = int(m.group(1)), m.group(2), m.group(3), int(m.group(4))
        (pers if kind == "sum" else curs).setdefault(stat, {})[vcpu] = value

    def by_vcpu(d):
        return {k: [v[i] for i in sorted(v)] for k, v in d.items()}
    return {"sum": {k: sum(v.values()) for k, v in pers.items()}, "per": by_vcpu(pers), "cur": by_vcpu(curs)}


def stats_delta(before, after):
    """Cumulative stats: after - before; instant ones (twed_delay): the
    mean over vCPUs at the end."""
    delta = {k: after["sum"][k] - before["sum"].get(k, 0) for k in after["sum"]}
    for k, values in after["cur"].items():
        if values:
            delta[k + "_mean"] = sum(values) / len(values)
    return delta


def parse_twedtune(text):
    out = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(mode|delay|min|max)\s*:\s*(\S+)", line)
        if m:
            out[m.group(1)] = m.group(2) if m.group(1) == "mode" else int(m.group(2))
    return out


class Runner:
    def __init__(self, matrix, out_dir, root, stack, boot_timeout=240, run_timeout=1800):
        self.matrix = matrix
        self.out = out_dir
        self.root = root
        self.stack = stack
        self.boot_timeout = boot_timeout
        self.run_timeout = run_timeout
        self.hosts = {h.name: Host(h, root, stack) for h in matrix.hosts}

    # The order interleaves settings inside each repetition, so that a
    # drift of the machine over the sweep (thermal, other load) spreads
    # over all settings instead of favouring the ones measured first.
    def plan(self):
        runs = []
        for rep in range(1, self.matrix.repetitions + 1):
            for h in self.matrix.hosts:
                for oc in self.matrix.overcommit:
                    for wl in self.matrix.workloads:
                        for s in self.matrix.settings:
                            runs.append((h, oc, wl, s, rep))
        return runs

    def raw_path(self, host, oc, wl, setting, rep):
        return os.path.join(self.out, "raw", host.name, oc.label.replace(":", "to"),
                            wl.label, setting.label, f"rep-{rep}.json")

    def preflight(self):
        """Everything a run needs, checked before the first one: each host
        answers, has the pCPUs for every ratio, and can apply TWED."""
        problems = []
        needs_twed = any(s.mode != "off" for s in self.matrix.settings)
        for name, host in self.hosts.items():
            try:
                pcpus = host.pcpus()
            except (RunError, subprocess.TimeoutExpired) as e:
                problems.append(str(e))
                continue
            for oc in self.matrix.overcommit:
                need = oc.pcpus_needed(self.matrix.vcpus)
                if need > pcpus:
                    problems.append(f"{name}: {self.matrix.vcpus} vCPUs at {oc.label} need "
                                    f"{need} pCPUs, the host has {pcpus}")
            if needs_twed and host.twed_supported() is False:
                problems.append(f"{name}: domain capabilities say TWED is not supported "
                                "(no FEAT_TWED), but the matrix has settings other than off")
        return problems

    def pin_host(self, host):
        """A cluster host's vCPU threads, one per CPU of this machine."""
        if not host.spec.is_cluster:
            return None
        p = subprocess.run([os.path.join(self.root, "tools", "cluster"), "pin", host.name],
                           capture_output=True, text=True, env=host._env())
        return (p.stdout or p.stderr).strip()

    def describe_hosts(self):
        os.makedirs(os.path.join(self.out, "hosts"), exist_ok=True)
        for name, host in self.hosts.items():
            info = describe_host(host)
            info["vcpu_threads"] = self.pin_host(host)
            write_json(os.path.join(self.out, "hosts", f"{name}.json"), info)
        write_json(os.path.join(self.out, "controller.json"), describe_controller())

    def run_all(self, dry_run=False):
        if self.matrix.session.enabled:
            from . import session
            return session.SessionRunner(self).run_all(dry_run)
        plan = self.plan()
        done = failed = skipped = 0
        for i, (h, oc, wl, s, rep) in enumerate(plan, 1):
            path = self.raw_path(h, oc, wl, s, rep)
            what = f"[{i}/{len(plan)}] {h.name} {oc.label} {wl.label} {s.label} rep {rep}"
            if os.path.exists(path):
                skipped += 1
                continue
            if dry_run:
                log(f"{what}: would run")
                continue
            log(f"{what}: running")
            t0 = time.monotonic()
            try:
                record = self.run_one(self.hosts[h.name], oc, wl, s, rep)
            except (RunError, subprocess.TimeoutExpired) as e:
                failed += 1
                log(f"{what}: FAILED: {e}")
                self.keep_failure(path, str(e))
                continue
            write_json(path, record)
            done += 1
            primary = workloads.KNOWN[wl.name].primary
            log(f"{what}: {primary}={record['result']['metrics'][primary]:g} "
                f"wfe_exit_stat={record['vcpu_stats']['delta'].get('wfe_exit_stat')} "
                f"({time.monotonic() - t0:.0f} s)")
        return done, skipped, failed

    def keep_failure(self, path, error):
        """A failed run is kept for diagnosis next to the results, but not
        as a result: a re-run retries it."""
        stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
        fail_path = path.replace(os.path.join(self.out, "raw"),
                                 os.path.join(self.out, "failed"), 1)[:-len(".json")] + f".{stamp}.json"
        write_json(fail_path, {"error": error, "console": getattr(self, "_last_console", "")})

    # --- one run --------------------------------------------------------

    def _cleanup(self, host):
        host.virsh("destroy", GUEST_NAME, check=False)
        host.virsh("undefine", GUEST_NAME, check=False)

    def _console(self, host):
        return host.sh(f"cat /var/log/twed/{GUEST_NAME}.console 2>/dev/null", check=False)

    def _wait_console(self, host, mark, timeout):
        deadline = time.monotonic() + timeout
        while True:
            text = self._console(host)
            if mark in text:
                return text
            state = host.virsh("domstate", GUEST_NAME, check=False).strip()
            if state and state not in ("running", "paused"):
                self._last_console = text
                raise RunError(f"the guest is {state} before '{mark}'; console ends:\n"
                               + "\n".join(text.splitlines()[-15:]))
            if time.monotonic() > deadline:
                self._last_console = text
                raise RunError(f"no '{mark}' on the guest console within {timeout} s; it ends:\n"
                               + "\n".join(text.splitlines()[-15:]))
            time.sleep(POLL_SECONDS)

    def _start_host_latency(self, host):
        hl = self.matrix.host_latency
        host.sh(f"rm -f {HOST_CYCLICTEST_OUT}; setsid cyclictest -q -m -S -d 0 "
                f"-p {hl.priority} -i {hl.interval_us} </dev/null >{HOST_CYCLICTEST_OUT} 2>&1 & "
                f"echo $! >{HOST_CYCLICTEST_PID}")

    def _stop_host_latency(self, host):
        # SIGINT makes cyclictest print its summary before it exits.
        out = host.sh(f"p=$(cat {HOST_CYCLICTEST_PID}); kill -INT $p; "
                      "for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; "
                      f"cat {HOST_CYCLICTEST_OUT}", check=False)
        metrics = workloads.Cyclictest.summarise(out.splitlines())
        return {"metrics": metrics, "output": out}

    def run_one(self, host, oc, wl, setting, rep):
        m = self.matrix
        kind = workloads.KNOWN[wl.name]
        argv = kind.command(wl.args)
        cmdline = guest_cmdline(argv)
        pinning = oc.pinning(m.vcpus)
        self._last_console = ""
        self._cleanup(host)
        host.sh(f"mkdir -p /var/log/twed; rm -f /var/log/twed/{GUEST_NAME}.console")
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(guest_xml(GUEST_NAME, m.vcpus, m.memory_mib, pinning, cmdline))
            xml = f.name
        started = datetime.datetime.now(datetime.timezone.utc)
        latency = None
        try:
            host.virsh("define", xml)
            host.virsh("start", "--paused", GUEST_NAME)
            host.virsh("twedtune", GUEST_NAME, "--live", "--config", *setting.twedtune_args())
            applied = parse_twedtune(host.virsh("twedtune", GUEST_NAME, "--live"))
            if applied.get("mode") != setting.mode or (
                    setting.mode != "off" and applied.get("delay") != setting.delay):
                raise RunError(f"twedtune reads back {applied}, not {setting.to_json()}")
            host.virsh("resume", GUEST_NAME)
            self._wait_console(host, BEGIN_MARK, self.boot_timeout)
            before = parse_domstats(host.virsh("domstats", "--vcpu", GUEST_NAME))
            if m.host_latency.enabled:
                self._start_host_latency(host)
            try:
                console = self._wait_console(host, END_MARK, self.run_timeout)
                after = parse_domstats(host.virsh("domstats", "--vcpu", GUEST_NAME))
            finally:
                if m.host_latency.enabled:
                    latency = self._stop_host_latency(host)
        finally:
            os.unlink(xml)
            self._cleanup(host)
        finished = datetime.datetime.now(datetime.timezone.utc)
        self._last_console = console
        lines = console.splitlines()
        begin = max(i for i, l in enumerate(lines) if BEGIN_MARK in l)
        end = max(i for i, l in enumerate(lines) if END_MARK in l)
        status = int(re.search(r"END (\d+)", lines[end]).group(1))
        output = lines[begin + 1:end]
        result = kind.parse(output)
        if status != 0 or result is None:
            raise RunError(f"{' '.join(argv)} exited {status}"
                           + ("" if result else ", no result line") + ":\n" + "\n".join(output[-15:]))
        return {
            "format": 1,
            "matrix": m.name,
            "host": host.name,
            "overcommit": oc.label,
            "setting": setting.to_json(),
            "workload": wl.to_json(),
            "repetition": rep,
            "started": started.isoformat(timespec="seconds"),
            "finished": finished.isoformat(timespec="seconds"),
            "guest": {"name": GUEST_NAME, "vcpus": m.vcpus, "memory_mib": m.memory_mib,
                      "pinning": pinning, "cmdline": cmdline},
            "twed_applied": applied,
            "result": result,
            "exit_status": status,
            "vcpu_stats": {"before": before, "after": after, "delta": stats_delta(before, after)},
            "host_latency": latency,
            "console": console,
        }


def write_json(path, data):
    """Atomically: a result file exists only when it is complete, which is
    what resuming relies on."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)
