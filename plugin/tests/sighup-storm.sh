#!/bin/bash
# twedd built with AddressSanitizer or ThreadSanitizer under a storm of
# reloads while libvirt's events keep coming: 20 hosts on two libvirtds
# (test driver, private sockets; the hosts share each daemon's default
# domain), a virsh per daemon looping lifecycle and TWED changes of it,
# and SIGHUP every 50 ms for 20 s and until twedd has taken 100 reloads,
# the host list alternating between all 20 and half of them (hosts
# removed and added on every reload).  Passes that run, callbacks that
# fire and the backend's reaper all race the reloads.  Asserts a clean
# exit, no sanitizer report, and the configured cap held in every
# interval.  TAP.
#   sighup-storm.sh address|thread TWEDD_SANITIZED LIBVIRTD VIRSH POLICY_DIR
set -u
sanitizer=$1 twedd=$2 libvirtd=$3 virsh=$4 policies=$5
here=$(cd "$(dirname "$0")" && pwd)
case $sanitizer in
address) name=AddressSanitizer lib=libasan ;;
thread) name=ThreadSanitizer lib=libtsan ;;
*) echo "Bail out! sanitizer '$sanitizer': want address or thread"; exit 1 ;;
esac
if [ ! -x "$twedd" ]; then
	echo "1..0 # SKIP twedd with $name not built (no $lib for this compiler)"
	exit 0
fi
if [ ! -x "$libvirtd" ] || [ ! -x "$virsh" ]; then
	echo "1..0 # SKIP needs libvirtd and virsh (got '$libvirtd', '$virsh')"
	exit 0
fi
# ok, check, wait_for, require_twed_api
. "$here/tap.sh"
require_twed_api "$twedd"
tmp=$(mktemp -d)
chmod 755 "$tmp"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

sock=()
for d in 1 2; do
	pid=$("$here/libvirtd-session.sh" "$libvirtd" "$tmp/d$d") ||
		{ echo "Bail out! libvirtd d$d did not start"; exit 1; }
	pids+=("$pid")
	sock+=("$tmp/d$d/run/libvirt-sock")
done
# Twenty names, ten per daemon; the query parameter only tells them apart.
: >"$tmp/hosts-all"
: >"$tmp/hosts-half"
for i in $(seq 1 20); do
	line="h$i test+unix:///default?socket=${sock[$((i % 2))]}&h=$i"
	echo "$line" >>"$tmp/hosts-all"
	[ "$i" -le 10 ] && echo "$line" >>"$tmp/hosts-half"
done
cp "$tmp/hosts-all" "$tmp/hosts"
cap=3 interval=2
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts_file=$tmp/hosts
policy_dir=$policies
interval=$interval
max_changes_per_cycle=$cap
threads=4
[libvirt]
keepalive_interval=1
keepalive_count=3
CONF
# Leaks are libvirt's and GLib's process-lifetime state as much as ours:
# valgrind covers the plugin's; here a use after free, a double free or
# an overflow aborts and reports.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:exitcode=66:log_path=$tmp/sanitizer
# Every race is reported, and the run goes on.  GLib, libvirt and libc
# are not instrumented: what they do inside is ordered by their own
# locks, which TSan sees only where twedd calls them (tsan-glib.h), so
# the memory their calls touch (g_free, memcpy in g_strdup) is not
# checked (ignore_noninstrumented_modules).  G_SLICE=always-malloc:
# GSlice's magazines hand memory between threads behind TSan's back.
export TSAN_OPTIONS=halt_on_error=0:exitcode=66:log_path=$tmp/sanitizer:ignore_noninstrumented_modules=1
export G_SLICE=always-malloc
"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$tmp/log" &
twedd_pid=$!
check "twedd ($name) connects to the hosts" \
	wait_for 20 grep -q '"message":"connected to' "$tmp/log"

# Events all the time: the default domain suspended, resumed, and set to
# a TWED value the policy puts back (a change per round, under the cap).
for d in 0 1; do
	(
		uri="test+unix:///default?socket=${sock[$d]}"
		k=0
		while kill -0 "$twedd_pid" 2>/dev/null; do
			"$virsh" -q -c "$uri" suspend test >/dev/null 2>&1
			"$virsh" -q -c "$uri" resume test >/dev/null 2>&1
			"$virsh" -q -c "$uri" twedtune test --mode fixed --delay $((k % 6)) --live >/dev/null 2>&1
			k=$((k + 1))
		done
	) &
	pids+=($!)
done

# The storm lasts 20 s and until twedd has taken reloads_wanted reloads,
# however long a loaded machine takes to send the signals; a daemon that
# stops taking them fails at the deadline (twice the idle time, times
# TWED_WAIT_SCALE).
reloads_wanted=100
start=$(date +%s)
end=$((start + 40 * ${TWED_WAIT_SCALE:-4}))
hups=0
while { [ "$(date +%s)" -lt $((start + 20)) ] ||
	[ "$(grep -c '"message":"SIGHUP: reloading' "$tmp/log")" -lt "$reloads_wanted" ]; } &&
	[ "$(date +%s)" -lt "$end" ] && kill -0 "$twedd_pid" 2>/dev/null; do
	if [ $((hups % 2)) -eq 0 ]; then cp "$tmp/hosts-half" "$tmp/hosts.new"; else cp "$tmp/hosts-all" "$tmp/hosts.new"; fi
	mv "$tmp/hosts.new" "$tmp/hosts"
	kill -HUP "$twedd_pid" 2>/dev/null
	hups=$((hups + 1))
	sleep 0.05
done
echo "# $hups SIGHUPs sent"
check "twedd alive after the storm" kill -0 "$twedd_pid"
stop_twedd "$twedd_pid"
if ls "$tmp"/sanitizer* >/dev/null 2>&1; then
	not_ok "no $name report"
	echo "# $(grep -c '^WARNING: ThreadSanitizer\|^==.*ERROR: ' "$tmp"/sanitizer* | awk -F: '{ s += $NF } END { print s }') report(s), the first:"
	head -60 "$tmp"/sanitizer* | sed 's/^/# /'
else
	ok "no $name report"
fi
/usr/bin/python3 "$here/changes-per-interval.py" "$tmp/log" >"$tmp/intervals"
read -r reloads ungranted made <"$tmp/intervals"
echo "# $reloads reloads; $ungranted change(s) without a grant; made per interval: $made"
check "the reloads were taken (at least $reloads_wanted)" test "$reloads" -ge "$reloads_wanted"
check "events prompted passes" grep -q '"event":"tunable"' "$tmp/log"
check "changes were made" /usr/bin/python3 -c 'import sys; sys.exit(sum(map(int, sys.argv[1].split())) == 0)' "$made"
check "no change made without a grant" test "$ungranted" -eq 0
check "never more than $cap changes made in one interval" \
	/usr/bin/python3 -c 'import sys; g = list(map(int, sys.argv[1].split())); sys.exit(max(g) > int(sys.argv[2]))' \
	"$made" "$cap"
[ $fails -eq 0 ] || grep -v '"level":"debug"' "$tmp/log" | tail -20 | sed 's/^/# /'

echo "1..$n"
[ $fails -eq 0 ]
