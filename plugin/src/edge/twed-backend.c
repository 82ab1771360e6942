/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libvirt inventory and apply. One connection per host; hosts are read
 * in parallel. A steady-state cycle is two reads per host (node info,
 * bulk domain state); domain definitions are read once and again only
 * after an event or an apply touched the domain, because the bulk
 * stats of some drivers (the test driver) carry no vCPU data.
 *
 * Every call here may block for as long as libvirt lets it (a domain
 * busy with a migration holds its job for up to 30 s, a host that went
 * silent until keepalive gives up): callers run it off any main loop
 * that dispatches libvirt's events. */
#include "config.h"
#include "twed-backend-private.h"
#include "twed-domcaps.h"
#include "twed-domain-params.h"
#include "twed-libvirt.h"
#include "twed-log.h"
#include "twed-overcommit.h"
#include "twed-domxml.h"
#include "twed-state.h"
#include "twed-signals.h"

#include <string.h>

void
backend_count_read (BackendHost *h)
{
  __atomic_fetch_add (&h->backend->reads, 1, __ATOMIC_RELAXED);
}

void
backend_count_write (BackendHost *h)
{
  __atomic_fetch_add (&h->backend->writes, 1, __ATOMIC_RELAXED);
}

/* The expectation of an own change's tunable event: one that has not
 * come by then never will (the set failed after all, or the event was
 * lost), and must not make a later external change look like ours. */
#define OWN_CHANGE_TTL_S 30

typedef struct {
  TwedSetting setting;
  gint64 at;                /* monotonic usec it was registered */
} OwnChange;

static void
cached_free (CachedDomain *c)
{
  twed_domain_free (c->def);
  g_free (c);
}

void
backend_mark_dirty (BackendHost *h, virDomainPtr dom)
{
  char uuid[VIR_UUID_STRING_BUFLEN];

  if (virDomainGetUUIDString (dom, uuid) < 0)
    return;
  g_mutex_lock (&h->dirty_lock);
  g_hash_table_add (h->dirty, g_strdup (uuid));
  g_mutex_unlock (&h->dirty_lock);
}

static void
notifier_clear (gpointer p)
{
  BackendNotifier *n = p;

  if (n->destroy)
    n->destroy (n->data);
}

static void
notifier_unref (BackendNotifier *n)
{
  if (n)
    g_atomic_rc_box_release_full (n, notifier_clear);
}

static void open_attempt_unref (OpenAttempt *a);

/* Connections opened to any host so far (TwedHost.session). */
static gint connections_opened;

/* A VM whose change failed is tried again after this, doubled per
 * failure up to the ceiling: a change that fails (the guest's QEMU
 * refuses it, the host lacks something) fails again at once. */
#define VM_FAILURE_BACKOFF_FIRST_S 30
#define VM_FAILURE_BACKOFF_MAX_S 3600

static void
vm_state_free (gpointer p)
{
  VmState *st = p;

  g_free (st->error);
  g_free (st);
}

static guint backoff_step (guint current, guint first, guint ceiling);

static void
change_stamp_free (gpointer p)
{
  ChangeStamp *c = p;

  g_free (c->host);
  g_free (c->before_host);
  g_free (c);
}

/* With changes_lock held: @key's stamp, created empty. */
static ChangeStamp *
change_stamp_locked (TwedBackend *b, const char *key)
{
  ChangeStamp *c = g_hash_table_lookup (b->changes, key);

  if (!c)
    {
      c = g_new0 (ChangeStamp, 1);
      g_hash_table_insert (b->changes, g_strdup (key), c);
    }
  return c;
}

static void
change_stamp_set (TwedBackend *b, const char *key, const char *host, gint64 at)
{
  ChangeStamp *c;

  g_mutex_lock (&b->changes_lock);
  c = change_stamp_locked (b, key);
  c->at = at;
  c->granted = FALSE;
  g_clear_pointer (&c->before_host, g_free);
  g_free (c->host);
  c->host = g_strdup (host);
  g_mutex_unlock (&b->changes_lock);
}

void
backend_vm_changed (BackendHost *h, const char *key, const GError *error, gboolean raise)
{
  gint64 now = g_get_monotonic_time ();
  VmState *st;

  if (!error)
    {
      change_stamp_set (h->backend, key, h->name, now);
      g_mutex_lock (&h->vm_lock);
      /* A lowering that passed the back-off of a failed raise says
       * nothing of the raise: its back-off runs on and grows at the next
       * refusal, or the host's ceiling would be asked every cycle. */
      st = g_hash_table_lookup (h->vms, key);
      if (!(st && st->failed_raise && !raise && st->retry_at > now))
        g_hash_table_remove (h->vms, key);
      g_mutex_unlock (&h->vm_lock);
      return;
    }
  g_mutex_lock (&h->vm_lock);
  if (!(st = g_hash_table_lookup (h->vms, key)))
    {
      st = g_new0 (VmState, 1);
      g_hash_table_insert (h->vms, g_strdup (key), st);
    }
  g_clear_pointer (&st->error, g_free);
  st->failures++;
  st->backoff = backoff_step (st->backoff, VM_FAILURE_BACKOFF_FIRST_S, VM_FAILURE_BACKOFF_MAX_S);
  st->retry_at = now + (gint64) st->backoff * G_USEC_PER_SEC;
  st->error = g_strdup (error->message);
  /* A lowering that fails too (a domain job, a hung monitor, not the
   * host's ceiling) ends the pass-through: the next one waits. */
  st->failed_raise = raise;
  g_mutex_unlock (&h->vm_lock);
}

static const char *
entry_key (const TwedPlanEntry *en)
{
  return en->uuid ? en->uuid : en->domain;
}

gboolean
twed_backend_grant (TwedBackend *b, const TwedPlanEntry *en)
{
  ChangeStamp *c;
  gboolean ok;

  g_mutex_lock (&b->changes_lock);
  c = change_stamp_locked (b, entry_key (en));
  /* A second grant would lose the first one's "before", and with it
   * what a refund restores: twed_backend_hold_granted keeps it out. */
  if ((ok = !c->granted))
    {
      c->before = c->at;
      g_free (c->before_host);
      c->before_host = g_steal_pointer (&c->host);
      c->granted = TRUE;
      c->at = g_get_monotonic_time ();
      c->host = g_strdup (en->host);
    }
  g_mutex_unlock (&b->changes_lock);
  return ok;
}

/* With changes_lock held: why the VM @key, planned on @host, may not be
 * changed now: a grant not yet made or refunded, or a change within
 * @min s.  NULL when it may. */
static char *
change_hold_locked (TwedBackend *b, const char *key, const char *host, guint min, gint64 now)
{
  ChangeStamp *c = g_hash_table_lookup (b->changes, key);
  gboolean elsewhere;

  if (!c)
    return NULL;
  elsewhere = g_strcmp0 (c->host, host) != 0;
  if (c->granted)
    return g_strdup_printf ("a change of it is already granted%s%s", elsewhere ? " on " : "",
                            elsewhere ? c->host : "");
  if (min && c->at && now - c->at < (gint64) min * G_USEC_PER_SEC)
    return g_strdup_printf ("changed %" G_GINT64_FORMAT " s ago%s%s, min_change_interval %u s",
                            (now - c->at) / G_USEC_PER_SEC, elsewhere ? " on " : "", elsewhere ? c->host : "",
                            min);
  return NULL;
}

