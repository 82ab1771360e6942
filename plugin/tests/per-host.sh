#!/bin/sh
# Per-host deployment: one twedd per compute node, connected to that
# node's libvirt alone (qemu:///system there; a test-driver host here),
# applying, with its policies in a directory an orchestrator fills (a
# Kubernetes ConfigMap volume, a file Nova's deployment tooling writes).
# The same policy documents as a twedd serving many hosts.  TAP.
# Usage: per-host.sh TWEDD DEMO_DIR DATA_DIR
set -u
twedd=$1 demo=$2 data=$3
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"
require_twed_api "$twedd"

# What the orchestrator delivers before the agent starts: the fleet's
# policies.  The node's configuration names its own libvirt only.
mkdir "$tmp/policies"
cp "$demo/policies.d/"*.json "$tmp/policies/"
cat >"$tmp/twed.conf" <<CONF
[twed]
hosts=test://$demo/host-b.xml
policy_dir=$tmp/policies
interval=3600
min_change_interval=0
[metrics]
textfile=$tmp/twed.prom
per_vm=true
CONF
"$twedd" --config "$tmp/twed.conf" 2>"$tmp/log" &
pid=$!
m() { grep -q "$1" "$tmp/twed.prom"; }
check "agent: its one host, named from the URI, up" wait_for 5 m '^twed_host_up{host="host-b"} 1$'
check "agent: the fleet's policy applied on its node" \
	wait_for 5 m '^twed_vm_delay{host="host-b",domain="web-1",mode="fixed"} 3$'
check "agent: changes counted as applied, not dry run" \
	sh -c "[ \"\$(sed -n 's/^twed_changes_applied_total //p' '$tmp/twed.prom')\" -ge 2 ]"
# The orchestrator updates the directory: a new document, written to a
# temporary name and renamed into place as tooling does.
cp "$data/web-override.json" "$tmp/policies/.20-web.json.tmp"
mv "$tmp/policies/.20-web.json.tmp" "$tmp/policies/20-web.json"
check "agent: the orchestrator's update applied" \
	wait_for 5 m '^twed_vm_delay{host="host-b",domain="web-1",mode="fixed"} 1$'
check "agent: the change logged" grep -q 'host=host-b domain=web-1.*fixed:3 -> fixed:1' "$tmp/log"
kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "agent: clean exit (exit $rc)" [ "$rc" -eq 0 ]
[ $fails -eq 0 ] || sed 's/^/# twedd: /' "$tmp/log" | tail -20

echo "1..$n"
[ $fails -eq 0 ]
