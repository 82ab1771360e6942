/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's engine: the same inventory → plan → apply as twedctl,
 * on a timer, on libvirt events and on reconnect schedules, with the
 * policy directory watched.
 *
 * The engine's state lives in the main context, which also dispatches
 * libvirt's events and keepalive (twed_libvirt_init).  A pass calls
 * libvirt, and a libvirt call can block for seconds (a domain whose job
 * a migration holds, a host that went silent), so passes run in a
 * thread pool: a slow host delays neither the keepalive of the others
 * nor their passes, signals or metrics.  A pass covers one host; one
 * pass at a time per host, and a pass wanted while one runs follows it.
 * The rate limits are the fleet's: every pass of an interval draws on
 * one budget (twed_plan_apply_budget), granted in the main context
 * between planning and applying. */
#include "config.h"
#include "twedd-engine.h"
#include "twed-apply-api.h"
#include "twed-log.h"
#include "twed-policydir.h"

#include <gio/gio.h>

/* Bursts of events (a migration fires several) collapse into one pass. */
#define EVENT_DEBOUNCE_MS 200
#define POLICY_DEBOUNCE_MS 300
/* First wait before a domain whose definition could not be read is read
 * again; doubled per pass that still cannot, up to reconnect_max. */
#define UNREAD_RETRY_S 2

/* What a pass needs from the engine outlives it: a reload or the engine's
 * end may come while a pass still runs in the pool. */
typedef struct {
  TwedEngine *engine;           /* NULL once the engine is gone */
  GMainContext *context;
} EngineLink;

struct _TwedEngine {
  TwedConfig *config;
  gboolean dry_run_option;      /* --dry-run: wins over the configuration */
  gboolean dry_run;
  GMainContext *context;
  EngineLink *link;             /* atomic rc box */
  TwedBackend *backend;
  TwedPolicySet *policies;      /* last good, NULL until one loaded */
  GFileMonitor *monitor;
  GSource *policy_timer;
  GSource *cycle_timer;
  GThreadPool *pool;
  GHashTable *busy;             /* host -> host: a pass over it runs */
  GHashTable *wanted;           /* host -> host: a pass is due when it ends */
  GHashTable *debounce;         /* host -> GSource: event pass soon */
  GHashTable *retry;            /* host -> GSource: reconnect or re-read */
  GHashTable *unread_backoff;   /* host -> seconds of the last re-read wait */
  TwedBudget *budget;           /* changes granted in this interval */
  TwedPlan *last_plan;
  TwedCounters counters;
  guint event_cycles;
  TwedMetricsServer *metrics_server;
};

typedef enum {
  PASS_READ,                    /* inventory and plan, in the pool */
  PASS_APPLY,                   /* the granted changes, in the pool */
} PassStage;

typedef struct {
  EngineLink *link;
  TwedBackend *backend;
  TwedPolicySet *policies;      /* NULL: no good set yet, inventory only */
  char *host;
  char *hosts[2];               /* { host, NULL } for the backend */
  gboolean from_event;
  gboolean dry_run;
  PassStage stage;
  char *generated;
  gint64 start;
  /* Results, filled in the pool. */
  GPtrArray *inventory;         /* the one TwedHost */
  TwedPlan *plan;
  guint changes;
  guint applied;
  guint failed;
} PassJob;

static void request_pass (TwedEngine *e, const char *host, gboolean from_event);

static void
link_clear (gpointer p)
{
  g_main_context_unref (((EngineLink *) p)->context);
}

static void
link_unref (EngineLink *link)
{
  g_atomic_rc_box_release_full (link, link_clear);
}

static gpointer
release_thread (gpointer backend)
{
  twed_backend_unref (backend);
  return NULL;
}

/* Dropping a backend's last reference closes its connections: RPCs to
 * hosts that may not answer, so never in the main context. */
static void
release_backend (TwedBackend *backend)
{
  g_thread_unref (g_thread_new ("twed-release", release_thread, backend));
}

