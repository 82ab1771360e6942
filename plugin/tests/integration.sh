#!/bin/bash
# twedctl and twedd against several libvirt test-driver hosts at once.
# Usage: integration.sh TWEDCTL DEMO_DIR DATA_DIR SCHEMAS_DIR
set -u
twedctl=$1 demo=$2 data=$3 schemas=$4
twedd=$(dirname "$twedctl")/../twedd/twedd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"

expect_rc() { # WANT DESCRIPTION COMMAND...: output in $tmp/out, $tmp/err
    want=$1 desc=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$desc (exit $rc)"; else
        not_ok "$desc (exit $rc, want $want)"; sed 's/^/# /' "$tmp/err" "$tmp/out"; fi
}

sed "s#@DEMO@#$demo#g" "$data/hosts.in" >"$tmp/hosts"
: >"$tmp/empty.conf"
# The checks on the daemon's decisions read the per-VM families.
printf '[metrics]\nper_vm=true\n' >"$tmp/pervm.conf"
H=(--hosts-file "$tmp/hosts" -P "$demo/policies.d")
has_api=no
"$twedctl" --version | grep -q 'API: yes' && has_api=yes

# Several hosts, one unreachable: reported, the others proceed.
expect_rc 3 "hosts: unreachable host gives exit 3" "$twedctl" hosts "${H[@]}"
check "hosts: three hosts up" [ "$(grep -c ' up ' "$tmp/out")" -eq 3 ]
check "hosts: down reported with reason" grep -q 'down .*unreachable.*nonexistent' "$tmp/out"
check "hosts: ratios 1.00 / 2.00 / 4.00" sh -c "grep -q 'host-a .* 1.00 ' '$tmp/out' && grep -q 'host-b .* 2.00 ' '$tmp/out' && grep -q 'host-c .* 4.00 ' '$tmp/out'"

expect_rc 3 "plan --json" "$twedctl" plan --json "${H[@]}"
check "plan --json matches schemas/twed-plan.schema.json" /usr/bin/python3 -c '
import json, sys, jsonschema
schema = json.load(open(sys.argv[1])); doc = json.load(open(sys.argv[2]))
jsonschema.Draft202012Validator(schema).validate(doc)
s = doc["summary"]
assert s["changes"] == 5 and s["skipped"] == 1 and s["unreachable"] == 1, s
opt = [v for v in doc["vms"] if v["domain"] == "legacy-1"][0]
assert opt["action"] == "skip" and "opted out" in opt["reason"], opt
batch = [v for v in doc["vms"] if v["domain"] == "batch-1"][0]
assert batch["policy"] == "batch-flavors" and batch["target"]["mode"] == "dynamic", batch
' "$schemas/twed-plan.schema.json" "$tmp/out"

expect_rc 0 "status on reachable hosts" "$twedctl" status -c "test://$demo/host-b.xml" -P "$demo/policies.d"
check "status: web-1 shown with its policy" grep -q 'web-1 .*running .* off .*default .*auto' "$tmp/out"

# Bad input: a clear error naming the culprit, exit 2, nothing done.
mkdir -p "$tmp/badpol"
cp "$demo/policies.d/"*.json "$data/bad-long-delay.json" "$tmp/badpol/"
expect_rc 2 "bad policy in the directory" "$twedctl" plan --hosts-file "$tmp/hosts" -P "$tmp/badpol"
check "bad policy: file and JSON path named" grep -q 'bad-long-delay.json: \$.beyond.delay: 9 exceeds 5' "$tmp/err"
expect_rc 2 "bad URI" "$twedctl" plan -c 'not a uri' -P "$demo/policies.d"
check "bad URI: named" grep -q "not a uri" "$tmp/err"
expect_rc 2 "bad configuration key" "$twedctl" plan --config "$data/bad.conf" "${H[@]}"
check "bad configuration: group and key named" grep -q "\[twed\] unknown key 'bogus'" "$tmp/err"
expect_rc 2 "no hosts" "$twedctl" plan --config "$tmp/empty.conf" -P "$demo/policies.d"
expect_rc 2 "unknown option" "$twedctl" plan --frobnicate
expect_rc 2 "set: long delay refused" "$twedctl" set web-1 --mode fixed --delay 7 "${H[@]}"
expect_rc 2 "set: fixed with stored bounds not holding the delay refused" \
    "$twedctl" set web-1 --mode fixed --delay 2 --min 3 "${H[@]}"
