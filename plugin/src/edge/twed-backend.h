/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-planner.h"
#include "twed-config.h"

G_BEGIN_DECLS

typedef struct _TwedBackend TwedBackend;

/* Called when an event touched @host, from whichever thread libvirt
 * dispatches it on; @what "lost" (domain NULL) when the connection
 * closed, so that the owner schedules the reconnect.  @source: the
 * backend the host belongs to, for comparison only (it may be gone). */
typedef void (*TwedBackendEventFunc) (TwedBackend *source, const char *host, const char *domain,
                                      const char *what, gpointer user_data);

typedef struct {
  guint threads;            /* parallel hosts */
  gboolean readonly;
  gboolean readonly_fallback; /* read-only when read-write is refused */
  gboolean events;          /* register lifecycle/tunable/metadata events */
  guint keepalive_interval; /* seconds, 0 = off */
  guint keepalive_count;
  guint reconnect_max;      /* backoff ceiling, seconds */
  guint connect_timeout;    /* seconds an open may take, 0 = 30 */
  guint min_change_interval; /* seconds between two changes of one VM, 0 = none */
  guint definition_max_age; /* drivers without bulk vCPU stats: re-read a
                             * running domain's definition after this many
                             * seconds, 0 = 600 */
} TwedBackendOptions;

TwedBackend *twed_backend_new (GPtrArray *specs /* TwedHostSpec */, const TwedBackendOptions *opts);
/* Reference counted: a pass running in a worker keeps the backend it
 * started with while the daemon reloads its configuration. */
TwedBackend *twed_backend_ref (TwedBackend *backend);
void         twed_backend_unref (TwedBackend *backend);
/* The same, but the last reference is dropped on a thread of its own:
 * closing connections is RPC to hosts that may not answer. */
void         twed_backend_unref_elsewhere (TwedBackend *backend);
/* A reload: hosts of @specs whose name and URI are unchanged stay as
 * they are (connection, cached definitions, what was done to their VMs:
 * min_change_interval and failure backoffs keep holding); new ones are
 * added, removed ones disconnected on a thread of their own.  The
 * options take effect at their next use (readonly, readonly_fallback and
 * events excepted: they stay as the backend was made); keepalive on the live
 * connections at their host's next pass.  Safe while passes run. */
void         twed_backend_reconfigure (TwedBackend *backend, GPtrArray *specs /* TwedHostSpec */,
                                       const TwedBackendOptions *opts);
/* Before the first inventory: hosts take it when they connect. */
void         twed_backend_set_event_func (TwedBackend *backend, TwedBackendEventFunc func,
                                          gpointer user_data, GDestroyNotify destroy);

/* Reads every host in parallel (or only those named in @hosts) and
 * returns TwedHost snapshots with ratios computed. Unreachable hosts
 * are returned with reachable = FALSE and the reason; never fails.
 * Blocks for as long as the slowest host takes. */
GPtrArray *twed_backend_inventory (TwedBackend *backend, const char *const *hosts);


/* Applies the plan's changes (only those), in parallel across hosts.
 * Fills each entry's result/error. Returns the number of failures. */
guint twed_backend_apply (TwedBackend *backend, TwedPlan *plan, gboolean dry_run);

/* Manual setting: applies @s and marks the VM pinned in its metadata;
 * with @s NULL removes the mark (back to automatic). All or nothing. */
gboolean twed_backend_set_manual (TwedBackend *backend, const char *domain,
                                  const TwedSetting *s, gboolean optout, GError **error);

/* A change of @entry's VM was granted: until it is tried, the VM counts
 * as changed now for min_change_interval (and twed_backend_save_vms
 * records it so), so that a restart between grant and change finds it
 * held.  VMs are told apart by uuid, fleet-wide: the hold follows a VM
 * that migrates to another host.  FALSE, and nothing changes, when a
 * change of it is already granted. */