static void
pass_job_free (PassJob *job)
{
  /* The engine's current backend has another reference: a plain unref
   * cannot be the last one. */
  if (job->link->engine && job->link->engine->backend == job->backend)
    twed_backend_unref (job->backend);
  else
    release_backend (job->backend);
  link_unref (job->link);
  if (job->policies)
    twed_policy_set_unref (job->policies);
  g_free (job->host);
  g_free (job->generated);
  g_clear_pointer (&job->inventory, g_ptr_array_unref);
  g_clear_pointer (&job->plan, twed_plan_free);
  g_free (job);
}

static void
destroy_source (gpointer p)
{
  g_source_destroy (p);
  g_source_unref (p);
}

/* A source on the engine's context; the caller keeps the returned ref. */
static GSource *
attach_timeout (TwedEngine *e, guint ms, GSourceFunc func, gpointer data, GDestroyNotify notify)
{
  GSource *src = g_timeout_source_new (ms);

  g_source_set_callback (src, func, data, notify);
  g_source_attach (src, e->context);
  return src;
}

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

/* @plan covers @hosts: it replaces their part of the last plan, and the
 * other hosts' parts are kept, so that metrics describe every host. */
static void
merge_plan (TwedEngine *e, TwedPlan *plan, const char *const *hosts)
{
  if (e->last_plan)
    {
      for (guint i = 0; i < e->last_plan->hosts->len; i++)
        {
          TwedPlanHost *h = g_ptr_array_index (e->last_plan->hosts, i);

          if (!g_strv_contains (hosts, h->name))
            g_ptr_array_add (plan->hosts, g_ptr_array_steal_index (e->last_plan->hosts, i--));
        }
      for (guint i = 0; i < e->last_plan->entries->len; i++)
        {
          TwedPlanEntry *en = g_ptr_array_index (e->last_plan->entries, i);

          if (!g_strv_contains (hosts, en->host))
            g_ptr_array_add (plan->entries, g_ptr_array_steal_index (e->last_plan->entries, i--));
        }
    }
  g_clear_pointer (&e->last_plan, twed_plan_free);
  e->last_plan = plan;
}

/* In the pool: everything that calls libvirt. */
static void
run_pass_stage (PassJob *job)
{
  TwedPlanOptions po = { job->generated, 0 /* the interval's budget applies */ };

  switch (job->stage)
    {
    case PASS_READ:
      job->inventory = twed_backend_inventory (job->backend, (const char *const *) job->hosts);
      if (job->policies)
        job->plan = twed_plan_build (job->inventory, job->policies, &po);
      break;
    case PASS_APPLY:
    default:
      job->failed = twed_backend_apply (job->backend, job->plan, FALSE);
      job->applied = twed_plan_count_result (job->plan, TWED_RESULT_APPLIED);
      break;
    }
}

typedef struct {
  TwedEngine *engine;
  char *host;
} HostTimer;

static void
host_timer_free (gpointer p)
{
  HostTimer *t = p;

  g_free (t->host);
  g_free (t);
}

static HostTimer *
host_timer_new (TwedEngine *e, const char *host)
{
  HostTimer *t = g_new0 (HostTimer, 1);

  t->engine = e;
  t->host = g_strdup (host);
  return t;
}

static gboolean
on_retry_due (gpointer data)
{
  HostTimer *t = data;
  TwedEngine *e = t->engine;
  g_autofree char *host = g_strdup (t->host);

  /* Removing the entry destroys this source (and frees @t). */
  g_hash_table_remove (e->retry, host);
  request_pass (e, host, FALSE);
  return G_SOURCE_REMOVE;
}

/* Another pass over @host at monotonic time @at (usec), replacing any
 * other retry scheduled for it. */
static void
schedule_retry (TwedEngine *e, const char *host, gint64 at)
{
  gint64 ms = MAX (at - g_get_monotonic_time (), 0) / 1000;

  g_hash_table_insert (e->retry, g_strdup (host),
                       attach_timeout (e, (guint) MIN (ms, (gint64) G_MAXUINT), on_retry_due,
                                       host_timer_new (e, host), host_timer_free));
}

