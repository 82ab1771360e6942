/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* twedd's side of a region: an engine over HOSTS hosts whose first
 * passes have run (their plans in the engine's store), then
 *  - event-cycle: what an event's pass over one host costs beyond its
 *    libvirt reads, on the daemon's own path (twed_engine_run_pass_inline):
 *    the host's overcommit and plan, the grant from the interval's budget,
 *    the apply stage (twed_backend_apply), the pass's end (plan store,
 *    schedules), and the metrics rendered as the engine renders them;
 *  - metrics: the default families (no per-VM samples), the engine's render.
 * The hosts have no libvirt behind them: the changes granted fail at
 * once ("not connected"), which the measurement includes, and their
 * warnings are not printed.  Fails when a figure misses its target.
 *   bench-daemon HOSTS MAX_EVENT_CPU_MS MAX_METRICS_CPU_MS */
#include "config.h"
#include "bench-fleet.h"
#include "twedd-engine.h"

#include <glib/gstdio.h>

#define ROUNDS 20

static GLogWriterOutput
quiet (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer data)
{
  return G_LOG_WRITER_HANDLED;
}

/* The bench's policies, as files in a policy directory of their own. */
static char *
write_policies (void)
{
  char *dir = g_dir_make_tmp ("twed-bench-XXXXXX", NULL);

  g_assert_nonnull (dir);
  for (guint i = 0; i < G_N_ELEMENTS (bench_policy_json); i++)
    {
      g_autofree char *name = g_strdup_printf ("%s/%02u.json", dir, i);

      g_assert_true (g_file_set_contents (name, bench_policy_json[i], -1, NULL));
    }
  return dir;
}

static void
remove_policies (char *dir)
{
  for (guint i = 0; i < G_N_ELEMENTS (bench_policy_json); i++)
    {
      g_autofree char *name = g_strdup_printf ("%s/%02u.json", dir, i);

      g_remove (name);
    }
  g_rmdir (dir);
  g_free (dir);
}

static GPtrArray *
inventory_of (TwedHost *host)
{
  GPtrArray *one = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);

  g_ptr_array_add (one, host);
  return one;
}

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 10000;
  double target_event_ms = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 50.0;
  double target_metrics_ms = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 10.0;
  char *policy_dir = write_policies ();
  TwedConfig *config = twed_config_new ();
  g_autoptr(TwedEngine) engine = NULL;
  g_autoptr(GPtrArray) rounds = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_autoptr(GError) error = NULL;
  GRand *rand = g_rand_new_with_seed (42);
  double t0, event_ms, metrics_ms;
  gsize bytes = 0;
  int rc = 0;

  g_log_set_writer_func (quiet, NULL, NULL);
  g_free (config->policy_dir);
  config->policy_dir = g_strdup (policy_dir);
  config->interval = 3600;
  for (guint h = 0; h < nhosts; h++)
    {
      g_autofree char *name = g_strdup_printf ("host-%05u", h);
      g_autofree char *uri = g_strdup_printf ("test:///nonexistent/%s.xml", name);

      g_assert_true (twed_config_add_host (config, name, uri, NULL));
    }
  engine = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (engine, &error));
  g_assert_no_error (error);
  /* The first passes: every host's plan in the store, as after the
   * daemon's first round (nothing dispatches the main context here, so
   * the engine's own first pass never runs). */
  for (guint h = 0; h < nhosts; h++)
    {
      TwedHost *host = bench_host (h, rand);

      twed_host_compute (host);
      twed_engine_run_pass_inline (engine, host->name, inventory_of (host));
    }
  g_assert_cmpuint (twed_engine_get_last_plan (engine)->entries->len, ==, nhosts * VMS_PER_HOST);
  /* The first render sorts the hosts once and sizes the buffer the
   * daemon keeps, as its first does. */
  twed_engine_render_now (engine);
  /* The inventories the events' read stages hand over, made beforehand:
   * reading is libvirt's time, not the daemon's. */
  for (guint r = 0; r < ROUNDS; r++)
    g_ptr_array_add (rounds, inventory_of (bench_host ((r * 7919) % nhosts, rand)));
  g_rand_free (rand);

  t0 = bench_cpu_seconds ();
  for (guint r = 0; r < ROUNDS; r++)
    {
      GPtrArray *inventory = g_ptr_array_steal_index (rounds, 0);
      TwedHost *host = g_ptr_array_index (inventory, 0);

      twed_host_compute (host);
      twed_engine_run_pass_inline (engine, host->name, inventory);
      twed_engine_render_now (engine);
    }
  event_ms = (bench_cpu_seconds () - t0) * 1000.0 / ROUNDS;

  t0 = bench_cpu_seconds ();
  for (guint r = 0; r < ROUNDS; r++)
    bytes = twed_engine_render_now (engine);
  metrics_ms = (bench_cpu_seconds () - t0) * 1000.0 / ROUNDS;

  printf ("event-cycle: vms=%u cpu_ms=%.3f\n", nhosts * VMS_PER_HOST, event_ms);
  printf ("metrics: vms=%u bytes=%" G_GSIZE_FORMAT " cpu_ms=%.3f\n", nhosts * VMS_PER_HOST, bytes, metrics_ms);
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
  g_clear_pointer (&engine, twed_engine_free);
  remove_policies (policy_dir);
  return rc;
}
