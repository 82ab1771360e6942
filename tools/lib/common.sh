# Shared helpers for twed's tools.  Source it; do not run it.
# shellcheck shell=bash

TWED_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TWED_CACHE_DIR=${TWED_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/twed}
TWED_WORK_DIR=${TWED_WORK_DIR:-$TWED_ROOT/work}
# Source trees and builds of kernel, QEMU and libvirt for the tests, shared
# by every clone (tools/stack); empty: under each build directory.
TWED_LAYER_CACHE=${TWED_LAYER_CACHE-$TWED_CACHE_DIR/layers}
export CCACHE_DIR=${CCACHE_DIR:-$TWED_CACHE_DIR/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# Builds under the checkout hit the cache from any other clone of it: paths
# are hashed relative to the checkout, and fresh checkouts' new timestamps do
# not defeat the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$TWED_ROOT}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-include_file_mtime,include_file_ctime,time_macros}
# Depend mode: a miss costs the compile alone, not a preprocessor run on
# top (measured: the arm64 kernel's cold build takes 419 s with plain
# ccache, 313 s in depend mode, 305 s without ccache).  Every build here
# writes dependency files (-MD), which depend mode needs.
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}
# Debian's meson and python modules live with /usr/bin/python3; a python3
# earlier on PATH may not see them.
TWED_PYTHON=/usr/bin/python3

die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }
info() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

# The track: which bases a series is made for (tools/setup/bases.conf).
#   debian-13  Debian 13's stack, for deployment; strict pins
#   upstream   the newest upstream releases the archive serves, what is
#              posted upstream; a pin that stops being served falls back
#              to the newest served upload of the same upstream series
# Commands take --track; the environment carries it to their helpers.
TWED_TRACK=${TWED_TRACK:-debian-13}
export TWED_TRACK
TWED_TRACKS="debian-13 upstream"

# set_track TRACK: select and check a track.
set_track() {
	case " $TWED_TRACKS " in
	*" $1 "*) TWED_TRACK=$1 ;;
	*) die "unknown track '$1' (known: ${TWED_TRACKS// /, })" ;;
	esac
}

# take_track_option "$@": set the track from a --track TRACK or
# --track=TRACK anywhere in the arguments; the rest, in order, in ARGS.
take_track_option() {
	ARGS=()
	while [ $# -gt 0 ]; do
		case $1 in
		--track) [ $# -ge 2 ] || die "--track needs a value"; set_track "$2"; shift 2 ;;
		--track=*) set_track "${1#--track=}"; shift ;;
		*) ARGS+=("$1"); shift ;;
		esac
	done
}

# track_strict TRACK: a pin of this track never falls back.
track_strict() { [ "$1" = debian-13 ]; }

# TWED_BASES_CONF: another pin file (a test of the fallback uses a copy)
TWED_BASES_CONF=${TWED_BASES_CONF:-$TWED_ROOT/tools/setup/bases.conf}
export TWED_BASES_CONF
# A fallback base fetch-bases chose because an upstream-track pin is not
# served any more; valid only as long as the pin it stands for.
TWED_FALLBACK_CONF=$TWED_CACHE_DIR/git/fallback.conf

# pin_line TRACK COMPONENT: the component's line of bases.conf for the
# track.  A component with no line in a track is single-track: its
# debian-13 pin serves every track (libvirt, while no newer tarball is
# served).
pin_line() {
	awk -v t="$1" -v c="$2" '
		/^#/ || NF == 0 { next }
		$2 == c && $1 == t { line = $0 }
		$2 == c && $1 == "debian-13" { d13 = $0 }
		END { if (line == "") line = d13; if (line == "") exit 1; print line }' "$TWED_BASES_CONF"
}

# multi_track COMPONENT: the component has a series per track.
multi_track() {
	awk -v c="$1" '!/^#/ && NF && $2 == c && $1 != "debian-13" { f = 1 } END { exit !f }' \
		"$TWED_BASES_CONF"
}

