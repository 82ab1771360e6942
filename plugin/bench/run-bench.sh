#!/bin/sh
# Runs the benchmarks and ends with their figure lines, in this order:
#   plan: hosts=1000 vms=50000 cpu_s=<float> rss_mib=<float>
#   plan: hosts=10000 vms=500000 cpu_s=<float> rss_mib=<float>
#   event-cycle: vms=500000 cpu_ms=<float>
#   metrics: vms=500000 bytes=<n> cpu_ms=<float>
#   grant-persist: held=100000 cpu_ms=<float> wall_ms=<float> bytes=<n>
#   apply: hosts=<n> changes=<n> failed=<n> reads_per_host=<float> writes=<n>
#   auto: hosts=1000 vms=45000 reads=8 ... worst_cpu_s=<float> kib_per_vm=<float>
# Targets: 1,000 hosts cpu_s < 1 and rss_mib < 200; 10,000 hosts cpu_s < 2
# and rss_mib < 1024; event-cycle cpu_ms < 50; metrics cpu_ms < 10;
# grant-persist (one grant recorded in the state directory while it holds
# 100,000 VMs) cpu_ms < 5; reads_per_host <= 2; auto (every running VM of
# 1,000 hosts under the closed loop, 8 reads) worst plan with the
# controller cpu_s < 1 and the controller's memory kib_per_vm < 5.  Each
# program checks its own and exits non-zero (with a FAIL line) when it
# misses; the figures are printed either way.
#   run-bench.sh BENCH_PLAN BENCH_DAEMON BENCH_BACKEND BACKEND_HOSTS BENCH_AUTO
set -u
rc=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # PROGRAM ARGS...: output appended to $out
	"$@" >>"$out" 2>&1 || { rc=1; echo "FAIL: $* exited non-zero" >>"$out"; }
}
run "$1" 1000 1 200
run "$1" 10000 2 1024
run "$2" 10000 50 10 5 100000
run "$3" "${4:-50}"
run "$5" 1000 8 1 5
grep -v -e '^plan: ' -e '^event-cycle: ' -e '^metrics: ' -e '^grant-persist: ' -e '^apply: ' -e '^auto: ' "$out"
for figure in 'plan: hosts=1000 ' 'plan: hosts=10000 ' 'event-cycle: ' 'metrics: ' 'grant-persist: ' 'apply: ' 'auto: '; do
	grep "^$figure" "$out" || { echo "FAIL: no '$figure' line"; rc=1; }
done
exit $rc
