/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon engine against the libvirt test driver: a domain started
 * on the engine's own connection (test:/// state lives only there)
 * must trigger a pass over that host alone, which sees the new VM. */
#include "config.h"
#include "twedd-engine.h"
#include "twed-libvirt.h"
#include "twed-log.h"
#include "twed-domain-params.h"
#include "twedd-state.h"
#include "test-util.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>

static const char *demo_dir;

static gboolean
wait_for (gboolean (*cond) (TwedEngine *), TwedEngine *e, guint ms)
{
  gint64 end = g_get_monotonic_time () + (gint64) ms * 1000;

  while (!cond (e) && g_get_monotonic_time () < end)
    g_main_context_iteration (NULL, FALSE), g_usleep (10000);
  return cond (e);
}

static guint64 passes_wanted;

/* At least passes_wanted passes, and nothing pending. */
static gboolean
passes_done (TwedEngine *e)
{
  return twed_engine_get_counters (e)->cycles >= passes_wanted && twed_engine_idle (e);
}

static const TwedPlanEntry *find (const TwedPlan *plan, const char *dom);

static gboolean
staging_running (TwedEngine *e)
{
  return find (twed_engine_get_last_plan (e), "staging-1")->active;
}

static const TwedPlanEntry *
find (const TwedPlan *plan, const char *dom)
{
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *en = g_ptr_array_index (plan->entries, i);

      if (g_str_equal (en->domain, dom))
        return en;
    }
  g_error ("no plan entry for %s", dom);
}

/* An engine over the demo's host-c and host-b, started; the interval is
 * an hour, so only the first passes and events run. */
static TwedEngine *
start_demo_engine (guint max_changes, gboolean dry_run)
{
  TwedConfig *config = twed_config_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *uri_c = g_strdup_printf ("test://%s/host-c.xml", demo_dir);
  g_autofree char *uri_b = g_strdup_printf ("test://%s/host-b.xml", demo_dir);
  TwedEngine *e;

  g_free (config->policy_dir);
  config->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
  config->interval = 3600;
  config->max_changes = max_changes;
  g_assert_true (twed_config_add_host (config, NULL, uri_c, NULL));
  g_assert_true (twed_config_add_host (config, NULL, uri_b, NULL));
  e = twed_engine_new (config, dry_run);
  g_assert_true (twed_engine_start (e, &error));
  g_assert_no_error (error);
  return e;
}

static void
test_start_event (void)
{
  g_autoptr(TwedEngine) e = start_demo_engine (0, TRUE);
  g_autoptr(virDomain) dom = NULL;
  const TwedPlanEntry *staging, *batch;
  guint event_cycles;

  passes_wanted = 2; /* one per host */
  g_assert_true (wait_for (passes_done, e, 5000));

  staging = find (twed_engine_get_last_plan (e), "staging-1");
  g_assert_false (staging->active);
  batch = find (twed_engine_get_last_plan (e), "batch-1");
  g_assert_cmpfloat_with_epsilon (batch->ratio, 4.0, 1e-9);

  dom = virDomainLookupByName (twed_backend_get_connection (twed_engine_get_backend (e), "host-c"), "staging-1");
  g_assert_nonnull (dom);
  event_cycles = twed_engine_get_event_cycles (e);
  g_assert_cmpint (virDomainCreate (dom), ==, 0);
  g_assert_true (wait_for (staging_running, e, 5000));
  g_assert_cmpuint (twed_engine_get_event_cycles (e), >, event_cycles);

  /* The pass covered host-c; host-b's part of the plan is kept. */
  staging = find (twed_engine_get_last_plan (e), "staging-1");
  g_assert_true (staging->active);
  batch = find (twed_engine_get_last_plan (e), "batch-1");
  g_assert_cmpfloat_with_epsilon (batch->ratio, 4.5, 1e-9);
  g_assert_nonnull (find (twed_engine_get_last_plan (e), "web-1"));
  g_assert_cmpuint (twed_engine_get_last_plan (e)->hosts->len, ==, 2);
}

/* The configured cap holds for the interval over every host's passes,
 * applying for real: host-b and host-c want five changes between them,
 * the cap lets one through, and the passes that events add later in the
 * interval get nothing more. */
