#!/bin/sh
# twedctl's changes reach the journal: those of apply and of set, when its
# output is quiet (the default) and when its standard error is the journal
# itself (a unit or a timer running it).  A stand-in for journald
# (journal-capture.py) listens on the journal's sockets in a private
# /run/systemd (a mount namespace of the test's own).  TAP.
# Usage: journal.sh TWEDCTL DEMO_DIR
set -u
twedctl=$1 demo=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${TWED_TEST_MOUNT_NS:-}" ]; then
	if ! unshare -m --propagation private true 2>/dev/null; then
		echo "1..0 # SKIP no mount namespace here (unshare -m refused): no private /run/systemd for a stand-in journal"
		exit 0
	fi
	TWED_TEST_MOUNT_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
# ok, not_ok, check, require_twed_api
. "$here/tap.sh"
require_twed_api "$twedctl"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mount -t tmpfs twed-test /run/systemd || { echo "Bail out! cannot mount a tmpfs on /run/systemd"; exit 1; }

# capture NAME [--stderr-journal] -- twedctl ARGS: the journal in $tmp/NAME.journal,
# its stdout dropped
capture() {
	name=$1
	shift
	rm -f /run/systemd/journal/socket /run/systemd/journal/stdout
	# twedctl's own output (its plan table) would break the TAP stream.
	/usr/bin/python3 "$here/journal-capture.py" "$tmp/$name.journal" "$tmp/$name.err" "$@" >/dev/null
}
# has NAME FIELD=VALUE...: one message of the journal carries them all
has() {
	name=$1
	shift
	/usr/bin/python3 - "$tmp/$name.journal" "$@" <<-'PY'
	import sys
	msgs = [set(m.split("\n")) for m in open(sys.argv[1]).read().split("\n\n") if m]
	sys.exit(not any(all(f in m for f in sys.argv[2:]) for m in msgs))
	PY
}

host="test://$demo/host-b.xml"
check "set, quiet: runs" capture set -- "$twedctl" set web-1 --mode fixed --delay 2 -c "$host"
check "set, quiet: its change is in the journal" \
	has set TWED_DOMAIN=web-1 TWED_HOST=host-b TWED_CHANGE=off-\>fixed:2 PRIORITY=5
check "set, stderr the journal: runs" \
	capture set-unit --stderr-journal -- "$twedctl" set web-1 --mode fixed --delay 2 -c "$host"
check "set, stderr the journal: its change is in the journal" \
	has set-unit TWED_DOMAIN=web-1 TWED_CHANGE=off-\>fixed:2
check "apply, quiet: runs" capture apply -- "$twedctl" apply -c "$host" -P "$demo/policies.d"
check "apply, quiet: its changes are in the journal" has apply TWED_DOMAIN=web-1 TWED_CHANGE=off-\>fixed:3
check "apply, stderr the journal: runs" \
	capture apply-unit --stderr-journal -- "$twedctl" apply -c "$host" -P "$demo/policies.d"
check "apply, stderr the journal: its changes are in the journal" \
	has apply-unit TWED_DOMAIN=web-1 TWED_CHANGE=off-\>fixed:3
[ "$fails" -eq 0 ] || for f in "$tmp"/*.journal "$tmp"/*.err; do echo "# $f:"; sed 's/^/#   /' "$f"; done
echo "1..$n"
[ "$fails" -eq 0 ]
