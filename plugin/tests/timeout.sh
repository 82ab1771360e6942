#!/bin/bash
# Connect timeout: a host whose port accepts the TCP connection and never
# answers (a hung libvirtd, a half-dead proxy) holds virConnectOpen
# forever.  twedctl and twedd give up on it within [libvirt]
# connect_timeout, the other hosts are read as usual, and a host keeps
# at most one open that was given up on.  TAP.
# Usage: timeout.sh TWEDCTL TWEDD DEMO_DIR
set -u
twedctl=$1 twedd=$2 demo=$3
tmp=$(mktemp -d)
listener=
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	[ -n "$listener" ] && kill "$listener" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"

# Accepts, counts and keeps every connection, never sends a byte.
/usr/bin/python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
held = []
while True:
    c, _ = s.accept()
    held.append(c)
    open(sys.argv[2], "w").write("%d\n" % len(held))
' "$tmp/port" "$tmp/accepted" &
listener=$!
wait_for 5 test -s "$tmp/port" || { echo "Bail out! the silent listener did not start"; exit 1; }
port=$(cat "$tmp/port")
printf '[libvirt]\nconnect_timeout=2\nreconnect_max=1\n' >"$tmp/twed.conf"
hosts=(-c "silent=qemu+tcp://127.0.0.1:$port/system" -c "ok=test://$demo/host-b.xml")

start=$(date +%s)
timeout 60 "$twedctl" hosts --config "$tmp/twed.conf" "${hosts[@]}" >"$tmp/out" 2>"$tmp/err"
rc=$?
elapsed=$(($(date +%s) - start))
check "twedctl: gives up on the silent host (exit $rc, want 3)" [ "$rc" -eq 3 ]
check "twedctl: within the timeout ($elapsed s for connect_timeout 2 s)" [ "$elapsed" -le 5 ]
check "twedctl: silent host reported with the timeout" grep -q 'silent .*no answer within connect_timeout 2 s' "$tmp/out"
check "twedctl: the other host read" grep -q '^ok  *up ' "$tmp/out"
[ $fails -eq 0 ] || sed 's/^/# /' "$tmp/out" "$tmp/err"

before=$(cat "$tmp/accepted")
"$twedd" --config "$tmp/twed.conf" -P "$demo/policies.d" -i 3600 --dry-run "${hosts[@]}" \
	--metrics-textfile "$tmp/twed.prom" 2>"$tmp/log" &
pid=$!
check "twedd: the other host is up while the silent one hangs" \
	wait_for 2 grep -q '^twed_host_up{host="ok"} 1$' "$tmp/twed.prom"
check "twedd: gives up on the silent host within the timeout" \
	wait_for 5 grep -q 'silent.*no answer within connect_timeout 2 s' "$tmp/log"
check "twedd: silent host reported down" wait_for 3 grep -q '^twed_host_up{host="silent"} 0$' "$tmp/twed.prom"
# Retries come every second (reconnect_max=1); none starts a second open
# while the first has not returned.
passes() { [ "$(grep -c 'host=silent: cycle .*unreachable' "$tmp/log")" -ge "$1" ]; }
check "twedd: retries while the open is pending" wait_for 8 passes 4
check "twedd: one open of the silent host at a time ($(($(cat "$tmp/accepted") - before)) accepted)" \
	[ "$(($(cat "$tmp/accepted") - before))" -eq 1 ]
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "twedd: clean exit with an open still hanging (exit $rc)" [ "$rc" -eq 0 ]
[ $fails -eq 0 ] || sed 's/^/# twedd: /' "$tmp/log" | tail -20

echo "1..$n"
[ $fails -eq 0 ]
