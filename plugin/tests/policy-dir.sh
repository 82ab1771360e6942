#!/bin/sh
# The policy directory replaced under a running twedd keeps being
# watched: removed and created again (rm -r, mkdir; slowly, and at once),
# and a volume mounted over it and unmounted again.  An inotify watch ends with the
# directory it watched; the interval here is an hour, so only a watch
# set up again on the new directory sees its policies and their later
# changes.  The mounts happen in a mount namespace of the test's own
# (unshare -m), skipped where that is refused.  TAP.
# Usage: policy-dir.sh TWEDD DEMO_DIR DATA_DIR
set -u
twedd=$1 demo=$2 data=$3
if [ -z "${TWED_TEST_MOUNT_NS:-}" ] && unshare -m --propagation private true 2>/dev/null; then
	TWED_TEST_MOUNT_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; umount "$tmp/pol" 2>/dev/null; rm -rf "$tmp"' EXIT
# ok, not_ok, check, wait_for
. "$(dirname "$0")/tap.sh"

delay() { grep -q "^twed_vm_target_delay{host=\"host-b\",domain=\"web-1\",mode=\"fixed\"} $1\$" "$tmp/m.prom"; }
# fill DIR [override]: the demo's policies, and the one that sets web-1 to 1
fill() {
	cp "$demo/policies.d/"*.json "$1/"
	[ $# -lt 2 ] || cp "$data/web-override.json" "$1/20-web.json"
}

mkdir "$tmp/pol"
fill "$tmp/pol"
printf '[metrics]\nper_vm=true\n' >"$tmp/twed.conf"
"$twedd" --config "$tmp/twed.conf" -P "$tmp/pol" -i 3600 --metrics-textfile "$tmp/m.prom" --dry-run \
	-c "test://$demo/host-b.xml" 2>"$tmp/log" &
pid=$!
check "the policies load" wait_for 5 delay 3

rm -r "$tmp/pol"
check "a directory removed is rejected, the last good set kept" \
	wait_for 5 grep -q 'policy rejected, keeping the last good set: policy directory .*/pol: ' "$tmp/log"
mkdir "$tmp/pol"
fill "$tmp/pol" override
check "created again: its policies load" wait_for 8 delay 1
rm "$tmp/pol/20-web.json"
check "created again: a change in it is seen" wait_for 5 delay 3
# Removed and created again at once, before twedd looks: on ext4 the new
# directory often has the old one's inode number.
rm -r "$tmp/pol"
mkdir "$tmp/pol"
fill "$tmp/pol" override
check "replaced at once: its policies load" wait_for 8 delay 1
rm "$tmp/pol/20-web.json"
check "replaced at once: a change in it is seen" wait_for 5 delay 3

if [ -n "${TWED_TEST_MOUNT_NS:-}" ] && mount -t tmpfs twed-test "$tmp/pol" 2>/dev/null; then
	fill "$tmp/pol" override
	check "a volume mounted over it: its policies load" wait_for 8 delay 1
	rm "$tmp/pol/20-web.json"
	check "mounted: a change in it is seen" wait_for 5 delay 3
	cp "$data/web-override.json" "$tmp/pol/20-web.json"
	wait_for 5 delay 1
	umount "$tmp/pol"
	check "unmounted: the directory beneath loads again" wait_for 8 delay 3
else
	for t in "a volume mounted over it" "mounted: a change in it" "unmounted"; do
		n=$((n + 1))
		echo "ok $n - $t # SKIP no mount namespace here (unshare -m refused)"
	done
fi
stop_twedd "$pid"
pid=
[ "$fails" -eq 0 ] || tail -n 20 "$tmp/log" | sed 's/^/# /'
echo "1..$n"
[ "$fails" -eq 0 ]
