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
#include "twed-domain-params.h"
#include "twed-log.h"
#include "twed-policydir.h"
#include "twed-state.h"
#include "twedd-state.h"

#include <gio/gio.h>
#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

/* Bursts of events (a migration fires several) collapse into one pass. */
#define EVENT_DEBOUNCE_MS 200
#define POLICY_DEBOUNCE_MS 300
/* How often the policy directory is looked at for being replaced (rm -r
 * and created again, a remount), which ends an inotify watch silently. */
#define POLICY_DIR_CHECK_MS 2000
/* Metrics are rendered at most this often, however many passes end. */
#define RENDER_MIN_INTERVAL_MS 1000
/* A pass that has been inside a worker this long is waiting on its
 * host (a connect that does not return): it no longer counts against
 * [twed] threads, so that hosts that hang cannot starve the others of
 * workers.  Only passes a worker runs count: a queued pass holds no
 * worker, however long it waits.  At most EXTRA_WORKERS_FACTOR x threads
 * such workers are added: a fleet that hangs as a whole must not turn
 * into thousands of threads and libvirt calls at once. */
#define STUCK_AFTER_S 15
#define EXTRA_WORKERS_FACTOR 2
/* Budget and VM history are written at most this long after they
 * changed by an apply.  A grant is written at once, and its changes are
 * made only once it is on disk. */
#define STATE_SAVE_DELAY_MS 1000
/* The state's log is folded into it once it is larger than the state
 * and than this. */
#define STATE_COMPACT_MIN_BYTES (64 * 1024)

/* Passes that finished reading wait this long at most for the others
 * of their round before the interval's budget is granted among them. */
#define GRANT_WAIT_MS 1000

/* The longest a stop waits for a file write still under way (a state
 * directory on a hung mount): a stop must not hang with it. */
#define SHUTDOWN_WRITE_WAIT_S 30

/* What a pass needs from the engine outlives it: a reload or the engine's
 * end may come while a pass still runs in the pool. */
typedef struct {
  TwedEngine *engine;           /* NULL once the engine is gone */
  GMainContext *context;
  gint generation;              /* atomic: bumped by every reload of the
                                 * configuration or the policies */
  gint gone;                    /* atomic: the engine ended, passes still
                                 * queued are dropped */
  GMutex claim_lock;            /* PassJob applying, taken_back */
} EngineLink;                   /* atomic rc box */

struct _TwedEngine {
  TwedConfig *config;
  gboolean dry_run_option;      /* --dry-run: wins over the configuration */
  gboolean dry_run;
  GMainContext *context;
  EngineLink *link;
  TwedBackend *backend;
  TwedPolicySet *policies;      /* last good, NULL until one loaded */
  GFileMonitor *monitor;
  GSource *dir_check;           /* the watched directory still the one there */
  gboolean dir_known;           /* dir_dev/dir_ino: the one watched */
  dev_t dir_dev;
  ino_t dir_ino;
  gint64 dir_stamp;             /* mtimes of the directory and ..data at the last load */
  GSource *policy_timer;
  GSource *cycle_timer;         /* one-shot: the next interval's start */
  gint64 interval_started;      /* monotonic usec the interval began */
  GHashTable *configured;       /* host names of config->hosts */
  guint seq;                    /* passes started, for the pool's order */
  GSource *first_pass;
  GSource *render_timer;
  GSource *stuck_timer;         /* looks for passes stuck in a worker */
  gint64 rendered_at;           /* monotonic usec */
  GThreadPool *pool;
  GHashTable *running;          /* PassJob set: every pass not ended yet */
  GHashTable *busy;             /* host -> PassJob running for it */
  GHashTable *wanted;           /* host -> GINT (from an event): due next */
  GHashTable *debounce;         /* host -> GSource: event pass soon */
  GHashTable *retry;            /* host -> GSource: reconnect or re-read */
  TwedPlanStore *plans;         /* every host's plan of its last pass */
  gint64 started;               /* monotonic usec */
  gint64 last_success;          /* monotonic usec a pass last read and planned its host */
  gint64 last_pass_end;         /* monotonic usec any pass last ended */
  TwedBudget *budget;           /* changes granted in this interval */
  guint reading;                /* passes in their read stage */
  GPtrArray *waiting;           /* PassJob read, waiting for their grant */
  GSource *grant_timer;
  TwedCounters counters;
  guint event_cycles;
  char *state_log;              /* the state's log; NULL: nothing kept
                                 * across restarts */
  GString *state_records;       /* records not written yet */
  GSource *state_timer;         /* writes them soon */
  gint64 interval_real;         /* Unix usec the interval began */
  gsize state_bytes;            /* the state as last written whole */
  gsize log_bytes;              /* the log since */
  guint64 state_gen;            /* the log's generation: the writer's
                                 * once it runs */
  guint64 state_seq;            /* state writes asked for */
  guint64 records_seq;          /* the last of them that appends records */
  GPtrArray *saving;            /* PassJob granted, waiting for the state
                                 * write that records the grant */
  GThreadPool *writer;          /* one thread for files: writes land in order */
  gint writes_pending;          /* atomic: pushed to the writer, not landed */
  guint saves_hung;             /* of counters.passes_stuck: waiting on a
                                 * state write that does not return */
  gboolean started_ok;          /* twed_engine_start succeeded */
  gboolean inline_stages;       /* twed_engine_run_pass_inline: no pool */
  TwedMetricsServer *metrics_server;
  GString *metrics_text;        /* kept between renders */
  TwedAuto *controller;         /* the auto bands' state across passes */
  GHashTable *auto_logged;      /* host -> (uuid -> what its last debug line said) */
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
  gint generation;              /* the engine's when the pass started */
  guint seq;
  gboolean skipped;             /* apply stage: nothing tried */
  gboolean applying;            /* claim_lock: a worker took its apply */
  gboolean taken_back;          /* claim_lock: the engine ended first and
                                 * gave its grant back */
  const char *skip_why;         /* why, when skipped */
  guint64 save_seq;             /* the state write its grant waits for */
  gint64 saving_since;          /* main context: monotonic usec it began to
                                 * wait for that write */
  char *generated;
  gint64 start;                 /* monotonic usec the pass was started */
  gint64 running_since;         /* atomic: monotonic usec a worker took the
                                 * current stage, 0 while queued or back */
  gboolean stuck_logged;        /* main context: warned once as stuck */
  gboolean hung_reported;       /* main context: reported as hung */
  TwedAuto *controller;
  /* Results, filled in the pool. */
  GPtrArray *inventory;         /* the one TwedHost */
  TwedPlan *plan;
  guint changes;
  guint applied;
  guint failed;
} PassJob;

static void request_pass (TwedEngine *e, const char *host, gboolean from_event);
static gint64 policy_dir_stamp (const char *dir);
static gboolean health_func (char **text, gpointer data);
static void start_pass (TwedEngine *e, const char *host, gboolean from_event);
static void size_pool (TwedEngine *e);
static gboolean pass_superseded (TwedEngine *e, const PassJob *job);
static void finish_pass (TwedEngine *e, PassJob *job);
static void run_pass_stage (PassJob *job);
static gboolean on_pass_stage_done (gpointer data);

static void
link_clear (gpointer p)
{
  EngineLink *link = p;

  g_mutex_clear (&link->claim_lock);
  g_main_context_unref (link->context);
}

static void
link_unref (EngineLink *link)
{
  g_atomic_rc_box_release_full (link, link_clear);
}

