/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A synthetic fleet through the pure core in one plan, as twedctl makes
 * it: overcommit, policy lookup, planning, budget.  Prints CPU seconds
 * and peak RSS and fails when they miss the targets given.
 *   bench-plan HOSTS MAX_CPU_S MAX_RSS_MIB */
#include "bench-fleet.h"

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 1000;
  double target_cpu_s = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 1.0;
  double target_rss_mib = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 200.0;
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPolicySet) set = bench_policies ();
  g_autoptr(TwedPlan) plan = NULL;
  GRand *rand = g_rand_new_with_seed (42);
  TwedPlanOptions po = { "bench", 0 };
  double t0, t1, rss_mib;

  for (guint h = 0; h < nhosts; h++)
    g_ptr_array_add (hosts, bench_host (h, rand));
  g_rand_free (rand);

  t0 = bench_cpu_seconds ();
  for (guint h = 0; h < hosts->len; h++)
    twed_host_compute (g_ptr_array_index (hosts, h));
  plan = twed_plan_build (hosts, set, &po);
  t1 = bench_cpu_seconds ();
  rss_mib = bench_rss_mib ();

  g_assert_cmpuint (plan->entries->len, ==, nhosts * VMS_PER_HOST);
  printf ("changes=%u deferred=%u\n", twed_plan_count (plan, TWED_ACTION_CHANGE),
          twed_plan_count (plan, TWED_ACTION_DEFER));
  printf ("plan: hosts=%u vms=%u cpu_s=%.3f rss_mib=%.1f\n", nhosts, nhosts * VMS_PER_HOST, t1 - t0,
          rss_mib);
  {
    /* twedctl plan --json of the same plan, streamed to /dev/null. */
    FILE *null = fopen ("/dev/null", "w");
    double j0 = bench_cpu_seconds ();

    g_assert_nonnull (null);
    g_assert_true (twed_plan_write_json (plan, TRUE, null));
    printf ("json: vms=%u cpu_s=%.3f rss_mib=%.1f\n", plan->entries->len, bench_cpu_seconds () - j0,
            bench_rss_mib ());
    fclose (null);
  }
  if (t1 - t0 >= target_cpu_s || rss_mib >= target_rss_mib)
    {
      printf ("FAIL: plan misses its target: cpu_s < %.1f and rss_mib < %.0f\n",
              target_cpu_s, target_rss_mib);
      return 1;
    }
  return 0;
}