void
twed_backend_hold_granted (TwedBackend *b, TwedPlan *const *plans, guint n)
{
  g_autoptr(GHashTable) batch = g_hash_table_new_full (g_str_hash, g_str_equal, NULL, g_free);
  guint min = BACKEND_OPT (b, min_change_interval);
  gint64 now = g_get_monotonic_time ();

  g_mutex_lock (&b->changes_lock);
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < plans[i]->entries->len; j++)
      {
        TwedPlanEntry *en = g_ptr_array_index (plans[i]->entries, j);
        const char *first;
        char *why;

        if (en->action != TWED_ACTION_CHANGE)
          continue;
        if ((first = g_hash_table_lookup (batch, entry_key (en))))
          why = g_strdup_printf ("a change of it is planned%s%s too", g_strcmp0 (first, en->host) ? " on " : "",
                                 g_strcmp0 (first, en->host) ? first : "");
        else
          {
            why = change_hold_locked (b, entry_key (en), en->host, min, now);
            g_hash_table_insert (batch, (gpointer) entry_key (en), g_strdup (en->host));
          }
        if (why)
          {
            g_autofree char *old = en->reason;

            en->action = TWED_ACTION_DEFER;
            en->reason = g_strdup_printf ("%s; deferred: %s", old, why);
            g_free (why);
          }
      }
  g_mutex_unlock (&b->changes_lock);
}

void
twed_backend_ungrant (TwedBackend *b, const TwedPlanEntry *en)
{
  ChangeStamp *c;

  g_mutex_lock (&b->changes_lock);
  if ((c = g_hash_table_lookup (b->changes, entry_key (en))) && c->granted)
    {
      c->granted = FALSE;
      c->at = c->before;
      g_free (c->host);
      c->host = g_steal_pointer (&c->before_host);
      if (!c->at)
        g_hash_table_remove (b->changes, entry_key (en));
    }
  g_mutex_unlock (&b->changes_lock);
}

