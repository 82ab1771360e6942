# Helpers of the e2e tests on the emulated cluster (tools/cluster).
# shellcheck shell=bash

root=$TWED_ROOT
export TWED_STACK
cluster=$root/tools/cluster
failures=0

note() { printf '# %s\n' "$*"; }
pass() { printf 'ok: %s\n' "$*"; }
# fail_log: a log whose tail a failed check prints (twedd's, when it runs)
fail_log=
fail() {
	printf 'FAIL: %s\n' "$*"
	failures=$((failures + 1))
	if [ -n "$fail_log" ] && [ -s "$fail_log" ]; then
		printf '#   last lines of %s:\n' "$fail_log"
		tail -n 30 "$fail_log" | sed 's/^/#   /'
	fi
}
# check DESCRIPTION COMMAND...: passes when the command succeeds; one
# that took 5 s or more says how long, where a slow run's time goes
check() {
	local what=$1 t0=$SECONDS took
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
	took=$((SECONDS - t0))
	[ "$took" -lt 5 ] || note "  took $took s"
}

# take_cluster_turn: the emulated cluster of this test, one at a time
# (held until the test exits: two runs in one build directory would share
# its ports and directory).  meson
# built the layers before it ran the test: "up" builds nothing.  Hosts an
# earlier run of this test left behind (killed before its clean-up) go
# first; tools/cluster starts hosts without this lock's descriptor, so
# they never hold the turn themselves.
take_cluster_turn() {
	export TWED_CLUSTER_BUILD=0
	mkdir -p "$TWED_STACK/e2e"
	exec {cluster_turn}>"$TWED_STACK/e2e/.cluster.lock"
	flock "$cluster_turn"
	"$cluster" down
}

cvirsh() { "$cluster" virsh "$@"; }
csh() { "$cluster" sh "$@"; }

# quiet_hosts: no guest of an earlier phase runs on any host.  The emulated
# hosts share this machine's CPUs, so a guest left running on one host
# (the plugin phase leaves b-2to1 running lockstress on host-c) takes CPU
# time from a measurement on another.
quiet_hosts() {
	local h g
	for h in host-a host-b host-c; do
		for g in $(cvirsh "$h" list --name); do
			cvirsh "$h" -q destroy "$g" >/dev/null || true
		done
	done
}

# guest_xml NAME VCPUS PCPUS TWED CMD [CPU]
#   PCPUS: the host pCPU of each vCPU in turn, e.g. "0 0 1 1" (2:1); "-" for
#   none (unpinned); TWED: attributes of <twed/>, or "" for no element;
#   CMD: the guest's twed.guest= command (tools/hosts/hostimage/guest-boot);
#   CPU "no-twed": the guest's ID registers hide FEAT_TWED (-cpu host,twed=off),
#   which a guest that migrates to a host without FEAT_TWED needs
guest_xml() {
	local name=$1 vcpus=$2 pcpus=$3 twed=$4 cmd=$5 cpu=${6:-} i=0 p cputune='' xml
	if [ "$pcpus" != - ]; then
		for p in $pcpus; do
			cputune+="    <vcpupin vcpu='$i' cpuset='$p'/>"$'\n'
			i=$((i + 1))
		done
	fi
	[ -z "$twed" ] || cputune+="    <twed $twed/>"$'\n'
	xml=$(<"$root/tools/hosts/guest-domain.xml")
	xml=${xml//@NAME@/$name}
	xml=${xml//@MEMORY_MIB@/96}
	xml=${xml//@VCPUS@/$vcpus}
	xml=${xml//@CPUTUNE@/$cputune}
	xml=${xml//@CMD@/$cmd}
	[ "$cpu" != no-twed ] ||
		xml=${xml//"<cpu mode='host-passthrough'/>"/"<cpu mode='host-passthrough'><feature policy='disable' name='twed'/></cpu>"}
	printf '%s\n' "$xml"
}

# define_guest HOST NAME VCPUS PCPUS TWED CMD [CPU]: define it on HOST
define_guest() {
	local host=$1 xml
	xml=$(mktemp)
	guest_xml "${@:2}" >"$xml"
	cvirsh "$host" -q define "$xml" >/dev/null
	local rc=$?
	rm -f "$xml"
	return $rc
}

# The deadlines below were set where the cluster came up in 10 s; on a
# slower machine they stretch by what cluster-e2e measured in this run
# (TWED_E2E_SLOWDOWN_PCT, percent, at least 100).
e2e_slowdown_pct=${TWED_E2E_SLOWDOWN_PCT:-100}

# wait_for SECONDS COMMAND...: COMMAND succeeds within SECONDS (scaled by
# the run's calibration); COMMAND is run again each time, so it must
# compute what it checks itself (no "$(...)" in its arguments).
wait_for() {
	local deadline=$((SECONDS + ($1 * e2e_slowdown_pct + 99) / 100))
	shift
	until "$@"; do [ $SECONDS -lt $deadline ] || return 1; sleep 1; done
}

# wait_console HOST NAME PATTERN [SECONDS]: the guest's console shows PATTERN
wait_console() {
	wait_for "${4:-120}" csh "$1" "grep -q '$3' /var/log/twed/$2.console >/dev/null"
}

# vcpu_stat HOST NAME VCPU STAT: one of the kernel's per-vCPU stats in
# virsh domstats --vcpu (vcpu.N.STAT.cur or .sum, as query-stats has them)
vcpu_stat() {
	cvirsh "$1" domstats --vcpu "$2" |
		sed -n "s/^ *vcpu\\.$3\\.$4\\.\\(cur\\|sum\\)=\\(.*\\)$/\\2/p"
}

# kernel_delay_is HOST NAME D: the kernel programs delay D for the domain:
# each vCPU's twed_delay (what its HCR_EL2 holds) is D, or 0 while the vCPU
# had its pCPU to itself and WFE did not trap at all, and one vCPU's is D
kernel_delay_is() {
	local v
	v=$(cvirsh "$1" domstats --vcpu "$2" | sed -n 's/^ *vcpu\.[0-9]*\.twed_delay\.cur=//p')
	[ -n "$v" ] && ! grep -qvx -e "$3" -e 0 <<<"$v" && grep -qx "$3" <<<"$v"
}

# sum_stat HOST NAME STAT: STAT summed over the vCPUs
sum_stat() {
	cvirsh "$1" domstats --vcpu "$2" |
		awk -F= -v s="$3" '$1 ~ "vcpu\\.[0-9]+\\." s "\\.(cur|sum)$" { n += $2 } END { print n + 0 }'
}

# qmp HOST NAME JSON: the reply of a QMP command through libvirt
qmp() { cvirsh "$1" qemu-monitor-command "$2" "$3"; }

# query_twed HOST NAME: "supported mode delay min max" from QMP query-twed,
# e.g. "true fixed 2 2 2"
query_twed() {
	qmp "$1" "$2" '{"execute":"query-twed"}' | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["return"]
print(str(r["supported"]).lower(), r["mode"], r["delay"], r["min"], r["max"])'
}