check "set: fixed bounds refusal names --min" grep -q -- '--min (3) must not exceed --delay (2)' "$tmp/err"
expect_rc 2 "set: fixed --max below the delay refused" "$twedctl" set web-1 --mode fixed --delay 2 --max 1 "${H[@]}"
expect_rc 2 "policy check: invalid" "$twedctl" policy check "$data/bad-long-delay.json"
expect_rc 0 "policy check: demo policies" "$twedctl" policy check "$demo/policies.d/"*.json
expect_rc 0 "apply --dry-run" "$twedctl" apply --dry-run -c "test://$demo/host-b.xml" -P "$demo/policies.d"
check "apply --dry-run: two would be applied" grep -q 'dry run: 2 change' "$tmp/out"

if [ $has_api = no ]; then
    expect_rc 4 "apply without the twed API" "$twedctl" apply "${H[@]}"
    check "apply without the API says why" grep -q 'applying needs the twed libvirt API' "$tmp/err"
    expect_rc 4 "set without the twed API" "$twedctl" set web-1 --mode fixed --delay 2 "${H[@]}"
else
    expect_rc 3 "apply with one host down" "$twedctl" apply --status "${H[@]}"
    check "apply: five applied" grep -q 'applied 5, failed 0' "$tmp/out"
    check "apply --status shows new values" grep -q 'web-1 .*running .* fixed:3 ' "$tmp/out"
    expect_rc 0 "set pins a VM" "$twedctl" set web-1 --mode fixed --delay 2 -c "test://$demo/host-b.xml"
    # libvirt keeps min/max in every mode and checks min <= delay <= max
    # against them: a fixed delay outside the stored bounds must still apply.
    expect_rc 0 "apply: band fixed:3 over stored bounds 4..6" \
        "$twedctl" apply --status -c "test://$data/stored-bounds.xml" -P "$demo/policies.d"
    check "apply over stored bounds: both applied" grep -q 'applied 2, failed 0' "$tmp/out"
    check "apply over stored bounds: web-1 at fixed:3" grep -q 'web-1 .*running .* fixed:3 ' "$tmp/out"
    expect_rc 0 "set: fixed below the stored bounds" \
        "$twedctl" set web-1 --mode fixed --delay 3 -c "test://$data/stored-bounds.xml"
    expect_rc 0 "set: fixed with its own stored bounds" \
        "$twedctl" set web-1 --mode fixed --delay 2 --min 1 --max 4 -c "test://$data/stored-bounds.xml"
    check "set: fixed with bounds reports fixed:2" grep -q 'web-1: fixed:2' "$tmp/out"
fi

# The metadata forms twedctl set writes, and the demo's opt-out, follow
# schemas/twed-metadata.rng.
if command -v xmllint >/dev/null; then
    for x in "<policy xmlns='urn:twed:libvirt:1' manage='no'/>" \
             "<policy xmlns='urn:twed:libvirt:1' manage='pinned' mode='fixed' delay='2'/>" \
             "<policy xmlns='urn:twed:libvirt:1' manage='pinned' mode='dynamic' delay='2' min='1' max='4'/>" \
             "<policy xmlns='urn:twed:libvirt:1' manage='pinned' mode='off'/>"; do
        check "metadata RNG accepts $x" sh -c "echo \"\$1\" | xmllint --noout --relaxng '$schemas/twed-metadata.rng' - 2>/dev/null" _ "$x"
    done
    check "metadata RNG rejects a pin without delay" sh -c "! echo \"<policy xmlns='urn:twed:libvirt:1' manage='pinned' mode='fixed'/>\" | xmllint --noout --relaxng '$schemas/twed-metadata.rng' - 2>/dev/null"
fi

# The daemon: a few cycles, a new policy, a bad one, SIGHUP, SIGTERM.
mkdir -p "$tmp/pol"
cp "$demo/policies.d/"*.json "$tmp/pol/"
"$twedd" --config "$tmp/pervm.conf" -P "$tmp/pol" -i 1 --metrics-textfile "$tmp/m.prom" --dry-run \
    -c "test://$demo/host-b.xml" -c "test://$demo/host-c.xml" -c down=test:///nonexistent/down.xml \
    2>"$tmp/log" &
