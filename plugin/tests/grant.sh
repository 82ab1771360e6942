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
tmp=$(mktemp -d)
pid=''
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for, require_twed_api
. "$(dirname "$0")/tap.sh"
require_twed_api "$twedd"

# hosts HOSTS: that many hosts of two 4-vCPU VMs on 4 pCPUs (ratio 2:
# each goes from off to fixed:3 under the demo's default policy)
hosts() {
	: >"$tmp/hosts"
	i=0
	while [ "$i" -lt "$1" ]; do
		{
			echo "<node>"
			for d in 1 2; do
				printf "<domain type='test'><name>vm-%d</name><uuid>00000000-0000-4000-8000-%012d</uuid>" "$d" $((i * 10 + d))
				echo "<memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os></domain>"
			done
			echo "<cpu><mhz>2600</mhz><active>4</active><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads></cpu>"
			echo "<memory>8388608</memory></node>"
		} >"$tmp/node-$i.xml"
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

# run NAME HOSTS: twedd killed at its first change made, then started
# again until every host had a pass
run() {
	start "$tmp/$1-1.log"
	check "$1: the first twedd makes a change" wait_for 20 sh -c "grep -q '\"change\":' '$tmp/$1-1.log'"
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
run min-interval 2
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

[ "$fails" -eq 0 ] || tail -n 5 "$tmp"/*.log | sed 's/^/# /'
echo "1..$n"
[ "$fails" -eq 0 ]