static void
pass_job_free (PassJob *job)
{
  twed_backend_unref_elsewhere (job->backend);
  link_unref (job->link);
  if (job->policies)
    twed_policy_set_unref (job->policies);
  g_free (job->host);
  g_free (job->generated);
  g_clear_pointer (&job->inventory, g_ptr_array_unref);
  g_clear_pointer (&job->plan, twed_plan_free);
  twed_auto_unref (job->controller);
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

/* Files are written on the writer's thread: a write waits for the disk
 * (fsync), which the main loop, running every connection's keepalive,
 * must not.  The state (twedd-state.h) is what a restart must not
 * forget: records of what changed, appended (built in the main context,
 * where the budget lives, and small: what a grant or an apply touched),
 * and now and then the whole state; the textfile, the metrics. */
typedef enum {
  WRITE_TEXTFILE,               /* @data to the file @path */
  WRITE_RECORDS,                /* @data appended to the log in @path */
  WRITE_STATE,                  /* @state whole into @path, a new log */
  WRITE_COMPACT,                /* the log in @path folded into its state */
} WriteKind;

typedef struct {
  WriteKind kind;
  char *path;
  GBytes *data;
  TwedState *state;
  gint64 min_change;            /* compact: min_change_interval, usec */
  guint64 *generation;          /* the log's; the writer's once started */
  EngineLink *link;             /* state: told when written, NULL when synchronous */
  guint64 seq;
  gsize state_bytes;            /* what the state written whole came to */
  gint *pending;                /* atomic: the engine's writes not landed yet */
} FileWrite;

/* The main context learns that the state write @seq landed, or failed. */
typedef struct {
  EngineLink *link;
  guint64 seq;
  gboolean ok;
  gsize state_bytes;            /* the state was written whole: its size */
} StateSaved;

static gboolean on_state_saved (gpointer data);

static void
state_saved_free (gpointer p)
{
  StateSaved *saved = p;

  link_unref (saved->link);
  g_free (saved);
}

static gboolean
file_write_now (FileWrite *w)
{
  g_autoptr(GError) error = NULL;
  gsize len = 0;
  const char *text = w->data ? g_bytes_get_data (w->data, &len) : NULL;
  gboolean ok = FALSE;

  switch (w->kind)
    {
    case WRITE_TEXTFILE:
      if (!twed_metrics_write_textfile (w->path, w->data, &error))
        g_warning ("metrics textfile %s: %s", w->path, error->message);
      return TRUE;
    case WRITE_RECORDS:
      ok = twedd_state_append (w->path, *w->generation, text, len, &error);
      break;
    case WRITE_STATE:
      w->state->log = *w->generation + 1;
      ok = twedd_state_write (w->path, w->state, w->generation, &w->state_bytes, &error);
      break;
    case WRITE_COMPACT:
      /* Not a grant's record: what it folds is on disk already, and
       * stays in the log while the state cannot be written whole. */
      if (!twedd_state_compact (w->path, g_get_real_time (), w->min_change, w->generation, &w->state_bytes,
                                &error))
        g_warning ("state in %s not compacted: %s: its log grows until it can be", w->path, error->message);
      return TRUE;
    default:
      g_assert_not_reached ();
    }
  if (!ok)
    g_warning ("state in %s: %s: no change is made while the grants cannot be recorded", w->path,
               error->message);
  return ok;
}

static void
file_write_free (FileWrite *w)
{
  g_free (w->path);
  g_clear_pointer (&w->data, g_bytes_unref);
  g_clear_pointer (&w->state, twed_state_free);
  if (w->link)
    link_unref (w->link);
  g_free (w);
}

/* On the writer's thread. */
static void
file_write (gpointer data, gpointer unused G_GNUC_UNUSED)
{
  FileWrite *w = data;
  gboolean ok = file_write_now (w);

  if (w->link)
    {
      StateSaved *saved = g_new0 (StateSaved, 1);
      GSource *src = g_idle_source_new ();

      saved->link = g_atomic_rc_box_acquire (w->link);
      saved->seq = w->seq;
      saved->ok = ok;
      saved->state_bytes = w->state_bytes;
      g_source_set_callback (src, on_state_saved, saved, state_saved_free);
      g_source_attach (src, w->link->context);
      g_source_unref (src);
    }
  g_atomic_int_dec_and_test (w->pending);
  file_write_free (w);
}

/* Written on the writer's thread, or at once (@now): then whether it
 * was written. */
static gboolean
write_file (TwedEngine *e, FileWrite *w, gboolean now)
{
  gboolean ok;

  if (now || !e->writer)
    {
      ok = file_write_now (w);
      if (w->state_bytes)
        e->state_bytes = w->state_bytes;
      file_write_free (w);
      return ok;
    }
  if (w->kind != WRITE_TEXTFILE)
    {
      w->link = g_atomic_rc_box_acquire (e->link);
      w->seq = ++e->state_seq;
    }
  w->pending = &e->writes_pending;
  g_atomic_int_inc (&e->writes_pending);
  g_thread_pool_push (e->writer, w, NULL);
  return TRUE;
}

static FileWrite *
state_write_new (TwedEngine *e, WriteKind kind)
{
  FileWrite *w = g_new0 (FileWrite, 1);

  w->kind = kind;
  w->path = g_strdup (e->config->state_dir);
  w->generation = &e->state_gen;
  w->min_change = (gint64) e->config->min_change_interval * G_USEC_PER_SEC;
  return w;
}

/* The interval in progress, without counts: the head of every record. */
static TwedState *
interval_state (TwedEngine *e)
{
  TwedState *s = twed_state_new ();

  s->interval_started = e->interval_real;
  s->interval = e->config->interval;
  s->granted = twed_budget_total (e->budget);
  s->hold = g_strdup (twed_budget_get_hold (e->budget));
  return s;
}

/* The state from what is in force now, whole: written at once (@now),
 * then whether it was; or on the writer's thread, as write
 * e->state_seq.  What it holds needs no record. */
static gboolean
save_state (TwedEngine *e, gboolean now)
{
  FileWrite *w;

  g_clear_pointer (&e->state_timer, destroy_source);
  if (!e->state_log)
    return TRUE;
  g_string_truncate (e->state_records, 0);
  e->log_bytes = 0;
  w = state_write_new (e, WRITE_STATE);
  w->state = interval_state (e);
  g_hash_table_unref (w->state->per_policy);
  g_hash_table_unref (w->state->per_host);
  twed_budget_export (e->budget, &w->state->granted, &w->state->per_policy, &w->state->per_host);
  twed_backend_save_vms (e->backend, w->state->vms);
  twed_auto_save_bars (e->controller, NULL, FALSE, g_get_monotonic_time (), g_get_real_time (), w->state->bars);
  return write_file (e, w, now);
}

/* A record of what is now of @entries' VMs (their last change, with
 * @failures their failures on their hosts) and of the interval's counts
 * they draw on, for the next write. */
static void
state_record (TwedEngine *e, TwedBackend *backend, TwedPlanEntry *const *entries, guint n, gboolean failures)
{
  g_autoptr(TwedState) iv = NULL;
  g_autoptr(GPtrArray) changed = NULL;
  g_autoptr(GPtrArray) failed = NULL;
  g_autofree char *line = NULL;

  if (!e->state_log)
    return;
  iv = interval_state (e);
  changed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  failed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  for (guint i = 0; i < n; i++)
    {
      twed_budget_export_entry (e->budget, entries[i], iv->per_policy, iv->per_host);
      twed_backend_vm_records (backend, entries[i], changed, failures ? failed : NULL);
    }
  line = twed_state_log_record (iv, changed, failed, NULL);
  g_string_append (e->state_records, line);
}

/* Records taking out of the state the failures the backend no longer
 * keeps (their VM gone, their host no longer configured): the state is
 * folded from disk, which would keep them for ever otherwise. */
static gboolean
state_record_forgotten (TwedEngine *e)
{
  g_autoptr(GPtrArray) failed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autofree char *line = NULL;

  twed_backend_take_forgotten (e->backend, failed);
  if (!e->state_log || !failed->len)
    return FALSE;
  line = twed_state_log_record (NULL, NULL, failed, NULL);
  g_string_append (e->state_records, line);
  return TRUE;
}

/* A record of the controller's bars on @host that changed in its pass
 * (a step down's cooldown, a level refused, off measured again), so
 * that a restart does not try at once what they bar. */
static gboolean
state_record_bars (TwedEngine *e, const char *host)
{
  g_autoptr(GPtrArray) bars = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autofree char *line = NULL;

  /* Without a state directory (one a reload took away) they are taken
   * all the same, so that none piles up. */
  twed_auto_save_bars (e->controller, host, TRUE, g_get_monotonic_time (), g_get_real_time (), bars);
  if (!e->state_log || !bars->len)
    return FALSE;
  line = twed_state_log_record (NULL, NULL, NULL, bars);
  g_string_append (e->state_records, line);
  return TRUE;
}

/* The records made since the last write: appended at once (@now), then
 * whether they were; or on the writer's thread, as write e->state_seq.
 * Once the log outgrows the state, it is folded into it there. */
static gboolean
state_flush (TwedEngine *e, gboolean now)
{
  FileWrite *w;
  gboolean ok;

  g_clear_pointer (&e->state_timer, destroy_source);
  if (!e->state_log || !e->state_records->len)
    return TRUE;
  w = state_write_new (e, WRITE_RECORDS);
  e->log_bytes += e->state_records->len;
  w->data = g_bytes_new (e->state_records->str, e->state_records->len);
  g_string_truncate (e->state_records, 0);
  ok = write_file (e, w, now);
  e->records_seq = e->state_seq;
  /* Each fold costs about the state's size, once the log has grown by
   * as much: a record's share stays small whatever the VMs held. */
  if (ok && e->log_bytes > MAX (e->state_bytes, STATE_COMPACT_MIN_BYTES))
    {
      e->log_bytes = 0;
      write_file (e, state_write_new (e, WRITE_COMPACT), now);
    }
  return ok;
}

static gboolean
on_state_due (gpointer data)
{
  TwedEngine *e = data;

  e->state_timer = NULL;
  state_flush (e, FALSE);
  return G_SOURCE_REMOVE;
}

/* Records are written within STATE_SAVE_DELAY_MS. */
static void
state_changed (TwedEngine *e)
{
  if (e->state_log && !e->state_timer)
    e->state_timer = attach_timeout (e, STATE_SAVE_DELAY_MS, on_state_due, e, NULL);
}

static void
set_state_dir (TwedEngine *e, const char *dir)
{
  g_clear_pointer (&e->state_log, g_free);
  if (dir)
    e->state_log = g_build_filename (dir, TWEDD_STATE_LOG, NULL);
}

/* The controller's bars of the configured hosts (others would never be
 * read, so never forgotten), on the clocks as they are now: the load
 * took a while. */
static guint
restore_bars (TwedEngine *e, GPtrArray *bars)
{
  g_autoptr(GPtrArray) mine = g_ptr_array_new ();

  for (guint i = 0; i < bars->len; i++)
    {
      TwedAutoBars *b = g_ptr_array_index (bars, i);

      if (g_hash_table_contains (e->configured, b->host))
        g_ptr_array_add (mine, b);
    }
  return twed_auto_restore_bars (e->controller, mine, g_get_monotonic_time (), g_get_real_time ());
}

/* At start: the interval that was running goes on with what it granted,
 * and the VMs stay held as they were.  A state that cannot be read says
 * nothing of what was done: nothing is changed before the next interval,
 * the safe side of every limit. */
static void
load_state (TwedEngine *e)
{
  const char *dir = e->config->state_dir;
  g_autoptr(GError) error = NULL;
  g_autoptr(TwedState) s = NULL;
  gint64 real = g_get_real_time ();
  gboolean carried = FALSE;
  TwedStateLoad info;
  guint held, barred;

  if (!e->state_log)
    return;
  if (g_mkdir_with_parents (dir, 0700) < 0)
    g_warning ("state directory %s: %s: no change is made while the grants cannot be recorded", dir,
               g_strerror (errno));
  s = twedd_state_load (dir, real, (gint64) e->config->min_change_interval * G_USEC_PER_SEC, &info, &error);
  if (!s && g_error_matches (error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    {
      g_info ("no state in %s yet", dir);
      return;
    }
  if (!s)
    {
      static const char *const names[] = { TWEDD_STATE_FILE, TWEDD_STATE_LOG };

      g_warning ("state in %s unreadable (%s): kept as *.corrupt; what was changed before this start is "
                 "unknown, so nothing is changed before the next interval", dir, error->message);
      /* Copies: the files stay until the hold below replaces them, so
       * that a start after a failed hold write holds too. */
      for (guint i = 0; i < G_N_ELEMENTS (names); i++)
        {
          g_autofree char *path = g_build_filename (dir, names[i], NULL);
          g_autofree char *aside = g_strconcat (path, ".corrupt", NULL);

          if (!g_file_test (path, G_FILE_TEST_EXISTS))
            continue;
          (void) g_unlink (aside);
          if (link (path, aside) < 0)
            {
              g_autofree char *text = NULL;
              gsize len;

              /* A file system without hard links. */
              if (!g_file_get_contents (path, &text, &len, NULL) ||
                  !g_file_set_contents_full (aside, text, (gssize) len, G_FILE_SET_CONTENTS_NONE, 0600, NULL))
                g_warning ("%s not kept as %s", path, aside);
            }
        }
      twed_budget_hold (e->budget, "state file unreadable at start: no change before the next interval");
      /* Kept at once: a second restart within the interval must hold
       * too, not find no file and change everything. */
      save_state (e, TRUE);
      return;
    }
  /* Before any append, and not left to the whole write below: a full
   * disk refuses that one while a record still fits. */
  if (!twedd_state_mend_log (dir, &info, &error))
    {
      g_warning ("state in %s: %s: no change is made while the grants cannot be recorded", dir,
                 error->message);
      g_clear_error (&error);
    }
  e->state_gen = s->log;
  e->state_bytes = info.state_bytes;
  e->log_bytes = info.log_bytes;
  held = twed_backend_restore_vms (e->backend, s->vms);
  barred = restore_bars (e, s->bars);
  if (state_record_forgotten (e))
    state_changed (e);
  if (s->interval_started && s->interval_started <= real &&
      real - s->interval_started < (gint64) e->config->interval * G_USEC_PER_SEC)
    {
      e->interval_started = g_get_monotonic_time () - (real - s->interval_started);
      e->interval_real = s->interval_started;
      twed_budget_import (e->budget, s->granted, s->per_policy, s->per_host);
      if (s->hold)
        twed_budget_hold (e->budget, s->hold);
      carried = TRUE;
    }
  g_message ("state from %s: %u VM(s) held, %u with the auto controller's bars; %s", dir, held, barred,
             carried ? "the interval in progress goes on with what it granted" : "a new interval starts");
  if (carried)
    g_message ("interval goes on: %u change(s) already granted", s->granted);
  /* Then folded, so that the log goes on from a state written whole;
   * when that fails, records still go to the mended log. */
  if (info.fresh_log_due)
    write_file (e, state_write_new (e, WRITE_COMPACT), FALSE);
}

static void
render_metrics (TwedEngine *e)
{
  g_autoptr(GBytes) text = NULL;

  twed_metrics_render_into (e->metrics_text, e->plans, &e->counters, e->config->metrics_per_vm);
  e->rendered_at = g_get_monotonic_time ();
  if (!e->config->metrics_textfile && !e->metrics_server)
    return;
  /* One copy per render, shared by the textfile and every scrape. */
  text = g_bytes_new (e->metrics_text->str, e->metrics_text->len);
  if (e->config->metrics_textfile)
    {
      FileWrite *w = g_new0 (FileWrite, 1);

      w->kind = WRITE_TEXTFILE;
      w->path = g_strdup (e->config->metrics_textfile);
      w->data = g_bytes_ref (text);
      write_file (e, w, FALSE);
    }
  if (e->metrics_server)
    twed_metrics_server_update (e->metrics_server, text);
}

static gboolean
on_render_due (gpointer data)
{
  TwedEngine *e = data;

  g_clear_pointer (&e->render_timer, destroy_source);
  render_metrics (e);
  return G_SOURCE_REMOVE;
}

/* Metrics soon: at once, unless they were rendered within the last
 * RENDER_MIN_INTERVAL_MS; then once that has passed. */
static void
render_soon (TwedEngine *e)
{
  gint64 since = (g_get_monotonic_time () - e->rendered_at) / 1000;

  if (e->render_timer)
    return;
  if (since >= RENDER_MIN_INTERVAL_MS)
    render_metrics (e);
  else
    e->render_timer = attach_timeout (e, (guint) (RENDER_MIN_INTERVAL_MS - since), on_render_due, e, NULL);
}

/* In the pool: everything that calls libvirt. */
static void
run_pass_stage (PassJob *job)
{
  TwedPlanOptions po = { job->generated, 0 /* the interval's budget applies */, job->controller };

  switch (job->stage)
    {
    case PASS_READ:
      job->inventory = twed_backend_inventory (job->backend, (const char *const *) job->hosts);
      if (job->policies)
        job->plan = twed_plan_build (job->inventory, job->policies, &po);
      break;
    case PASS_APPLY:
    default:
      /* A reload between grant and apply (dry_run turned on, other
       * policies or hosts): what was granted is no longer wanted. */
      if (g_atomic_int_get (&job->link->generation) != job->generation)
        {
          job->skipped = TRUE;
          job->skip_why = "a reload came first";
          break;
        }
      job->failed = twed_backend_apply (job->backend, job->plan, FALSE);
      job->applied = twed_plan_count_result (job->plan, TWED_RESULT_APPLIED);
      break;
    }
}

/* A pass over one host when a timer of one of the engine's tables
 * (retry, debounce) fires. */
typedef struct {
  TwedEngine *engine;
  GHashTable *table;
  char *host;
  gboolean from_event;
} HostTimer;

static void
host_timer_free (gpointer p)
{
  HostTimer *t = p;

  g_free (t->host);
  g_free (t);
}

static gboolean
on_host_timer (gpointer data)
{
  HostTimer *t = data;
  TwedEngine *e = t->engine;
  g_autofree char *host = g_strdup (t->host);
  gboolean from_event = t->from_event;

  /* Removing the entry destroys this source (and frees @t). */
  g_hash_table_remove (t->table, host);
  request_pass (e, host, from_event);
  return G_SOURCE_REMOVE;
}

/* A pass over @host in @ms, kept in @table under its name (replacing
 * what was there). */
static void
schedule_host (TwedEngine *e, GHashTable *table, const char *host, guint ms, gboolean from_event)
{
  HostTimer *t = g_new0 (HostTimer, 1);

  t->engine = e;
  t->table = table;
  t->host = g_strdup (host);
  t->from_event = from_event;
  g_hash_table_insert (table, g_strdup (host), attach_timeout (e, ms, on_host_timer, t, host_timer_free));
}

/* After a pass: a host that could not be read is tried again on its own
 * backoff, whatever the interval and whether or not events come (none
 * come from a lost host); so is one with definitions to read again once
 * a job lets them be.  The backend says when. */
static void
schedule_followups (TwedEngine *e, GPtrArray *inventory)
{
  for (guint i = 0; i < inventory->len; i++)
    {
      const TwedHost *h = g_ptr_array_index (inventory, i);
      gint64 ms;

      if (!h->retry_at)
        {
          g_hash_table_remove (e->retry, h->name);
          continue;
        }
      /* Rounded up: a timer that fires early would find the backoff
       * still running and cost a pass for nothing. */
      ms = (MAX (h->retry_at - g_get_monotonic_time (), 0) + 999) / 1000;
      schedule_host (e, e->retry, h->name, (guint) MIN (ms, (gint64) G_MAXUINT), FALSE);
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

/* What an auto decision says apart from its figures: the action, the
 * decision, both settings and the reason without its numbers, so that a
 * VM holding for the same reason window after window reads the same. */
static char *
auto_log_class (const TwedPlanEntry *en)
{
  g_autofree char *cur = twed_setting_to_string (&en->current);
  g_autofree char *to = twed_setting_to_string (&en->target);
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "%s %s %s %s ", twed_action_to_string (en->action),
                          twed_auto_decision_to_string (en->auto_decision), cur, to);
  for (const char *c = en->reason ? en->reason : ""; *c; c++)
    if (!g_ascii_isdigit (*c) && !strchr (".+-", *c))
      g_string_append_c (s, *c);
  return g_string_free (s, FALSE);
}

/* Why an auto VM was left as it is: only its changes reach the info
 * log, and a controller that settled (or holds on a figure) would
 * otherwise not say why it stopped moving.  Once per VM and reason
 * (not per pass: a fleet's worth of lines a pass would crowd the
 * journal's rate limit, and with it the changes' records), and only
 * for decisions that are not only waiting (judged windows, fallbacks,
 * settings outside the bounds), not for the passes that wait out a
 * dwell or a step not in force yet. */
static void
log_auto_kept (TwedEngine *e, const char *host, const TwedPlan *plan)
{
  GHashTable *was, *now;

  if (!twed_log_enabled (G_LOG_LEVEL_DEBUG))
    {
      g_hash_table_remove_all (e->auto_logged);
      return;
    }
  was = g_hash_table_lookup (e->auto_logged, host);
  now = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *en = g_ptr_array_index (plan->entries, i);
      const char *key = en->uuid ? en->uuid : en->domain;
      const char *last = was ? g_hash_table_lookup (was, key) : NULL;
      g_autofree char *cls = NULL;
      g_autofree char *cur = NULL;

      if (!en->is_auto)
        continue;
      if (en->auto_waiting)
        {
          /* Keeps what was last logged for it. */
          if (last)
            g_hash_table_replace (now, g_strdup (key), g_strdup (last));
          continue;
        }
      cls = auto_log_class (en);
      if ((en->action == TWED_ACTION_KEEP || en->action == TWED_ACTION_DEFER) && g_strcmp0 (cls, last) != 0)
        {
          cur = twed_setting_to_string (&en->current);
          twed_log_auto (en->host, en->domain, twed_auto_decision_to_string (en->auto_decision),
                         "TWED %s %s: auto %s (%s)", cur, en->action == TWED_ACTION_KEEP ? "kept" : "deferred",
                         twed_auto_decision_to_string (en->auto_decision), en->reason);
        }
      g_hash_table_replace (now, g_strdup (key), g_steal_pointer (&cls));
    }
  g_hash_table_replace (e->auto_logged, g_strdup (host), now);
}

/* Passes that were wanted while their hosts were busy, now. */
static void
run_wanted (TwedEngine *e)
{
  GHashTableIter it;
  gpointer key, value;

  size_pool (e);
  g_hash_table_iter_init (&it, e->wanted);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      g_autofree char *host = NULL;

      if (g_hash_table_contains (e->busy, key))
        continue;
      /* Starting it touches busy and retry, not this table. */
      host = key;
      g_hash_table_iter_steal (&it);
      start_pass (e, host, GPOINTER_TO_INT (value));
    }
}

/* A pass started with what is no longer in force: a reload of the
 * configuration (hosts, dry_run, limits) or of the policies came since. */
static gboolean
pass_superseded (TwedEngine *e, const PassJob *job)
{
  return job->generation != g_atomic_int_get (&e->link->generation);
}

/* What runs now was started with what is no longer in force. */
static void
supersede (TwedEngine *e)
{
  g_atomic_int_inc (&e->link->generation);
}

static void
finish_pass (TwedEngine *e, PassJob *job)
{
  gboolean ours = g_hash_table_lookup (e->busy, job->host) == job;

  if (ours)
    g_hash_table_remove (e->busy, job->host);
  if (job->stage == PASS_READ && pass_superseded (e, job))
    {
      /* Its auto steps were decided and never asked for. */
      if (job->plan)
        twed_plan_report_auto (job->plan, job->controller, TRUE);
      /* Nothing of it is used; a pass with what is in force follows. */
      twed_log_host (G_LOG_LEVEL_DEBUG, job->host, "pass dropped: the configuration or policies changed");
      if (ours && g_hash_table_contains (e->configured, job->host))
        g_hash_table_insert (e->wanted, g_strdup (job->host), GINT_TO_POINTER (job->from_event));
      run_wanted (e);
      return;
    }
  e->counters.cycles++;
  e->last_pass_end = g_get_monotonic_time ();
  e->counters.cycle_seconds = (double) (g_get_monotonic_time () - job->start) / G_USEC_PER_SEC;
  if (job->from_event)
    e->event_cycles++;
  if (!job->plan)
    g_warning ("no valid policy loaded yet: planning skipped, nothing applied");
  else
    {
      /* Before the changes made count as kept below. */
      twed_plan_report_auto (job->plan, job->controller, job->skipped);
      e->counters.changes_failed += job->failed;
      e->counters.changes_applied += job->applied;
      if (job->changes && (job->dry_run || !twed_domain_params_available ()))
        log_would_change (job->plan);
      log_auto_kept (e, job->host, job->plan);
      twed_log_host (G_LOG_LEVEL_INFO, job->host, "cycle %" G_GUINT64_FORMAT ": %u VM(s), %u change(s), %u deferred, %s",
                     e->counters.cycles, job->plan->entries->len, job->changes,
                     twed_plan_count (job->plan, TWED_ACTION_DEFER),
                     twed_plan_unreachable (job->plan) ? "unreachable" : "reachable");
      if (!twed_plan_unreachable (job->plan))
        {
          e->last_success = e->last_pass_end;
          e->counters.last_success_at = g_get_real_time () / G_USEC_PER_SEC;
        }
      /* What was applied is in force now: the daemon's own tunable
       * events no longer prompt a pass that would read it back. */
      for (guint i = 0; job->applied && i < job->plan->entries->len; i++)
        {
          TwedPlanEntry *en = g_ptr_array_index (job->plan->entries, i);

          /* ...and counts as kept, not as a change still pending
           * (STATUS=, twed_vms{action}). */
          if (en->result == TWED_RESULT_APPLIED)
            {
              en->current = en->target;
              en->action = TWED_ACTION_KEEP;
            }
        }
      /* A host removed meanwhile has left the plan for good. */
      if (g_hash_table_contains (e->configured, job->host))
        twed_plan_store_replace (e->plans, job->host, g_steal_pointer (&job->plan));
    }
  twed_backend_counters (e->backend, &e->counters.libvirt_reads, &e->counters.libvirt_writes);
  if (g_hash_table_contains (e->configured, job->host))
    schedule_followups (e, job->inventory);
  render_soon (e);
  run_wanted (e);
}

/* The apply stage of a pass whose grant is recorded. */
static void
start_apply (TwedEngine *e, PassJob *job)
{
  if (e->inline_stages)
    {
      run_pass_stage (job);
      on_pass_stage_done (job);
    }
  else
    g_thread_pool_push (e->pool, job, NULL);
}

/* A granted pass that applies nothing: what it was granted goes back. */
static void
skip_apply (PassJob *job, const char *why)
{
  job->skipped = TRUE;
  job->skip_why = why;
  on_pass_stage_done (job);
}

/* After its grant: the pass applies what it was granted once the grant
 * is on disk (@saved: the state write that records it has landed, or
 * none is kept; @save_failed: it could not be written), or ends. */
static void
after_grant (TwedEngine *e, PassJob *job, gboolean saved, gboolean save_failed)
{
  job->changes = twed_plan_count (job->plan, TWED_ACTION_CHANGE);
  if (job->changes)
    {
      twed_log_host (G_LOG_LEVEL_INFO, job->host, "%u change(s) granted from the interval's budget",
                     job->changes);
      job->stage = PASS_APPLY;
      if (save_failed)
        skip_apply (job, "the grant could not be recorded in the state file");
      else if (saved)
        start_apply (e, job);
      else
        {
          /* A restart must find the grant spent before any change is
           * made: the change waits for its record, not the reverse. */
          job->save_seq = e->records_seq;
          job->saving_since = g_get_monotonic_time ();
          g_ptr_array_add (e->saving, job);
        }
      return;
    }
  g_hash_table_remove (e->running, job);
  finish_pass (e, job);
  pass_job_free (job);
}

/* The passes waiting for their grant get it together: the interval's
 * budget goes to the most overcommitted VMs of all of them, not to the
 * host whose pass happened to finish reading first. */
static void
grant_waiting (TwedEngine *e)
{
  g_autoptr(GPtrArray) jobs = g_steal_pointer (&e->waiting);
  g_autoptr(GPtrArray) plans = g_ptr_array_new ();

  e->waiting = g_ptr_array_new ();
  g_clear_pointer (&e->grant_timer, destroy_source);
  for (guint i = 0; i < jobs->len; i++)
    {
      PassJob *job = g_ptr_array_index (jobs, i);

      /* Passes started with what is still in force share one policy set. */
      if (!pass_superseded (e, job))
        g_ptr_array_add (plans, job->plan);
    }
  gboolean saved = TRUE, save_failed = FALSE;

  if (plans->len && e->policies)
    {
      /* Passes read concurrently each saw the VM free: a VM listed on
       * two hosts (mid-migration) would be changed twice, and counted
       * twice against the budget, within min_change_interval. */
      twed_backend_hold_granted (e->backend, (TwedPlan *const *) plans->pdata, plans->len);
      twed_plans_apply_budget ((TwedPlan **) plans->pdata, plans->len, e->policies, e->budget);
      /* The VMs granted a change count as changed from now on, for
       * min_change_interval, until the change is made or refunded. */
      for (guint i = 0; i < jobs->len; i++)
        {
          PassJob *job = g_ptr_array_index (jobs, i);
          g_autoptr(GPtrArray) granted = g_ptr_array_new ();

          for (guint j = 0; !pass_superseded (e, job) && j < job->plan->entries->len; j++)
            {
              TwedPlanEntry *en = g_ptr_array_index (job->plan->entries, j);

              if (en->action != TWED_ACTION_CHANGE)
                continue;
              if (!twed_backend_grant (job->backend, en))
                g_warn_if_reached ();
              g_ptr_array_add (granted, en);
            }
          if (granted->len)
            state_record (e, job->backend, (TwedPlanEntry *const *) granted->pdata, granted->len, FALSE);
        }
      /* Before anything is applied: a restart must find it spent.  A
       * batch that granted nothing writes nothing. */
      if (e->state_log && e->state_records->len)
        {
          if (e->inline_stages)
            save_failed = !state_flush (e, TRUE);
          else
            {
              state_flush (e, FALSE);
              saved = FALSE;
            }
        }
    }
  for (guint i = 0; i < jobs->len; i++)
    {
      PassJob *job = g_ptr_array_index (jobs, i);

      if (pass_superseded (e, job))
        {
          g_hash_table_remove (e->running, job);
          finish_pass (e, job);
          pass_job_free (job);
        }
      else
        after_grant (e, job, saved, save_failed);
    }
}

/* Main context: the state write @seq landed (or failed): the passes
 * whose grant it records apply now (or not at all). */
static gboolean
on_state_saved (gpointer data)
{
  StateSaved *saved = data;
  TwedEngine *e = saved->link->engine;
  g_autoptr(GPtrArray) due = NULL;

  if (!e)
    return G_SOURCE_REMOVE;
  if (saved->state_bytes)
    e->state_bytes = saved->state_bytes;
  /* The controller's bars it carried are saved again with the next
   * records. */
  if (!saved->ok)
    twed_auto_bars_unsaved (e->controller);
  due = g_ptr_array_new ();
  for (guint i = 0; i < e->saving->len;)
    {
      PassJob *job = g_ptr_array_index (e->saving, i);

      if (job->save_seq <= saved->seq)
        {
          g_ptr_array_add (due, job);
          g_ptr_array_remove_index (e->saving, i);
        }
      else
        i++;
    }
  for (guint i = 0; i < due->len; i++)
    {
      PassJob *job = g_ptr_array_index (due, i);

      if (saved->ok)
        start_apply (e, job);
      else
        skip_apply (job, "the grant could not be recorded in the state file");
    }
  return G_SOURCE_REMOVE;
}

static gboolean
on_grant_due (gpointer data)
{
  grant_waiting (data);
  return G_SOURCE_REMOVE;
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
  if (job->stage == PASS_READ)
    {
      gboolean recorded = state_record_forgotten (e);

      e->reading--;
      if (state_record_bars (e, job->host))
        recorded = TRUE;
      if (recorded)
        state_changed (e);
    }
  if (job->stage == PASS_READ && job->plan && !pass_superseded (e, job) &&
      !job->dry_run && twed_domain_params_available () &&
      twed_plan_count (job->plan, TWED_ACTION_CHANGE))
    {
      /* The interval's budget is shared by every host's passes; what is
       * only logged (dry run, no API) spends none of it.  Passes still
       * reading get a moment to join (GRANT_WAIT_MS at most: a host that
       * hangs must not hold the others' changes). */
      g_ptr_array_add (e->waiting, job);
      if (!e->grant_timer)
        e->grant_timer = attach_timeout (e, GRANT_WAIT_MS, on_grant_due, e, NULL);
      if (e->reading == 0)
        grant_waiting (e);
      return G_SOURCE_REMOVE;
    }
  if (job->stage == PASS_READ && job->plan)
    job->changes = twed_plan_count (job->plan, TWED_ACTION_CHANGE);
  else if (job->stage == PASS_APPLY && job->plan)
    {
      g_autoptr(GPtrArray) tried = g_ptr_array_new ();

      /* A change that was not made takes nothing from the budget. */
      for (guint i = 0; i < job->plan->entries->len; i++)
        {
          TwedPlanEntry *en = g_ptr_array_index (job->plan->entries, i);

          if (en->action != TWED_ACTION_CHANGE)
            continue;
          if (en->result == TWED_RESULT_FAILED || job->skipped)
            {
              twed_budget_refund (e->budget, en);
              twed_backend_ungrant (job->backend, en);
            }
          g_ptr_array_add (tried, en);
        }
      /* When the changes were made, the failures and the refunds. */
      if (tried->len)
        {
          state_record (e, job->backend, (TwedPlanEntry *const *) tried->pdata, tried->len, TRUE);
          state_changed (e);
        }
    }
  if (job->skipped)
    twed_log_host (G_LOG_LEVEL_INFO, job->host, "granted change(s) not applied: %s", job->skip_why);
  g_hash_table_remove (e->running, job);
  finish_pass (e, job);
  pass_job_free (job);
  /* This pass was the last one reading: the waiting ones need not wait. */
  if (e->reading == 0 && e->waiting->len)
    grant_waiting (e);
  return G_SOURCE_REMOVE;
}

/* Applying first: a granted change waiting behind a round of reads
 * would go out long after its grant (and its budget's interval); then
 * in the order passes were started. */
static gint
pass_order (gconstpointer a, gconstpointer b, gpointer data G_GNUC_UNUSED)
{
  const PassJob *x = a, *y = b;

  if (x->stage != y->stage)
    return x->stage == PASS_APPLY ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* In the pool: a stage, then back to the main context. */
static void
pass_thread (gpointer data, gpointer user_data G_GNUC_UNUSED)
{
  PassJob *job = data;
  GSource *src;

  if (job->stage == PASS_APPLY)
    {
      gboolean back;

      /* Either this worker makes the changes, or the engine's end took
       * their grant back: never both, never neither. */
      g_mutex_lock (&job->link->claim_lock);
      back = job->taken_back;
      job->applying = !back;
      g_mutex_unlock (&job->link->claim_lock);
      if (back)
        {
          pass_job_free (job);
          return;
        }
    }
  /* A claimed apply is made even when the engine ends meanwhile: its
   * grant was not given back. */
  else if (g_atomic_int_get (&job->link->gone))
    {
      pass_job_free (job);
      return;
    }
  src = g_idle_source_new ();
  __atomic_store_n (&job->running_since, g_get_monotonic_time (), __ATOMIC_RELEASE);
  run_pass_stage (job);
  __atomic_store_n (&job->running_since, 0, __ATOMIC_RELEASE);
  g_source_set_callback (src, on_pass_stage_done, job, NULL);
  g_source_attach (src, job->link->context);
  g_source_unref (src);
}

guint
twed_engine_extra_workers (guint threads, const gint64 *running_since, guint n, gint64 now)
{
  gint64 stuck_before = now - (gint64) STUCK_AFTER_S * G_USEC_PER_SEC;
  guint stuck = 0;

  for (guint i = 0; i < n; i++)
    stuck += running_since[i] && running_since[i] < stuck_before;
  return MIN (stuck, MAX (threads, 1u) * EXTRA_WORKERS_FACTOR);
}

static const char *
stage_name (PassStage stage)
{
  return stage == PASS_APPLY ? "apply" : "read";
}

/* Passes that wait on a host for long do not count against [twed]
 * threads: more workers (up to a cap), so that the other hosts still get
 * theirs.  A pass that has hung for long is reported: its host shows
 * down, the pass as stuck, until it ends. */
static void
size_pool (TwedEngine *e)
{
  gint64 now = g_get_monotonic_time ();
  /* A pass inside a worker this long is reported: its host is shown
   * down and the pass as stuck. */
  gint64 hung_after = (gint64) MAX (2 * e->config->interval, e->config->hung_pass_after) * G_USEC_PER_SEC;
  g_autoptr(GArray) since = g_array_sized_new (FALSE, FALSE, sizeof (gint64), g_hash_table_size (e->running));
  GHashTableIter it;
  gpointer value;
  guint hung = 0, saves_hung = 0, extra;
  gboolean newly_hung = FALSE;

  /* Passes of a replaced backend too: they hold workers all the same. */
  g_hash_table_iter_init (&it, e->running);
  while (g_hash_table_iter_next (&it, &value, NULL))
    {
      PassJob *job = value;
      gint64 rs = __atomic_load_n (&job->running_since, __ATOMIC_ACQUIRE);

      g_array_append_val (since, rs);
      if (!rs)
        continue;
      if (now - rs > (gint64) STUCK_AFTER_S * G_USEC_PER_SEC && !job->stuck_logged)
        {
          job->stuck_logged = TRUE;
          twed_log_host (G_LOG_LEVEL_MESSAGE, job->host,
                         "pass waiting on the host for more than %d s (%s stage): its worker is not counted against threads",
                         STUCK_AFTER_S, stage_name (job->stage));
        }
      if (now - rs > hung_after)
        {
          hung++;
          if (!job->hung_reported)
            {
              g_autofree char *why = g_strdup_printf ("pass hung in its %s stage for more than %" G_GINT64_FORMAT " s",
                                                      stage_name (job->stage), hung_after / G_USEC_PER_SEC);

              job->hung_reported = TRUE;
              twed_log_host (G_LOG_LEVEL_WARNING, job->host, "%s: a libvirt call does not return", why);
              twed_plan_store_mark_down (e->plans, job->host, why);
              newly_hung = TRUE;
            }
        }
    }
  /* A grant waits for its state write, which a hung disk (a dead NFS
   * mount) never ends: the pass is as stuck as one in libvirt, and every
   * change waits behind that write. */
  for (guint i = 0; i < e->saving->len; i++)
    {
      PassJob *job = g_ptr_array_index (e->saving, i);

      if (now - job->saving_since <= hung_after)
        continue;
      hung++;
      saves_hung++;
      if (!job->hung_reported)
        {
          g_autofree char *why = g_strdup_printf ("pass waiting for more than %" G_GINT64_FORMAT
                                                  " s for the state write that records its grant",
                                                  hung_after / G_USEC_PER_SEC);

          job->hung_reported = TRUE;
          twed_log_host (G_LOG_LEVEL_WARNING, job->host, "%s: writing %s does not return", why, e->state_log);
          twed_plan_store_mark_down (e->plans, job->host, why);
          newly_hung = TRUE;
        }
    }
  /* Rendered with the count as it is now, whichever way it moved. */
  if (newly_hung || hung != e->counters.passes_stuck || saves_hung != e->saves_hung)
    {
      e->counters.passes_stuck = hung;
      e->saves_hung = saves_hung;
      render_soon (e);
    }
  extra = twed_engine_extra_workers (e->config->threads, (const gint64 *) since->data, since->len, now);
  g_thread_pool_set_max_threads (e->pool, (int) (MAX (e->config->threads, 1u) + extra), NULL);
}

/* Stuck passes are found whether or not anything else happens. */
static gboolean
on_stuck_check (gpointer data)
{
  size_pool (data);
  return G_SOURCE_CONTINUE;
}

static PassJob *
new_pass (TwedEngine *e, const char *host, gboolean from_event)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  PassJob *job = g_new0 (PassJob, 1);

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
  job->generation = g_atomic_int_get (&e->link->generation);
  job->seq = e->seq++;
  job->generated = g_date_time_format_iso8601 (now);
  job->start = g_get_monotonic_time ();
  job->controller = twed_auto_ref (e->controller);
  g_hash_table_insert (e->busy, g_strdup (host), job);
  g_hash_table_add (e->running, job);
  e->reading++;
  return job;
}

static void
start_pass (TwedEngine *e, const char *host, gboolean from_event)
{
  g_thread_pool_push (e->pool, new_pass (e, host, from_event), NULL);
}

void
twed_engine_run_pass_inline (TwedEngine *e, const char *host, GPtrArray *inventory)
{
  PassJob *job = new_pass (e, host, TRUE);
  TwedPlanOptions po = { job->generated, 0, job->controller };

  /* What the read stage would have found and planned. */
  job->inventory = inventory;
  if (job->policies)
    job->plan = twed_plan_build (inventory, job->policies, &po);
  e->inline_stages = TRUE;
  on_pass_stage_done (job);
  e->inline_stages = FALSE;
}

gsize
twed_engine_render_now (TwedEngine *e)
{
  render_metrics (e);
  return e->metrics_text->len;
}

/* A pass over @host, or over every host when NULL; a host whose pass
 * still runs gets the next one when it ends. */
static void
request_pass (TwedEngine *e, const char *host, gboolean from_event)
{
  size_pool (e);
  for (guint i = 0; i < e->config->hosts->len; i++)
    {
      const TwedHostSpec *spec = g_ptr_array_index (e->config->hosts, i);

      if (host && !g_str_equal (host, spec->name))
        continue;
      if (g_hash_table_contains (e->busy, spec->name))
        {
          gboolean ev = GPOINTER_TO_INT (g_hash_table_lookup (e->wanted, spec->name)) || from_event;

          g_hash_table_insert (e->wanted, g_strdup (spec->name), GINT_TO_POINTER (ev));
        }
      else
        start_pass (e, spec->name, from_event);
    }
}

static void
new_budget (TwedEngine *e)
{
  twed_budget_free (e->budget);
  e->budget = twed_budget_new (e->config->max_changes);
}

static void arm_cycle_timer (TwedEngine *e);

static gboolean
on_cycle_timer (gpointer data)
{
  TwedEngine *e = data;

  /* A new interval: a new budget, and what was deferred gets its turn. */
  g_clear_pointer (&e->cycle_timer, destroy_source);
  e->interval_started = g_get_monotonic_time ();
  e->interval_real = g_get_real_time ();
  arm_cycle_timer (e);
  new_budget (e);
  g_info ("interval starts: budget renewed");
  /* Whatever the persistence: without a state file nothing else would
   * ever drop the VMs min_change_interval no longer holds. */
  twed_backend_prune_changes (e->backend);
  /* A restart now finds the new interval, with nothing granted. */
  state_record (e, e->backend, NULL, 0, FALSE);
  state_flush (e, FALSE);
  /* The watch is the way policy changes come; should one have been
   * missed (a watch lost with its directory's mount), the interval
   * reads them still. */
  if (policy_dir_stamp (e->config->policy_dir) != e->dir_stamp)
    twed_engine_reload_policies (e);
  request_pass (e, NULL, FALSE);
  return G_SOURCE_REMOVE;
}

static gboolean
on_first_pass (gpointer data)
{
  TwedEngine *e = data;

  g_clear_pointer (&e->first_pass, destroy_source);
  request_pass (e, NULL, FALSE);
  return G_SOURCE_REMOVE;
}

typedef struct {
  EngineLink *link;
  TwedBackend *source;          /* identity only */
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
  twed_plan_store_mark_down (e->plans, host, "connection lost, reconnecting");
  render_soon (e);
}

/* Main context: schedule a pass over the host the event came from. */
static gboolean
on_event_main (gpointer data)
{
  EventNotice *n = data;
  TwedEngine *e = n->link->engine;

  /* A notice from a backend a reload replaced, or from a host it
   * removed, says nothing of now. */
  if (!e || n->source != e->backend || !g_hash_table_contains (e->configured, n->host))
    return G_SOURCE_REMOVE;
  if (n->lost)
    mark_host_down (e, n->host);
  if (!g_hash_table_contains (e->debounce, n->host))
    schedule_host (e, e->debounce, n->host, EVENT_DEBOUNCE_MS, TRUE);
  return G_SOURCE_REMOVE;
}

/* Whichever thread libvirt dispatches on: always hand over through a
 * source, never call into the engine here. */
static void
on_backend_event (TwedBackend *source, const char *host, const char *domain G_GNUC_UNUSED,
                  const char *what, gpointer data)
{
  EngineLink *link = data;
  EventNotice *n = g_new0 (EventNotice, 1);
  GSource *src = g_idle_source_new ();

  n->link = g_atomic_rc_box_acquire (link);
  n->source = source;
  n->host = g_strdup (host);
  n->lost = g_str_equal (what, "lost");
  g_source_set_callback (src, on_event_main, n, event_notice_free);
  g_source_attach (src, link->context);
  g_source_unref (src);
}

/* Modification times of the policy directory and of its "..data" link
 * (a ConfigMap update): what a lost watch would have reported. */
static gint64
policy_dir_stamp (const char *dir)
{
  g_autofree char *data = g_build_filename (dir, "..data", NULL);
  GStatBuf st;
  gint64 stamp = 0;

  if (g_stat (dir, &st) == 0)
    stamp = (gint64) st.st_mtim.tv_sec * G_USEC_PER_SEC + st.st_mtim.tv_nsec / 1000;
  if (g_lstat (data, &st) == 0)
    stamp ^= (gint64) st.st_mtim.tv_sec * G_USEC_PER_SEC + st.st_mtim.tv_nsec / 1000 + 1;
  return stamp;
}

gboolean
twed_engine_reload_policies (TwedEngine *e)
{
  g_autoptr(GError) error = NULL;
  TwedPolicySet *set;

  e->dir_stamp = policy_dir_stamp (e->config->policy_dir);
  set = twed_policy_dir_load (e->config->policy_dir, e->config->allow_builtin_default, &error);

  if (!set)
    {
      e->counters.policy_errors++;
      e->counters.policy_ok = FALSE;
      g_warning ("policy rejected, %s: %s", e->policies ? "keeping the last good set" : "no good set yet",
                 error->message);
      render_soon (e);
      return FALSE;
    }
  g_clear_pointer (&e->policies, twed_policy_set_unref);
  e->policies = set;
  supersede (e);
  e->counters.policy_ok = TRUE;
  e->counters.policy_loaded_at = g_get_real_time () / G_USEC_PER_SEC;
  g_message ("policy loaded from %s: %u document(s)", e->config->policy_dir, set->policies->len);
  render_soon (e);
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

/* Policy files, and the "..data" symlink a Kubernetes ConfigMap volume
 * swaps to update all its files at once. */
static gboolean
watched_name (GFile *file)
{
  g_autofree char *name = file ? g_file_get_basename (file) : NULL;

  return name && ((g_str_has_suffix (name, ".json") && name[0] != '.') || g_str_equal (name, "..data"));
}

static void
on_policy_dir_changed (GFileMonitor *m G_GNUC_UNUSED, GFile *file, GFile *other,
                       GFileMonitorEvent ev, gpointer data)
{
  TwedEngine *e = data;

  /* The directory itself went (rm -r, renamed away, unmounted): the
   * watch ends with it.  Whatever is at the path next is another
   * directory, even one with the same inode number (ext4 hands a freed
   * one out again at once), and on_dir_check watches it again. */
  if (ev == G_FILE_MONITOR_EVENT_DELETED || ev == G_FILE_MONITOR_EVENT_MOVED_OUT ||
      ev == G_FILE_MONITOR_EVENT_RENAMED || ev == G_FILE_MONITOR_EVENT_UNMOUNTED)
    {
      g_autoptr(GFile) dir = g_file_new_for_path (e->config->policy_dir);

      if (file && g_file_equal (file, dir))
        {
          g_debug ("policy directory %s itself went (event %d)", e->config->policy_dir, ev);
          e->dir_known = FALSE;
        }
    }
  /* A rename names the new name in @other (..data_tmp -> ..data). */
  if (!watched_name (file) && !watched_name (other))
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
    .connect_timeout = c->connect_timeout,
    .min_change_interval = c->min_change_interval,
    .definition_max_age = c->definition_max_age,
  };
}

static void
set_configured (TwedEngine *e)
{
  g_hash_table_remove_all (e->configured);
  for (guint i = 0; i < e->config->hosts->len; i++)
    g_hash_table_add (e->configured, g_strdup (((TwedHostSpec *) g_ptr_array_index (e->config->hosts, i))->name));
}

static void
setup_backend (TwedEngine *e)
{
  TwedBackendOptions bo;

  backend_options (e->config, &bo);
  e->backend = twed_backend_new (e->config->hosts, &bo);
  twed_backend_set_event_func (e->backend, on_backend_event, g_atomic_rc_box_acquire (e->link),
                               (GDestroyNotify) link_unref);
}

static gboolean
configured (const char *host, gpointer data)
{
  return g_hash_table_contains (data, host);
}

/* Hosts no longer configured leave the plan, the metrics, every
 * schedule and the controller. */
static void
forget_removed_hosts (TwedEngine *e)
{
  GHashTable *tables[] = { e->retry, e->debounce, e->wanted, e->auto_logged };

  for (guint t = 0; t < G_N_ELEMENTS (tables); t++)
    {
      GHashTableIter it;
      gpointer key;

      g_hash_table_iter_init (&it, tables[t]);
      while (g_hash_table_iter_next (&it, &key, NULL))
        if (!configured (key, e->configured))
          g_hash_table_iter_remove (&it);
    }
  twed_plan_store_retain (e->plans, configured, e->configured);
  {
    g_autofree const char **hosts = (const char **) g_hash_table_get_keys_as_array (e->configured, NULL);

    twed_auto_retain_hosts (e->controller, hosts);
  }
}

static void
setup_monitor (TwedEngine *e)
{
  g_autoptr(GFile) dir = g_file_new_for_path (e->config->policy_dir);
  g_autoptr(GError) error = NULL;
  GStatBuf st;

  g_clear_object (&e->monitor);
  e->dir_known = g_stat (e->config->policy_dir, &st) == 0;
  if (e->dir_known)
    {
      e->dir_dev = st.st_dev;
      e->dir_ino = st.st_ino;
    }
  e->monitor = g_file_monitor_directory (dir, G_FILE_MONITOR_WATCH_MOVES, NULL, &error);
  if (!e->monitor)
    {
      g_warning ("cannot watch %s (%s): policy changes need SIGHUP", e->config->policy_dir, error->message);
      return;
    }
  g_signal_connect (e->monitor, "changed", G_CALLBACK (on_policy_dir_changed), e);
}

/* A watch ends with the directory it watched: one created again at the
 * same path (rm -r and mkdir, a volume mounted again) gets a new watch,
 * and its policies are read. */
static gboolean
on_dir_check (gpointer data)
{
  TwedEngine *e = data;
  GStatBuf st;

  /* A stat in the main loop: it blocks while the policy directory's file
   * system does not answer (a hung network mount), and the keepalives
   * with it.  Policy directories are local (a ConfigMap volume is a
   * tmpfs, /etc/twed a local disk); one on a network mount would need
   * this check moved off the main loop. */
  if (g_stat (e->config->policy_dir, &st) != 0)
    {
      e->dir_known = FALSE;
      return G_SOURCE_CONTINUE;
    }
  /* Another directory (a mount), or one seen gone since: a new inode
   * may well carry the old number. */
  if (e->dir_known && st.st_dev == e->dir_dev && st.st_ino == e->dir_ino)
    return G_SOURCE_CONTINUE;
  g_message ("policy directory %s (re)appeared: watching it again", e->config->policy_dir);
  setup_monitor (e);
  g_clear_pointer (&e->policy_timer, destroy_source);
  e->policy_timer = attach_timeout (e, POLICY_DEBOUNCE_MS, on_policy_debounced, e, NULL);
  return G_SOURCE_CONTINUE;
}

/* The next interval starts one interval after this one began: the
 * phase holds across reloads, and a reload that changes the interval
 * moves only where the current one ends (at once if already past). */
static void
arm_cycle_timer (TwedEngine *e)
{
  gint64 end = e->interval_started + (gint64) e->config->interval * G_USEC_PER_SEC;
  gint64 ms = MAX (end - g_get_monotonic_time (), 0) / 1000;

  g_clear_pointer (&e->cycle_timer, destroy_source);
  e->cycle_timer = attach_timeout (e, (guint) MIN (ms, (gint64) G_MAXUINT), on_cycle_timer, e, NULL);
}

static void
schedule_first_pass (TwedEngine *e)
{
  g_clear_pointer (&e->first_pass, destroy_source);
  e->first_pass = g_idle_source_new ();
  g_source_set_callback (e->first_pass, on_first_pass, e, NULL);
  g_source_attach (e->first_pass, e->context);
}

gboolean
twed_engine_start (TwedEngine *e, GError **error)
{
  /* The directory must exist and hold policies (its documents may
   * still be wrong: then nothing is applied until they are fixed). */
  if (!twed_policy_dir_check (e->config->policy_dir, e->config->allow_builtin_default, error))
    return FALSE;
  if (e->config->metrics_listen &&
      !(e->metrics_server = twed_metrics_server_new (e->config->metrics_listen, error)))
    return FALSE;
  if (e->metrics_server)
    twed_metrics_server_set_health (e->metrics_server, health_func, e);
  if (!twed_domain_params_available () && !e->dry_run)
    g_warning ("plan only: %s", TWED_API_MISSING_MESSAGE);
  twed_engine_reload_policies (e);
  setup_monitor (e);
  e->interval_started = g_get_monotonic_time ();
  e->interval_real = g_get_real_time ();
  load_state (e);
  arm_cycle_timer (e);
  e->stuck_timer = attach_timeout (e, STUCK_AFTER_S * 1000 / 3, on_stuck_check, e, NULL);
  e->dir_check = attach_timeout (e, POLICY_DIR_CHECK_MS, on_dir_check, e, NULL);
  schedule_first_pass (e);
  e->started_ok = TRUE;
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
      if (server)
        twed_metrics_server_set_health (server, health_func, e);
    }
  {
    TwedBackendOptions bo;
    guint old_interval = e->config->interval, old_cap = e->config->max_changes;
    g_autofree char *old_state_dir = g_strdup (e->config->state_dir);

    twed_config_free (e->config);
    e->config = config;
    e->dry_run = e->dry_run_option || config->dry_run;
    twed_auto_set_dry_run (e->controller, e->dry_run || !twed_domain_params_available ());
    set_configured (e);
    supersede (e);
    /* A new state directory is written from now on, whole (nothing is
     * read from it: this process's own state is the newer). */
    if (g_strcmp0 (config->state_dir, old_state_dir) != 0)
      {
        set_state_dir (e, config->state_dir);
        if (config->state_dir && g_mkdir_with_parents (config->state_dir, 0700) < 0)
          g_warning ("state directory %s: %s", config->state_dir, g_strerror (errno));
        save_state (e, FALSE);
      }
    /* Unchanged hosts keep their connections, cached definitions and
     * the history of their VMs; options apply at their next use. */
    backend_options (config, &bo);
    twed_backend_reconfigure (e->backend, config->hosts, &bo);
    if (state_record_forgotten (e))
      state_changed (e);
    forget_removed_hosts (e);
    setup_monitor (e);
    /* The interval and its budget go on: a reload is no new interval,
     * or reloads would let the limits out faster than they say. */
    if (config->interval != old_interval)
      arm_cycle_timer (e);
    if (config->max_changes != old_cap)
      twed_budget_set_cap (e->budget, config->max_changes);
  }
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
  g_mutex_init (&e->link->claim_lock);
  e->running = g_hash_table_new (NULL, NULL);
  e->busy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->wanted = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->debounce = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, destroy_source);
  e->retry = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, destroy_source);
  e->plans = twed_plan_store_new ();
  e->configured = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  e->auto_logged = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) g_hash_table_unref);
  set_configured (e);
  e->waiting = g_ptr_array_new ();
  e->saving = g_ptr_array_new ();
  e->metrics_text = g_string_new (NULL);
  e->started = g_get_monotonic_time ();
  e->budget = twed_budget_new (config->max_changes);
  e->controller = twed_auto_new ();
  /* Changes that are not made (a dry run, a libvirt without the twed
   * API) are not awaited by the controller. */
  twed_auto_set_dry_run (e->controller, e->dry_run || !twed_domain_params_available ());
  /* No item free function: GThreadPool hands the markers it queues to
   * stop its threads to it as well when it ends with items still queued
   * (g_thread_pool_free, immediate).  Queued passes free themselves
   * instead, once the engine is gone. */
  e->pool = g_thread_pool_new (pass_thread, NULL, (int) MAX (config->threads, 1u), FALSE, NULL);
  g_thread_pool_set_sort_function (e->pool, pass_order, NULL);
  set_state_dir (e, config->state_dir);
  e->state_records = g_string_new (NULL);
  e->writer = g_thread_pool_new (file_write, NULL, 1, FALSE, NULL);
  setup_backend (e);
  return e;
}

