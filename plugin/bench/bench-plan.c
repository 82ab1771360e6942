/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Synthetic 1,000 hosts x 50 VMs through the pure core: overcommit,
 * policy lookup, planning. Prints CPU seconds and peak RSS. */
#include "twed-overcommit.h"
#include "twed-planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#define VMS_PER_HOST 50
#define PCPUS 64
/* The targets of plugin/README.md: a benchmark that only prints its
 * figures lets a regression through. */

static double
cpu_seconds (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
         (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static TwedPolicy *
policy (const char *json)
{
  TwedPolicy *p = twed_policy_parse (json, strlen (json), json, NULL);

  g_assert_nonnull (p);
  return p;
}

int
main (int argc, char **argv)
{
  guint HOSTS = argc > 1 ? (guint) atoi (argv[1]) : 1000;
  double target_cpu_s = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 1.0;
  double target_rss_mib = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 200.0;
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedPlan) plan = NULL;
  GRand *rand = g_rand_new_with_seed (42);
  TwedPlanOptions po = { "bench", 0 };
  struct rusage ru;
  double t0, t1, rss_mib;

  g_assert_true (twed_policy_set_add (set, policy ("{\"version\":1,\"name\":\"default\",\"bands\":[{\"up_to\":1,\"mode\":\"off\"},"
                                                    "{\"up_to\":2,\"mode\":\"fixed\",\"delay\":3}],\"beyond\":{\"mode\":\"dynamic\","
                                                    "\"delay\":3,\"min\":1,\"max\":5},\"max_changes_per_cycle\":{\"host\":20}}"), NULL));
  g_assert_true (twed_policy_set_add (set, policy ("{\"version\":1,\"name\":\"batch\",\"priority\":10,\"match\":{\"flavors\":[\"c1.*\"]},"
                                                    "\"beyond\":{\"mode\":\"dynamic\",\"delay\":2,\"min\":1,\"max\":4}}"), NULL));
  g_assert_true (twed_policy_set_add (set, policy ("{\"version\":1,\"name\":\"edge\",\"match\":{\"hosts\":[\"host-9*\"],"
                                                    "\"domains\":[\"*-7\"]},\"beyond\":{\"mode\":\"fixed\",\"delay\":2}}"), NULL));

  /* Inventory as the backend would hand it over. */
  for (guint h = 0; h < HOSTS; h++)
    {
      g_autofree char *name = g_strdup_printf ("host-%04u", h);
      TwedHost *host = twed_host_new (name, NULL);

      host->reachable = TRUE;
      host->ncpus = PCPUS;
      for (guint v = 0; v < VMS_PER_HOST; v++)
        {
          g_autofree char *dn = g_strdup_printf ("vm-%u-%u", h, v);
          TwedDomain *d = twed_domain_new (dn);
          guint n = 1 + g_rand_int_range (rand, 0, 8);

          d->active = v % 10 != 9;
          d->flavor = g_strdup (v % 3 ? "m1.large" : "c1.xlarge");
          twed_domain_set_vcpus (d, n);
          if (v % 5 == 0)
            {
              /* a quarter of the host's pCPUs, as a NUMA-pinned VM would */
              guint base = g_rand_int_range (rand, 0, 4) * 16;
              g_autofree char *cs = g_strdup_printf ("%u-%u", base, base + 15);

              d->default_affinity = twed_cpuset_parse (cs, NULL);
            }
          else if (v % 7 == 0)
            for (guint i = 0; i < n; i++)
              {
                g_autofree char *cs = g_strdup_printf ("%u", (v + i) % PCPUS);
                g_autoptr(GArray) set1 = twed_cpuset_parse (cs, NULL);

                twed_domain_pin_vcpu (d, i, set1);
              }
          g_ptr_array_add (host->domains, d);
        }
      g_ptr_array_add (hosts, host);
    }

  t0 = cpu_seconds ();
  for (guint h = 0; h < hosts->len; h++)
    twed_host_compute (g_ptr_array_index (hosts, h));
  plan = twed_plan_build (hosts, set, &po);
  t1 = cpu_seconds ();
  getrusage (RUSAGE_SELF, &ru);
  g_rand_free (rand);

  g_assert_cmpuint (plan->entries->len, ==, HOSTS * VMS_PER_HOST);
  printf ("changes=%u deferred=%u\n", twed_plan_count (plan, TWED_ACTION_CHANGE),
          twed_plan_count (plan, TWED_ACTION_DEFER));
  rss_mib = ru.ru_maxrss / 1024.0;
  printf ("plan: hosts=%u vms=%u cpu_s=%.3f rss_mib=%.1f\n", HOSTS, HOSTS * VMS_PER_HOST, t1 - t0,
          rss_mib);
  if (t1 - t0 >= target_cpu_s || rss_mib >= target_rss_mib)
    {
      printf ("FAIL: plan misses its target: cpu_s < %.1f and rss_mib < %.0f\n",
              target_cpu_s, target_rss_mib);
      return 1;
    }
  return 0;
}