char *
backend_vm_hold (BackendHost *h, const char *key, gboolean *after_failure)
{
  TwedBackend *b = h->backend;
  guint min = BACKEND_OPT (b, min_change_interval);
  gint64 now = g_get_monotonic_time ();
  char *failed = NULL, *recent = NULL;
  gboolean failed_raise = FALSE;
  VmState *st;
  ChangeStamp *c;

  g_mutex_lock (&h->vm_lock);
  if ((st = g_hash_table_lookup (h->vms, key)) && st->retry_at > now)
    {
      failed = g_strdup_printf ("its last change failed (%u in a row, next try in %" G_GINT64_FORMAT " s): %s",
                                st->failures, (st->retry_at - now + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC,
                                st->error);
      failed_raise = st->failed_raise;
    }
  g_mutex_unlock (&h->vm_lock);
  /* Both are asked: the planner may let a lowering through the
   * back-off of a failed raise, never through min_change_interval. */
  if (min)
    {
      g_mutex_lock (&b->changes_lock);
      if ((c = g_hash_table_lookup (b->changes, key)) && c->at && now - c->at < (gint64) min * G_USEC_PER_SEC)
        recent = g_strdup_printf ("changed %" G_GINT64_FORMAT " s ago%s%s, min_change_interval %u s",
                                  (now - c->at) / G_USEC_PER_SEC, g_strcmp0 (c->host, h->name) ? " on " : "",
                                  g_strcmp0 (c->host, h->name) ? c->host : "", min);
      g_mutex_unlock (&b->changes_lock);
    }
  *after_failure = failed && failed_raise && !recent;
  /* Both hold it: name min_change_interval first, it holds every
   * change; the failure says how long the back-off runs. */
  if (failed && recent)
    {
      char *both = g_strdup_printf ("%s; and %s", recent, failed);

      g_free (recent);
      g_free (failed);
      return both;
    }
  return failed ? failed : recent;
}

static BackendHost *
host_ref (BackendHost *h)
{
  g_atomic_int_inc (&h->ref);
  return h;
}

static void
host_unref (gpointer p)
{
  BackendHost *h = p;

  if (!g_atomic_int_dec_and_test (&h->ref))
    return;
  g_clear_pointer (&h->pending_open, open_attempt_unref);
  g_mutex_clear (&h->lock);
  g_hash_table_unref (h->cache);
  g_hash_table_unref (h->dirty);
  g_hash_table_unref (h->unread_warned);
  g_mutex_clear (&h->dirty_lock);
  g_hash_table_unref (h->vms);
  g_hash_table_unref (h->own_changes);
  g_mutex_clear (&h->vm_lock);
  notifier_unref (h->notifier);
  g_free (h->name);
  g_free (h->uri);
  g_free (h->last_error);
  g_free (h->support_reason);
  g_free (h);
}

static void
notify (BackendHost *h, const char *domain, const char *what)
{
  if (domain)
    twed_log_event (h->name, domain, what);
  if (h->notifier && h->notifier->func)
    h->notifier->func (h->notifier->source, h->name, domain, what, h->notifier->data);
}

static int
on_lifecycle (virConnectPtr conn G_GNUC_UNUSED, virDomainPtr dom, int event,
              int detail G_GNUC_UNUSED, void *opaque)
{
  BackendHost *h = opaque;
  static const char *const names[] = { "defined", "undefined", "started", "suspended",
                                       "resumed", "stopped", "shutdown", "pmsuspended", "crashed" };

  backend_mark_dirty (h, dom);
  notify (h, virDomainGetName (dom), event >= 0 && (guint) event < G_N_ELEMENTS (names) ? names[event] : "lifecycle");
  return 0;
}

void
backend_expect_own_change (BackendHost *h, virDomainPtr dom, const TwedSetting *s)
{
  char uuid[VIR_UUID_STRING_BUFLEN];
  OwnChange *oc;

  if (virDomainGetUUIDString (dom, uuid) < 0)
    return;
  oc = g_new0 (OwnChange, 1);
  oc->setting = *s;
  oc->at = g_get_monotonic_time ();
  g_mutex_lock (&h->dirty_lock);
  g_hash_table_replace (h->own_changes, g_strdup (uuid), oc);
  g_mutex_unlock (&h->dirty_lock);
}

gboolean
twed_own_echo (const TwedSetting *set, gint64 set_at, const TwedSetting *reported, gint64 now)
{
  return now - set_at <= (gint64) OWN_CHANGE_TTL_S * G_USEC_PER_SEC && twed_setting_equal (set, reported);
}

void
backend_forget_own_change (BackendHost *h, virDomainPtr dom)
{
  char uuid[VIR_UUID_STRING_BUFLEN];

  if (virDomainGetUUIDString (dom, uuid) < 0)
    return;
  g_mutex_lock (&h->dirty_lock);
  g_hash_table_remove (h->own_changes, uuid);
  g_mutex_unlock (&h->dirty_lock);
}

/* The event reports only TWED parameters, with the values this backend
 * set: the echo of its own change (interfaces.md: a live change emits a
 * tunable event with cputune.twed_*).  Consumed once. */
static gboolean
own_twed_event (BackendHost *h, virDomainPtr dom, virTypedParameterPtr params, int nparams)
{
  char uuid[VIR_UUID_STRING_BUFLEN];
  const char *mode = NULL;
  TwedSetting got = { 0 };
  OwnChange *want;
  gboolean ours = FALSE;

  for (int i = 0; i < nparams; i++)
    if (!g_str_has_prefix (params[i].field, "cputune.twed_"))
      return FALSE;
  if (virDomainGetUUIDString (dom, uuid) < 0 ||
      virTypedParamsGetString (params, nparams, "cputune.twed_mode", &mode) != 1 ||
      !twed_mode_from_string (mode, &got.mode))
    return FALSE;
  virTypedParamsGetUInt (params, nparams, "cputune.twed_delay", &got.delay);
  virTypedParamsGetUInt (params, nparams, "cputune.twed_min", &got.min);
  virTypedParamsGetUInt (params, nparams, "cputune.twed_max", &got.max);
  g_mutex_lock (&h->dirty_lock);
  if ((want = g_hash_table_lookup (h->own_changes, uuid)))
    {
      gint64 now = g_get_monotonic_time ();

      ours = twed_own_echo (&want->setting, want->at, &got, now);
      /* Consumed, or expired: either way never matched again. */
      if (ours || now - want->at > (gint64) OWN_CHANGE_TTL_S * G_USEC_PER_SEC)
        g_hash_table_remove (h->own_changes, uuid);
    }
  g_mutex_unlock (&h->dirty_lock);
  return ours;
}

static int
on_tunable (virConnectPtr conn G_GNUC_UNUSED, virDomainPtr dom,
            virTypedParameterPtr params, int nparams, void *opaque)
{
  BackendHost *h = opaque;

  /* vCPU pinning and TWED both arrive as tunable events. */
  backend_mark_dirty (h, dom);
  /* Our own change: re-planning on it would only spend a pass (and, with
   * a fresh look at the budget, used to let deferred changes through). */
  if (own_twed_event (h, dom, params, nparams))
    {
      twed_log_domain (G_LOG_LEVEL_DEBUG, h->name, virDomainGetName (dom), "event: tunable, our own change");
      return 0;
    }
  notify (h, virDomainGetName (dom), "tunable");
  return 0;
}

static int
on_metadata (virConnectPtr conn G_GNUC_UNUSED, virDomainPtr dom, int type G_GNUC_UNUSED,
             const char *nsuri G_GNUC_UNUSED, void *opaque)
{
  BackendHost *h = opaque;

  backend_mark_dirty (h, dom);
  notify (h, virDomainGetName (dom), "metadata");
  return 0;
}

static void
on_close (virConnectPtr conn G_GNUC_UNUSED, int reason G_GNUC_UNUSED, void *opaque)
{
  BackendHost *h = opaque;

  twed_log_host (G_LOG_LEVEL_WARNING, h->name, "connection to %s lost", h->uri);
  /* The connection object is dropped by the next refresh, which the
   * owner schedules on this notice: reconnecting must not wait for an
   * event (none comes from a lost host) or a distant timer. */
  g_mutex_lock (&h->dirty_lock);
  h->lost = TRUE;
  g_mutex_unlock (&h->dirty_lock);
  notify (h, NULL, "lost");
}

static void
disconnect_locked (BackendHost *h)
{
  if (!h->conn)
    return;
  if (h->cb_lifecycle >= 0)
    virConnectDomainEventDeregisterAny (h->conn, h->cb_lifecycle);
  if (h->cb_tunable >= 0)
    virConnectDomainEventDeregisterAny (h->conn, h->cb_tunable);
  if (h->cb_metadata >= 0)
    virConnectDomainEventDeregisterAny (h->conn, h->cb_metadata);
  h->cb_lifecycle = h->cb_tunable = h->cb_metadata = -1;
  virConnectUnregisterCloseCallback (h->conn, on_close);
  virConnectClose (h->conn);
  h->conn = NULL;
  g_hash_table_remove_all (h->cache);
  /* Events of the old connection are gone with it. */
  g_mutex_lock (&h->dirty_lock);
  g_hash_table_remove_all (h->own_changes);
  g_mutex_unlock (&h->dirty_lock);
}

static int
register_event (BackendHost *h, int id, virConnectDomainEventGenericCallback cb)
{
  int ret = virConnectDomainEventRegisterAny (h->conn, NULL, id, cb, host_ref (h), host_unref);

  if (ret < 0)
    {
      host_unref (h);
      virResetLastError ();
    }
  return ret;
}

/* <features><twed supported='yes|no'> of interfaces.md section 3. */
static void
probe_support (BackendHost *h)
{
  g_autofree char *caps = NULL;

  g_clear_pointer (&h->support_reason, g_free);
  if (h->is_test)
    {
      /* The test driver has no domain capabilities; it keeps TWED
       * settings itself.  Without the twed API a plan still shows what
       * apply would do, and apply says what it lacks. */
      h->support = TWED_SUPPORT_YES;
      return;
    }
  if (h->readonly_conn)
    {
      h->support = TWED_SUPPORT_UNKNOWN;
      h->support_reason = g_strdup ("read-only connection: libvirt gives domain capabilities to writers only");
      return;
    }
  backend_count_read (h);
  if (!(caps = virConnectGetDomainCapabilities (h->conn, NULL, NULL, NULL, NULL, 0)))
    {
      const char *msg = virGetLastErrorMessage ();

      h->support = TWED_SUPPORT_UNKNOWN;
      h->support_reason = g_strdup_printf ("domain capabilities: %s (libvirt error %d)",
                                           msg && *msg ? msg : "unknown libvirt error", virGetLastErrorCode ());
      virResetLastError ();
      return;
    }
  h->support = twed_domcaps_twed_support (caps, &h->support_reason);
}

/* The next wait of a backoff: @first, then doubled up to @ceiling. */
static guint
backoff_step (guint current, guint first, guint ceiling)
{
  return current ? MIN (current * 2, ceiling) : first;
}

/* After a failed attempt: the next one after a backoff measured from
 * now, the end of the attempt (a connect can itself take minutes),
 * doubling up to the configured ceiling, with +-25 % jitter so that
 * hosts lost together (a rack, a switch) do not all come back at once. */
static void
backend_schedule_retry (BackendHost *h)
{
  double delay;

  h->backoff = backoff_step (h->backoff, 1, BACKEND_OPT (h->backend, reconnect_max));
  delay = (double) h->backoff * G_USEC_PER_SEC * g_random_double_range (0.75, 1.25);
  h->retry_at = g_get_monotonic_time () + (gint64) delay;
}

static void
open_attempt_clear (gpointer p)
{
  OpenAttempt *a = p;

  if (a->conn)
    virConnectClose (a->conn);
  g_free (a->uri);
  g_free (a->error);
  g_mutex_clear (&a->lock);
  g_cond_clear (&a->cond);
}

static void
open_attempt_unref (OpenAttempt *a)
{
  g_atomic_rc_box_release_full (a, open_attempt_clear);
}

static gpointer
open_thread (gpointer data)
{
  OpenAttempt *a = data;
  virConnectPtr conn = a->readonly ? virConnectOpenReadOnly (a->uri) : virConnectOpen (a->uri);
  gboolean readonly = a->readonly;
  g_autofree char *error = NULL;
  int code = VIR_ERR_OK;

  if (!conn && !a->readonly && a->readonly_fallback)
    {
      /* Read-only access still plans; TWED support then stays unknown,
       * because libvirt gives domain capabilities to writers only. */
      virResetLastError ();
      conn = virConnectOpenReadOnly (a->uri);
      readonly = TRUE;
    }
  if (!conn)
    {
      /* libvirt's last error is per thread: carry it over. */
      const char *msg = virGetLastErrorMessage ();

      code = virGetLastErrorCode ();
      error = g_strdup (msg && *msg ? msg : "unknown libvirt error");
      virResetLastError ();
    }
  g_mutex_lock (&a->lock);
  a->done = TRUE;
  a->conn = conn;
  a->got_readonly = readonly;
  a->error = g_steal_pointer (&error);
  a->code = code;
  g_cond_signal (&a->cond);
  g_mutex_unlock (&a->lock);
  /* Abandoned: the last reference closes the connection that came late. */
  open_attempt_unref (a);
  return NULL;
}

/* virConnectOpen within the connect timeout: on a thread, waited for
 * until the deadline, then left to finish on its own.  A host keeps at
 * most one such open: while it has not returned, the next attempt
 * fails at once instead of starting another thread. */
static virConnectPtr
open_bounded (BackendHost *h, GError **error)
{
  const TwedBackendOptions *o = &h->backend->opts;
  guint timeout = BACKEND_OPT (h->backend, connect_timeout) ? BACKEND_OPT (h->backend, connect_timeout) : 30;
  gint64 deadline = g_get_monotonic_time () + (gint64) timeout * G_USEC_PER_SEC;
  g_autoptr(GError) thread_error = NULL;
  OpenAttempt *a;
  GThread *thread;
  virConnectPtr conn = NULL;

  if ((a = h->pending_open))
    {
      gboolean done;

      g_mutex_lock (&a->lock);
      done = a->done;
      g_mutex_unlock (&a->lock);
      if (!done)
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED,
                       "cannot connect: the open given up on after %u s has still not returned", timeout);
          return NULL;
        }
      g_clear_pointer (&h->pending_open, open_attempt_unref);
    }

  a = g_atomic_rc_box_new0 (OpenAttempt);
  a->uri = g_strdup (h->uri);
  a->readonly = o->readonly;
  a->readonly_fallback = o->readonly_fallback;
  g_mutex_init (&a->lock);
  g_cond_init (&a->cond);
  if (!(thread = g_thread_try_new ("twed-open", open_thread, g_atomic_rc_box_acquire (a), &thread_error)))
    {
      open_attempt_unref (a);
      open_attempt_unref (a);
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "cannot connect: %s", thread_error->message);
      return NULL;
    }
  g_thread_unref (thread);

  g_mutex_lock (&a->lock);
  while (!a->done)
    if (!g_cond_wait_until (&a->cond, &a->lock, deadline))
      break;
  if (a->done)
    {
      conn = g_steal_pointer (&a->conn);
      h->readonly_conn = a->got_readonly;
      if (!conn)
        g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "cannot connect: %s (libvirt error %d)",
                     a->error, a->code);
    }
  else
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED,
                   "cannot connect: no answer within connect_timeout %u s", timeout);
    }
  g_mutex_unlock (&a->lock);
  if (conn || a->done)
    open_attempt_unref (a);
  else
    h->pending_open = a;
  return conn;
}