pid=$!
check "twedd: first cycle" wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 3' "$tmp/m.prom"
check "twedd: unreachable host reported" grep -q 'host=down: unreachable' "$tmp/log"
cp "$data/web-override.json" "$tmp/pol/20-web.json"
check "twedd: new policy takes effect" wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 1' "$tmp/m.prom"
cp "$data/bad-long-delay.json" "$tmp/pol/30-bad.json"
check "twedd: bad policy logged with path and reason" wait_for 5 grep -q 'policy rejected, keeping the last good set: .*30-bad.json: \$.beyond.delay' "$tmp/log"
check "twedd: policy_ok 0 while bad" wait_for 3 grep -q '^twed_policy_ok 0' "$tmp/m.prom"
sleep 1.2
check "twedd: last good policy still in force" grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 1' "$tmp/m.prom"
rm "$tmp/pol/30-bad.json"
check "twedd: fixed directory loads again" wait_for 5 grep -q '^twed_policy_ok 1' "$tmp/m.prom"
rm -r "$tmp/pol"
check "twedd: a policy directory that went away is rejected, last good set kept" \
    wait_for 5 grep -q 'policy rejected, keeping the last good set: policy directory .*/pol: ' "$tmp/log"
# Created again (rm -r, then a fresh copy): watched again, read again.
mkdir "$tmp/pol"
cp "$demo/policies.d/"*.json "$tmp/pol/"
check "twedd: a policy directory created again loads" \
    wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 3' "$tmp/m.prom"
cp "$data/web-override.json" "$tmp/pol/20-web.json"
check "twedd: a change in the new directory is seen" \
    wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 1' "$tmp/m.prom"
kill -HUP $pid
check "twedd: SIGHUP reloads" wait_for 5 grep -q 'SIGHUP: reloading' "$tmp/log"
stop_twedd "$pid" twedd
check "twedd: several cycles ran" [ "$(sed -n 's/^twed_cycles_total //p' "$tmp/m.prom")" -ge 3 ]
[ $fails -eq 0 ] || sed 's/^/# twedd: /' "$tmp/log" | tail -30

# A missing policy directory: nothing starts, nothing is planned.
expect_rc 2 "twedd: missing policy directory refused" "$twedd" --config "$tmp/empty.conf" -P "$tmp/nowhere" \
    -c "test://$demo/host-b.xml" --dry-run
check "twedd: missing directory named" grep -q "policy directory $tmp/nowhere: " "$tmp/err"
expect_rc 2 "twedctl: missing policy directory refused" "$twedctl" plan -P "$tmp/nowhere" -c "test://$demo/host-b.xml"
check "twedctl: missing directory named" grep -q "policy directory $tmp/nowhere: " "$tmp/err"
# An empty one (an unmounted mountpoint) too, unless the built-in
# default is asked for.
mkdir -p "$tmp/emptypol"
expect_rc 2 "twedd: empty policy directory refused" "$twedd" --config "$tmp/empty.conf" -P "$tmp/emptypol" \
    -c "test://$demo/host-b.xml" --dry-run
check "twedd: empty directory named" grep -q "policy directory $tmp/emptypol holds no \*.json policy" "$tmp/err"
expect_rc 2 "twedctl: empty policy directory refused" "$twedctl" plan -P "$tmp/emptypol" -c "test://$demo/host-b.xml"
check "twedctl: empty directory named" grep -q "policy directory $tmp/emptypol holds no" "$tmp/err"
printf '[twed]\nallow_builtin_default=true\n' >"$tmp/builtin.conf"
expect_rc 0 "twedctl: empty directory with allow_builtin_default plans the default" \
    "$twedctl" plan --config "$tmp/builtin.conf" -P "$tmp/emptypol" -c "test://$demo/host-b.xml"

# A Kubernetes ConfigMap volume: files are symlinks through "..data",
# which an update swaps for a new directory in one rename.
cm=$tmp/configmap
mkdir -p "$cm/..2026_01" "$cm/..2026_02"
cp "$demo/policies.d/"*.json "$cm/..2026_01/"
cp "$demo/policies.d/"*.json "$cm/..2026_02/"
# The same file in both, matching nothing in the first.
sed 's/"web-\*"/"none-*"/' "$data/web-override.json" >"$cm/..2026_01/20-web.json"
cp "$data/web-override.json" "$cm/..2026_02/20-web.json"
ln -s ..2026_01 "$cm/..data"
for f in "$cm/..2026_02/"*.json; do ln -s "..data/$(basename "$f")" "$cm/$(basename "$f")"; done
"$twedd" --config "$tmp/pervm.conf" -P "$cm" -i 3600 --metrics-textfile "$tmp/cm.prom" --dry-run \
    -c "test://$demo/host-b.xml" 2>"$tmp/cm.log" &
