#!/bin/sh
# Rate limits with apply on: a policy that changes every VM of 50
# test-driver hosts goes out at [twed] max_changes_per_cycle per
# interval, never faster, whatever passes run (timer, events), and the
# fleet converges.  TAP.
# Usage: rate.sh TWEDD DEMO_DIR
set -u
twedd=$1 demo=$2
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"
require_twed_api "$twedd"

hosts=50 cap=20 interval=2
# Two VMs of 4 vCPUs on 4 pCPUs per host: ratio 2, every VM goes from
# off to fixed:3 under the demo's default policy: 100 changes.
: >"$tmp/hosts"
i=0
while [ $i -lt $hosts ]; do
	{
		echo "<node>"
		for d in 1 2; do
			echo "<domain type='test'><name>vm-$d</name><memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os></domain>"
		done
		echo "<cpu><mhz>2600</mhz><active>4</active><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads></cpu>"
		echo "<memory>8388608</memory></node>"
	} >"$tmp/node-$i.xml"
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
applied() { sed -n 's/^twed_changes_applied_total //p' "$tmp/twed.prom"; }
converged() { [ "$(applied)" = 100 ] && grep -q '^twed_vms{action="change"} 0$' "$tmp/twed.prom" &&
	grep -q '^twed_vms{action="defer"} 0$' "$tmp/twed.prom"; }
check "converges: all 100 changes applied, none pending" wait_for 40 converged
kill -TERM "$pid"
wait "$pid"
pid=
# The log is one stream in the order the main loop grants and renews.
/usr/bin/python3 - "$tmp/log" "$cap" >"$tmp/intervals" <<'PY'
import json, re, sys
cap = int(sys.argv[2])
granted = [0]
for line in open(sys.argv[1]):
    msg = json.loads(line)["message"]
    if msg.startswith("interval starts"):
        granted.append(0)
    m = re.match(r"(\d+) change\(s\) granted", msg)
    if m:
        granted[-1] += int(m.group(1))
print(" ".join(map(str, granted)))
PY
echo "# granted per interval: $(cat "$tmp/intervals")"
check "never more than $cap changes granted in one interval" \
	/usr/bin/python3 -c 'import sys; g = list(map(int, open(sys.argv[1]).read().split())); sys.exit(max(g) > int(sys.argv[2]))' \
	"$tmp/intervals" "$cap"
check "all 100 granted, over at least 5 intervals" \
	/usr/bin/python3 -c 'import sys; g = list(map(int, open(sys.argv[1]).read().split())); sys.exit(not (sum(g) == 100 and len([x for x in g if x]) >= 5))' \
	"$tmp/intervals"
check "no change failed" grep -q '^twed_changes_failed_total 0$' "$tmp/twed.prom"
[ $fails -eq 0 ] || tail -20 "$tmp/log" | sed 's/^/# /'

echo "1..$n"
[ $fails -eq 0 ]