/* After a pass: a host that could not be read is tried again on its own
 * backoff, whatever the interval and whether or not events come (none
 * come from a lost host); a domain whose definition could not be read
 * is read again soon, its last known load counted meanwhile. */
static void
schedule_followups (TwedEngine *e, GPtrArray *inventory)
{
  for (guint i = 0; i < inventory->len; i++)
    {
      const TwedHost *h = g_ptr_array_index (inventory, i);
      gboolean unread = FALSE;

      for (guint d = 0; h->reachable && d < h->domains->len && !unread; d++)
        unread = ((TwedDomain *) g_ptr_array_index (h->domains, d))->load_error != NULL;
      if (!h->reachable)
        {
          schedule_retry (e, h->name, h->retry_at);
          twed_log_host (G_LOG_LEVEL_DEBUG, h->name, "next attempt in %.1f s",
                         (double) MAX (h->retry_at - g_get_monotonic_time (), 0) / G_USEC_PER_SEC);
        }
      else if (unread)
        {
          guint wait = GPOINTER_TO_UINT (g_hash_table_lookup (e->unread_backoff, h->name));

          wait = wait ? MIN (wait * 2, e->config->reconnect_max) : UNREAD_RETRY_S;
          g_hash_table_insert (e->unread_backoff, g_strdup (h->name), GUINT_TO_POINTER (wait));
          schedule_retry (e, h->name, g_get_monotonic_time () + (gint64) wait * G_USEC_PER_SEC);
        }
      else
        {
          g_hash_table_remove (e->unread_backoff, h->name);
          g_hash_table_remove (e->retry, h->name);
        }
    }
}

static void
log_would_change (const TwedPlan *plan)
{
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *en = g_ptr_array_index (plan->entries, i);
      g_autofree char *from = NULL, *to = NULL;

      if (en->action != TWED_ACTION_CHANGE)
        continue;
      from = twed_setting_to_string (&en->current);
      to = twed_setting_to_string (&en->target);
      twed_log_domain (G_LOG_LEVEL_INFO, en->host, en->domain, "would change %s -> %s (%s)",
                       from, to, en->reason);
    }
}

static void
finish_pass (TwedEngine *e, PassJob *job)
{
  g_autoptr(GPtrArray) wanted = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter it;
  gpointer key;

  g_hash_table_remove (e->busy, job->host);
  e->counters.cycles++;
  e->counters.cycle_seconds = (double) (g_get_monotonic_time () - job->start) / G_USEC_PER_SEC;
  if (job->from_event)
    e->event_cycles++;
  if (!job->plan)
    g_warning ("no valid policy loaded yet: planning skipped, nothing applied");
  else
    {
      TwedPlan *plan = g_steal_pointer (&job->plan);

      e->counters.changes_failed += job->failed;
      e->counters.changes_applied += job->applied;
      if (job->changes && (job->dry_run || !twed_apply_api_available ()))
        log_would_change (plan);
      g_info ("cycle %" G_GUINT64_FORMAT " for %s: %u VM(s), %u change(s), %u deferred, %s",
              e->counters.cycles, job->host, plan->entries->len, job->changes,
              twed_plan_count (plan, TWED_ACTION_DEFER),
              twed_plan_unreachable (plan) ? "unreachable" : "reachable");
      merge_plan (e, plan, (const char *const *) job->hosts);
    }
  twed_backend_counters (e->backend, &e->counters.libvirt_reads, &e->counters.libvirt_writes);
  schedule_followups (e, job->inventory);
  render_metrics (e);

  /* Passes wanted while these hosts were busy. */
  g_hash_table_iter_init (&it, e->wanted);
  while (g_hash_table_iter_next (&it, &key, NULL))
    {
      g_ptr_array_add (wanted, key);
      g_hash_table_iter_steal (&it);
    }
  for (guint i = 0; i < wanted->len; i++)
    request_pass (e, g_ptr_array_index (wanted, i), FALSE);
}

