/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's engine: the same inventory → plan → apply as twedctl,
 * on a timer and on libvirt events, with the policy directory watched.
 * Everything here runs in the main context; libvirt event callbacks
 * arrive on libvirt's event thread and are handed over. */
#include "config.h"
#include "twedd-engine.h"
#include "twed-apply-api.h"
#include "twed-log.h"
#include "twed-policydir.h"

#include <gio/gio.h>

/* Bursts of events (a migration fires several) collapse into one pass. */
#define EVENT_DEBOUNCE_MS 200
#define POLICY_DEBOUNCE_MS 300

struct _TwedEngine {
  TwedConfig *config;
  gboolean dry_run;
  GMainContext *context;
  TwedBackend *backend;
  TwedPolicySet *policies;      /* last good, NULL until one loaded */
  GFileMonitor *monitor;
  guint policy_timer;
  guint cycle_timer;
  GHashTable *pending_hosts;    /* host -> source id of a debounced cycle */
  TwedPlan *last_plan;
  TwedCounters counters;
  guint event_cycles;
  TwedMetricsServer *metrics_server;
  gboolean warned_no_api;
};

static void
render_metrics (TwedEngine *e)
{
  g_autofree char *text = twed_metrics_render (e->last_plan, &e->counters);
  g_autoptr(GError) error = NULL;

  if (e->config->metrics_textfile &&
      !twed_metrics_write_textfile (e->config->metrics_textfile, text, &error))
    g_warning ("metrics textfile %s: %s", e->config->metrics_textfile, error->message);
  if (e->metrics_server)
    twed_metrics_server_update (e->metrics_server, text);
}

static void
merge_plan (TwedEngine *e, TwedPlan *plan, const char *only_host)
{
  /* A single-host pass replaces only that host's part of the last plan,
   * so metrics keep describing every host. */
  if (only_host && e->last_plan)
    {
      for (guint i = 0; i < e->last_plan->hosts->len; i++)
        {
          TwedPlanHost *h = g_ptr_array_index (e->last_plan->hosts, i);

          if (!g_str_equal (h->name, only_host))
            g_ptr_array_add (plan->hosts, g_ptr_array_steal_index (e->last_plan->hosts, i--));
        }
      for (guint i = 0; i < e->last_plan->entries->len; i++)
        {
          TwedPlanEntry *en = g_ptr_array_index (e->last_plan->entries, i);

          if (!g_str_equal (en->host, only_host))
            g_ptr_array_add (plan->entries, g_ptr_array_steal_index (e->last_plan->entries, i--));
        }
    }
  g_clear_pointer (&e->last_plan, twed_plan_free);
  e->last_plan = plan;
}

void
twed_engine_cycle (TwedEngine *e, const char *only_host)
{
  gint64 start = g_get_monotonic_time ();
  g_autoptr(GPtrArray) hosts = twed_backend_inventory (e->backend, only_host);
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *iso = g_date_time_format_iso8601 (now);
  TwedPlanOptions po = { iso, e->config->max_changes };
  TwedPlan *plan;
  guint changes;

  if (!e->policies)
    {
      g_warning ("no valid policy loaded yet: planning skipped, nothing applied");
      e->counters.cycles++;
      render_metrics (e);
      return;
    }
  plan = twed_plan_build (hosts, e->policies, &po);
  changes = twed_plan_count (plan, TWED_ACTION_CHANGE);
  if (changes && !e->dry_run && twed_apply_api_available ())
    {
      guint failed = twed_backend_apply (e->backend, plan, FALSE);

      e->counters.changes_failed += failed;
      e->counters.changes_applied += twed_plan_count_result (plan, TWED_RESULT_APPLIED);
    }
  else if (changes)
    for (guint i = 0; i < plan->entries->len; i++)
      {
        TwedPlanEntry *en = g_ptr_array_index (plan->entries, i);
        g_autofree char *from = twed_setting_to_string (&en->current);
        g_autofree char *to = twed_setting_to_string (&en->target);

        if (en->action == TWED_ACTION_CHANGE)
          twed_log_domain (G_LOG_LEVEL_INFO, en->host, en->domain, "would change %s -> %s (%s)",
                           from, to, en->reason);
      }
  e->counters.cycles++;
  e->counters.cycle_seconds = (double) (g_get_monotonic_time () - start) / G_USEC_PER_SEC;
  twed_backend_counters (e->backend, &e->counters.libvirt_reads, &e->counters.libvirt_writes);
  g_info ("cycle %" G_GUINT64_FORMAT "%s%s: %u host(s), %u VM(s), %u change(s), %u deferred, %u unreachable",
          e->counters.cycles, only_host ? " for " : "", only_host ? only_host : "", plan->hosts->len,
          plan->entries->len, changes, twed_plan_count (plan, TWED_ACTION_DEFER), twed_plan_unreachable (plan));
  merge_plan (e, plan, only_host);
  render_metrics (e);
}

