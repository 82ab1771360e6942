/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-planner.h"

G_BEGIN_DECLS

typedef struct {
  guint64 cycles;
  guint64 changes_applied;
  guint64 changes_failed;
  guint64 policy_errors;
  guint64 libvirt_reads;
  guint64 libvirt_writes;
  gboolean policy_ok;        /* the last load succeeded */
  gint64 policy_loaded_at;   /* unix seconds of the last good load */
  double cycle_seconds;
} TwedCounters;

/* Prometheus text exposition format 0.0.4. */
char *twed_metrics_render (const TwedPlan *plan, const TwedCounters *counters);

/* node_exporter textfile collector: written atomically. */
gboolean twed_metrics_write_textfile (const char *path, const char *text, GError **error);

typedef struct _TwedMetricsServer TwedMetricsServer;

/* Serves the latest text on http://LISTEN/metrics; needs libsoup. */
TwedMetricsServer *twed_metrics_server_new (const char *listen, GError **error);
void               twed_metrics_server_update (TwedMetricsServer *server, const char *text);
void               twed_metrics_server_free (TwedMetricsServer *server);

G_END_DECLS