static void
test_budget_holds (void)
{
  g_autoptr(TwedEngine) e = NULL;
  g_autoptr(virDomain) dom = NULL;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is applied");
      return;
    }
  e = start_demo_engine (1, FALSE);
  passes_wanted = 2;
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 1);
  g_assert_cmpuint (twed_plan_count (twed_engine_get_last_plan (e), TWED_ACTION_DEFER), >=, 3);

  /* An event pass later in the interval: still nothing more. */
  passes_wanted = twed_engine_get_counters (e)->cycles + 1;
  dom = virDomainLookupByName (twed_backend_get_connection (twed_engine_get_backend (e), "host-c"), "staging-1");
  g_assert_nonnull (dom);
  g_assert_cmpint (virDomainCreate (dom), ==, 0);
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 1);
}

/* The interval's budget goes to the most overcommitted VMs of the
 * fleet, not to the host read first: with one worker, host-b (2:1) is
 * read before host-c (4:1), and the one change the cap allows is
 * host-c's. */
static void
test_fleet_priority (void)
{
  TwedConfig *config = twed_config_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *uri_b = g_strdup_printf ("test://%s/host-b.xml", demo_dir);
  g_autofree char *uri_c = g_strdup_printf ("test://%s/host-c.xml", demo_dir);
  g_autoptr(TwedEngine) e = NULL;
  const TwedPlan *plan;
  guint on_b = 0, on_c = 0;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is applied");
      return;
    }
  g_free (config->policy_dir);
  config->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
  config->interval = 3600;
  config->max_changes = 1;
  config->threads = 1;
  g_assert_true (twed_config_add_host (config, NULL, uri_b, NULL));
  g_assert_true (twed_config_add_host (config, NULL, uri_c, NULL));
  e = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (e, &error));
  g_assert_no_error (error);
  passes_wanted = 2;
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 1);
  plan = twed_engine_get_last_plan (e);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *en = g_ptr_array_index (plan->entries, i);

      if (en->result != TWED_RESULT_APPLIED)
        continue;
      on_b += g_str_equal (en->host, "host-b");
      on_c += g_str_equal (en->host, "host-c");
      g_assert_cmpfloat (en->ratio, >=, 4.0);
    }
  g_assert_cmpuint (on_b, ==, 0);
  g_assert_cmpuint (on_c, ==, 1);
}

/* The daemon's own changes come back as tunable events; they prompt no
 * pass.  A change made by someone else does. */
static void
test_own_events_quiet (void)
{
  g_autoptr(TwedEngine) e = NULL;
  g_autoptr(virDomain) dom = NULL;
  TwedSetting other = { TWED_MODE_FIXED, 5, 5, 5 };
  g_autoptr(GError) error = NULL;
  guint64 applied;
  guint events;
  gint64 until;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is applied");
      return;
    }
  e = start_demo_engine (0, FALSE);
  passes_wanted = 2;
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, >=, 3);
  /* The events of those changes have had time to arrive and settle. */
  until = g_get_monotonic_time () + 1000 * 1000;
  while (g_get_monotonic_time () < until)
    g_main_context_iteration (NULL, FALSE), g_usleep (10000);
  g_assert_true (twed_engine_idle (e));
  g_assert_cmpuint (twed_engine_get_event_cycles (e), ==, 0);
  /* What was applied shows as current without a pass reading it back. */
  g_assert_cmpuint (find (twed_engine_get_last_plan (e), "web-1")->current.mode, ==, TWED_MODE_FIXED);

  events = twed_engine_get_event_cycles (e);
  applied = twed_engine_get_counters (e)->changes_applied;
  dom = virDomainLookupByName (twed_backend_get_connection (twed_engine_get_backend (e), "host-b"), "web-1");
  g_assert_nonnull (dom);
  g_assert_true (twed_domain_params_set (dom, &other, TRUE, FALSE, &error));
  g_assert_no_error (error);
  passes_wanted = twed_engine_get_counters (e)->cycles + 1;
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_cmpuint (twed_engine_get_event_cycles (e), >, events);
  /* ...which read fixed:5 and put the policy's setting back. */
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, applied + 1);
  g_assert_cmpuint (find (twed_engine_get_last_plan (e), "web-1")->result, ==, TWED_RESULT_APPLIED);
  g_assert_cmpuint (find (twed_engine_get_last_plan (e), "web-1")->current.delay, ==, 3);
}

/* A reload that adds a host keeps the others as they are: the same
 * connection (a test:/// host's state lives in it), and what the daemon
 * did to their VMs, so min_change_interval still holds for a VM changed
 * before the reload. */