/* Main context: a stage of a pass ended in the pool. */
static gboolean
on_pass_stage_done (gpointer data)
{
  PassJob *job = data;
  TwedEngine *e = job->link->engine;

  if (!e)
    {
      pass_job_free (job);
      return G_SOURCE_REMOVE;
    }
  if (job->stage == PASS_READ && job->plan)
    {
      /* The interval's budget is shared by every host's passes. */
      twed_plan_apply_budget (job->plan, job->policies, e->budget);
      job->changes = twed_plan_count (job->plan, TWED_ACTION_CHANGE);
      if (job->changes && !job->dry_run && twed_apply_api_available ())
        {
          job->stage = PASS_APPLY;
          g_thread_pool_push (e->pool, job, NULL);
          return G_SOURCE_REMOVE;
        }
    }
  finish_pass (e, job);
  pass_job_free (job);
  return G_SOURCE_REMOVE;
}

/* In the pool: a stage, then back to the main context. */
static void
pass_thread (gpointer data, gpointer user_data G_GNUC_UNUSED)
{
  PassJob *job = data;
  GSource *src = g_idle_source_new ();

  run_pass_stage (job);
  g_source_set_callback (src, on_pass_stage_done, job, NULL);
  g_source_attach (src, job->link->context);
  g_source_unref (src);
}

static void
start_pass (TwedEngine *e, const char *host, gboolean from_event)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  PassJob *job = g_new0 (PassJob, 1);

  g_hash_table_add (e->busy, g_strdup (host));
  /* This pass does what a scheduled retry would. */
  g_hash_table_remove (e->retry, host);
  job->link = g_atomic_rc_box_acquire (e->link);
  job->backend = twed_backend_ref (e->backend);
  job->policies = e->policies ? twed_policy_set_ref (e->policies) : NULL;
  job->host = g_strdup (host);
  job->hosts[0] = job->host;
  job->from_event = from_event;
  job->dry_run = e->dry_run;
  job->stage = PASS_READ;
  job->generated = g_date_time_format_iso8601 (now);
  job->start = g_get_monotonic_time ();
  g_thread_pool_push (e->pool, job, NULL);
}

/* A pass over @host, or over every host when NULL; a host whose pass
 * still runs gets the next one when it ends. */
static void
request_pass (TwedEngine *e, const char *host, gboolean from_event)
{
  for (guint i = 0; i < e->config->hosts->len; i++)
    {
      const TwedHostSpec *spec = g_ptr_array_index (e->config->hosts, i);

      if (host && !g_str_equal (host, spec->name))
        continue;
      if (g_hash_table_contains (e->busy, spec->name))
        g_hash_table_add (e->wanted, g_strdup (spec->name));
      else
        start_pass (e, spec->name, from_event);
    }
}

static gboolean
on_cycle_timer (gpointer data)
{
  TwedEngine *e = data;

  /* A new interval: a new budget, and what was deferred gets its turn. */
  twed_budget_free (e->budget);
  e->budget = twed_budget_new (e->config->max_changes);
  request_pass (e, NULL, FALSE);
  return G_SOURCE_CONTINUE;
}

static gboolean
on_first_pass (gpointer data)
{
  request_pass (data, NULL, FALSE);
  return G_SOURCE_REMOVE;
}

static gboolean
on_host_debounced (gpointer data)
{
  HostTimer *t = data;
  TwedEngine *e = t->engine;
  g_autofree char *host = g_strdup (t->host);

  g_hash_table_remove (e->debounce, host);
  request_pass (e, host, TRUE);
  return G_SOURCE_REMOVE;
}

typedef struct {
  EngineLink *link;
  char *host;
  gboolean lost;
} EventNotice;

static void
event_notice_free (gpointer p)
{
  EventNotice *n = p;

  link_unref (n->link);
  g_free (n->host);
  g_free (n);
}