gboolean
backend_connect_locked (BackendHost *h, GError **error)
{
  const TwedBackendOptions *o = &h->backend->opts;
  gint64 now = g_get_monotonic_time ();
  g_autoptr(GError) local = NULL;
  const char *type;
  gboolean lost;

  guint ka_interval = BACKEND_OPT (h->backend, keepalive_interval);
  guint ka_count = BACKEND_OPT (h->backend, keepalive_count);

  if (h->removed)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "no longer configured");
      return FALSE;
    }
  g_mutex_lock (&h->dirty_lock);
  lost = h->lost;
  h->lost = FALSE;
  g_mutex_unlock (&h->dirty_lock);
  if (h->conn && !lost && virConnectIsAlive (h->conn) == 1)
    {
      /* A reload changed keepalive: the live connection takes it (libvirt
       * cannot turn it off on a connection; 0 keeps the old one). */
      if (ka_interval && (ka_interval != h->ka_interval || ka_count != h->ka_count))
        {
          if (virConnectSetKeepAlive (h->conn, (int) ka_interval, ka_count) < 0)
            virResetLastError ();
          h->ka_interval = ka_interval;
          h->ka_count = ka_count;
        }
      return TRUE;
    }
  disconnect_locked (h);
  if (h->retry_at && now < h->retry_at)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "%s (next reconnect in %" G_GINT64_FORMAT " s)",
                   h->last_error ? h->last_error : "unreachable",
                   (h->retry_at - now) / G_USEC_PER_SEC + 1);
      return FALSE;
    }
  if (!(h->conn = open_bounded (h, &local)))
    {
      backend_schedule_retry (h);
      g_free (h->last_error);
      h->last_error = g_strdup (local->message);
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  /* Unique in the process: a host whose URI changed is another
   * BackendHost, whose first connection must not look like the old
   * one's. */
  h->session = (guint) g_atomic_int_add (&connections_opened, 1) + 1;
  /* The backoff is reset by a successful read, not by a connection
   * that then fails every call. */
  g_clear_pointer (&h->last_error, g_free);
  /* Every call's timeout: libvirt has none of its own, but a remote
   * connection whose peer misses keepalive_count replies is closed and
   * its calls fail.  Remote drivers only (local ones report
   * "unsupported"), and only with libvirt's event loop running. */
  if (ka_interval && virConnectSetKeepAlive (h->conn, (int) ka_interval, ka_count) < 0)
    virResetLastError ();
  h->ka_interval = ka_interval;
  h->ka_count = ka_count;
  type = virConnectGetType (h->conn);
  h->is_test = type && g_ascii_strcasecmp (type, "TEST") == 0;
  probe_support (h);
  if (o->events)
    {
      if (!h->notifier && h->backend->notifier)
        h->notifier = g_atomic_rc_box_acquire (h->backend->notifier);
      /* Unregistering waits for a close callback that is running (both
       * hold the callback's lock), so it needs no reference to the host;
       * and drivers without close callbacks (test:///) accept one and
       * never release it. */
      if (virConnectRegisterCloseCallback (h->conn, on_close, h, NULL) < 0)
        virResetLastError ();
      /* libvirt may still run an event callback after it was deregistered
       * on another thread: each registration holds a reference to the
       * host, which libvirt releases once it has dropped the callback. */
      /* VIR_DOMAIN_EVENT_CALLBACK is libvirt's documented cast. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-function-type"
      h->cb_lifecycle = register_event (h, VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK (on_lifecycle));
      h->cb_tunable = register_event (h, VIR_DOMAIN_EVENT_ID_TUNABLE, VIR_DOMAIN_EVENT_CALLBACK (on_tunable));
      h->cb_metadata = register_event (h, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE,
                                       VIR_DOMAIN_EVENT_CALLBACK (on_metadata));
#pragma GCC diagnostic pop
    }
  twed_log_host (G_LOG_LEVEL_INFO, h->name, "connected to %s", h->uri);
  return TRUE;
}

static gboolean
read_node (BackendHost *h, TwedHost *out, GError **error)
{
  if (!h->is_test)
    {
      unsigned char *map = NULL;
      unsigned int online = 0;
      int n;

      backend_count_read (h);
      if ((n = virNodeGetCPUMap (h->conn, &map, &online, 0)) >= 0)
        {
          out->ncpus = (guint) n;
          out->online = g_array_new (FALSE, FALSE, sizeof (guint));
          for (guint c = 0; c < (guint) n; c++)
            if (VIR_CPU_USED (map, c))
              g_array_append_val (out->online, c);
          free (map);
          return TRUE;
        }
      virResetLastError ();
    }
  {
    /* The test driver's CPU map is a fixed fake; its node info is real. */
    virNodeInfo info;

    backend_count_read (h);
    if (virNodeGetInfo (h->conn, &info) < 0)
      {
        twed_set_libvirt_error (error, "virNodeGetInfo");
        return FALSE;
      }
    out->ncpus = info.cpus;
  }
  return TRUE;
}

static TwedDomain *
load_definition (BackendHost *h, virDomainPtr dom, GError **error)
{
  g_autofree char *xml = NULL;
  TwedDomain *def;
  int persistent;

  backend_count_read (h);
  if (!(xml = virDomainGetXMLDesc (dom, 0)))
    {
      twed_set_libvirt_error (error, "virDomainGetXMLDesc");
      return NULL;
    }
  if (!(def = twed_domain_parse_xml (xml, error)))
    return NULL;
  backend_count_read (h);
  persistent = virDomainIsPersistent (dom);
  def->persistent = persistent != 0;
  virResetLastError ();
  return def;
}

/* The load of a domain whose definition cannot be read right now (its
 * job is held by a migration or another operation, which makes
 * virDomainGetXMLDesc wait up to 30 s and fail, or the XML does not
 * parse): the vCPUs still take pCPU time, so they stay in the host's
 * load.  The last definition read is the best guess; without one, the
 * live vCPU count and pinning, which libvirt reports without the job. */
