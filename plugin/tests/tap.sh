# TAP helpers of the plugin's shell tests.  Source it; do not run it.
# shellcheck shell=sh
fails=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
# check DESCRIPTION COMMAND...: passes when COMMAND succeeds
check() {
	desc=$1; shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
# wait_for SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS
# times TWED_WAIT_SCALE (default 4): SECONDS is what an idle machine
# needs, and the suites also run beside emulated hosts and inside package
# builds.  A condition met returns at once, so a longer bound costs a
# passing test nothing.
wait_for() {
	t=$(($1 * 10 * ${TWED_WAIT_SCALE:-4})); shift
	while [ $t -gt 0 ]; do "$@" 2>/dev/null && return 0; sleep 0.1; t=$((t - 1)); done
	return 1
}
# twedd_test_tmp: $tmp, a directory removed at exit, after the twedd whose
# pid is in $pid (if any) is killed.
twedd_test_tmp() {
	tmp=$(mktemp -d)
	pid=''
	trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
}
# notify_listener SOCKET LOG: stand in for systemd's notify socket, appending
# every datagram to LOG as a line; $listener is its pid, for the caller to kill
notify_listener() {
	/usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as log:
    while True:
        log.write(s.recv(4096).decode() + "\n")
        log.flush()
' "$1" "$2" &
	# shellcheck disable=SC2034 # read by the sourcing script
	listener=$!
	wait_for 5 test -S "$1"
}
# test_node FILE I: a test-driver node of two 4-vCPU VMs, vm-1 and vm-2, on
# 4 pCPUs (ratio 2), with the UUIDs ...-8000-0000000000I1 and ...I2
test_node() {
	{
		echo "<node>"
		for d in 1 2; do
			printf "<domain type='test'><name>vm-%d</name><uuid>00000000-0000-4000-8000-%012d</uuid>" "$d" $(($2 * 10 + d))
			echo "<memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os></domain>"
		done
		echo "<cpu><mhz>2600</mhz><active>4</active><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads></cpu>"
		echo "<memory>8388608</memory></node>"
	} >"$1"
}
# stop_twedd PID [PREFIX]: SIGTERM to twedd, and a check that it exits 0
stop_twedd() {
	kill -TERM "$1" 2>/dev/null
	wait "$1"
	rc=$?
	check "${2:+$2: }clean exit on SIGTERM (exit $rc)" test "$rc" -eq 0
}
# require_twed_api TWEDD: a TAP skip of the whole script unless TWEDD was
# built with the twed libvirt API (applying needs it)
require_twed_api() {
	if ! "$1" --version | grep -q 'API: yes'; then
		echo "1..0 # SKIP applying needs libvirt with the twed API"
		exit 0
	fi
}