/* The grants of @job's changes, which will not be made, go back. */
static void
give_back (TwedEngine *e, PassJob *job)
{
  g_autoptr(GPtrArray) back = g_ptr_array_new ();

  for (guint j = 0; j < job->plan->entries->len; j++)
    {
      TwedPlanEntry *en = g_ptr_array_index (job->plan->entries, j);

      if (en->action == TWED_ACTION_CHANGE)
        {
          twed_budget_refund (e->budget, en);
          twed_backend_ungrant (job->backend, en);
          g_ptr_array_add (back, en);
        }
    }
  if (back->len)
    state_record (e, job->backend, (TwedPlanEntry *const *) back->pdata, back->len, FALSE);
}

void
twed_engine_free (TwedEngine *e)
{
  if (!e)
    return;
  /* Passes still running end on their own and find no engine: their
   * results are dropped, their references released. */
  e->link->engine = NULL;
  /* Granted changes no worker has taken will not be made now: their
   * grants go back.  Before the passes are told the engine is gone:
   * until then no worker frees a pass, so every one in running is
   * there to look at. */
  g_mutex_lock (&e->link->claim_lock);
  {
    GHashTableIter it;
    gpointer key;

    g_hash_table_iter_init (&it, e->running);
    while (g_hash_table_iter_next (&it, &key, NULL))
      {
        PassJob *job = key;

        if (job->stage != PASS_APPLY || job->applying || g_ptr_array_find (e->saving, job, NULL))
          continue;
        job->taken_back = TRUE;
        give_back (e, job);
      }
  }
  g_mutex_unlock (&e->link->claim_lock);
  g_atomic_int_set (&e->link->gone, TRUE);
  g_thread_pool_free (e->pool, FALSE, FALSE);
  /* Pending writes land, then the last word, without the grants of
   * changes that will not be made now. */
  g_thread_pool_free (e->writer, FALSE, TRUE);
  e->writer = NULL;
  for (guint i = 0; i < e->saving->len; i++)
    {
      PassJob *job = g_ptr_array_index (e->saving, i);

      give_back (e, job);
      pass_job_free (job);
    }
  g_ptr_array_unref (e->saving);
  if (e->started_ok)
    {
      /* Bars a pass changed whose end the main loop has not seen yet. */
      state_record_bars (e, NULL);
      state_flush (e, TRUE);
    }
  /* Passes waiting for their grant are the engine's to free. */
  g_clear_pointer (&e->grant_timer, destroy_source);
  for (guint i = 0; i < e->waiting->len; i++)
    pass_job_free (g_ptr_array_index (e->waiting, i));
  g_ptr_array_unref (e->waiting);
  g_hash_table_unref (e->debounce);
  g_hash_table_unref (e->retry);
  g_hash_table_unref (e->busy);
  g_hash_table_unref (e->running);
  g_hash_table_unref (e->wanted);
  g_hash_table_unref (e->configured);
  g_hash_table_unref (e->auto_logged);
  g_clear_pointer (&e->policy_timer, destroy_source);
  g_clear_pointer (&e->cycle_timer, destroy_source);
  g_clear_pointer (&e->first_pass, destroy_source);
  g_clear_pointer (&e->render_timer, destroy_source);
  g_clear_pointer (&e->stuck_timer, destroy_source);
  g_clear_pointer (&e->dir_check, destroy_source);
  g_clear_pointer (&e->state_timer, destroy_source);
  g_free (e->state_log);
  g_string_free (e->state_records, TRUE);
  g_clear_object (&e->monitor);
  twed_backend_unref_elsewhere (e->backend);
  g_clear_pointer (&e->policies, twed_policy_set_unref);
  twed_plan_store_free (e->plans);
  g_string_free (e->metrics_text, TRUE);
  twed_budget_free (e->budget);
  twed_auto_unref (e->controller);
  twed_metrics_server_free (e->metrics_server);
  twed_config_free (e->config);
  link_unref (e->link);
  g_main_context_unref (e->context);
  g_free (e);
}