static gboolean
on_cycle_timer (gpointer data)
{
  twed_engine_cycle (data, NULL);
  return G_SOURCE_CONTINUE;
}

static void
first_cycle (gpointer data)
{
  twed_engine_cycle (data, NULL);
}

typedef struct {
  TwedEngine *engine;
  char *host;
} HostJob;

static void
host_job_free (HostJob *j)
{
  g_free (j->host);
  g_free (j);
}

static gboolean
on_host_debounced (gpointer data)
{
  HostJob *j = data;

  g_hash_table_remove (j->engine->pending_hosts, j->host);
  j->engine->event_cycles++;
  twed_engine_cycle (j->engine, j->host);
  return G_SOURCE_REMOVE;
}

/* Main context: schedule a pass over the host the event came from. */
static gboolean
on_event_main (gpointer data)
{
  HostJob *j = data;
  TwedEngine *e = j->engine;
  GSource *src;

  if (!g_hash_table_contains (e->pending_hosts, j->host))
    {
      HostJob *job = g_new0 (HostJob, 1);

      job->engine = e;
      job->host = g_strdup (j->host);
      src = g_timeout_source_new (EVENT_DEBOUNCE_MS);
      g_source_set_callback (src, on_host_debounced, job, (GDestroyNotify) host_job_free);
      g_hash_table_insert (e->pending_hosts, g_strdup (j->host),
                           GUINT_TO_POINTER (g_source_attach (src, e->context)));
      g_source_unref (src);
    }
  return G_SOURCE_REMOVE;
}

/* libvirt's event thread. */
static void
on_backend_event (const char *host, const char *domain G_GNUC_UNUSED, const char *what G_GNUC_UNUSED,
                  gpointer data)
{
  TwedEngine *e = data;
  HostJob *j = g_new0 (HostJob, 1);

  j->engine = e;
  j->host = g_strdup (host);
  g_main_context_invoke_full (e->context, G_PRIORITY_DEFAULT, on_event_main, j,
                              (GDestroyNotify) host_job_free);
}

gboolean
twed_engine_reload_policies (TwedEngine *e)
{
  g_autoptr(GError) error = NULL;
  TwedPolicySet *set = twed_policy_dir_load (e->config->policy_dir, &error);

  if (!set)
    {
      e->counters.policy_errors++;
      e->counters.policy_ok = FALSE;
      g_warning ("policy rejected, %s: %s", e->policies ? "keeping the last good set" : "no good set yet",
                 error->message);
      render_metrics (e);
      return FALSE;
    }
  g_clear_pointer (&e->policies, twed_policy_set_free);
  e->policies = set;
  e->counters.policy_ok = TRUE;
  e->counters.policy_loaded_at = g_get_real_time () / G_USEC_PER_SEC;
  g_message ("policy loaded from %s: %u document(s)", e->config->policy_dir, set->policies->len);
  render_metrics (e);
  return TRUE;
}

static gboolean
on_policy_debounced (gpointer data)
{
  TwedEngine *e = data;

  e->policy_timer = 0;
  /* New policies apply now, not at the next scheduled cycle. */
  if (twed_engine_reload_policies (e))
    twed_engine_cycle (e, NULL);
  return G_SOURCE_REMOVE;
}

static void
on_policy_dir_changed (GFileMonitor *m G_GNUC_UNUSED, GFile *file, GFile *other G_GNUC_UNUSED,
                       GFileMonitorEvent ev, gpointer data)
{
  TwedEngine *e = data;
  g_autofree char *name = g_file_get_basename (file);

  if (!g_str_has_suffix (name, ".json") || name[0] == '.')
    return;
  if (ev != G_FILE_MONITOR_EVENT_CHANGES_DONE_HINT && ev != G_FILE_MONITOR_EVENT_DELETED &&
      ev != G_FILE_MONITOR_EVENT_CREATED && ev != G_FILE_MONITOR_EVENT_MOVED_IN &&
      ev != G_FILE_MONITOR_EVENT_MOVED_OUT && ev != G_FILE_MONITOR_EVENT_RENAMED &&
      ev != G_FILE_MONITOR_EVENT_CHANGED)
    return;
  if (e->policy_timer)
    g_source_remove (e->policy_timer);
  e->policy_timer = g_timeout_add (POLICY_DEBOUNCE_MS, on_policy_debounced, e);
}

