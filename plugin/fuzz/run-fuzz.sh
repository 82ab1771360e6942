#!/bin/sh
# Bounded libFuzzer run as a test. Seeds: the kept corpus and the policy
# corpus; new inputs go to a scratch directory in the build tree (merge
# them into plugin/fuzz/corpus with the fuzz-corpus-update target).
# Usage: run-fuzz.sh FUZZER SECONDS WORKDIR SEED_DIR...
set -eu
fuzzer=$1 seconds=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work/new" "$work/artifacts"
exec "$fuzzer" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=1024 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/new" "$@"
