/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* twedd's side of a region: HOSTS hosts whose last plans sit in the
 * daemon's plan store (as after its first passes), then
 *  - event-cycle: what the main loop and the pass spend when an event
 *    re-plans one host: its overcommit and plan, the interval's budget,
 *    the store's update, the metrics rendered;
 *  - metrics: the default families (no per-VM samples) rendered.
 * Fails when a figure misses its target.
 *   bench-daemon HOSTS MAX_EVENT_CPU_MS MAX_METRICS_CPU_MS */
#include "bench-fleet.h"
#include "twed-plan-store.h"
#include "twed-metrics.h"

#define ROUNDS 20

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 10000;
  double target_event_ms = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 50.0;
  double target_metrics_ms = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 10.0;
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPolicySet) set = bench_policies ();
  g_autoptr(TwedPlanStore) store = twed_plan_store_new ();
  g_autoptr(TwedBudget) budget = twed_budget_new (0);
  GRand *rand = g_rand_new_with_seed (42);
  TwedPlanOptions po = { "bench", 0 };
  TwedCounters counters = { .policy_ok = TRUE };
  g_autoptr(GString) text = g_string_new (NULL);
  double t0, event_ms, metrics_ms;
  int rc = 0;

  for (guint h = 0; h < nhosts; h++)
    {
      TwedHost *host = bench_host (h, rand);
      g_autoptr(GPtrArray) one = g_ptr_array_new ();

      twed_host_compute (host);
      g_ptr_array_add (one, host);
      twed_plan_store_replace (store, host->name, twed_plan_build (one, set, &po));
      g_ptr_array_add (hosts, host);
    }
  g_rand_free (rand);
  g_assert_cmpuint (twed_plan_store_summary (store)->vms, ==, nhosts * VMS_PER_HOST);
  /* The first render sorts the hosts once and sizes the buffer the
   * daemon keeps, as its first does. */
  twed_metrics_render_into (text, store, &counters, FALSE);

  t0 = bench_cpu_seconds ();
  for (guint r = 0; r < ROUNDS; r++)
    {
      TwedHost *host = g_ptr_array_index (hosts, (r * 7919) % nhosts);
      g_autoptr(GPtrArray) one = g_ptr_array_new ();
      TwedPlan *plan;

      twed_host_compute (host);
      g_ptr_array_add (one, host);
      plan = twed_plan_build (one, set, &po);
      twed_plan_apply_budget (plan, set, budget);
      twed_plan_store_replace (store, host->name, plan);
      twed_metrics_render_into (text, store, &counters, FALSE);
    }
  event_ms = (bench_cpu_seconds () - t0) * 1000.0 / ROUNDS;

  t0 = bench_cpu_seconds ();
  for (guint r = 0; r < ROUNDS; r++)
    twed_metrics_render_into (text, store, &counters, FALSE);
  metrics_ms = (bench_cpu_seconds () - t0) * 1000.0 / ROUNDS;

  printf ("event-cycle: vms=%u cpu_ms=%.3f\n", nhosts * VMS_PER_HOST, event_ms);
  printf ("metrics: vms=%u bytes=%" G_GSIZE_FORMAT " cpu_ms=%.3f\n", nhosts * VMS_PER_HOST, text->len, metrics_ms);
  if (event_ms >= target_event_ms)
    {
      printf ("FAIL: event-cycle misses its target: cpu_ms < %.0f\n", target_event_ms);
      rc = 1;
    }
  if (metrics_ms >= target_metrics_ms)
    {
      printf ("FAIL: metrics misses its target: cpu_ms < %.0f\n", target_metrics_ms);
      rc = 1;
    }
  return rc;
}
