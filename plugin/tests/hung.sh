#!/bin/bash
# A pass that hangs inside a libvirt call is reported: a libvirtd that
# stops (SIGSTOP) mid-run, with keepalive off on twedd's side, so that
# nothing ends the call (as libvirtd waiting on a QEMU monitor that
# hangs, while it keeps answering keepalive).  After hung_pass_after (at
# least twice the interval): the warning, the host down, twed_passes_stuck,
# STATUS= (a listener stands in for systemd's notify socket) and /healthz
# 503, the only host's pass being hung; all back once libvirtd goes on
# (SIGCONT) and the call returns.  TAP.
#   hung.sh TWEDD LIBVIRTD POLICY_DIR
set -u
twedd=$1 libvirtd=$2 policies=$3
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$libvirtd" ]; then
	echo "1..0 # SKIP needs libvirtd (got '$libvirtd')"
	exit 0
fi
# ok, not_ok, check, wait_for
. "$here/tap.sh"
tmp=$(mktemp -d)
chmod 755 "$tmp"
pid='' lvd='' listener=''
cleanup() {
	[ -n "$lvd" ] && kill -CONT "$lvd" 2>/dev/null
	for p in $pid $lvd $listener; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

lvd=$("$here/libvirtd-session.sh" "$libvirtd" "$tmp/d") || { echo "Bail out! libvirtd did not start"; exit 1; }
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# health_intervals far beyond the test: /healthz fails only for the hang.
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts=h1=test+unix:///default?socket=$tmp/d/run/libvirt-sock
policy_dir=$policies
interval=2
hung_pass_after=1
dry_run=true
[libvirt]
keepalive_interval=0
[metrics]
listen=127.0.0.1:$port
health_intervals=1000
CONF
notify_listener "$tmp/notify.sock" "$tmp/notify.log"
# A watchdog of 2 s: STATUS= every second.
NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=2000000 sh -c 'WATCHDOG_PID=$$ exec "$@"' sh \
	"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$tmp/log" &
pid=$!

code() { curl -s -o "$tmp/body" -w '%{http_code}' "http://127.0.0.1:$port/healthz"; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | grep -qx "$1"; }
healthy() { [ "$(code)" = 200 ] && metric 'twed_passes_stuck 0' && metric 'twed_host_up{host="h1"} 1'; }
check "up: the host read, /healthz 200, nothing stuck" wait_for 10 healthy

kill -STOP "$lvd"
stopped=$(date +%s)
check "hung: twed_passes_stuck 1" wait_for 25 metric 'twed_passes_stuck 1'
after=$(($(date +%s) - stopped))
echo "# reported $after s after libvirtd stopped (interval 2 s: at least 4 s)"
check "hung: not before twice the interval" test "$after" -ge 4
check "hung: the host shows down" metric 'twed_host_up{host="h1"} 0'
check "hung: /healthz 503, every host's pass stuck" sh -c "[ \"\$(curl -s -o '$tmp/body' -w '%{http_code}' http://127.0.0.1:$port/healthz)\" = 503 ] && grep -q 'the pass of every host (1) is stuck' '$tmp/body'"
check "hung: a warning naming the host and the stage" \
	grep -q '"level":"warning","message":"pass hung in its read stage for more than 4 s: a libvirt call does not return","host":"h1"' "$tmp/log"
check "hung: STATUS= counts it" wait_for 5 grep -q '^STATUS=.*1 pass(es) stuck in libvirt' "$tmp/notify.log"

kill -CONT "$lvd"
check "back: the call returns, the host is read again, /healthz 200" wait_for 15 healthy
: >"$tmp/notify.log"
check "back: STATUS= without it" wait_for 5 grep -q '^STATUS=1/1 host(s) up' "$tmp/notify.log"
check "back: no STATUS= counts it" sh -c "! grep -q 'stuck' '$tmp/notify.log'"

stop_twedd "$pid"
pid=
[ "$fails" -eq 0 ] || tail -n 20 "$tmp/log" | sed 's/^/# /'
echo "1..$n"
[ "$fails" -eq 0 ]