static void
test_reload_keeps_hosts (void)
{
  g_autoptr(TwedEngine) e = NULL;
  g_autoptr(virDomain) dom = NULL;
  TwedConfig *config = twed_config_new ();
  TwedSetting other = { TWED_MODE_FIXED, 5, 5, 5 };
  g_autoptr(GError) error = NULL;
  g_autofree char *uri_a = g_strdup_printf ("test://%s/host-a.xml", demo_dir);
  g_autofree char *uri_b = g_strdup_printf ("test://%s/host-b.xml", demo_dir);
  g_autofree char *uri_c = g_strdup_printf ("test://%s/host-c.xml", demo_dir);
  const TwedPlanEntry *web;
  virConnectPtr conn_b;
  guint64 applied;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is applied");
      return;
    }
  e = start_demo_engine (0, FALSE);
  passes_wanted = 2;
  g_assert_true (wait_for (passes_done, e, 5000));
  applied = twed_engine_get_counters (e)->changes_applied;
  g_assert_cmpuint (applied, >=, 3);
  conn_b = twed_backend_get_connection (twed_engine_get_backend (e), "host-b");
  g_assert_nonnull (conn_b);

  g_free (config->policy_dir);
  config->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
  config->interval = 3600;
  config->min_change_interval = 3600;
  g_assert_true (twed_config_add_host (config, NULL, uri_c, NULL));
  g_assert_true (twed_config_add_host (config, NULL, uri_b, NULL));
  g_assert_true (twed_config_add_host (config, NULL, uri_a, NULL));
  g_assert_true (twed_engine_reload_config (e, config));
  passes_wanted = twed_engine_get_counters (e)->cycles + 3;
  g_assert_true (wait_for (passes_done, e, 5000));
  g_assert_true (twed_backend_get_connection (twed_engine_get_backend (e), "host-b") == conn_b);
  g_assert_cmpuint (twed_engine_get_last_plan (e)->hosts->len, ==, 3);
  /* host-b's changes are still in force: nothing to do there again. */
  web = find (twed_engine_get_last_plan (e), "web-1");
  g_assert_cmpuint (web->action, ==, TWED_ACTION_KEEP);

  /* Someone else changes web-1: the daemon changed it less than
   * min_change_interval ago, before the reload, so it waits. */
  dom = virDomainLookupByName (conn_b, "web-1");
  g_assert_nonnull (dom);
  applied = twed_engine_get_counters (e)->changes_applied;
  g_assert_true (twed_domain_params_set (dom, &other, TRUE, FALSE, &error));
  g_assert_no_error (error);
  passes_wanted = twed_engine_get_counters (e)->cycles + 1;
  g_assert_true (wait_for (passes_done, e, 5000));
  web = find (twed_engine_get_last_plan (e), "web-1");
  g_assert_cmpuint (web->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (web->reason, "min_change_interval"));
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, applied);
}

/* An engine over host-c and host-b keeping its state in @state_dir. */
static TwedEngine *
start_state_engine (const char *state_dir, guint max_changes, guint min_change_interval)
{
  TwedConfig *config = twed_config_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *uri_c = g_strdup_printf ("test://%s/host-c.xml", demo_dir);
  g_autofree char *uri_b = g_strdup_printf ("test://%s/host-b.xml", demo_dir);
  TwedEngine *e;

  g_free (config->policy_dir);
  config->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
  g_free (config->state_dir);
  config->state_dir = g_strdup (state_dir);
  config->interval = 3600;
  config->max_changes = max_changes;
  config->min_change_interval = min_change_interval;
  g_assert_true (twed_config_add_host (config, NULL, uri_c, NULL));
  g_assert_true (twed_config_add_host (config, NULL, uri_b, NULL));
  e = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (e, &error));
  g_assert_no_error (error);
  passes_wanted = 2;
  g_assert_true (wait_for (passes_done, e, 5000));
  return e;
}

/* A restart (a crash loop, an upgrade) gives no fresh budget and lets
 * no VM change before min_change_interval: both come back from the
 * state file.  A test:/// host forgets what was applied with its
 * connection, so after the restart every VM wants its change again. */
