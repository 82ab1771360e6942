#!/bin/sh
# What twedd grants, between the grant and the change.  The state file
# is written on a slow disk (slow-fsync.so: each fsync of it takes
# seconds), which holds every change until its grant is on disk:
# - a twedd killed (SIGKILL) just after it made changes, and started
#   again at once, makes no change the interval's budget or
#   min_change_interval forbid.  test:/// hosts forget what was set with
#   their connection: after the restart every VM wants its change again.
#   The VMs have fixed uuids, as real ones do;
# - a reload (SIGHUP) turning dry_run on between the grant and the change:
#   nothing is changed, and the tokens are given back (with dry_run off
#   again, the same interval's budget makes every change).
# TAP.
# Usage: grant.sh TWEDD SLOW_FSYNC_SO DEMO_DIR
set -u
twedd=$1 shim=$2 demo=$3
# ok, not_ok, check, wait_for, require_twed_api, twedd_test_tmp
. "$(dirname "$0")/tap.sh"
twedd_test_tmp
require_twed_api "$twedd"

# hosts HOSTS: that many hosts of two 4-vCPU VMs on 4 pCPUs (ratio 2:
# each goes from off to fixed:3 under the demo's default policy)
hosts() {
	: >"$tmp/hosts"
	i=0
	while [ "$i" -lt "$1" ]; do
		test_node "$tmp/node-$i.xml" "$i"
		echo "h$i test://$tmp/node-$i.xml" >>"$tmp/hosts"
		i=$((i + 1))
	done
}

# config CAP MIN_CHANGE_INTERVAL [DRY_RUN]: one long interval, the state
# in $tmp/state
config() {
	cat >"$tmp/twed.conf" <<-CONF
	[twed]
	hosts_file=$tmp/hosts
	policy_dir=$demo/policies.d
	interval=600
	max_changes_per_cycle=$1
	min_change_interval=$2
	state_dir=$tmp/state
	dry_run=${3:-false}
	CONF
}

# start LOG [FSYNC_MS]
start() {
	TWED_SLOW_FSYNC_DIR=$tmp/state TWED_SLOW_FSYNC_MS=${2:-2000} LD_PRELOAD=$shim \
		"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$1" &
	pid=$!
}
# made LOG...: the changes the logs record as made, together
made() { cat "$@" 2>/dev/null | grep -c '"change":'; }

# run NAME HOSTS [CHANGES]: twedd killed at its first change made (or
# once CHANGES are made: passes granted in separate batches have their
# grants on disk then), then started again until every host had a pass
run() {
	start "$tmp/$1-1.log"
	check "$1: the first twedd makes a change" wait_for 20 sh -c "grep -q '\"change\":' '$tmp/$1-1.log'"
	[ -z "${3:-}" ] || check "$1: the first twedd makes $3 changes" \
		wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/$1-1.log') -ge $3 ]"
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	start "$tmp/$1-2.log"
	check "$1: the restarted twedd reads every host" wait_for 30 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/$1-2.log') -ge $2 ]"
	kill -TERM "$pid"
	wait "$pid"
	pid=
	echo "# $1: $(made "$tmp/$1-1.log") change(s) before the kill, $(made "$tmp/$1-2.log") after the restart"
}

# The budget: 12 changes wanted, 4 an interval.
hosts 6
rm -rf "$tmp/state"
config 4 0
run budget 6
check "budget: no more than 4 changes made in the interval, across the restart" \
	test "$(made "$tmp/budget-1.log" "$tmp/budget-2.log")" -le 4

# min_change_interval: no VM changed twice.
hosts 2
rm -rf "$tmp/state"
config 100 600
run min-interval 2 4
grep -h '"change":' "$tmp/min-interval-1.log" "$tmp/min-interval-2.log" |
	sed 's/.*"host":"\([^"]*\)".*"domain":"\([^"]*\)".*/\1 \2/' | sort | uniq -d >"$tmp/twice"
check "min-interval: no VM changed twice within min_change_interval, across the restart" test ! -s "$tmp/twice"
check "min-interval: the restarted twedd defers every VM of both hosts" \
	test "$(grep -c '2 VM(s), 0 change(s), 2 deferred' "$tmp/min-interval-2.log")" -ge 2

# A reload between grant and change: 4 changes wanted, 4 an interval.
hosts 2
rm -rf "$tmp/state"
config 4 0
start "$tmp/reload.log" 1500
check "reload: changes granted" wait_for 20 grep -q 'change(s) granted' "$tmp/reload.log"
config 4 0 true
kill -HUP "$pid"
check "reload: the granted changes are not made" \
	wait_for 10 grep -q 'granted change(s) not applied: a reload came first' "$tmp/reload.log"