gboolean
twed_engine_writes_settle (TwedEngine *e, guint *waited)
{
  guint bound = MIN (e->config->hung_pass_after, SHUTDOWN_WRITE_WAIT_S);
  gint64 deadline = g_get_monotonic_time () + (gint64) bound * G_USEC_PER_SEC;

  *waited = bound;
  while (g_atomic_int_get (&e->writes_pending))
    {
      if (g_get_monotonic_time () >= deadline)
        return FALSE;
      g_usleep (10 * G_TIME_SPAN_MILLISECOND);
    }
  return TRUE;
}

gboolean
twed_engine_idle (TwedEngine *e)
{
  return g_hash_table_size (e->busy) == 0 && g_hash_table_size (e->debounce) == 0 &&
         g_hash_table_size (e->wanted) == 0 && !e->first_pass;
}

/* Since when nothing has gone right: the last pass that read its host
 * and planned it, or the start. */
static gint64
since_success (TwedEngine *e)
{
  return g_get_monotonic_time () - MAX (e->last_success, e->started);
}

gboolean
twed_engine_healthy (TwedEngine *e, char **text)
{
  gint64 limit = (gint64) e->config->health_intervals * e->config->interval * G_USEC_PER_SEC;
  gint64 since = since_success (e);
  /* Every host's pass hung: nothing is read, whatever the last success. */
  gboolean all_hung = e->counters.passes_stuck && e->counters.passes_stuck >= e->config->hosts->len;
  gboolean ok = since <= limit && !all_hung;

  /* No change is made anywhere while the state cannot be written. */
  if (e->saves_hung)
    {
      if (text)
        *text = g_strdup_printf ("unhealthy: %u pass(es) wait for a state write to %s that does not return; "
                                 "no change is made\n", e->saves_hung, e->state_log);
      return FALSE;
    }
  if (text && all_hung)
    {
      *text = g_strdup_printf ("unhealthy: the pass of every host (%u) is stuck in a libvirt call\n",
                               e->counters.passes_stuck);
      return FALSE;
    }

  if (text)
    *text = g_strdup_printf ("%s: %s %.0f s ago (limit %u interval(s), %u s)\n", ok ? "ok" : "unhealthy",
                             e->last_success ? "a pass last read and planned its host" : "started, no pass has succeeded yet;",
                             (double) since / G_USEC_PER_SEC, e->config->health_intervals,
                             e->config->health_intervals * e->config->interval);
  return ok;
}