gboolean twed_backend_grant (TwedBackend *backend, const TwedPlanEntry *entry);
/* Before the budget is spent on @plans (passes read at about the same
 * time, possibly over hosts that list the same VM: mid-migration, or an
 * inactive copy left on the source): defers each change of a VM whose
 * change is already granted, still held by min_change_interval, or
 * planned earlier in @plans.  The read-time hold cannot see those. */
void twed_backend_hold_granted (TwedBackend *backend, TwedPlan *const *plans, guint n);
/* Forgets when VMs were changed once min_change_interval no longer holds
 * them (whether or not a state file keeps them). */
void twed_backend_prune_changes (TwedBackend *backend);
/* How many VMs' last change the backend keeps (for tests). */
guint twed_backend_count_changes (TwedBackend *backend);
/* The granted change was not made (it failed, or was not tried): the
 * VM's last change is what it was before the grant. */
void twed_backend_ungrant (TwedBackend *backend, const TwedPlanEntry *entry);

/* A reload changed [twed] min_change_interval: the VMs' history stays. */
void twed_backend_set_min_change_interval (TwedBackend *backend, guint seconds);

/* What this process did to each VM lately that still holds it back:
 * TwedVmRecord, Unix times, appended to @out, for the state file.  When
 * a VM was changed or granted a change (min_change_interval, keyed by
 * uuid fleet-wide: the record's host says where), and the failures of
 * its changes on a host (a failure backoff), in records of their own. */
void  twed_backend_save_vms (TwedBackend *backend, GPtrArray *out);
/* Takes such records back (failures: those of configured hosts; when a
 * VM was changed: all of them): how many. */
guint twed_backend_restore_vms (TwedBackend *backend, GPtrArray *records);
/* Moves to @failed a record of no failure (0 failures, no retry_at) for
 * each VM whose failures the backend stopped keeping since the last
 * call: the VM left its host and its backoff was over, its host left the
 * configuration, or its host was not configured when its records were
 * restored.  Appended to the state's log, they take those failures out
 * of the state. */
void  twed_backend_take_forgotten (TwedBackend *backend, GPtrArray *failed);

/* What holds @entry's VM back now, as records for the state's log: when
 * it was last changed (fleet-wide; changed_at 0 when never, or no
 * longer kept) appended to @changed, and, with @failed, its failures on
 * the entry's host (none: 0 failures, no retry_at). */
void  twed_backend_vm_records (TwedBackend *backend, const TwedPlanEntry *entry, GPtrArray *changed,
                               GPtrArray *failed);

/* libvirt calls made so far: reads and writes, all hosts. */
void twed_backend_counters (TwedBackend *backend, guint64 *reads, guint64 *writes);

/* Whether a cached definition no longer says how many vCPUs a domain
 * has: a running domain's bulk stats report vcpu.current (@has_current)
 * other than the definition's count (vCPU hot-plug, which emits no
 * event), or, from drivers without that (the test driver), the
 * definition was read more than @max_age seconds ago.  A domain not
 * running, or whose cached definition is a fallback (@cached_unread),
 * is never stale.  Times monotonic usec.  Pure, for tests. */
gboolean twed_definition_stale (gboolean active, gboolean has_current, guint current, guint cached_nvcpus,
                                gboolean cached_unread, gint64 read_at, gint64 now, guint max_age);

/* Whether a tunable event reporting @reported is the echo of the live
 * change to @set made at @set_at (monotonic usec): the same values,
 * within 30 s.  Later, an event with the same values is someone else's
 * change (the echo never came: the set failed after all, the event was
 * lost).  Pure, for tests. */
gboolean twed_own_echo (const TwedSetting *set, gint64 set_at, const TwedSetting *reported, gint64 now);

/* For tests only. */
struct _virConnect;
struct _virConnect *twed_backend_get_connection (TwedBackend *backend, const char *host);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedBackend, twed_backend_unref)

G_END_DECLS
