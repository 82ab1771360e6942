/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-plan-store.h"

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
  gint64 last_success_at;    /* unix seconds a pass last read and planned its host, 0 = never */
  guint passes_stuck;        /* passes whose libvirt call has not returned for long */
} TwedCounters;

/* Prometheus text exposition format 0.0.4 into @out (emptied first):
 * the daemon's counters, the fleet's totals and one sample per host;
 * with @per_vm one per VM too (a region's VMs are a hundred megabytes of
 * text, so that is asked for).  A buffer kept between renders keeps its
 * pages, where a fresh megabyte is mapped and faulted in each time. */
void  twed_metrics_render_into (GString *out, TwedPlanStore *store, const TwedCounters *counters,
                                gboolean per_vm);

/* node_exporter textfile collector: written atomically. */
gboolean twed_metrics_write_textfile (const char *path, GBytes *text, GError **error);

typedef struct _TwedMetricsServer TwedMetricsServer;

/* Serves the latest text on http://LISTEN/metrics; needs libsoup. */
TwedMetricsServer *twed_metrics_server_new (const char *listen, GError **error);
/* Serves @text (a reference is kept) from now on. */
void               twed_metrics_server_update (TwedMetricsServer *server, GBytes *text);
/* /healthz answers 200 when @func returns TRUE, else 503; the text it
 * sets is the body.  Asked at each request: health changes with time
 * alone. */
typedef gboolean (*TwedHealthFunc) (char **text, gpointer data);
void               twed_metrics_server_set_health (TwedMetricsServer *server, TwedHealthFunc func,
                                                   gpointer data);
void               twed_metrics_server_free (TwedMetricsServer *server);

G_END_DECLS
