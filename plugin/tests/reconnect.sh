#!/bin/bash
# twedd against three libvirtd hosts (test driver, private sockets) with
# short keepalives on both sides, when one host stops answering (SIGSTOP
# of its libvirtd, longer than the keepalive) and a pass blocks on it:
# the other hosts stay connected and keep being re-planned on their
# events, and the stopped one is reconnected and re-planned on its own
# schedule after SIGCONT, with no scheduled cycle (interval 3600 s) and
# no event to prompt it.  TAP.
#   reconnect.sh TWEDD LIBVIRTD VIRSH POLICY_DIR
set -u
twedd=$1 libvirtd=$2 virsh=$3 policies=$4
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$libvirtd" ] || [ ! -x "$virsh" ]; then
	echo "1..0 # SKIP needs libvirtd and virsh (got '$libvirtd', '$virsh')"
	exit 0
fi
tmp=$(mktemp -d)
# The daemons run as nobody (libvirtd-session.sh), who must be able to
# reach their directories below it.
chmod 755 "$tmp"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# ok, check, wait_for; a failure here also shows twedd's last lines
. "$here/tap.sh"
not_ok() {
	n=$((n + 1)) fails=$((fails + 1))
	echo "not ok $n - $1"
	tail -25 "$tmp/twedd.log" | sed 's/^/# twedd: /'
}
count() { grep -c -- "$1" "$tmp/twedd.log"; }
# more_than N PATTERN: the log has more than N lines matching PATTERN now
more_than() { [ "$(count "$2")" -gt "$1" ]; }
up() { grep -q "^twed_host_up{host=\"$1\"} 1\$" "$tmp/twed.prom" 2>/dev/null; }

# Server side: a client that answers no keepalive for ~3 s is dropped,
# as a stalled daemon would be by a production libvirtd within 30 s.
uri=()
for h in 1 2 3; do
	pid=$("$here/libvirtd-session.sh" "$libvirtd" "$tmp/d$h" keepalive_interval=1 keepalive_count=2) ||
		{ echo "Bail out! libvirtd h$h did not start"; exit 1; }
	pids+=("$pid")
	uri+=("test+unix:///default?socket=$tmp/d$h/run/libvirt-sock")
done
cat >"$tmp/twed.conf" <<CONF
[twed]
interval=3600
[libvirt]
keepalive_interval=1
keepalive_count=2
reconnect_max=2
CONF
G_MESSAGES_DEBUG=all "$twedd" --config "$tmp/twed.conf" -P "$policies" \
	-c "h1=${uri[0]}" -c "h2=${uri[1]}" -c "h3=${uri[2]}" \
	--metrics-textfile "$tmp/twed.prom" >"$tmp/twedd.log" 2>&1 &
twedd_pid=$!
pids+=("$twedd_pid")

check "first pass over the three hosts" wait_for 20 eval 'up h1 && up h2 && up h3'

kill -STOP "${pids[0]}"
check "h1's connection given up by keepalive" \
	wait_for 20 grep -q 'host=h1: connection to .* lost' "$tmp/twedd.log"

# A pass over every host now blocks on h1 (its reconnect cannot finish).
kill -HUP "$twedd_pid"
sleep 4
before=$(count 'host=h2: cycle [0-9]*')
"$virsh" -q -c "${uri[1]}" "suspend test; resume test" >/dev/null
check "h2 re-planned on its event while h1 hangs" \
	wait_for 15 more_than "$before" 'host=h2: cycle [0-9]*'
check "h2 and h3 still up while h1 hangs" up h2
check "h2 and h3 still up while h1 hangs (h3)" up h3
check "h1 reported down while it hangs" grep -q '^twed_host_up{host="h1"} 0$' "$tmp/twed.prom"

connects=$(count 'host=h1: connected to')
kill -CONT "${pids[0]}"
check "h1: the reconnect that hung completes after SIGCONT" \
	wait_for 20 more_than "$connects" 'host=h1: connected to'
check "h1 re-planned: reported up again" wait_for 20 up h1

# A host whose libvirtd is gone: attempts fail at once, and are repeated
# on a backoff (capped at reconnect_max=2 s) until it is back.
kill "${pids[2]}"
# Not this shell's child (libvirtd-session.sh started it): wait until it has
# exited, and so cleaned up its run directory, before one starts there again.
gone() { ! kill -0 "$1" 2>/dev/null; }
wait_for 10 gone "${pids[2]}" || { echo "Bail out! libvirtd h3 did not exit"; exit 1; }
check "h3 reported down when its libvirtd ended" \
	wait_for 10 grep -q '^twed_host_up{host="h3"} 0$' "$tmp/twed.prom"
sleep 5
attempts=$(count 'host=h3: cycle [0-9]*: .* unreachable')
check "h3 retried on its backoff meanwhile ($attempts passes in 5 s)" test "$attempts" -ge 2
connects=$(count 'host=h3: connected to')
pid=$("$here/libvirtd-session.sh" "$libvirtd" "$tmp/d3" keepalive_interval=1 keepalive_count=2) ||
	{ echo "Bail out! libvirtd h3 did not start again"; exit 1; }
pids+=("$pid")
check "h3 reconnected once its libvirtd is back" \
	wait_for 10 more_than "$connects" 'host=h3: connected to'
check "h3 re-planned: reported up again" wait_for 10 up h3
check "h2 never lost its connection" test "$(count 'host=h2: connection to .* lost')" = 0
check "h3 lost its connection only when its libvirtd ended" \
	test "$(count 'host=h3: connection to .* lost')" -le 1
check "twedd is still running" kill -0 "$twedd_pid"
check "twedd logged no critical error" test "$(grep -ci critical "$tmp/twedd.log")" = 0
echo "1..$n"
[ "$fails" = 0 ]