static TwedDomain *
load_fallback (BackendHost *h, virDomainStatsRecordPtr r, const CachedDomain *cached, guint ncpus,
               gboolean active, const char *why)
{
  virDomainPtr dom = r->dom;
  unsigned int current = 0;
  g_autoptr(TwedDomain) def = NULL;
  unsigned int flags = active ? VIR_DOMAIN_AFFECT_LIVE : VIR_DOMAIN_AFFECT_CONFIG;
  int nvcpus, maplen, n;
  g_autofree unsigned char *maps = NULL;

  if (cached)
    {
      def = twed_domain_copy (cached->def);
      def->load_error = g_strdup (why);
      return g_steal_pointer (&def);
    }
  backend_count_read (h);
  if ((nvcpus = virDomainGetVcpusFlags (dom, flags)) < 0)
    {
      virResetLastError ();
      /* The bulk stats' count, which needs no call: the vCPUs load the
       * host whatever libvirt answers now.  Without it, nothing is known. */
      if (!active || virTypedParamsGetUInt (r->params, r->nparams, "vcpu.current", &current) != 1)
        return NULL;
      def = twed_domain_new (virDomainGetName (dom));
      def->load_error = g_strdup (why);
      twed_domain_set_vcpus (def, current);
      return g_steal_pointer (&def);
    }
  def = twed_domain_new (virDomainGetName (dom));
  def->load_error = g_strdup (why);
  twed_domain_set_vcpus (def, (guint) nvcpus);
  maplen = VIR_CPU_MAPLEN (MAX (ncpus, 1u));
  maps = g_malloc0 ((gsize) nvcpus * (gsize) maplen + 1);
  backend_count_read (h);
  n = nvcpus ? virDomainGetVcpuPinInfo (dom, nvcpus, maps, maplen, flags) : 0;
  for (int v = 0; v < n; v++)
    {
      g_autoptr(GArray) cpus = g_array_new (FALSE, FALSE, sizeof (guint));

      for (guint c = 0; c < ncpus; c++)
        if (VIR_CPU_USABLE (maps, maplen, v, c))
          g_array_append_val (cpus, c);
      /* Every pCPU: floating, as an unpinned vCPU in a definition. */
      if (cpus->len && cpus->len < ncpus)
        twed_domain_pin_vcpu (def, (guint) v, cpus);
    }
  virResetLastError ();
  backend_count_read (h);
  def->persistent = virDomainIsPersistent (dom) != 0;
  virResetLastError ();
  return g_steal_pointer (&def);
}

/* Whether a job holds the domain now; asking takes none. */
static gboolean
domain_job_running (BackendHost *h, virDomainPtr dom)
{
  virDomainControlInfo info;

  backend_count_read (h);
  if (virDomainGetControlInfo (dom, &info, 0) < 0)
    {
      virResetLastError ();
      return FALSE;
    }
  return info.state == VIR_DOMAIN_CONTROL_JOB || info.state == VIR_DOMAIN_CONTROL_OCCUPIED;
}

static gboolean
state_is_active (int state)
{
  return state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED && state != VIR_DOMAIN_NOSTATE;
}

/* A cached definition no longer says how many vCPUs the running domain
 * has: the bulk stats' vcpu.current differs (hot-plug), or, from a
 * driver whose stats lack the VCPU group (the test driver), it is older
 * than definition_max_age. */
gboolean
twed_definition_stale (gboolean active, gboolean has_current, guint current, guint cached_nvcpus,
                       gboolean cached_unread, gint64 read_at, gint64 now, guint max_age)
{
  /* A fallback (the definition could not be read) is replaced when the
   * domain changes, which an event or a job's end reports. */
  if (!active || cached_unread)
    return FALSE;
  if (has_current)
    return current != cached_nvcpus;
  return now - read_at > (gint64) max_age * G_USEC_PER_SEC;
}

static gboolean
definition_stale (BackendHost *h, virDomainStatsRecordPtr r, const CachedDomain *c, int state)
{
  unsigned int current = 0;
  gboolean has = virTypedParamsGetUInt (r->params, r->nparams, "vcpu.current", &current) == 1;

  return twed_definition_stale (state_is_active (state), has, current, c->def->nvcpus, c->def->load_error != NULL,
                                c->read_at, g_get_monotonic_time (), BACKEND_OPT (h->backend, definition_max_age));
}

/* @records (TwedVmRecord, taken): failures no longer kept, for
 * twed_backend_take_forgotten. */
static void
backend_add_forgotten (TwedBackend *b, GPtrArray *records)
{
  gsize n = 0;
  g_autofree gpointer *taken = g_ptr_array_steal (records, &n);

  if (!n)
    return;
  g_mutex_lock (&b->forgotten_lock);
  for (gsize i = 0; i < n; i++)
    g_ptr_array_add (b->forgotten, taken[i]);
  g_mutex_unlock (&b->forgotten_lock);
}

/* With h->vm_lock held: a record of no failure of @key on @h into
 * @forgotten when a state file may hold one. */
static void
vm_forgotten_locked (BackendHost *h, const char *key, const VmState *st, GPtrArray *forgotten)
{
  if (st->failures)
    g_ptr_array_add (forgotten, twed_vm_record_new (h->name, key));
}

/* The failures of VMs no longer on the host go once their backoff is
 * over: a VM that migrates away and back within it is still held.  (When
 * VMs were last changed is kept fleet-wide, in the backend.) */
static void
backend_vms_prune (BackendHost *h, GHashTable *listed)
{
  g_autoptr(GPtrArray) forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  gint64 now = g_get_monotonic_time ();
  GHashTableIter it;
  gpointer key, value;

  g_mutex_lock (&h->vm_lock);
  g_hash_table_iter_init (&it, h->vms);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      VmState *st = value;

      if (!g_hash_table_contains (listed, key) && st->retry_at <= now)
        {
          vm_forgotten_locked (h, key, st, forgotten);
          g_hash_table_iter_remove (&it);
        }
    }
  g_mutex_unlock (&h->vm_lock);
  backend_add_forgotten (h->backend, forgotten);
}