static void
test_state_across_restart (void)
{
  g_autofree char *dir = NULL;
  g_autofree char *path = NULL, *aside = NULL, *log = NULL, *log_aside = NULL;
  const TwedPlanEntry *web;
  TwedEngine *e;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is applied");
      return;
    }
  dir = g_dir_make_tmp ("twed-state-XXXXXX", NULL);
  path = g_build_filename (dir, "state.json", NULL);
  aside = g_strconcat (path, ".corrupt", NULL);
  log = g_build_filename (dir, "state.log", NULL);
  log_aside = g_strconcat (log, ".corrupt", NULL);

  /* The interval's budget: one change, spent before the restart. */
  e = start_state_engine (dir, 1, 0);
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 1);
  twed_engine_free (e);
  e = start_state_engine (dir, 1, 0);
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 0);
  g_assert_cmpuint (twed_plan_count (twed_engine_get_last_plan (e), TWED_ACTION_DEFER), >=, 4);
  twed_engine_free (e);
  /* Kept as records: nothing was written whole yet. */
  g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
  g_assert_cmpint (g_remove (log), ==, 0);

  /* min_change_interval: web-1 was changed just before the restart. */
  e = start_state_engine (dir, 0, 3600);
  g_assert_cmpuint (find (twed_engine_get_last_plan (e), "web-1")->result, ==, TWED_RESULT_APPLIED);
  twed_engine_free (e);
  e = start_state_engine (dir, 0, 3600);
  web = find (twed_engine_get_last_plan (e), "web-1");
  g_assert_cmpuint (web->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (web->reason, "min_change_interval"));
  twed_engine_free (e);

  /* A damaged file: set aside, and nothing changes this interval. */
  g_assert_true (g_file_set_contents (path, "{\"version\":1,\"interval\":", -1, NULL));
  e = start_state_engine (dir, 0, 0);
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 0);
  web = find (twed_engine_get_last_plan (e), "web-1");
  g_assert_cmpuint (web->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (web->reason, "state file unreadable"));
  g_assert_true (g_file_test (aside, G_FILE_TEST_EXISTS));
  twed_engine_free (e);
  /* ...and the hold is kept: a second restart in the interval holds too. */
  e = start_state_engine (dir, 0, 0);
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_applied, ==, 0);
  web = find (twed_engine_get_last_plan (e), "web-1");
  g_assert_cmpuint (web->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (web->reason, "state file unreadable"));
  twed_engine_free (e);

  g_remove (path);
  g_remove (aside);
  g_remove (log);
  g_remove (log_aside);
  g_rmdir (dir);
}

/* One host's inventory as its read stage would hand it over: a VM of 4
 * vCPUs on 2 pCPUs, which the demo's default policy changes. */
static GPtrArray *
solo_inventory (void)
{
  GPtrArray *one = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  TwedHost *host = twed_host_new ("solo", NULL);
  TwedDomain *d;

  host->reachable = TRUE;
  host->support = TWED_SUPPORT_YES;
  host->ncpus = 2;
  d = add_dom (host, "vm", 4, NULL);
  d->uuid = g_strdup ("5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a02");
  twed_host_compute (host);
  g_ptr_array_add (one, host);
  return one;
}

/* Grants are records appended to the state's log; the log is folded
 * into the state (written whole) only once it has grown past the
 * state's size, not at every grant, and what is on disk then is what
 * the records said.  The host has no libvirt behind it: each change
 * granted fails and is given back, and the next pass grants it again. */
static void
test_state_log_compacts (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-state-log-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "state.json", NULL);
  g_autofree char *log = g_build_filename (dir, "state.log", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TwedState) s = NULL;
  TwedConfig *config = twed_config_new ();
  const TwedVmRecord *failed = NULL;
  GStatBuf folded, after;
  TwedStateLoad info;
  TwedEngine *e;
  guint passes = 0;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is granted");
      return;
    }
  g_free (config->policy_dir);
  config->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
  config->state_dir = g_strdup (dir);
  config->interval = 3600;
  g_assert_true (twed_config_add_host (config, "solo", "test:///nonexistent/solo.xml", NULL));
  e = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (e, &error));
  g_assert_no_error (error);
  while (passes < 5000 && !g_file_test (path, G_FILE_TEST_EXISTS))
    {
      twed_engine_run_pass_inline (e, "solo", solo_inventory ());
      passes++;
      g_assert_cmpuint (twed_engine_get_counters (e)->changes_failed, ==, passes);
    }
  g_test_message ("state written whole after %u grants", passes);
  g_assert_true (g_file_test (path, G_FILE_TEST_EXISTS));
  /* A record is a few hundred bytes: the state of one VM is written
   * whole once 64 KiB of them came, not at every grant. */
  g_assert_cmpuint (passes, >, 20);
  g_assert_cmpint (g_stat (path, &folded), ==, 0);
  g_assert_cmpint (g_stat (log, &after), ==, 0);
  g_assert_cmpint (after.st_size, <, 1024);
  /* The next grant is a record again. */
  twed_engine_run_pass_inline (e, "solo", solo_inventory ());
  passes++;
  g_assert_cmpint (g_stat (log, &after), ==, 0);
  g_assert_cmpint (after.st_size, >, 100);
  g_assert_cmpint (g_stat (path, &after), ==, 0);
  g_assert_cmpint (after.st_mtim.tv_nsec, ==, folded.st_mtim.tv_nsec);
  g_assert_cmpint (after.st_size, ==, folded.st_size);
  twed_engine_free (e);

  /* Every grant given back, the failures counted. */
  s = twedd_state_load (dir, g_get_real_time (), 0, &info, &error);
  g_assert_no_error (error);
  g_assert_false (info.fresh_log_due);
  g_assert_cmpuint (s->granted, ==, 0);
  for (guint i = 0; i < s->vms->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (s->vms, i);

      if (r->failures)
        failed = r;
    }
  g_assert_nonnull (failed);
  g_assert_cmpstr (failed->vm, ==, "5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a02");
  g_assert_cmpuint (failed->failures, ==, passes);

  g_remove (path);
  g_remove (log);
  g_rmdir (dir);
}

