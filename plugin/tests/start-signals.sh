#!/bin/sh
# Signals while twedd starts.  The start is held in its first state write:
# the state file is unreadable, so twedd sets it aside and writes its hold
# at once, and the slow disk (slow-fsync.so) keeps that write's fsync
# waiting while a gate file exists; the signal is sent then, and the gate
# removed.
#   SIGHUP: held until the handler exists, not the end of the daemon:
#     twedd finishes starting, then reloads, and runs on.
#   SIGTERM: ends twedd at once (a start held up by a hung state
#     directory must still stop; nothing has been granted yet).
# TAP.
# Usage: start-signals.sh TWEDD SLOW_FSYNC_SO DEMO_DIR
set -u
twedd=$1 shim=$2 demo=$3
# ok, not_ok, check, wait_for, test_node, twedd_test_tmp
. "$(dirname "$0")/tap.sh"
twedd_test_tmp

state=$tmp/state
test_node "$tmp/node-0.xml" 0
echo "h0 test://$tmp/node-0.xml" >"$tmp/hosts"
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts_file=$tmp/hosts
policy_dir=$demo/policies.d
interval=600
state_dir=$state
CONF

# line_of PATTERN LOG: the number of the first line of LOG with PATTERN
line_of() { grep -n -m1 "$1" "$2" | cut -d: -f1; }

for sig in HUP TERM; do
	rm -rf "$state"
	mkdir -p "$state"
	echo 'not a state' >"$state/state.json"
	: >"$tmp/fsyncs"
	: >"$tmp/gate"
	log=$tmp/$sig.log
	env TWED_SLOW_FSYNC_DIR="$state" TWED_SLOW_FSYNC_MS=0 TWED_SLOW_FSYNC_GATE="$tmp/gate" \
		TWED_FSYNC_LOG="$tmp/fsyncs" LD_PRELOAD="$shim" \
		"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$log" &
	pid=$!
	check "SIG$sig: twedd waits in its start-up state write" wait_for 20 test -s "$tmp/fsyncs"
	check "SIG$sig: sent before twedd said it started" sh -c "! grep -q '\"started (version' '$log'"
	kill -"$sig" "$pid"
	rm -f "$tmp/gate"
	if [ "$sig" = HUP ]; then
		check "SIGHUP: twedd finishes starting" wait_for 20 grep -q '"started (version' "$log"
		check "SIGHUP: then reloads" wait_for 20 grep -q 'SIGHUP: reloading' "$log"
		check "SIGHUP: the reload comes after the start" \
			test "$(line_of 'SIGHUP: reloading' "$log")" -gt "$(line_of '"started (version' "$log")"
		check "SIGHUP: and runs on" kill -0 "$pid"
		kill -TERM "$pid"
		want=0
	else
		want=143 # 128 + SIGTERM: the signal's own action
	fi
	check "SIG$sig: twedd ends" wait_for 20 sh -c "! kill -0 $pid 2>/dev/null"
	wait "$pid"
	rc=$?
	pid=
	check "SIG$sig: exit status $want (was $rc)" test "$rc" = "$want"
	[ $fails -eq 0 ] || tail -5 "$log" | sed 's/^/# /'
done

echo "1..$n"
[ $fails -eq 0 ]
