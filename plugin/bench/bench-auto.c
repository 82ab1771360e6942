/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The closed loop's controller over the synthetic fleet, every VM under
 * an auto band, as twedd plans it pass after pass: each read advances
 * the counters by a minute (exits that differ from VM to VM and from
 * level to level, so windows are judged and steps made), the steps
 * planned are made before the next read.  Prints the CPU time of a
 * read and the memory the controller holds per VM after the last one,
 * and fails when they miss the targets given.
 *   bench-auto HOSTS READS MAX_CPU_S_PER_READ MAX_KIB_PER_VM */
#include "bench-fleet.h"
#include "twed-auto.h"

#include <malloc.h>

static const char auto_policy_json[] =
  "{\"version\":1,\"name\":\"default\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":5}}";

/* Bytes the allocator hands out now. */
static double
bench_heap_bytes (void)
{
  struct mallinfo2 mi = mallinfo2 ();

  return (double) mi.uordblks + (double) mi.hblkhd;
}

/* Read @r of @host: a minute of each active VM's counters, at a WFE
 * exit rate that falls with its delay by an amount of its own. */
static void
advance (TwedHost *host, guint h, guint r)
{
  for (guint d = 0; d < host->domains->len; d++)
    {
      TwedDomain *dom = g_ptr_array_index (host->domains, d);
      guint level = dom->has_twed && dom->twed.mode == TWED_MODE_FIXED ? dom->twed.delay + 1 : 0;
      guint64 exits = 60000 - (guint64) level * (1000 + (h + d) % 7 * 1000);

      if (!dom->signals)
        continue;
      dom->signals->at = (G_GINT64_CONSTANT (864000) + (gint64) r * 60) * G_USEC_PER_SEC;
      for (guint v = 0; v < dom->signals->vcpus->len; v++)
        {
          TwedVcpuSignals *s = twed_domain_signals_vcpu (dom->signals, v);

          s->wfe_exits += exits;
          s->wait_ns += G_GUINT64_CONSTANT (6000000000) + (guint64) ((d + r) % 5) * 100000000;
          s->time_ns += G_GUINT64_CONSTANT (30000000000);
          s->twed_delay = level ? level - 1 : 0;
        }
    }
}

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 1000;
  guint nreads = argc > 2 ? (guint) atoi (argv[2]) : 8;
  double target_cpu_s = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 1.0;
  double target_kib = argc > 4 ? g_ascii_strtod (argv[4], NULL) : 4.0;
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  GHashTable *by_name = g_hash_table_new (g_str_hash, g_str_equal);
  GRand *rand = g_rand_new_with_seed (42);
  TwedPlanOptions po = { "bench", 0, ctl };
  double cpu = 0, worst = 0, heap0, kib_per_vm;
  guint nactive = 0, changes = 0;

  g_assert_true (twed_policy_set_add (set, bench_policy (auto_policy_json), NULL));
  for (guint h = 0; h < nhosts; h++)
    {
      TwedHost *host = bench_host (h, rand);

      twed_host_compute (host);
      g_hash_table_insert (by_name, host->name, host);
      for (guint d = 0; d < host->domains->len; d++)
        nactive += ((TwedDomain *) g_ptr_array_index (host->domains, d))->active;
      g_ptr_array_add (hosts, host);
    }
  g_rand_free (rand);
  heap0 = bench_heap_bytes ();

  for (guint r = 0; r < nreads; r++)
    {
      g_autoptr(TwedPlan) plan = NULL;
      double t0;

      for (guint h = 0; h < hosts->len; h++)
        advance (g_ptr_array_index (hosts, h), h, r);
      t0 = bench_cpu_seconds ();
      plan = twed_plan_build (hosts, set, &po);
      t0 = bench_cpu_seconds () - t0;
      cpu += t0;
      worst = MAX (worst, t0);
      /* The steps are made before the next read. */
      for (guint i = 0; i < plan->entries->len; i++)
        {
          TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);
          TwedHost *host = g_hash_table_lookup (by_name, e->host);

          if (e->action != TWED_ACTION_CHANGE)
            continue;
          for (guint d = 0; d < host->domains->len; d++)
            {
              TwedDomain *dom = g_ptr_array_index (host->domains, d);

              if (g_strcmp0 (dom->uuid, e->uuid) == 0)
                {
                  dom->twed = e->target;
                  dom->has_twed = TRUE;
                  changes++;
                }
            }
        }
    }
  /* What the plans left behind was freed: the rest is the controller's. */
  malloc_trim (0);
  kib_per_vm = (bench_heap_bytes () - heap0) / 1024.0 / MAX (nactive, 1);
  printf ("auto: hosts=%u vms=%u reads=%u changes=%u cpu_s_per_read=%.3f worst_cpu_s=%.3f kib_per_vm=%.2f\n",
          nhosts, nactive, nreads, changes, cpu / MAX (nreads, 1), worst, kib_per_vm);
  g_hash_table_unref (by_name);
  if (worst >= target_cpu_s || kib_per_vm >= target_kib)
    {
      printf ("FAIL: auto misses its target: cpu_s per read < %.1f and kib_per_vm < %.1f\n", target_cpu_s,
              target_kib);
      return 1;
    }
  return 0;
}