static gboolean
read_domains (BackendHost *h, TwedHost *out, GError **error)
{
  virDomainStatsRecordPtr *records = NULL;
  g_autoptr(GHashTable) dirty = NULL;
  gboolean unread = FALSE;
  int n;

  g_mutex_lock (&h->dirty_lock);
  dirty = g_steal_pointer (&h->dirty);
  h->dirty = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  g_mutex_unlock (&h->dirty_lock);

  backend_count_read (h);
  /* The VCPU group's vcpu.current catches vCPU hot-plug, which emits
   * no event; NOWAIT: a domain whose job (a migration) is running
   * reports what needs no job instead of holding the call. */
  n = virConnectGetAllDomainStats (h->conn, VIR_DOMAIN_STATS_STATE | VIR_DOMAIN_STATS_VCPU, &records,
                                   VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
  if (n < 0)
    {
      twed_set_libvirt_error (error, "virConnectGetAllDomainStats");
      return FALSE;
    }
  for (int i = 0; i < n; i++)
    {
      virDomainStatsRecordPtr r = records[i];
      char uuid[VIR_UUID_STRING_BUFLEN];
      int state = VIR_DOMAIN_NOSTATE;
      CachedDomain *c;
      TwedDomain *copy = NULL;

      if (virDomainGetUUIDString (r->dom, uuid) < 0)
        continue;
      virTypedParamsGetInt (r->params, r->nparams, "state.state", &state);
      c = g_hash_table_lookup (h->cache, uuid);
      if (!c || g_hash_table_contains (dirty, uuid) || definition_stale (h, r, c, state))
        {
          g_autoptr(GError) local = NULL;
          TwedDomain *def = NULL;

          /* virDomainGetXMLDesc would wait (up to 30 s) for the job. */
          if (domain_job_running (h, r->dom))
            g_set_error (&local, TWED_ERROR, TWED_ERROR_FAILED, "a job (migration or another) holds the domain");
          else
            def = load_definition (h, r->dom, &local);
          if (!def)
            {
              /* A job ends: read again soon.  A definition that does not
               * parse stays so until the domain changes, which an event
               * reports: until then the fallback is kept, quietly. */
              gboolean retry = !g_error_matches (local, TWED_ERROR, TWED_ERROR_INVALID) &&
                               local->domain != G_MARKUP_ERROR;

              copy = load_fallback (h, r, c, out->ncpus, state_is_active (state), local->message);
              twed_log_domain (g_hash_table_contains (h->unread_warned, uuid) ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_WARNING,
                               h->name, virDomainGetName (r->dom), "definition not read, %s: %s",
                               copy ? "its last known vCPUs are counted" : "left out of the load", local->message);
              g_hash_table_add (h->unread_warned, g_strdup (uuid));
              if (retry)
                {
                  g_mutex_lock (&h->dirty_lock);
                  g_hash_table_add (h->dirty, g_strdup (uuid));
                  g_mutex_unlock (&h->dirty_lock);
                  unread = TRUE;
                }
              if (!copy)
                continue;
              if (!retry)
                {
                  /* Kept until an event marks the domain dirty. */
                  c = g_new0 (CachedDomain, 1);
                  c->def = g_steal_pointer (&copy);
                  g_hash_table_replace (h->cache, g_strdup (uuid), c);
                }
            }
          else
            {
              g_hash_table_remove (h->unread_warned, uuid);
              c = g_new0 (CachedDomain, 1);
              c->def = def;
              c->read_at = g_get_monotonic_time ();
              g_hash_table_replace (h->cache, g_strdup (uuid), c);
            }
        }
      if (!copy)
        copy = twed_domain_copy (c->def);
      copy->active = state_is_active (state);
      if (!copy->uuid)
        copy->uuid = g_strdup (uuid);
      g_free (copy->hold);
      copy->hold = backend_vm_hold (h, uuid, &copy->hold_after_failure);
      /* The auto bands' signals come with the same call. */
      twed_domain_signals_free (copy->signals);
      copy->signals = copy->active ? twed_signals_from_record (r, g_get_monotonic_time ()) : NULL;
      g_ptr_array_add (out->domains, copy);
    }
  virDomainStatsRecordListFree (records);
  /* Definitions to read again: soon, then less often while they cannot
   * be (a long migration), up to the reconnect ceiling. */
  if (unread)
    {
      h->unread_backoff = backoff_step (h->unread_backoff, 2, BACKEND_OPT (h->backend, reconnect_max));
      out->retry_at = g_get_monotonic_time () + (gint64) h->unread_backoff * G_USEC_PER_SEC;
    }
  else
    h->unread_backoff = 0;

  /* Forget domains that are gone. */
  {
    GHashTableIter it;
    gpointer key;
    g_autoptr(GHashTable) keep = g_hash_table_new (g_str_hash, g_str_equal);

    for (guint i = 0; i < out->domains->len; i++)
      g_hash_table_add (keep, ((TwedDomain *) g_ptr_array_index (out->domains, i))->uuid);
    g_hash_table_iter_init (&it, h->cache);
    while (g_hash_table_iter_next (&it, &key, NULL))
      if (!g_hash_table_contains (keep, key))
        g_hash_table_iter_remove (&it);
    g_hash_table_iter_init (&it, h->unread_warned);
    while (g_hash_table_iter_next (&it, &key, NULL))
      if (!g_hash_table_contains (keep, key))
        g_hash_table_iter_remove (&it);
    backend_vms_prune (h, keep);
  }
  return TRUE;
}

static TwedHost *
refresh_host (BackendHost *h)
{
  TwedHost *out = twed_host_new (h->name, h->uri);
  g_autoptr(GError) error = NULL;

  g_mutex_lock (&h->lock);
  if (h->removed)
    {
      /* A pass that started before a reconfiguration removed the host. */
      g_mutex_unlock (&h->lock);
      out->reachable = FALSE;
      out->error = g_strdup ("no longer configured");
      return out;
    }
  if (backend_connect_locked (h, &error) && read_node (h, out, &error) && read_domains (h, out, &error))
    {
      out->session = h->session;
      if (h->warned)
        twed_log_host (G_LOG_LEVEL_MESSAGE, h->name, "reachable again");
      h->backoff = 0;
      h->retry_at = 0;
      h->warned = FALSE;
      out->reachable = TRUE;
      out->support = h->support;
      out->support_reason = g_strdup (h->support_reason);
    }
  else
    {
      out->reachable = FALSE;
      out->error = g_strdup (error->message);
      g_ptr_array_set_size (out->domains, 0);
      /* One warning per outage; the rest at debug level. */
      twed_log_host (h->warned ? G_LOG_LEVEL_DEBUG : G_LOG_LEVEL_WARNING, h->name, "unreachable: %s",
                     error->message);
      h->warned = TRUE;
      /* A failed read on a live connection means it is not usable. */
      if (h->conn && virConnectIsAlive (h->conn) != 1)
        disconnect_locked (h);
      /* Unless the connect attempt just set it (or the backoff was
       * still running), the next try is a backoff away too. */
      if (h->retry_at <= g_get_monotonic_time ())
        backend_schedule_retry (h);
      out->retry_at = h->retry_at;
    }
  g_mutex_unlock (&h->lock);
  if (out->reachable)
    twed_host_compute (out);
  return out;
}

typedef struct {
  GPtrArray *items;
  gint next;
  gpointer (*func) (gpointer item, gpointer data);
  gpointer data;
  gpointer *results;
} FanOut;

static gpointer
fan_out_worker (gpointer p)
{
  FanOut *f = p;
  gint i;

  while ((i = g_atomic_int_add (&f->next, 1)) < (gint) f->items->len)
    f->results[i] = f->func (g_ptr_array_index (f->items, i), f->data);
  return NULL;
}

/* Runs @func on every item with up to @threads threads. */
gpointer *
backend_fan_out (GPtrArray *items, guint threads, gpointer (*func) (gpointer, gpointer), gpointer data)
{
  FanOut f = { items, 0, func, data, g_new0 (gpointer, items->len + 1) };
  g_autoptr(GPtrArray) workers = g_ptr_array_new ();
  guint n = MIN (MAX (threads, 1u), items->len);

  for (guint i = 1; i < n; i++)
    g_ptr_array_add (workers, g_thread_new ("twed-host", fan_out_worker, &f));
  fan_out_worker (&f);
  for (guint i = 0; i < workers->len; i++)
    g_thread_join (g_ptr_array_index (workers, i));
  return f.results;
}

static gpointer
refresh_func (gpointer item, gpointer data G_GNUC_UNUSED)
{
  return refresh_host (item);
}

HostTable *
backend_hosts (TwedBackend *b)
{
  HostTable *t;

  g_mutex_lock (&b->table_lock);
  t = g_atomic_rc_box_acquire (b->table);
  g_mutex_unlock (&b->table_lock);
  return t;
}

static void
host_table_clear (gpointer p)
{
  HostTable *t = p;

  g_hash_table_unref (t->by_name);
  g_ptr_array_unref (t->list);
}

void
backend_hosts_unref (HostTable *t)
{
  g_atomic_rc_box_release_full (t, host_table_clear);
}

static HostTable *
host_table_new (void)
{
  HostTable *t = g_atomic_rc_box_new0 (HostTable);

  t->list = g_ptr_array_new_with_free_func (host_unref);
  t->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  return t;
}

static void
host_table_add (HostTable *t, BackendHost *h)
{
  g_ptr_array_add (t->list, h);
  g_hash_table_insert (t->by_name, h->name, h);
}

GPtrArray *
twed_backend_inventory (TwedBackend *b, const char *const *hosts)
{
  g_autoptr(HostTable) t = backend_hosts (b);
  g_autoptr(GPtrArray) todo = g_ptr_array_new ();
  g_autofree gpointer *results = NULL;
  GPtrArray *out = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);

  if (!hosts)
    g_ptr_array_extend (todo, t->list, NULL, NULL);
  else
    for (guint i = 0; hosts[i]; i++)
      {
        BackendHost *h = g_hash_table_lookup (t->by_name, hosts[i]);

        if (h && !g_ptr_array_find (todo, h, NULL))
          g_ptr_array_add (todo, h);
      }
  results = backend_fan_out (todo, BACKEND_OPT (b, threads), refresh_func, NULL);
  for (guint i = 0; i < todo->len; i++)
    g_ptr_array_add (out, results[i]);
  return out;
}

