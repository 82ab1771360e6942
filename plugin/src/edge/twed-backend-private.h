/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by twed-backend.c (connections, events, inventory) and
 * twed-backend-changes.c (changes); not installed. */
#pragma once

#include "twed-backend.h"
#include "twed-libvirt.h"

G_BEGIN_DECLS

/* An option that a reconfiguration may change while workers read it. */
#define BACKEND_OPT(b, field) ((guint) g_atomic_int_get ((gint *) &(b)->opts.field))

typedef struct {
  TwedDomain *def;   /* parsed definition; active flag set per cycle */
  gint64 read_at;    /* monotonic usec the definition was read */
} CachedDomain;

/* How the changes this process made to one VM on one host failed
 * lately.  Kept across reconnects. */
typedef struct {
  guint failures;           /* changes failed in a row */
  guint backoff;            /* seconds of the current failure backoff */
  gint64 retry_at;          /* monotonic usec: no change before */
  char *error;              /* the last failure, with libvirt's code */
  gboolean failed_raise;    /* the last failed change was not to a
                             * lower delay: one to a lower delay may
                             * pass the back-off */
} VmState;

/* When a VM was last changed, fleet-wide: keyed by its uuid, not by
 * host, so that min_change_interval follows a VM that migrates (changed
 * on one host, planned again at once on the next). */
typedef struct {
  gint64 at;                /* monotonic usec of the last change, or of
                             * the grant of one not tried yet */
  gint64 before;            /* while granted: at before the grant */
  char *before_host;        /* while granted: host before the grant */
  gboolean granted;         /* a grant not yet made or refunded */
  char *host;               /* where it was changed (or granted) */
} ChangeStamp;

/* Where event notices go: shared by a backend and its hosts, which
 * libvirt's callbacks may outlive the backend by. */
typedef struct {
  TwedBackendEventFunc func;
  gpointer data;
  GDestroyNotify destroy;
  TwedBackend *source;      /* identity only, never dereferenced */
} BackendNotifier;          /* atomic rc box */

/* A virConnectOpen running on a thread of its own, so that the caller
 * can stop waiting for it: libvirt has no connect timeout, and a host
 * that accepts the TCP connection and never answers holds the open
 * forever.  Shared by the thread and the host that started it. */
typedef struct {
  char *uri;
  gboolean readonly;
  gboolean readonly_fallback;
  GMutex lock;
  GCond cond;
  gboolean done;
  virConnectPtr conn;
  gboolean got_readonly;    /* conn is read-only (asked for, or the fallback) */
  char *error;
  int code;                 /* virErrorNumber of the failure */
} OpenAttempt;              /* atomic rc box */

/* Reference counted: libvirt holds a reference for each callback it may
 * still run (events, close), released when it drops the callback. */
typedef struct {
  gint ref;                 /* atomic */
  TwedBackend *backend;     /* not for callbacks: they may outlive it */
  BackendNotifier *notifier; /* for callbacks */
  char *name;
  char *uri;
  GMutex lock;
  virConnectPtr conn;
  gboolean is_test;
  TwedSupport support;
  char *support_reason;   /* why unknown */
  gboolean readonly_conn;
  guint session;          /* under lock: the connection's number among all opened */
  GHashTable *cache;      /* uuid -> CachedDomain */
  /* Event callbacks run on libvirt's event thread and must never wait
   * for a cycle in progress: they only touch these, under their lock. */
  GMutex dirty_lock;
  GHashTable *dirty;      /* uuids whose definition must be re-read */
  gboolean lost;          /* close callback fired */
  GHashTable *own_changes; /* uuid -> OwnChange we set live: its tunable
                            * event is ours, not news */
  gboolean removed;       /* under lock: no longer configured, disconnected */
  guint ka_interval;      /* under lock: keepalive set on conn */
  guint ka_count;
  int cb_lifecycle;
  int cb_tunable;
  int cb_metadata;
  OpenAttempt *pending_open; /* an open given up on that has not returned */
  guint backoff;          /* seconds of the last wait, doubled per failure */
  gint64 retry_at;        /* monotonic usec of the next attempt, 0 = none due */
  char *last_error;
  gboolean warned;        /* this outage was logged as a warning */
  guint unread_backoff;   /* seconds before definitions are read again */
  GHashTable *unread_warned; /* uuids whose unread definition was logged */
  GMutex vm_lock;
  GHashTable *vms;        /* uuid (or name) -> VmState */
} BackendHost;

/* The configured hosts: never changed once published, replaced as a
 * whole by a reconfiguration; whoever iterates holds a reference. */
typedef struct {
  GPtrArray *list;        /* BackendHost, a reference each */
  GHashTable *by_name;    /* name -> BackendHost, borrowed from list */
} HostTable;              /* atomic rc box */

struct _TwedBackend {
  gint ref;               /* atomic */
  TwedBackendOptions opts; /* fields read with BACKEND_OPT */
  GMutex table_lock;
  HostTable *table;       /* under table_lock: swap and acquire */
  BackendNotifier *notifier;
  GMutex changes_lock;
  GHashTable *changes;    /* under changes_lock: VM key -> ChangeStamp */
  GMutex forgotten_lock;
  GPtrArray *forgotten;   /* under forgotten_lock: TwedVmRecord, failures
                           * no longer kept, until taken */
  guint64 reads;          /* atomic (__atomic builtins): counters never wrap */
  guint64 writes;
};

/* The hosts now: a reference to release with backend_hosts_unref. */
HostTable *backend_hosts (TwedBackend *b);
void       backend_hosts_unref (HostTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HostTable, backend_hosts_unref)
/* With the VM's own change registered: forget it (the set failed). */
void       backend_forget_own_change (BackendHost *h, virDomainPtr dom);

void      backend_count_read (BackendHost *h);
void      backend_count_write (BackendHost *h);
/* After a change of the VM @key was tried (@error NULL: made): holds
 * it for min_change_interval and ends its failure back-off, or backs it
 * off when it failed.  A lowering made during the back-off of a failed
 * raise leaves that back-off running.  @key: its uuid (or name, from a
 * driver without uuids); @raise: the change was not to a lower delay
 * (twed_setting_lowers). */
void      backend_vm_changed (BackendHost *h, const char *key, const GError *error, gboolean raise);
/* Why the VM @key must not change now, NULL when it may.
 * @after_failure: the hold is only the back-off after a failed raise,
 * which a change to a lower delay may pass. */
char     *backend_vm_hold (BackendHost *h, const char *key, gboolean *after_failure);
/* @dom was set live to @s here: the tunable event that reports it is
 * the backend's own and prompts no pass. */
void      backend_expect_own_change (BackendHost *h, virDomainPtr dom, const TwedSetting *s);
/* The definition of @dom is read again at the next refresh. */
void      backend_mark_dirty (BackendHost *h, virDomainPtr dom);
/* With h->lock held: (re)connects unless a backoff is pending. */
gboolean  backend_connect_locked (BackendHost *h, GError **error);
/* Runs @func on every item with up to @threads threads. */
gpointer *backend_fan_out (GPtrArray *items, guint threads,
                           gpointer (*func) (gpointer, gpointer), gpointer data);

G_END_DECLS
