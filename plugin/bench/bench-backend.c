/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* N libvirt test-driver hosts through the real backend: the plan is
 * applied (the writes), then libvirt calls per host are counted over
 * steady-state cycles. The first cycle reads every domain definition
 * once, the one after the apply re-reads the changed definitions. */
#include "config.h"
#include "twed-backend.h"
#include "twed-planner.h"
#include "twed-libvirt.h"
#include "twed-log.h"
#include "twed-domain-params.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>

#define DOMAINS_PER_HOST 20
#define STEADY_CYCLES 5
/* The target of plugin/README.md: a steady-state cycle costs at most two
 * libvirt reads per host, however many domains it holds. */
#define TARGET_READS_PER_HOST 2.0

static char *
write_node (const char *dir, guint h)
{
  g_autoptr(GString) xml = g_string_new ("<node>\n");
  char *path = g_strdup_printf ("%s/bench-%03u.xml", dir, h);

  for (guint d = 0; d < DOMAINS_PER_HOST; d++)
    g_string_append_printf (xml,
                            "  <domain type='test'><name>vm-%u</name><memory>1048576</memory>"
                            "<vcpu cpuset='%u-%u'>%u</vcpu><os><type>hvm</type></os></domain>\n",
                            d, (d % 2) * 8, (d % 2) * 8 + 7, 2 + d % 4);
  g_string_append (xml, "  <cpu><mhz>2600</mhz><active>16</active><nodes>1</nodes><sockets>1</sockets>"
                        "<cores>16</cores><threads>1</threads></cpu>\n  <memory>67108864</memory>\n</node>\n");
  g_assert_true (g_file_set_contents (path, xml->str, -1, NULL));
  return path;
}

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 50;
  g_autofree char *dir = g_dir_make_tmp ("twed-bench-XXXXXX", NULL);
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  g_autoptr(TwedBackend) b = NULL;
  TwedBackendOptions o = { .threads = 8 };
  guint64 r0, w0, r1, w1;
  guint changes = 0, failed = 0;
  double reads_per_host;

  twed_log_init (TWED_LOG_QUIET);
  twed_libvirt_init (FALSE);
  for (guint h = 0; h < nhosts; h++)
    {
      g_autofree char *path = write_node (dir, h);
      g_autofree char *uri = g_strdup_printf ("test://%s", path);
      g_autofree char *name = g_strdup_printf ("bench-%03u", h);

      g_ptr_array_add (specs, twed_host_spec_new (name, uri));
    }
  b = twed_backend_new (specs, &o);

  /* Cold cycle: connect and read every definition once. */
  {
    g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);

    for (guint i = 0; i < hosts->len; i++)
      g_assert_true (((TwedHost *) g_ptr_array_index (hosts, i))->reachable);
  }
  twed_backend_counters (b, &r0, &w0);
  printf ("cold: reads=%" G_GUINT64_FORMAT " (%.2f per host)\n", r0, (double) r0 / nhosts);
  if (twed_domain_params_available ())
    {
      g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
      g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);
      TwedPlanOptions po = { "bench", 0 };
      g_autoptr(TwedPlan) plan = twed_plan_build (hosts, set, &po);
      g_autoptr(GPtrArray) settle = NULL;

      failed = twed_backend_apply (b, plan, FALSE);
      changes = twed_plan_count (plan, TWED_ACTION_CHANGE);
      g_assert_cmpuint (changes, >, 0);
      settle = twed_backend_inventory (b, NULL);
    }
  twed_backend_counters (b, &r0, &w0);
  for (guint c = 0; c < STEADY_CYCLES; c++)
    {
      g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);

      g_assert_cmpuint (hosts->len, ==, nhosts);
    }
  twed_backend_counters (b, &r1, &w1);

  for (guint h = 0; h < nhosts; h++)
    {
      g_autofree char *path = g_strdup_printf ("%s/bench-%03u.xml", dir, h);

      g_unlink (path);
    }
  g_rmdir (dir);
  reads_per_host = (double) (r1 - r0) / ((double) nhosts * STEADY_CYCLES);
  printf ("apply: hosts=%u changes=%u failed=%u reads_per_host=%.2f writes=%" G_GUINT64_FORMAT "\n",
          nhosts, changes, failed, reads_per_host, w1);
  if (reads_per_host > TARGET_READS_PER_HOST || failed)
    {
      printf ("FAIL: apply misses its target: reads_per_host <= %.0f, no change failed\n", TARGET_READS_PER_HOST);
      return 1;
    }
  return 0;
}