# base_line COMPONENT: the base the current track uses: the pin, or a
# fallback recorded for exactly this pin (upstream track only).
base_line() {
	local pin fb
	pin=$(pin_line "$TWED_TRACK" "$1") ||
		die "unknown component '$1' (known: $(components | paste -sd, | sed 's/,/, /g'))"
	if ! track_strict "$TWED_TRACK" && [ -f "$TWED_FALLBACK_CONF" ]; then
		# fallback.conf: the pin (TARBALL@SHA256), then the fallback's
		# own line.
		fb=$(awk -v t="$TWED_TRACK" -v c="$1" -v s="$(echo "$pin" | awk '{ print $5 "@" $6 }')" '
			$1 == s && $2 == t && $3 == c { $1 = ""; sub(/^ /, ""); print }' "$TWED_FALLBACK_CONF")
		[ -z "$fb" ] || pin=$fb
	fi
	echo "$pin"
}

# base_field COMPONENT FIELD -> value from tools/setup/bases.conf, for the
# current track
#   fields: package topdir tarball sha256 commit
base_field() {
	local comp=$1 field=$2 line
	line=$(base_line "$comp") || exit 1
	echo "$line" | awk -v f="$field" '{
		if (f == "package") print $3
		else if (f == "topdir") print $4
		else if (f == "tarball") print $5
		else if (f == "sha256") print $6
		else if (f == "commit") print $7
		else exit 1 }'
}

# base_fallen_back COMPONENT: the current track's base is a fallback, not
# the pin.
base_fallen_back() {
	[ "$(base_line "$1")" != "$(pin_line "$TWED_TRACK" "$1")" ]
}

components() { awk '!/^#/ && NF { print $2 }' "$TWED_BASES_CONF" | awk '!seen[$0]++'; }

# patch_dir COMPONENT: the series of the current track.  Components with a
# pin in more than one track keep one folder per track.
patch_dir() {
	if multi_track "$1"; then
		echo "$TWED_ROOT/$1-patches/$TWED_TRACK"
	else
		echo "$TWED_ROOT/$1-patches"
	fi
}

jobs() { nproc 2>/dev/null || echo 2; }

# tree_inputs_digest TREE [TEXT]...: a digest of TREE's commit and of each
# TEXT (what else a build is made of: file digests, tool versions), or
# nothing when TREE is not a clean git checkout (untracked files count):
# then only make can tell what changed.  A build that wrote the digest it
# was made from can skip make's own walk of a kernel tree (seconds of CPU)
# while it matches.
tree_inputs_digest() {
	local tree=$1 head
	shift
	head=$(git -C "$tree" rev-parse HEAD 2>/dev/null) || return 0
	[ -z "$(git -C "$tree" status --porcelain 2>/dev/null)" ] || return 0
	printf '%s\n' "$head" "$@" | sha256sum | cut -d' ' -f1
}

# update_file NEW DEST: move NEW over DEST unless they are the same, so
# that an unchanged DEST keeps its timestamp (nothing rebuilds for it).
update_file() {
	if cmp -s "$1" "$2"; then rm -f "$1"; else mv -f "$1" "$2"; fi
}

# copy_if_changed SRC DEST: copy SRC to DEST unless DEST is the same already
# (keeping its timestamp).
copy_if_changed() {
	cmp -s "$1" "$2" || cp "$1" "$2"
}

# series_patches DIR: the patch files DIR/series names, in order.
series_patches() {
	local dir=$1
	[ -f "$dir/series" ] || return 0
	grep -v -e '^#' -e '^[[:space:]]*$' "$dir/series" | sed "s|^|$dir/|"
}

# series_digest COMPONENT: the pinned base plus the committed series.
series_digest() {
	local comp=$1 f
	{
		base_field "$comp" sha256
		while read -r f; do sha256sum <"$f"; done < <(series_patches "$(patch_dir "$comp")")
	} | sha256sum | cut -d' ' -f1
}

# --- layer provenance (tools/stack, tests/smoke/layer-series) -----------------
# A layer build is keyed by what made it: the source digest of its component
# (base, series, build-tree fixups) and the digest of its configuration (the
# build script, the tools/layers configuration files it reads, the options from the
# environment).  Different series or configurations never share a build.

