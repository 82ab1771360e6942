/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-backend.h"
#include "twed-config.h"
#include "twed-metrics.h"

G_BEGIN_DECLS

typedef struct _TwedEngine TwedEngine;

/* Takes ownership of @config. Runs in the thread-default main context,
 * which must be the one that dispatches libvirt's events (GLib's global
 * default, see twed_libvirt_init): the engine keeps every libvirt call
 * off it, in a thread pool. */
TwedEngine *twed_engine_new (TwedConfig *config, gboolean dry_run);
void        twed_engine_free (TwedEngine *engine);

/* Loads the policies, watches the policy directory, starts the timer
 * and schedules a first cycle. FALSE when the metrics listener fails. */
gboolean twed_engine_start (TwedEngine *engine, GError **error);

/* Re-reads the policy directory; a bad set is logged and the last good
 * one stays. */
gboolean twed_engine_reload_policies (TwedEngine *engine);
/* Replaces the configuration (SIGHUP); TRUE when it was taken. */
gboolean twed_engine_reload_config (TwedEngine *engine, TwedConfig *config);

/* No pass runs or waits for its debounce (for tests). */
gboolean twed_engine_idle (TwedEngine *engine);
/* Before twed_engine_free, which waits for them: waits for the file
 * writes under way to land, at most [twed] hung_pass_after seconds (30 at
 * most, in @waited_s).  FALSE when one has not: the caller may only exit
 * then, without freeing the engine. */
gboolean twed_engine_writes_settle (TwedEngine *engine, guint *waited_s);

/* A pass read and planned its host within [metrics] health_intervals
 * intervals (or the engine started that recently); @text: why, for
 * /healthz.  */
gboolean twed_engine_healthy (TwedEngine *engine, char **text);
/* Passes keep ending (whatever they found): the systemd watchdog. */
gboolean twed_engine_progressing (TwedEngine *engine);
/* One line for systemd's STATUS=. */
char    *twed_engine_status (TwedEngine *engine);

/* Workers added beyond @threads: one per pass that has been inside a
 * worker for long (@running_since: monotonic usec a worker took each
 * running pass, 0 for one still queued or between stages), at most
 * 2 x @threads.  Pure, for tests. */
guint twed_engine_extra_workers (guint threads, const gint64 *running_since, guint n, gint64 now);

/* For benchmarks: in the calling thread, what the engine does with an
 * event's pass over @host once its read stage found @inventory (the one
 * TwedHost, taken): the plan, the grant from the interval's budget, the
 * apply stage, the pass's end (plan store, schedules); then the metrics
 * as a render makes them, their size in bytes. */
void  twed_engine_run_pass_inline (TwedEngine *engine, const char *host, GPtrArray *inventory);
gsize twed_engine_render_now (TwedEngine *engine);

TwedBackend         *twed_engine_get_backend (TwedEngine *engine);
const TwedPlan      *twed_engine_get_last_plan (TwedEngine *engine);
const TwedCounters  *twed_engine_get_counters (TwedEngine *engine);
guint                twed_engine_get_event_cycles (TwedEngine *engine);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedEngine, twed_engine_free)

G_END_DECLS
