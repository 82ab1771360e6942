#!/bin/sh
# Runs both benchmarks and ends with their figure lines, in this order:
#   plan: hosts=1000 vms=50000 cpu_s=<float> rss_mib=<float>
#   backend: hosts=<n> reads_per_host=<float> writes=<n>
# Targets: cpu_s < 1, rss_mib < 200, reads_per_host <= 2.
set -eu
plan_out=$("$1")
backend_out=$("$2" "${3:-50}")
printf '%s\n%s\n' "$plan_out" "$backend_out" | grep -v -e '^plan: ' -e '^backend: '
printf '%s\n' "$plan_out" | grep '^plan: '
printf '%s\n' "$backend_out" | grep '^backend: '