check "reload: dry run plans them" wait_for 10 grep -q '"message":"would change' "$tmp/reload.log"
check "reload: nothing changed in dry run" test "$(made "$tmp/reload.log")" -eq 0
config 4 0
kill -HUP "$pid"
check "reload: dry run off, the same interval's budget makes all 4" \
	wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/reload.log') -eq 4 ]"
kill -TERM "$pid"
wait "$pid"
pid=

# One VM on two hosts at once (mid-migration, or an inactive copy left
# on the source): the hosts' passes, read together, are granted together;
# the VM is changed once within min_change_interval.
for i in 0 1; do
	cat >"$tmp/node-$i.xml" <<-XML
	<node><domain type='test'><name>mover</name><uuid>5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a01</uuid>
	<memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os></domain>
	<cpu><mhz>2600</mhz><active>2</active><nodes>1</nodes><sockets>1</sockets><cores>2</cores><threads>1</threads></cpu>
	<memory>8388608</memory></node>
	XML
done
printf 'h0 test://%s/node-0.xml\nh1 test://%s/node-1.xml\n' "$tmp" "$tmp" >"$tmp/hosts"
rm -rf "$tmp/state"
config 100 600
start "$tmp/twice.log" 0
check "same uuid: both hosts read" wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/twice.log') -ge 2 ]"
check "same uuid: one change made" wait_for 10 sh -c "[ \$(grep -c '\"change\":' '$tmp/twice.log') -eq 1 ]"
sleep 1
echo "# same uuid: $(made "$tmp/twice.log") change(s) made"
check "same uuid: still one change" test "$(made "$tmp/twice.log")" -eq 1
check "same uuid: the other host's pass defers it" grep -q '1 VM(s), 0 change(s), 1 deferred' "$tmp/twice.log"
kill -TERM "$pid"
wait "$pid"
pid=

# A state write that does not return (a hung state mount: every fsync
# there takes 60 s): the granted passes wait on it, reported as stuck
# (twed_passes_stuck, /healthz 503) after hung_pass_after (at least twice
# the interval), and SIGTERM does not wait for it past hung_pass_after.
hosts 1
rm -rf "$tmp/state"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/twed.conf" <<-CONF
[twed]
hosts_file=$tmp/hosts
policy_dir=$demo/policies.d
interval=2
hung_pass_after=1
state_dir=$tmp/state
[metrics]
listen=127.0.0.1:$port
health_intervals=1000
CONF
start "$tmp/hung-write.log" 60000
metric() { curl -s "http://127.0.0.1:$port/metrics" | grep -qx "$1"; }
check "hung write: changes granted" wait_for 20 grep -q 'change(s) granted' "$tmp/hung-write.log"
check "hung write: twed_passes_stuck 1" wait_for 20 metric 'twed_passes_stuck 1'
# Its first pass never ended: the host has no plan to mark down yet.
check "hung write: the host does not show up" sh -c "! curl -s http://127.0.0.1:$port/metrics | grep -qx 'twed_host_up{host=\"h0\"} 1'"
check "hung write: /healthz 503 naming the state write" \
	sh -c "[ \"\$(curl -s -o '$tmp/body' -w '%{http_code}' http://127.0.0.1:$port/healthz)\" = 503 ] && grep -q 'state write' '$tmp/body'"
check "hung write: a warning naming the state file" grep -q 'for the state write that records its grant: writing .* does not return' "$tmp/hung-write.log"
check "hung write: nothing changed" test "$(made "$tmp/hung-write.log")" -eq 0
kill -TERM "$pid"
stopped=$(date +%s)
# Not waited for blindly: a twedd that waits on the write would hang here.
wait_for 15 sh -c "! kill -0 $pid"
kill -KILL "$pid" 2>/dev/null
wait "$pid"
rc=$?
pid=
echo "# hung write: SIGTERM ended twedd in $(($(date +%s) - stopped)) s, exit $rc"
check "hung write: SIGTERM ends it within 10 s" test $(($(date +%s) - stopped)) -le 10
check "hung write: exit non-zero" test "$rc" -ne 0
check "hung write: saying why" grep -q 'a file write has not returned in 1 s' "$tmp/hung-write.log"

[ "$fails" -eq 0 ] || tail -n 5 "$tmp"/*.log | sed 's/^/# /'
echo "1..$n"
[ "$fails" -eq 0 ]
