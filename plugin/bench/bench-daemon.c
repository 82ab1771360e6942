/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* twedd's side of a region: an engine over HOSTS hosts whose first
 * passes have run (their plans in the engine's store), then
 *  - event-cycle: what an event's pass over one host costs beyond its
 *    libvirt reads, on the daemon's own path (twed_engine_run_pass_inline):
 *    the host's overcommit and plan, the grant from the interval's budget,
 *    the apply stage (twed_backend_apply), the pass's end (plan store,
 *    schedules), and the metrics rendered as the engine renders them;
 *  - metrics: the default families (no per-VM samples), the engine's render;
 *  - grant-persist: what recording one grant in the state directory
 *    costs a daemon whose state holds HELD VMs (min_change_interval):
 *    an event's pass as above, with the state kept, less the same pass
 *    without; its CPU time (the write waits on the disk in the writer's
 *    thread, not in the main loop: its wall time is shown, not held to
 *    a target) and the bytes written.
 * The hosts have no libvirt behind them: the changes granted fail at
 * once ("not connected"), which the measurement includes, and their
 * warnings are not printed.  Fails when a figure misses its target.
 *   bench-daemon HOSTS MAX_EVENT_CPU_MS MAX_METRICS_CPU_MS [MAX_GRANT_CPU_MS HELD] */
#include "config.h"
#include "bench-fleet.h"
#include "twed-state.h"
#include "twedd-engine.h"

#include <glib/gstdio.h>
#include <sys/stat.h>

#define ROUNDS 20
/* Passes of the grant-persist measurement, over as many hosts. */
#define GRANT_ROUNDS 50

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

static double
wall_seconds (void)
{
  return (double) g_get_monotonic_time () / G_USEC_PER_SEC;
}

/* A state directory whose state holds @held VMs changed 10 s ago. */
static char *
held_state (guint held)
{
  char *dir = g_dir_make_tmp ("twed-bench-state-XXXXXX", NULL);
  g_autoptr(TwedState) s = twed_state_new ();
  g_autofree char *json = NULL, *path = NULL, *log = NULL, *header = NULL;
  gint64 now = g_get_real_time ();

  g_assert_nonnull (dir);
  s->interval_started = now - 10 * G_USEC_PER_SEC;
  s->interval = 3600;
  for (guint i = 0; i < held; i++)
    {
      g_autofree char *host = g_strdup_printf ("elsewhere-%05u", i / VMS_PER_HOST);
      g_autofree char *vm = g_strdup_printf ("ffffffff-0000-4000-8000-%012x", i);
      TwedVmRecord *r = twed_vm_record_new (host, vm);

      r->changed_at = now - 10 * G_USEC_PER_SEC;
      g_ptr_array_add (s->vms, r);
    }
  json = twed_state_to_json (s);
  path = g_build_filename (dir, "state.json", NULL);
  g_assert_true (g_file_set_contents (path, json, -1, NULL));
  header = twed_state_log_header (s->log);
  log = g_build_filename (dir, "state.log", NULL);
  g_assert_true (g_file_set_contents (log, header, -1, NULL));
  return dir;
}

static void
remove_state (char *dir)
{
  const char *name;
  GDir *d = g_dir_open (dir, 0, NULL);

  while (d && (name = g_dir_read_name (d)))
    {
      g_autofree char *path = g_build_filename (dir, name, NULL);

      g_remove (path);
    }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
  g_free (dir);
}

/* GRANT_ROUNDS passes, one over each host, each granted its changes
 * (they then fail: no libvirt), on an engine keeping its state in
 * @state_dir (NULL: none): their CPU and wall seconds. */
static void
grant_passes (const char *policy_dir, const char *state_dir, double *cpu_s, double *wall_s)
{
  TwedConfig *config = twed_config_new ();
  g_autoptr(TwedEngine) engine = NULL;
  g_autoptr(GPtrArray) rounds = g_ptr_array_new_with_free_func ((GDestroyNotify) g_ptr_array_unref);
  g_autoptr(GError) error = NULL;
  GRand *rand = g_rand_new_with_seed (7);
  double t0, w0;
  guint waited;

  g_free (config->policy_dir);
  config->policy_dir = g_strdup (policy_dir);
  config->interval = 3600;
  config->min_change_interval = 3600;
  config->state_dir = g_strdup (state_dir);
  for (guint h = 0; h < GRANT_ROUNDS; h++)
    {
      g_autofree char *name = g_strdup_printf ("host-%05u", h);
      g_autofree char *uri = g_strdup_printf ("test:///nonexistent/%s.xml", name);

      g_assert_true (twed_config_add_host (config, name, uri, NULL));
    }
  engine = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (engine, &error));
  g_assert_no_error (error);
  g_assert_true (twed_engine_writes_settle (engine, &waited));
  for (guint r = 0; r < GRANT_ROUNDS; r++)
    {
      TwedHost *host = bench_host (r, rand);

      twed_host_compute (host);
      g_ptr_array_add (rounds, inventory_of (host));
    }
  g_rand_free (rand);
  t0 = bench_cpu_seconds ();
  w0 = wall_seconds ();
  for (guint r = 0; r < GRANT_ROUNDS; r++)
    {
      GPtrArray *inventory = g_ptr_array_steal_index (rounds, 0);

      twed_engine_run_pass_inline (engine, ((TwedHost *) g_ptr_array_index (inventory, 0))->name, inventory);
    }
  *cpu_s = bench_cpu_seconds () - t0;
  *wall_s = wall_seconds () - w0;
}

static int
bench_grant_persist (const char *policy_dir, guint held, double target_ms)
{
  char *state_dir = held_state (held);
  g_autofree char *log = g_build_filename (state_dir, "state.log", NULL);
  double cpu_with, wall_with, cpu_without, wall_without, cpu_ms, wall_ms;
  GStatBuf before, after;

  grant_passes (policy_dir, NULL, &cpu_without, &wall_without);
  g_assert_cmpint (g_stat (log, &before), ==, 0);
  grant_passes (policy_dir, state_dir, &cpu_with, &wall_with);
  g_assert_cmpint (g_stat (log, &after), ==, 0);
  cpu_ms = MAX (cpu_with - cpu_without, 0) * 1000.0 / GRANT_ROUNDS;
  wall_ms = MAX (wall_with - wall_without, 0) * 1000.0 / GRANT_ROUNDS;
  printf ("grant-persist: held=%u cpu_ms=%.3f wall_ms=%.3f bytes=%" G_GINT64_FORMAT "\n", held, cpu_ms, wall_ms,
          (gint64) (after.st_size - before.st_size) / GRANT_ROUNDS);
  remove_state (state_dir);
  if (after.st_size == before.st_size)
    {
      printf ("FAIL: grant-persist: nothing was recorded\n");
      return 1;
    }
  if (cpu_ms >= target_ms)
    {
      printf ("FAIL: grant-persist misses its target: cpu_ms < %.0f\n", target_ms);
      return 1;
    }
  return 0;
}

int
main (int argc, char **argv)
{
  guint nhosts = argc > 1 ? (guint) atoi (argv[1]) : 10000;
  double target_event_ms = argc > 2 ? g_ascii_strtod (argv[2], NULL) : 50.0;
  double target_metrics_ms = argc > 3 ? g_ascii_strtod (argv[3], NULL) : 10.0;
  double target_grant_ms = argc > 4 ? g_ascii_strtod (argv[4], NULL) : 5.0;
  guint held = argc > 5 ? (guint) atoi (argv[5]) : 100000;
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
  rc |= bench_grant_persist (policy_dir, held, target_grant_ms);
  remove_policies (policy_dir);
  return rc;
}