static BackendHost *
host_new (TwedBackend *b, const TwedHostSpec *s)
{
  BackendHost *h = g_new0 (BackendHost, 1);

  h->ref = 1;
  h->backend = b;
  h->name = g_strdup (s->name);
  h->unread_warned = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  h->uri = g_strdup (s->uri);
  g_mutex_init (&h->lock);
  h->cache = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) cached_free);
  g_mutex_init (&h->vm_lock);
  h->vms = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, vm_state_free);
  g_mutex_init (&h->dirty_lock);
  h->dirty = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  h->own_changes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  h->cb_lifecycle = h->cb_tunable = h->cb_metadata = -1;
  return h;
}

/* Defaults of the options left 0, and the options published so that
 * workers reading them see whole values. */
static void
set_options (TwedBackend *b, const TwedBackendOptions *opts)
{
  TwedBackendOptions o = *opts;

  if (!o.reconnect_max)
    o.reconnect_max = 60;
  if (!o.connect_timeout)
    o.connect_timeout = 30;
  if (!o.definition_max_age)
    o.definition_max_age = 600;
#define SET(field) g_atomic_int_set ((gint *) &b->opts.field, (gint) o.field)
  SET (threads);
  SET (keepalive_interval);
  SET (keepalive_count);
  SET (reconnect_max);
  SET (connect_timeout);
  SET (min_change_interval);
  SET (definition_max_age);
#undef SET
}

TwedBackend *
twed_backend_new (GPtrArray *specs, const TwedBackendOptions *opts)
{
  TwedBackend *b = g_new0 (TwedBackend, 1);

  b->ref = 1;
  /* What connections are (read-only or not, with events): fixed for the
   * backend's life, as a reconfiguration keeps the connections it has
   * (and workers read these without synchronization). */
  b->opts.readonly = opts->readonly;
  b->opts.readonly_fallback = opts->readonly_fallback;
  b->opts.events = opts->events;
  set_options (b, opts);
  g_mutex_init (&b->table_lock);
  g_mutex_init (&b->changes_lock);
  b->changes = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, change_stamp_free);
  g_mutex_init (&b->forgotten_lock);
  b->forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  b->table = host_table_new ();
  for (guint i = 0; i < specs->len; i++)
    host_table_add (b->table, host_new (b, g_ptr_array_index (specs, i)));
  return b;
}

TwedBackend *
twed_backend_ref (TwedBackend *b)
{
  g_atomic_int_inc (&b->ref);
  return b;
}

/* Off the host: its connection closed (RPC to a host that may not
 * answer, hence on the reaper), its table entry's reference dropped. */
static void
host_retire (BackendHost *h, gboolean removed)
{
  g_mutex_lock (&h->lock);
  disconnect_locked (h);
  h->removed = removed;
  if (!removed)
    h->backend = NULL;
  g_mutex_unlock (&h->lock);
}

void
twed_backend_unref (TwedBackend *b)
{
  if (!b || !g_atomic_int_dec_and_test (&b->ref))
    return;
  for (guint i = 0; i < b->table->list->len; i++)
    host_retire (g_ptr_array_index (b->table->list, i), FALSE);
  backend_hosts_unref (b->table);
  g_mutex_clear (&b->table_lock);
  g_hash_table_unref (b->changes);
  g_mutex_clear (&b->changes_lock);
  g_ptr_array_unref (b->forgotten);
  g_mutex_clear (&b->forgotten_lock);
  notifier_unref (b->notifier);
  g_free (b);
}

void
twed_backend_set_event_func (TwedBackend *b, TwedBackendEventFunc func, gpointer user_data,
                             GDestroyNotify destroy)
{
  BackendNotifier *n = g_atomic_rc_box_new0 (BackendNotifier);

  n->func = func;
  n->data = user_data;
  n->destroy = destroy;
  n->source = b;
  /* Hosts take it when they connect. */
  notifier_unref (b->notifier);
  b->notifier = n;
}

/* What the reaper does: drop a backend, or retire a removed host. */
typedef struct {
  TwedBackend *backend;
  BackendHost *host;
} Reap;

static void
reap (gpointer data, gpointer unused G_GNUC_UNUSED)
{
  Reap *r = data;

  if (r->backend)
    twed_backend_unref (r->backend);
  if (r->host)
    {
      host_retire (r->host, TRUE);
      host_unref (r->host);
    }
  g_free (r);
}

static void
reap_elsewhere (TwedBackend *b, BackendHost *h)
{
  static GThreadPool *reaper;
  static gsize once;
  Reap *r = g_new0 (Reap, 1);

  if (g_once_init_enter (&once))
    {
      reaper = g_thread_pool_new (reap, NULL, 1, FALSE, NULL);
      g_once_init_leave (&once, 1);
    }
  r->backend = b;
  r->host = h;
  g_thread_pool_push (reaper, r, NULL);
}

void
twed_backend_unref_elsewhere (TwedBackend *b)
{
  gint old;

  do
    {
      old = g_atomic_int_get (&b->ref);
      if (old == 1)
        {
          reap_elsewhere (b, NULL);
          return;
        }
    }
  while (!g_atomic_int_compare_and_exchange (&b->ref, old, old - 1));
}

void
twed_backend_reconfigure (TwedBackend *b, GPtrArray *specs, const TwedBackendOptions *opts)
{
  HostTable *old, *t = host_table_new ();
  g_autoptr(GHashTable) kept = g_hash_table_new (NULL, NULL);
  guint added = 0, removed = 0;

  set_options (b, opts);
  g_mutex_lock (&b->table_lock);
  old = b->table;
  for (guint i = 0; i < specs->len; i++)
    {
      const TwedHostSpec *s = g_ptr_array_index (specs, i);
      BackendHost *h = g_hash_table_lookup (old->by_name, s->name);

      if (g_hash_table_contains (t->by_name, s->name))
        continue;
      /* Same name, same URI: the same host, with its connection, cache
       * and what this process did to its VMs. */
      if (h && g_str_equal (h->uri, s->uri))
        {
          g_atomic_int_inc (&h->ref);
          g_hash_table_add (kept, h);
        }
      else
        {
          h = host_new (b, s);
          added++;
        }
      host_table_add (t, h);
    }
  b->table = t;
  g_mutex_unlock (&b->table_lock);
  for (guint i = 0; i < old->list->len; i++)
    {
      BackendHost *h = g_ptr_array_index (old->list, i);

      if (!g_hash_table_contains (kept, h))
        {
          g_autoptr(GPtrArray) forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
          GHashTableIter it;
          gpointer key, value;

          /* Its VMs' failures go with it. */
          g_mutex_lock (&h->vm_lock);
          g_hash_table_iter_init (&it, h->vms);
          while (g_hash_table_iter_next (&it, &key, &value))
            vm_forgotten_locked (h, key, value, forgotten);
          g_mutex_unlock (&h->vm_lock);
          backend_add_forgotten (b, forgotten);
          g_atomic_int_inc (&h->ref);
          reap_elsewhere (NULL, h);
          removed++;
        }
    }
  backend_hosts_unref (old);
  if (added || removed)
    g_message ("hosts reconfigured: %u kept, %u added, %u removed", g_hash_table_size (kept), added, removed);
}

