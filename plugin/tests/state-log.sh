#!/bin/sh
# twedd's state directory as a record log:
# - a grant appends a record to state.log, fdatasync'd; it does not
#   write the state whole (state.json);
# - a twedd killed after its changes, whose log ends in a record cut
#   short, starts again without that record (a warning names the file
#   and the offset), with every VM of the records before it still held,
#   and writes the state whole with a new log before it appends: the
#   state file and its directory fsync'd (the rename is durable);
# - SIGTERM while granted changes wait for a worker (threads=1, its one
#   worker held by a host that never answers) gives their grants back:
#   started again in the same interval, twedd makes them;
# - a grant that cannot be written (every fsync fails with EIO) is not
#   applied;
# - when the state cannot be written whole at start (the fsyncs of
#   state.json fail: a full disk still takes a small record), after a
#   crash that cut a record short or that came between the renames of a
#   whole write (a log of an older state), grants still go to a log the
#   next start reads: started again, it holds every VM changed;
# - a state that cannot be read holds every change at start, and still
#   does at the next start when its hold could not be written.
# TAP.
# Usage: state-log.sh TWEDD SLOW_FSYNC_SO DEMO_DIR
set -u
twedd=$1 shim=$2 demo=$3
tmp=$(mktemp -d)
pid='' listener=''
trap '[ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; [ -n "$listener" ] && kill "$listener" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for, require_twed_api
. "$(dirname "$0")/tap.sh"
require_twed_api "$twedd"
state=$tmp/state

# two hosts of two 4-vCPU VMs on 4 pCPUs (ratio 2: each goes from off to
# fixed:3 under the demo's default policy), fixed uuids
test_node "$tmp/node-0.xml" 0
test_node "$tmp/node-1.xml" 1
printf 'h0 test://%s/node-0.xml\nh1 test://%s/node-1.xml\n' "$tmp" "$tmp" >"$tmp/hosts"

# config CAP MIN_CHANGE_INTERVAL [EXTRA]
config() {
	cat >"$tmp/twed.conf" <<-CONF
	[twed]
	hosts_file=$tmp/hosts
	policy_dir=$demo/policies.d
	interval=600
	max_changes_per_cycle=$1
	min_change_interval=$2
	state_dir=$state
	${3:-}
	CONF
}
# start LOG [env NAME=VALUE...]
start() {
	log=$1; shift
	env "$@" TWED_SLOW_FSYNC_DIR="$state" TWED_SLOW_FSYNC_MS=0 TWED_FSYNC_LOG="$tmp/fsyncs" LD_PRELOAD="$shim" \
		"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$log" &
	pid=$!
}
made() { grep -c '"change":' "$1"; }

# A grant is a record.
config 100 600
start "$tmp/first.log"
check "grant: the 4 changes are made" wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/first.log') -eq 4 ]"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
pid=
check "grant: recorded in state.log" test -s "$state/state.log"
check "grant: state.log fdatasync'd" grep -qx "fdatasync $state/state.log" "$tmp/fsyncs"
check "grant: a record per grant after the header, naming the VMs" \
	sh -c "head -n 1 '$state/state.log' | grep -qx '{\"log\":0}' && grep -q '00000000-0000-4000-8000-000000000001' '$state/state.log'"
check "grant: the state is not written whole" test ! -e "$state/state.json"

# A record cut short by the crash.
good=$(wc -c <"$state/state.log")
printf '{"interval":{"started":1,"sec' >>"$state/state.log"
: >"$tmp/fsyncs"
start "$tmp/second.log"
check "torn: the restarted twedd reads both hosts" \
	wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/second.log') -ge 2 ]"
check "torn: a warning naming the log and the offset ($good)" \
	grep -q "state log $state/state.log: the last record, at offset $good, is cut short" "$tmp/second.log"
check "torn: the records before it are taken: every VM held" \
	test "$(grep -c '2 VM(s), 0 change(s), 2 deferred' "$tmp/second.log")" -ge 2
check "torn: nothing changed" test "$(made "$tmp/second.log")" -eq 0
check "torn: the state written whole, with a new log" \
	wait_for 10 sh -c "test -s '$state/state.json' && head -n 1 '$state/state.log' | grep -qx '{\"log\":1}'"
check "torn: the record cut short is gone" sh -c "! grep -q '\"sec\$' '$state/state.log'"
check "torn: state.json fsync'd" grep -q "^fsync $state/\(state.json\|\.state\.json\)" "$tmp/fsyncs"
check "torn: the directory fsync'd after the renames" \
	test "$(grep -cx "fsync $state" "$tmp/fsyncs")" -ge 2
kill -TERM "$pid"
wait "$pid"
pid=

# SIGTERM with granted changes queued for a worker.  One worker; the
# silent host's pass takes it (connecting, 20 s) right after h0's read,
# and h0's grant (1 s later: a pass is still reading) waits behind it.
/usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
held = []
while True:
    held.append(s.accept()[0])
' "$tmp/port" &
listener=$!
wait_for 5 test -s "$tmp/port" || { echo "Bail out! the silent listener did not start"; exit 1; }
printf 'h0 test://%s/node-0.xml\nsilent qemu+tcp://127.0.0.1:%s/system\n' "$tmp" "$(cat "$tmp/port")" >"$tmp/hosts"
rm -rf "$state"
config 2 600 "threads=1
[libvirt]
connect_timeout=20"
start "$tmp/queued.log"
check "queued: h0's changes granted" wait_for 10 grep -q 'change(s) granted.*"host":"h0"' "$tmp/queued.log"
sleep 1
check "queued: not made" test "$(made "$tmp/queued.log")" -eq 0
kill -TERM "$pid"
wait "$pid"
pid=
printf 'h0 test://%s/node-0.xml\n' "$tmp" >"$tmp/hosts"
start "$tmp/after.log"
check "queued: started again in the interval, twedd makes both" \
	wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/after.log') -eq 2 ]"
