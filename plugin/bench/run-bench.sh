#!/bin/sh
# Runs both benchmarks and ends with their figure lines, in this order:
#   plan: hosts=1000 vms=50000 cpu_s=<float> rss_mib=<float>
#   backend: hosts=<n> reads_per_host=<float> writes=<n>
# Targets: cpu_s < 1, rss_mib < 200, reads_per_host <= 2.  Each program
# checks its own and exits non-zero (with a FAIL line) when it misses;
# the figures are printed either way.
set -u
plan_rc=0
backend_rc=0
plan_out=$("$1") || plan_rc=$?
backend_out=$("$2" "${3:-50}") || backend_rc=$?
printf '%s\n%s\n' "$plan_out" "$backend_out" | grep -v -e '^plan: ' -e '^backend: '
printf '%s\n' "$plan_out" | grep '^plan: ' || echo "FAIL: bench-plan printed no figures (exit $plan_rc)"
printf '%s\n' "$backend_out" | grep '^backend: ' || echo "FAIL: bench-backend printed no figures (exit $backend_rc)"
[ "$plan_rc" = 0 ] && [ "$backend_rc" = 0 ]
