#!/bin/bash
# Start a libvirtd serving the test driver on a private UNIX socket, in
# session mode inside DIR, so that it touches nothing outside DIR.  Run by
# root, it runs as nobody (a privileged libvirtd would be the system one),
# allowed to read a build in root's home; DIR must be reachable by nobody.
#   libvirtd-session.sh LIBVIRTD DIR [LIBVIRTD.CONF LINE...]
# Prints the daemon's pid once its socket exists; the socket is
# DIR/run/libvirt-sock.  Exit 1 (and the daemon's log) if it did not start.
set -eu
libvirtd=$1 dir=$2
shift 2
mkdir -p "$dir/run" "$dir/config"
chmod 755 "$dir"
{
	printf 'unix_sock_dir = "%s"\nauth_unix_rw = "none"\nauth_unix_ro = "none"\n' "$dir/run"
	printf '%s\n' "$@"
} >"$dir/libvirtd.conf"
as=()
if [ "$(id -u)" = 0 ]; then
	chown -R 65534:65534 "$dir"
	as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	# libvirtd checks for its directories with access(2), which ignores
	# capabilities: nobody must be able to reach DIR itself.
	if ! "${as[@]}" test -r "$dir/libvirtd.conf"; then
		echo "libvirtd-session.sh: $dir is below a directory nobody cannot search" >&2
		exit 1
	fi
	# The build may live in root's home: then nobody may read and search
	# past file permissions, nothing more.
	lib=$(dirname "$libvirtd")/libvirt.so.0
	if [ -e "$lib" ] && ! "${as[@]}" test -r "$lib"; then
		as+=(--inh-caps=+dac_read_search --ambient-caps=+dac_read_search)
	fi
fi
HOME=$dir XDG_RUNTIME_DIR=$dir/run XDG_CONFIG_HOME=$dir/config XDG_CACHE_HOME=$dir/cache \
	"${as[@]}" "$libvirtd" --config "$dir/libvirtd.conf" --pid-file "$dir/libvirtd.pid" \
	>"$dir/libvirtd.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 100); do
	[ -S "$dir/run/libvirt-sock" ] && { echo "$pid"; exit 0; }
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
cat "$dir/libvirtd.log" >&2
kill "$pid" 2>/dev/null || true
exit 1