/* The connection to @host closed: it is down until a pass reaches it
 * again, whatever its last pass found. */
static void
mark_host_down (TwedEngine *e, const char *host)
{
  if (!e->last_plan)
    return;
  for (guint i = 0; i < e->last_plan->hosts->len; i++)
    {
      TwedPlanHost *h = g_ptr_array_index (e->last_plan->hosts, i);

      if (!g_str_equal (h->name, host) || !h->reachable)
        continue;
      h->reachable = FALSE;
      g_free (h->error);
      h->error = g_strdup ("connection lost, reconnecting");
      for (guint j = 0; j < e->last_plan->entries->len; j++)
        if (g_str_equal (((TwedPlanEntry *) g_ptr_array_index (e->last_plan->entries, j))->host, host))
          g_ptr_array_remove_index (e->last_plan->entries, j--);
      render_metrics (e);
    }
}

/* Main context: schedule a pass over the host the event came from. */
static gboolean
on_event_main (gpointer data)
{
  EventNotice *n = data;
  TwedEngine *e = n->link->engine;

  if (e && n->lost)
    mark_host_down (e, n->host);
  if (e && !g_hash_table_contains (e->debounce, n->host))
    g_hash_table_insert (e->debounce, g_strdup (n->host),
                         attach_timeout (e, EVENT_DEBOUNCE_MS, on_host_debounced,
                                         host_timer_new (e, n->host), host_timer_free));
  return G_SOURCE_REMOVE;
}

/* Whichever thread libvirt dispatches on: always hand over through a
 * source, never call into the engine here. */
static void
on_backend_event (const char *host, const char *domain G_GNUC_UNUSED, const char *what, gpointer data)
{
  EngineLink *link = data;
  EventNotice *n = g_new0 (EventNotice, 1);
  GSource *src = g_idle_source_new ();

  n->link = g_atomic_rc_box_acquire (link);
  n->host = g_strdup (host);
  n->lost = g_str_equal (what, "lost");
  g_source_set_callback (src, on_event_main, n, event_notice_free);
  g_source_attach (src, link->context);
  g_source_unref (src);
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
  g_clear_pointer (&e->policies, twed_policy_set_unref);
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

  g_clear_pointer (&e->policy_timer, destroy_source);
  /* New policies apply now, not at the next scheduled cycle. */
  if (twed_engine_reload_policies (e))
    request_pass (e, NULL, FALSE);
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
  g_clear_pointer (&e->policy_timer, destroy_source);
  e->policy_timer = attach_timeout (e, POLICY_DEBOUNCE_MS, on_policy_debounced, e, NULL);
}

static void
backend_options (const TwedConfig *c, TwedBackendOptions *bo)
{
  *bo = (TwedBackendOptions) {
    .threads = c->threads,
    .readonly = FALSE, /* events and apply want a full connection */
    .events = TRUE,
    .keepalive_interval = c->keepalive_interval,
    .keepalive_count = c->keepalive_count,
    .reconnect_max = c->reconnect_max,
  };
}

/* The same hosts, reached the same way: the connections can stay. */
static gboolean
same_backend (const TwedConfig *a, const TwedConfig *b)
{
  if (a->hosts->len != b->hosts->len || a->threads != b->threads ||
      a->keepalive_interval != b->keepalive_interval || a->keepalive_count != b->keepalive_count ||
      a->reconnect_max != b->reconnect_max)
    return FALSE;
  for (guint i = 0; i < a->hosts->len; i++)
    {
      const TwedHostSpec *x = g_ptr_array_index (a->hosts, i), *y = g_ptr_array_index (b->hosts, i);

      if (!g_str_equal (x->name, y->name) || !g_str_equal (x->uri, y->uri))
        return FALSE;
    }
  return TRUE;
}