# layer_component LAYER -> kernel | qemu | libvirt
layer_component() {
	case $1 in
	kernel | kernel-arm32) echo kernel ;;
	qemu-x86 | qemu-arm64 | qemu-x86-base | qemu-arm64-base) echo qemu ;;
	libvirt | libvirt-arm64) echo libvirt ;;
	*) die "layer '$1' is not built from a series (kernel, kernel-arm32, qemu-x86, qemu-arm64, qemu-x86-base, qemu-arm64-base, libvirt, libvirt-arm64)" ;;
	esac
}

# source_digest COMPONENT [--base]: what the component's source tree is made
# of; with --base, its pristine base without the series (the qemu-*-base
# layers: QEMU as released, the other side of a migration or a benchmark).
source_digest() {
	local comp=$1 f
	{
		if [ "${2:-}" = --base ]; then
			echo base
			base_field "$comp" sha256
		else
			series_digest "$comp"
		fi
		for f in "$TWED_ROOT/tools/layers/fixups/$comp"-*; do
			[ ! -f "$f" ] || sha256sum <"$f"
		done
	} | sha256sum | cut -d' ' -f1
}

# kernel_fragments arm64|arm32: KERNEL_FRAGMENTS, the configuration
# fragments of a test kernel (tools/layers/build-kernel), in the order they
# are merged onto allnoconfig.  arm64: the KVM host of the selftests'
# boots, and unless TWED_KERNEL_FOR=selftests, of tools/cluster's emulated
# hosts too.  (An array, not output: a bad value dies in the caller's
# shell, not in a process substitution.)
kernel_fragments() {
	local t=$TWED_ROOT/tools/layers
	case $1 in
	arm64)
		KERNEL_FRAGMENTS=("$t/kernel-host.config")
		case ${TWED_KERNEL_FOR:-cluster} in
		cluster) KERNEL_FRAGMENTS+=("$t/kernel-cluster.config") ;;
		selftests) ;;
		*) die "TWED_KERNEL_FOR must be cluster or selftests, not '$TWED_KERNEL_FOR'" ;;
		esac
		;;
	arm32) KERNEL_FRAGMENTS=("$t/kernel-arm32-guest.config") ;;
	*) die "kernel_fragments: arm64 or arm32, not '$1'" ;;
	esac
}

# config_digest LAYER: how the layer is built from its source tree.
config_digest() {
	local layer=$1 t=$TWED_ROOT/tools/layers cfg_files=()
	case $1 in
	kernel) kernel_fragments arm64; cfg_files=("${KERNEL_FRAGMENTS[@]}" "$t/build-kernel") ;;
	kernel-arm32) kernel_fragments arm32; cfg_files=("${KERNEL_FRAGMENTS[@]}" "$t/build-kernel") ;;
	qemu-x86 | qemu-x86-base) cfg_files=("$t/build-qemu" "$t/qemu-x86-devices.mak") ;;
	qemu-arm64 | qemu-arm64-base) cfg_files=("$t/build-qemu" "$t/qemu-arm64-devices.mak") ;;
	libvirt) cfg_files=("$t/build-libvirt" "$t/libvirt-tests") ;;
	libvirt-arm64) cfg_files=("$t/build-libvirt" "$t/aarch64-linux-gnu.meson") ;;
	*) layer_component "$layer" >/dev/null ;;
	esac
	{
		echo "$layer"
		[ "$layer" != qemu-arm64 ] || echo "TWED_QEMU_ARM64=${TWED_QEMU_ARM64:-kvm-host}"
		cat "${cfg_files[@]}"
	} | sha256sum | cut -d' ' -f1
}

# is_base_layer LAYER: whether LAYER is built from the pristine base alone
# (qemu-x86-base, qemu-arm64-base), not from base + series.
is_base_layer() { [ "${1%-base}" != "$1" ]; }

# layer_stamp LAYER: the provenance record tools/stack writes into the
# layer's build directory once the build succeeded (.twed-layer).
layer_stamp() {
	local comp
	comp=$(layer_component "$1")
	if is_base_layer "$1"; then
		printf 'layer %s\nseries none\nsource %s\nconfig %s\n' "$1" \
			"$(source_digest "$comp" --base)" "$(config_digest "$1")"
		return
	fi
	printf 'layer %s\nseries %s\nsource %s\nconfig %s\n' "$1" \
		"$(series_digest "$comp")" "$(source_digest "$comp")" "$(config_digest "$1")"
}