pid=$!
check "twedd: ConfigMap policies load" wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 3' "$tmp/cm.prom"
ln -s ..2026_02 "$cm/..data_tmp" && mv -T "$cm/..data_tmp" "$cm/..data"
check "twedd: a ConfigMap update (..data swapped) takes effect" \
    wait_for 5 grep -q 'twed_vm_target_delay{host="host-b",domain="web-1",mode="fixed"} 1' "$tmp/cm.prom"
kill -TERM $pid
wait $pid

# Fleet-level metrics by default, /healthz, systemd notifications: a
# listener stands in for systemd's notify socket.
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf '[metrics]\nlisten=127.0.0.1:%s\nhealth_intervals=1\n' "$port" >"$tmp/health.conf"
notify_listener "$tmp/notify.sock" "$tmp/notify.log"
NOTIFY_SOCKET=$tmp/notify.sock WATCHDOG_USEC=400000 sh -c 'WATCHDOG_PID=$$ exec "$@"' sh \
    "$twedd" --config "$tmp/health.conf" -P "$demo/policies.d" -i 1 --metrics-textfile "$tmp/h.prom" --dry-run \
    -c "test://$demo/host-b.xml" 2>"$tmp/h.log" &
pid=$!
check "twedd: /healthz 200 while passes succeed" wait_for 5 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/healthz)\" = 200 ]"
check "twedd: /metrics served" wait_for 3 sh -c "[ \"\$(curl -s http://127.0.0.1:$port/metrics | grep -c '^twed_host_up{host=\"host-b\"} 1')\" = 1 ]"
check "twedd: fleet families by default" grep -q '^twed_vms{action="change"} ' "$tmp/h.prom"
check "twedd: VMs counted by mode" grep -q '^twed_vms_mode{mode="off"} ' "$tmp/h.prom"
check "twedd: no per-VM families unless per_vm" sh -c "! grep -q '^twed_vm_' '$tmp/h.prom'"
check "twedd: last successful pass time" wait_for 3 sh -c "[ \"\$(sed -n 's/^twed_last_cycle_success_timestamp_seconds //p' '$tmp/h.prom')\" -gt 0 ]"
check "twedd: READY=1 sent" wait_for 3 grep -q '^READY=1' "$tmp/notify.log"
check "twedd: watchdog petted while passes end" wait_for 3 grep -q '^WATCHDOG=1' "$tmp/notify.log"
check "twedd: STATUS= line" wait_for 3 grep -q '^STATUS=1/1 host(s) up, 2 VM(s)' "$tmp/notify.log"
kill -TERM $pid
wait $pid
kill $listener 2>/dev/null
wait $listener 2>/dev/null
# Only an unreachable host: no pass succeeds, health fails after one interval.
"$twedd" --config "$tmp/health.conf" -P "$demo/policies.d" -i 1 --dry-run \
    -c down=test:///nonexistent/down.xml 2>"$tmp/h2.log" &
pid=$!
check "twedd: /healthz 503 when no pass succeeded for health_intervals" \
    wait_for 6 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/healthz)\" = 503 ]"
kill -TERM $pid
wait $pid

# Logs: G_MESSAGES_DEBUG shows debug messages without --debug; JSON lines
# with the structured fields as members.
G_MESSAGES_DEBUG=twed "$twedd" --config "$tmp/empty.conf" -P "$demo/policies.d" -i 1 --dry-run --log-format=json \
    -c down=test:///nonexistent/down.xml -c "test://$demo/host-b.xml" 2>"$tmp/json.log" &
pid=$!
check "twedd: G_MESSAGES_DEBUG honoured" wait_for 6 grep -q '"level":"debug".*"host":"down"' "$tmp/json.log"
kill -TERM $pid
wait $pid
check "twedd: every log line is a JSON object with level and message" /usr/bin/python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines
for l in lines:
    o = json.loads(l)
    assert o["level"] and "message" in o and o["ts"], l
assert any(o.get("domain") == "web-1" for o in map(json.loads, lines))
' "$tmp/json.log"
"$twedd" --config "$tmp/empty.conf" -P "$demo/policies.d" -i 1 --dry-run \
    -c down=test:///nonexistent/down.xml -c "test://$demo/host-b.xml" 2>"$tmp/nodebug.log" &
pid=$!
sleep 2.5
kill -TERM $pid
wait $pid
check "twedd: no debug lines without --debug or G_MESSAGES_DEBUG" sh -c "! grep -q '^debug' '$tmp/nodebug.log'"

echo "1..$n"
[ $fails -eq 0 ]