static void
setup_backend (TwedEngine *e)
{
  TwedBackendOptions bo;

  backend_options (e->config, &bo);
  /* Passes still running keep the old backend until they end. */
  if (e->backend)
    release_backend (g_steal_pointer (&e->backend));
  e->backend = twed_backend_new (e->config->hosts, &bo);
  twed_backend_set_event_func (e->backend, on_backend_event, g_atomic_rc_box_acquire (e->link),
                               (GDestroyNotify) link_unref);
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

static void
setup_timer (TwedEngine *e)
{
  g_clear_pointer (&e->cycle_timer, destroy_source);
  e->cycle_timer = g_timeout_source_new_seconds (e->config->interval);
  g_source_set_callback (e->cycle_timer, on_cycle_timer, e, NULL);
  g_source_attach (e->cycle_timer, e->context);
}

static void
schedule_first_pass (TwedEngine *e)
{
  GSource *src = g_idle_source_new ();

  g_source_set_callback (src, on_first_pass, e, NULL);
  g_source_attach (src, e->context);
  /* Kept in the retry table under no host name: destroyed with the rest. */
  g_hash_table_insert (e->retry, g_strdup (""), src);
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
  setup_timer (e);
  schedule_first_pass (e);
  return TRUE;
}

gboolean
twed_engine_reload_config (TwedEngine *e, TwedConfig *config)
{
  g_autoptr(GError) error = NULL;
  TwedMetricsServer *server = NULL;
  gboolean keep_backend;

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
  /* Unchanged hosts keep their connections and cached definitions. */
  keep_backend = same_backend (e->config, config);
  twed_config_free (e->config);
  e->config = config;
  e->dry_run = e->dry_run_option || config->dry_run;
  g_thread_pool_set_max_threads (e->pool, (int) MAX (config->threads, 1u), NULL);
  if (!keep_backend)
    setup_backend (e);
  setup_monitor (e);
  setup_timer (e);
  twed_engine_reload_policies (e);
  /* New hosts or policies apply now, not at the next scheduled cycle. */
  schedule_first_pass (e);
  return TRUE;
}

TwedEngine *
twed_engine_new (TwedConfig *config, gboolean dry_run)
{
  TwedEngine *e = g_new0 (TwedEngine, 1);

  e->config = config;
  e->dry_run_option = dry_run;
  e->dry_run = dry_run || config->dry_run;
  e->context = g_main_context_ref_thread_default ();
  e->link = g_atomic_rc_box_new0 (EngineLink);
  e->link->engine = e;
  e->link->context = g_main_context_ref (e->context);
  e->busy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->wanted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->debounce = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, destroy_source);
  e->retry = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, destroy_source);
  e->unread_backoff = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->budget = twed_budget_new (config->max_changes);
  e->pool = g_thread_pool_new_full (pass_thread, NULL, (GDestroyNotify) pass_job_free,
                                    (int) MAX (config->threads, 1u), FALSE, NULL);
  setup_backend (e);
  return e;
}

void
twed_engine_free (TwedEngine *e)
{
  if (!e)
    return;
  /* Passes still running end on their own and find no engine: their
   * results are dropped, their references released. */
  e->link->engine = NULL;
  g_thread_pool_free (e->pool, TRUE, FALSE);
  g_hash_table_unref (e->debounce);
  g_hash_table_unref (e->retry);
  g_hash_table_unref (e->busy);
  g_hash_table_unref (e->wanted);
  g_hash_table_unref (e->unread_backoff);
  g_clear_pointer (&e->policy_timer, destroy_source);
  g_clear_pointer (&e->cycle_timer, destroy_source);
  g_clear_object (&e->monitor);
  release_backend (e->backend);
  g_clear_pointer (&e->policies, twed_policy_set_unref);
  g_clear_pointer (&e->last_plan, twed_plan_free);
  twed_budget_free (e->budget);
  twed_metrics_server_free (e->metrics_server);
  twed_config_free (e->config);
  link_unref (e->link);
  g_main_context_unref (e->context);
  g_free (e);
}

gboolean
twed_engine_idle (TwedEngine *e)
{
  return g_hash_table_size (e->busy) == 0 && g_hash_table_size (e->debounce) == 0;
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
