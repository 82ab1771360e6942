#!/bin/sh
# Rate limits with apply on: a policy that changes every VM of 50
# test-driver hosts goes out at [twed] max_changes_per_cycle per
# interval, never faster, whatever passes run (timer, events, reloads:
# SIGHUP every 0.3 s for 12 s), and the fleet converges.  What is counted
# is the changes the daemon logged as made.  TAP.
# Usage: rate.sh TWEDD DEMO_DIR
set -u
twedd=$1 demo=$2
tmp=$(mktemp -d)
pid='' hups=''
trap '[ -n "$hups" ] && kill "$hups" 2>/dev/null; [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"
require_twed_api "$twedd"

hosts=50 cap=20 interval=2
# Two VMs of 4 vCPUs on 4 pCPUs per host: ratio 2, every VM goes from
# off to fixed:3 under the demo's default policy: 100 changes.
: >"$tmp/hosts"
i=0
while [ $i -lt $hosts ]; do
	test_node "$tmp/node-$i.xml" "$i"
	echo "h$i test://$tmp/node-$i.xml" >>"$tmp/hosts"
	i=$((i + 1))
done
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts_file=$tmp/hosts
policy_dir=$demo/policies.d
interval=$interval
max_changes_per_cycle=$cap
min_change_interval=0
[metrics]
textfile=$tmp/twed.prom
CONF
"$twedd" --config "$tmp/twed.conf" --log-format=json 2>"$tmp/log" &
pid=$!
# Reloads while the changes go out: each re-plans every host at once, and
# none may give a fresh budget or restart the interval.  They begin once
# twedd has started (a signal before its main() is the kernel's to act
# on; start-signals.sh covers those during the start).
wait_for 30 grep -q '"started (version' "$tmp/log" ||
	{ echo "Bail out! twedd did not start"; tail -5 "$tmp/log" | sed 's/^/# /'; exit 1; }
(
	i=0
	while [ $i -lt 40 ]; do
		sleep 0.3
		kill -HUP "$pid" 2>/dev/null || exit 0
		i=$((i + 1))
	done
) &
hups=$!
applied() { sed -n 's/^twed_changes_applied_total //p' "$tmp/twed.prom"; }
converged() { [ "$(applied)" = 100 ] && grep -q '^twed_vms{action="change"} 0$' "$tmp/twed.prom" &&
	grep -q '^twed_vms{action="defer"} 0$' "$tmp/twed.prom"; }
check "converges: all 100 changes applied, none pending" wait_for 40 converged
wait "$hups"
hups=
kill -TERM "$pid"
wait "$pid"
pid=
# Each change logged as made, in the interval of its grant.
/usr/bin/python3 "$(dirname "$0")/changes-per-interval.py" "$tmp/log" >"$tmp/intervals"
read -r reloads ungranted made <"$tmp/intervals"
echo "# $reloads reloads; $ungranted change(s) without a grant; made per interval: $made"
check "reloads ran during the run" test "$reloads" -ge 20
check "no change made without a grant" test "$ungranted" -eq 0
check "never more than $cap changes made in one interval" \
	/usr/bin/python3 -c 'import sys; g = list(map(int, sys.argv[1].split())); sys.exit(max(g) > int(sys.argv[2]))' \
	"$made" "$cap"
check "all 100 made, over at least 5 intervals" \
	/usr/bin/python3 -c 'import sys; g = list(map(int, sys.argv[1].split())); sys.exit(not (sum(g) == 100 and len([x for x in g if x]) >= 5))' \
	"$made"
check "no change failed" grep -q '^twed_changes_failed_total 0$' "$tmp/twed.prom"
[ $fails -eq 0 ] || tail -20 "$tmp/log" | sed 's/^/# /'

echo "1..$n"
[ $fails -eq 0 ]