kill -TERM "$pid"
wait "$pid"
pid=

# full_disk NAME: started on what $state holds now, with h0 and h1, the
# state cannot be written whole; h1's VMs are changed.  Killed, then
# started again, twedd reads the state and holds all four VMs.
full_disk() {
	printf 'h0 test://%s/node-0.xml\nh1 test://%s/node-1.xml\n' "$tmp" "$tmp" >"$tmp/hosts"
	start "$tmp/$1-full.log" TWED_FSYNC_FAIL_MATCH=state.json
	check "$1, disk full: the state is not written whole" \
		wait_for 20 grep -q "state in $state not compacted" "$tmp/$1-full.log"
	check "$1, disk full: h1's changes are made" \
		wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/$1-full.log') -eq 2 ]"
	# the apply's record too (written within 1 s)
	sleep 2
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	pid=
	start "$tmp/$1-again.log"
	check "$1, started again: the state is read, all 4 VMs held" \
		wait_for 20 grep -q "state from $state: 4 VM(s) held," "$tmp/$1-again.log"
	check "$1, started again: not unreadable" sh -c "! grep -q 'unreadable' '$tmp/$1-again.log'"
	check "$1, started again: both hosts read" \
		wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/$1-again.log') -ge 2 ]"
	check "$1, started again: nothing changed" test "$(made "$tmp/$1-again.log")" -eq 0
	kill -TERM "$pid"
	wait "$pid"
	pid=
}
# grant_h0: h0's two VMs changed and recorded in a log, then killed.
grant_h0() {
	rm -rf "$state"
	printf 'h0 test://%s/node-0.xml\n' "$tmp" >"$tmp/hosts"
	start "$tmp/$1-h0.log"
	wait_for 20 sh -c "[ \$(grep -c '\"change\":' '$tmp/$1-h0.log') -eq 2 ]"
	sleep 2
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null
	pid=
}
config 100 600
# A record cut short, then a full disk.
grant_h0 torn
printf '{"interval":{"started":1,"sec' >>"$state/state.log"
full_disk torn
# A crash between the renames (the state written whole, its log still
# the older one), then a full disk.
grant_h0 stale
cp "$state/state.log" "$tmp/older.log"
printf '{"interval":{"started":1,"sec' >>"$state/state.log"
start "$tmp/stale-whole.log"
wait_for 10 sh -c "test -s '$state/state.json' && head -n 1 '$state/state.log' | grep -qx '{\"log\":1}'"
kill -TERM "$pid"
wait "$pid"
pid=
cp "$tmp/older.log" "$state/state.log"
full_disk stale

# A damaged state, whose hold cannot be written at the first start.
grant_h0 damaged
printf '{"log":0,"interval' >"$state/state.json"
printf 'h0 test://%s/node-0.xml\nh1 test://%s/node-1.xml\n' "$tmp" "$tmp" >"$tmp/hosts"
start "$tmp/damaged-full.log" TWED_FSYNC_FAIL_MATCH=state.json
check "damaged, disk full: unreadable, kept as *.corrupt" \
	wait_for 20 grep -q "state in $state unreadable" "$tmp/damaged-full.log"
check "damaged, disk full: both hosts read" \
	wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/damaged-full.log') -ge 2 ]"
check "damaged, disk full: nothing changed" test "$(made "$tmp/damaged-full.log")" -eq 0
check "damaged, disk full: state.json.corrupt" test -s "$state/state.json.corrupt"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
pid=
start "$tmp/damaged-again.log"
check "damaged, started again: still unreadable, so held" \
	wait_for 20 grep -q "state in $state unreadable" "$tmp/damaged-again.log"
check "damaged, started again: both hosts read" \
	wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/damaged-again.log') -ge 2 ]"
check "damaged, started again: nothing changed" test "$(made "$tmp/damaged-again.log")" -eq 0
kill -TERM "$pid"
wait "$pid"
pid=
start "$tmp/damaged-held.log"
check "damaged, the hold written: the next start goes on with it" \
	wait_for 20 grep -q "state from $state: .*the interval in progress goes on" "$tmp/damaged-held.log"
check "damaged, the hold written: both hosts read" \
	wait_for 20 sh -c "[ \$(grep -c '\"message\":\"cycle ' '$tmp/damaged-held.log') -ge 2 ]"
check "damaged, the hold written: nothing changed" test "$(made "$tmp/damaged-held.log")" -eq 0
kill -TERM "$pid"
wait "$pid"
pid=

# A grant that cannot be recorded.
rm -rf "$state"
config 100 0
start "$tmp/eio.log" TWED_FSYNC_FAIL=1
check "unwritable: the granted changes are not made" \
	wait_for 10 grep -q 'granted change(s) not applied: the grant could not be recorded in the state file' "$tmp/eio.log"
check "unwritable: a warning naming the state directory" \
	grep -q "state in $state: .*no change is made while the grants cannot be recorded" "$tmp/eio.log"
check "unwritable: nothing changed" test "$(made "$tmp/eio.log")" -eq 0
kill -TERM "$pid"
wait "$pid"
pid=

[ "$fails" -eq 0 ] || tail -n 5 "$tmp"/*.log | sed 's/^/# /'
echo "1..$n"
[ "$fails" -eq 0 ]