static void
setup_backend (TwedEngine *e)
{
  TwedBackendOptions bo = {
    .threads = e->config->threads,
    .readonly = FALSE, /* events and apply want a full connection */
    .events = TRUE,
    .keepalive_interval = e->config->keepalive_interval,
    .keepalive_count = e->config->keepalive_count,
    .reconnect_max = e->config->reconnect_max,
  };

  g_clear_pointer (&e->backend, twed_backend_free);
  e->backend = twed_backend_new (e->config->hosts, &bo);
  twed_backend_set_event_func (e->backend, on_backend_event, e);
}

static void
setup_monitor (TwedEngine *e)
{
  g_autoptr(GFile) dir = g_file_new_for_path (e->config->policy_dir);
  g_autoptr(GError) error = NULL;

  g_clear_object (&e->monitor);
  e->monitor = g_file_monitor_directory (dir, G_FILE_MONITOR_WATCH_MOVES, NULL, &error);
  if (!e->monitor)
    {
      g_warning ("cannot watch %s (%s): policy changes need SIGHUP", e->config->policy_dir, error->message);
      return;
    }
  g_signal_connect (e->monitor, "changed", G_CALLBACK (on_policy_dir_changed), e);
}

gboolean
twed_engine_start (TwedEngine *e, GError **error)
{
  if (e->config->metrics_listen &&
      !(e->metrics_server = twed_metrics_server_new (e->config->metrics_listen, error)))
    return FALSE;
  if (!twed_apply_api_available () && !e->dry_run)
    g_warning ("plan only: %s", TWED_API_MISSING_MESSAGE);
  twed_engine_reload_policies (e);
  setup_monitor (e);
  e->cycle_timer = g_timeout_add_seconds (e->config->interval, on_cycle_timer, e);
  g_idle_add_once (first_cycle, e);
  return TRUE;
}

gboolean
twed_engine_reload_config (TwedEngine *e, TwedConfig *config)
{
  g_autoptr(GError) error = NULL;
  TwedMetricsServer *server = NULL;

  if (g_strcmp0 (config->metrics_listen, e->config->metrics_listen) != 0 && config->metrics_listen &&
      !(server = twed_metrics_server_new (config->metrics_listen, &error)))
    {
      g_warning ("configuration rejected, keeping the current one: %s", error->message);
      twed_config_free (config);
      return FALSE;
    }
  if (server || !config->metrics_listen)
    {
      g_clear_pointer (&e->metrics_server, twed_metrics_server_free);
      e->metrics_server = server;
    }
  twed_config_free (e->config);
  e->config = config;
  setup_backend (e);
  setup_monitor (e);
  if (e->cycle_timer)
    g_source_remove (e->cycle_timer);
  e->cycle_timer = g_timeout_add_seconds (e->config->interval, on_cycle_timer, e);
  twed_engine_reload_policies (e);
  /* New hosts or policies apply now, not at the next scheduled cycle. */
  g_idle_add_once (first_cycle, e);
  return TRUE;
}

TwedEngine *
twed_engine_new (TwedConfig *config, gboolean dry_run)
{
  TwedEngine *e = g_new0 (TwedEngine, 1);

  e->config = config;
  e->dry_run = dry_run || config->dry_run;
  e->context = g_main_context_ref_thread_default ();
  e->pending_hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  setup_backend (e);
  return e;
}

void
twed_engine_free (TwedEngine *e)
{
  GHashTableIter it;
  gpointer v;

  if (!e)
    return;
  g_hash_table_iter_init (&it, e->pending_hosts);
  while (g_hash_table_iter_next (&it, NULL, &v))
    {
      GSource *src = g_main_context_find_source_by_id (e->context, GPOINTER_TO_UINT (v));

      if (src)
        g_source_destroy (src);
    }
  g_hash_table_unref (e->pending_hosts);
  if (e->policy_timer)
    g_source_remove (e->policy_timer);
  if (e->cycle_timer)
    g_source_remove (e->cycle_timer);
  g_clear_object (&e->monitor);
  twed_backend_free (e->backend);
  g_clear_pointer (&e->policies, twed_policy_set_free);
  g_clear_pointer (&e->last_plan, twed_plan_free);
  twed_metrics_server_free (e->metrics_server);
  twed_config_free (e->config);
  g_main_context_unref (e->context);
  g_free (e);
}

TwedBackend *
twed_engine_get_backend (TwedEngine *e)
{
  return e->backend;
}

const TwedPlan *
twed_engine_get_last_plan (TwedEngine *e)
{
  return e->last_plan;
}

const TwedCounters *
twed_engine_get_counters (TwedEngine *e)
{
  return &e->counters;
}

guint
twed_engine_get_event_cycles (TwedEngine *e)
{
  return e->event_cycles;
}