static const char *failure_log;

static gboolean
log_has_failure (TwedEngine *e)
{
  g_autofree char *text = NULL;

  return g_file_get_contents (failure_log, &text, NULL, NULL) && strstr (text, "\"failures\":1");
}

/* The failures of a host removed from the configuration leave the
 * state: a record clears them, and the next fold writes none of them. */
static void
test_state_forgets_removed_host (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-state-forget-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "state.json", NULL);
  g_autofree char *log = g_build_filename (dir, "state.log", NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(TwedState) s = NULL;
  g_autofree char *text = NULL;
  TwedConfig *config = twed_config_new (), *again = twed_config_new ();
  TwedStateLoad info;
  TwedEngine *e;
  guint64 gen = 0;
  gsize bytes;

  if (!twed_domain_params_available ())
    {
      g_test_skip ("built without the twed libvirt API: nothing is granted");
      return;
    }
  for (TwedConfig *c = config; c; c = c == config ? again : NULL)
    {
      g_free (c->policy_dir);
      c->policy_dir = g_build_filename (demo_dir, "policies.d", NULL);
      c->state_dir = g_strdup (dir);
      c->interval = 3600;
    }
  g_assert_true (twed_config_add_host (config, "solo", "test:///nonexistent/solo.xml", NULL));
  g_assert_true (twed_config_add_host (again, "other", "test:///nonexistent/other.xml", NULL));
  e = twed_engine_new (config, FALSE);
  g_assert_true (twed_engine_start (e, &error));
  g_assert_no_error (error);
  twed_engine_run_pass_inline (e, "solo", solo_inventory ());
  g_assert_cmpuint (twed_engine_get_counters (e)->changes_failed, ==, 1);
  /* The failure on disk, as the records of a real host would be. */
  failure_log = log;
  g_assert_true (wait_for (log_has_failure, e, 5000));
  g_assert_true (twed_engine_reload_config (e, again));
  twed_engine_free (e);

  s = twedd_state_load (dir, g_get_real_time (), 0, &info, &error);
  g_assert_no_error (error);
  for (guint i = 0; i < s->vms->len; i++)
    g_assert_cmpuint (((TwedVmRecord *) g_ptr_array_index (s->vms, i))->failures, ==, 0);
  g_assert_true (twedd_state_compact (dir, g_get_real_time (), 0, &gen, &bytes, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  g_assert_null (strstr (text, "5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a02"));
  g_remove (path);
  g_remove (log);
  g_rmdir (dir);
}

/* A record goes only to a log the next start takes whole: not to one
 * of another generation (a crash between the renames of a whole write
 * left it), nor after a record cut short; mended, the log takes it. */
static void
test_state_log_append_checks (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-state-append-XXXXXX", NULL);
  g_autofree char *log = g_build_filename (dir, TWEDD_STATE_LOG, NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *text = NULL;
  TwedStateLoad info = { 0 };
  static const char record[] = "{\"interval\":{\"started\":1}}\n";

  g_assert_true (twedd_state_append (dir, 3, record, strlen (record), &error));
  g_assert_no_error (error);
  g_assert_false (twedd_state_append (dir, 4, record, strlen (record), &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (g_file_set_contents (log, "{\"log\":3}\n{\"interval\":{\"sta", -1, NULL));
  g_assert_false (twedd_state_append (dir, 3, record, strlen (record), &error));
  g_assert_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED);
  g_clear_error (&error);
  g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
  g_assert_cmpstr (text, ==, "{\"log\":3}\n{\"interval\":{\"sta");
  g_clear_pointer (&text, g_free);

  info.log_torn = TRUE;
  info.log_bytes = strlen ("{\"log\":3}\n");
  g_assert_true (twedd_state_mend_log (dir, &info, &error));
  g_assert_no_error (error);
  g_assert_true (twedd_state_append (dir, 3, record, strlen (record), &error));
  g_assert_no_error (error);
  g_assert_true (g_file_get_contents (log, &text, NULL, NULL));
  g_assert_true (g_str_has_suffix (text, "}\n{\"interval\":{\"started\":1}}\n"));

  info = (TwedStateLoad) { .log_stale = TRUE };
  g_assert_true (twedd_state_mend_log (dir, &info, &error));
  g_assert_no_error (error);
  g_assert_false (g_file_test (log, G_FILE_TEST_EXISTS));
  g_assert_true (twedd_state_append (dir, 4, record, strlen (record), &error));
  g_assert_no_error (error);
  g_remove (log);
  g_rmdir (dir);
}

/* Extra workers count only passes a worker has held for long: a round
 * of thousands of queued passes (a long timer round, threads=1) once
 * counted them all and grew the pool to thousands of threads. */
static void
test_extra_workers (void)
{
  const gint64 now = 1000 * G_USEC_PER_SEC, s = G_USEC_PER_SEC;
  static const struct {
    const char *what;
    guint threads;
    guint queued;       /* running_since 0: waiting for a worker */
    guint fresh;        /* in a worker for 5 s */
    guint stuck;        /* in a worker for 20 s */
    guint want;
  } cases[] = {
    { "7000 queued behind one worker", 1, 7000, 1, 0, 0 },
    { "7000 queued, the worker stuck", 1, 6999, 0, 1, 1 },
    { "two stuck of eight", 8, 100, 6, 2, 2 },
    { "capped at 2 x threads", 1, 0, 0, 2777, 2 },
    { "capped at 2 x threads (8)", 8, 5000, 0, 40, 16 },
    { "threads 0 counts as 1", 0, 0, 0, 5, 2 },
    { "nothing running", 4, 0, 0, 0, 0 },
  };

  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(GArray) since = g_array_new (FALSE, FALSE, sizeof (gint64));
      gint64 zero = 0, fresh = now - 5 * s, stuck = now - 20 * s;

      for (guint i = 0; i < cases[c].queued; i++)
        g_array_append_val (since, zero);
      for (guint i = 0; i < cases[c].fresh; i++)
        g_array_append_val (since, fresh);
      for (guint i = 0; i < cases[c].stuck; i++)
        g_array_append_val (since, stuck);
      g_test_message ("%s", cases[c].what);
      g_assert_cmpuint (twed_engine_extra_workers (cases[c].threads, (const gint64 *) since->data,
                                                   since->len, now), ==, cases[c].want);
    }
}

/* A libvirtd connection that breaks must not end twedd by SIGPIPE. */
static void
test_sigpipe_ignored (void)
{
  struct sigaction sa;

  g_assert_cmpint (sigaction (SIGPIPE, NULL, &sa), ==, 0);
  g_assert_true (sa.sa_handler == SIG_IGN);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (argc < 2)
    g_error ("usage: test-events DEMO_DIR");
  demo_dir = argv[1];
  twed_log_init (g_getenv ("TWED_TEST_VERBOSE") ? TWED_LOG_DEBUG : TWED_LOG_QUIET);
  twed_libvirt_init (TRUE);
  g_test_add_func ("/engine/start-event", test_start_event);
  g_test_add_func ("/engine/budget-holds", test_budget_holds);
  g_test_add_func ("/engine/own-events-quiet", test_own_events_quiet);
  g_test_add_func ("/engine/fleet-priority", test_fleet_priority);
  g_test_add_func ("/engine/extra-workers", test_extra_workers);
  g_test_add_func ("/engine/reload-keeps-hosts", test_reload_keeps_hosts);
  g_test_add_func ("/engine/state-across-restart", test_state_across_restart);
  g_test_add_func ("/engine/state-log-compacts", test_state_log_compacts);
  g_test_add_func ("/engine/state-log-append-checks", test_state_log_append_checks);
  g_test_add_func ("/engine/state-forgets-removed-host", test_state_forgets_removed_host);
  g_test_add_func ("/libvirt/sigpipe-ignored", test_sigpipe_ignored);
  return g_test_run ();
}
