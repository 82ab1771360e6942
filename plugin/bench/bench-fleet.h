/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A synthetic fleet for the benchmarks: HOSTS hosts of 64 pCPUs with
 * 50 VMs each (1..8 vCPUs, some NUMA-pinned, some pinned per vCPU, a
 * tenth shut off), and three policies. */
#pragma once

#include "twed-overcommit.h"
#include "twed-planner.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#define VMS_PER_HOST 50
#define PCPUS 64

static inline double
bench_cpu_seconds (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return (double) ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
         (double) ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static inline double
bench_rss_mib (void)
{
  struct rusage ru;

  getrusage (RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

/* A region's policies: a default with a per-host cap, a flavor's, a
 * narrow one, and the closed loop on a tenth of the hosts. */
static const char *const bench_policy_json[] = {
  "{\"version\":1,\"name\":\"default\",\"bands\":[{\"up_to\":1,\"mode\":\"off\"},"
  "{\"up_to\":2,\"mode\":\"fixed\",\"delay\":3}],\"beyond\":{\"mode\":\"dynamic\","
  "\"delay\":3,\"min\":1,\"max\":5},\"max_changes_per_cycle\":{\"host\":20}}",
  "{\"version\":1,\"name\":\"batch\",\"priority\":10,\"match\":{\"flavors\":[\"c1.*\"]},"
  "\"beyond\":{\"mode\":\"dynamic\",\"delay\":2,\"min\":1,\"max\":4}}",
  "{\"version\":1,\"name\":\"edge\",\"match\":{\"hosts\":[\"host-9*\"],"
  "\"domains\":[\"*-7\"]},\"beyond\":{\"mode\":\"fixed\",\"delay\":2}}",
  "{\"version\":1,\"name\":\"closed-loop\",\"priority\":5,\"match\":{\"hosts\":[\"host-*3\"]},"
  "\"bands\":[{\"up_to\":1,\"mode\":\"off\"}],\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4}}",
};

static inline TwedPolicy *
bench_policy (const char *json)
{
  TwedPolicy *p = twed_policy_parse (json, strlen (json), json, NULL);

  g_assert_nonnull (p);
  return p;
}

static inline TwedPolicySet *
bench_policies (void)
{
  TwedPolicySet *set = twed_policy_set_new ();

  for (guint i = 0; i < G_N_ELEMENTS (bench_policy_json); i++)
    g_assert_true (twed_policy_set_add (set, bench_policy (bench_policy_json[i]), NULL));
  return set;
}

/* Inventory as the backend would hand one host over. */
static inline TwedHost *
bench_host (guint h, GRand *rand)
{
  g_autofree char *name = g_strdup_printf ("host-%05u", h);
  TwedHost *host = twed_host_new (name, NULL);

  host->reachable = TRUE;
  host->support = TWED_SUPPORT_YES;
  host->ncpus = PCPUS;
  for (guint v = 0; v < VMS_PER_HOST; v++)
    {
      g_autofree char *dn = g_strdup_printf ("vm-%u-%u", h, v);
      TwedDomain *d = twed_domain_new (dn);
      guint n = 1 + g_rand_int_range (rand, 0, 8);

      d->active = v % 10 != 9;
      d->uuid = g_strdup_printf ("%08x-0000-4000-8000-%012x", h, v);
      if (d->active)
        {
          /* The bulk stats' VCPU group, as every read has it: counters
           * that grow with the time of the read. */
          gint64 at = g_get_real_time ();

          d->signals = twed_domain_signals_new (at, (int) v + 1);
          for (guint i = 0; i < n; i++)
            {
              TwedVcpuSignals *s = twed_domain_signals_vcpu (d->signals, i);

              s->wfe_exits = (guint64) at / 1000;
              s->wait_ns = (guint64) at * 10;
              s->time_ns = (guint64) at * 500;
              s->have = TWED_SIGNALS_ALL;
            }
        }
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
  return host;
}
