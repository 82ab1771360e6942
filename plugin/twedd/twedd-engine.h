/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-backend.h"
#include "twed-config.h"
#include "twed-metrics.h"

G_BEGIN_DECLS

typedef struct _TwedEngine TwedEngine;

/* Takes ownership of @config. Runs in the thread-default main context. */
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

/* One inventory/plan/apply pass over every host, or just @only_host. */
void twed_engine_cycle (TwedEngine *engine, const char *only_host);

TwedBackend         *twed_engine_get_backend (TwedEngine *engine);
const TwedPlan      *twed_engine_get_last_plan (TwedEngine *engine);
const TwedCounters  *twed_engine_get_counters (TwedEngine *engine);
guint                twed_engine_get_event_cycles (TwedEngine *engine);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedEngine, twed_engine_free)

G_END_DECLS
