#!/bin/sh
# twedd's debug line for an auto VM that keeps its setting comes once per
# VM and reason, not once per pass: on a host whose bulk stats carry no
# vCPU signals (the test driver) every pass falls back to off, the VMs
# are off already, and the reason never changes; after a reload that
# puts them in another band it does, and each gets one more line.  The
# line carries the decision in TWED_AUTO.  TAP.
# Usage: auto-log.sh TWEDD
set -u
twedd=$1
tmp=$(mktemp -d)
pid=''
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for, test_node, stop_twedd
. "$(dirname "$0")/tap.sh"

test_node "$tmp/node.xml" 0
mkdir "$tmp/policies.d"
echo '{"version":1,"name":"loop","beyond":{"mode":"auto","min":1,"max":4}}' >"$tmp/policies.d/loop.json"
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts=h0=test://$tmp/node.xml
policy_dir=$tmp/policies.d
interval=1
dry_run=true
CONF
"$twedd" --config "$tmp/twed.conf" --debug --log-format=json 2>"$tmp/log" &
pid=$!
cycles() { grep -c '"message":"cycle [0-9]*:' "$tmp/log"; }
passes() { [ "$(cycles)" -ge 5 ]; }
check "twedd ran 5 passes" wait_for 30 passes
# kept VM: the number of debug lines saying why VM kept its setting
kept() { grep -c "\"message\":\"TWED off kept: auto fallback (.*\"domain\":\"$1\"" "$tmp/log"; }
for vm in vm-1 vm-2; do
	check "$vm: one line for $(cycles) passes at the same reason (got $(kept $vm))" test "$(kept $vm)" -eq 1
done
# Another reason (the VMs' band is another one now): one more line each.
echo '{"version":1,"name":"loop","bands":[{"up_to":100,"mode":"auto","min":1,"max":4}],"beyond":{"mode":"off"}}' \
	>"$tmp/policies.d/loop.json"
seen=$(cycles)
kill -HUP "$pid"
more() { [ "$(cycles)" -ge $((seen + 4)) ]; }
check "twedd ran 4 more passes after a reload" wait_for 30 more
stop_twedd "$pid"
pid=''
for vm in vm-1 vm-2; do
	check "$vm: a second line when the reason changed (got $(kept $vm))" test "$(kept $vm)" -eq 2
done
check "the second line gives the new band" grep -q 'in band \[0, 100.00\]' "$tmp/log"
check "the line carries the decision in TWED_AUTO" grep -q '"domain":"vm-1","auto":"fallback"' "$tmp/log"
[ "$fails" -eq 0 ] || sed 's/^/# /' "$tmp/log"
echo "1..$n"