/* With changes_lock held: drops the stamps that no longer hold their VM
 * back (@min usec after the change) and are not a grant in flight. */
static void
prune_changes_locked (TwedBackend *b, gint64 now, gint64 min)
{
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, b->changes);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      const ChangeStamp *c = value;

      if (!c->granted && c->at + min <= now)
        g_hash_table_iter_remove (&it);
    }
}

void
twed_backend_prune_changes (TwedBackend *b)
{
  gint64 min = (gint64) BACKEND_OPT (b, min_change_interval) * G_USEC_PER_SEC;

  g_mutex_lock (&b->changes_lock);
  prune_changes_locked (b, g_get_monotonic_time (), min);
  g_mutex_unlock (&b->changes_lock);
}

guint
twed_backend_count_changes (TwedBackend *b)
{
  guint n;

  g_mutex_lock (&b->changes_lock);
  n = g_hash_table_size (b->changes);
  g_mutex_unlock (&b->changes_lock);
  return n;
}

/* @st's failures into @r, its times from this boot's monotonic clock
 * (@mono) to the real one (@real). */
static void
vm_record_set_failures (TwedVmRecord *r, const VmState *st, gint64 mono, gint64 real)
{
  r->failures = st->failures;
  r->backoff = st->backoff;
  r->retry_at = st->retry_at ? real + (st->retry_at - mono) : 0;
  r->error = g_strdup (st->error);
  r->failed_raise = st->failed_raise;
}

void
twed_backend_save_vms (TwedBackend *b, GPtrArray *out)
{
  g_autoptr(HostTable) t = backend_hosts (b);
  gint64 mono = g_get_monotonic_time (), real = g_get_real_time ();
  gint64 min = (gint64) BACKEND_OPT (b, min_change_interval) * G_USEC_PER_SEC;
  GHashTableIter it;
  gpointer key, value;

  /* When VMs were changed (or granted a change), while that still holds
   * them back; what no longer does goes. */
  g_mutex_lock (&b->changes_lock);
  prune_changes_locked (b, mono, min);
  g_hash_table_iter_init (&it, b->changes);
  while (g_hash_table_iter_next (&it, &key, &value))
    {
      const ChangeStamp *c = value;
      TwedVmRecord *r;

      r = twed_vm_record_new (c->host, key);
      r->changed_at = real + (c->at - mono);
      g_ptr_array_add (out, r);
    }
  g_mutex_unlock (&b->changes_lock);

  /* Failures, per host: a backoff still running, or one to double. */
  for (guint i = 0; i < t->list->len; i++)
    {
      BackendHost *h = g_ptr_array_index (t->list, i);

      g_mutex_lock (&h->vm_lock);
      g_hash_table_iter_init (&it, h->vms);
      while (g_hash_table_iter_next (&it, &key, &value))
        {
          const VmState *st = value;
          TwedVmRecord *r;

          if (!st->failures && st->retry_at <= mono)
            continue;
          r = twed_vm_record_new (h->name, key);
          vm_record_set_failures (r, st, mono, real);
          g_ptr_array_add (out, r);
        }
      g_mutex_unlock (&h->vm_lock);
    }
}

void
twed_backend_vm_records (TwedBackend *b, const TwedPlanEntry *en, GPtrArray *changed, GPtrArray *failed)
{
  gint64 mono = g_get_monotonic_time (), real = g_get_real_time ();
  const char *key = entry_key (en);
  TwedVmRecord *r;
  ChangeStamp *c;

  g_mutex_lock (&b->changes_lock);
  c = g_hash_table_lookup (b->changes, key);
  r = twed_vm_record_new (c && c->host ? c->host : en->host, key);
  r->changed_at = c && c->at ? real + (c->at - mono) : 0;
  g_mutex_unlock (&b->changes_lock);
  g_ptr_array_add (changed, r);
  if (failed)
    {
      g_autoptr(HostTable) t = backend_hosts (b);
      BackendHost *h = g_hash_table_lookup (t->by_name, en->host);
      const VmState *st;

      r = twed_vm_record_new (en->host, key);
      if (h)
        {
          g_mutex_lock (&h->vm_lock);
          /* As twed_backend_save_vms keeps them. */
          if ((st = g_hash_table_lookup (h->vms, key)) && (st->failures || st->retry_at > mono))
            vm_record_set_failures (r, st, mono, real);
          g_mutex_unlock (&h->vm_lock);
        }
      g_ptr_array_add (failed, r);
    }
}

void
twed_backend_take_forgotten (TwedBackend *b, GPtrArray *failed)
{
  g_mutex_lock (&b->forgotten_lock);
  g_ptr_array_extend_and_steal (failed, g_steal_pointer (&b->forgotten));
  b->forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_mutex_unlock (&b->forgotten_lock);
}

guint
twed_backend_restore_vms (TwedBackend *b, GPtrArray *records)
{
  g_autoptr(GPtrArray) forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(HostTable) t = backend_hosts (b);
  gint64 mono = g_get_monotonic_time (), real = g_get_real_time ();
  guint n = 0;

  for (guint i = 0; i < records->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (records, i);
      BackendHost *h = g_hash_table_lookup (t->by_name, r->host);
      gboolean taken = FALSE;

      /* When it was changed holds the VM wherever it runs now, on a
       * configured host or not.  Back to this boot's monotonic clock; a
       * time ahead of now (a clock stepped back) counts as now, so it
       * holds no longer than it would have. */
      if (r->changed_at)
        {
          gint64 at = mono - MAX (real - r->changed_at, 0);
          ChangeStamp *c;

          g_mutex_lock (&b->changes_lock);
          c = change_stamp_locked (b, r->vm);
          if (at > c->at)
            {
              c->at = at;
              g_free (c->host);
              c->host = g_strdup (r->host);
            }
          g_mutex_unlock (&b->changes_lock);
          taken = TRUE;
        }
      if (h && (r->failures || r->retry_at))
        {
          VmState *st = g_new0 (VmState, 1);

          st->failures = r->failures;
          st->backoff = r->backoff;
          st->retry_at = r->retry_at ? mono + MIN (r->retry_at - real, (gint64) r->backoff * G_USEC_PER_SEC) : 0;
          st->error = g_strdup (r->error);
          st->failed_raise = r->failed_raise;
          g_mutex_lock (&h->vm_lock);
          g_hash_table_replace (h->vms, g_strdup (r->vm), st);
          g_mutex_unlock (&h->vm_lock);
          taken = TRUE;
        }
      else if (r->failures)
        /* Of a host no longer configured: they went with it. */
        g_ptr_array_add (forgotten, twed_vm_record_new (r->host, r->vm));
      n += taken;
    }
  backend_add_forgotten (b, forgotten);
  return n;
}

void
twed_backend_set_min_change_interval (TwedBackend *b, guint seconds)
{
  g_atomic_int_set ((gint *) &b->opts.min_change_interval, (gint) seconds);
}

void
twed_backend_counters (TwedBackend *b, guint64 *reads, guint64 *writes)
{
  *reads = __atomic_load_n (&b->reads, __ATOMIC_RELAXED);
  *writes = __atomic_load_n (&b->writes, __ATOMIC_RELAXED);
}

/* For tests: the live connection of @host (e.g. to drive a test:///
 * driver whose state lives only inside that connection). */
virConnectPtr
twed_backend_get_connection (TwedBackend *b, const char *host)
{
  g_autoptr(HostTable) t = backend_hosts (b);
  BackendHost *h = g_hash_table_lookup (t->by_name, host);

  return h ? h->conn : NULL;
}