gboolean
twed_engine_progressing (TwedEngine *e)
{
  /* Passes end at least once an interval (the timer starts one per
   * host), and one stuck on a silent host gives up within the connect
   * timeout: two intervals and that margin without any pass ending
   * means the engine is wedged. */
  gint64 limit = ((gint64) 2 * e->config->interval + 2 * STUCK_AFTER_S) * G_USEC_PER_SEC;

  return g_get_monotonic_time () - MAX (e->last_pass_end, e->started) <= limit;
}

char *
twed_engine_status (TwedEngine *e)
{
  const TwedPlanSummary *sum = twed_plan_store_summary (e->plans);

  g_autofree char *stuck = NULL;

  if (e->saves_hung)
    stuck = g_strdup_printf (", %u pass(es) stuck (%u waiting on the state write)", e->counters.passes_stuck,
                             e->saves_hung);
  else if (e->counters.passes_stuck)
    stuck = g_strdup_printf (", %u pass(es) stuck in libvirt", e->counters.passes_stuck);

  return g_strdup_printf ("%u/%u host(s) up, %u VM(s), %u change(s) pending, %u deferred; "
                          "%" G_GUINT64_FORMAT " applied, %" G_GUINT64_FORMAT " failed since start%s%s",
                          sum->hosts_up, e->config->hosts->len, sum->vms, sum->actions[TWED_ACTION_CHANGE],
                          sum->actions[TWED_ACTION_DEFER], e->counters.changes_applied,
                          e->counters.changes_failed, stuck ? stuck : "", e->dry_run ? " (dry run)" : "");
}

static gboolean
health_func (char **text, gpointer data)
{
  return twed_engine_healthy (data, text);
}

TwedBackend *
twed_engine_get_backend (TwedEngine *e)
{
  return e->backend;
}

const TwedPlan *
twed_engine_get_last_plan (TwedEngine *e)
{
  return twed_plan_store_view (e->plans);
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
