/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twed-metrics.h"

#include <gio/gio.h>
#include <string.h>

static void
escape_label (GString *out, const char *value)
{
  const char *p = value ? value : "";
  gsize plain = strcspn (p, "\\\"\n");

  /* Host and domain names need no escaping: one copy. */
  g_string_append_len (out, p, (gssize) plain);
  for (p += plain; *p; p++)
    {
      if (*p == '\\' || *p == '"')
        g_string_append_c (out, '\\');
      if (*p == '\n')
        {
          g_string_append (out, "\\n");
          continue;
        }
      g_string_append_c (out, *p);
    }
}

static void
family (GString *s, const char *name, const char *type, const char *help)
{
  g_string_append_printf (s, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one unlabelled sample: its HELP, TYPE and value lines. */
static void G_GNUC_PRINTF (5, 6)
scalar (GString *s, const char *name, const char *type, const char *help, const char *fmt, ...)
{
  va_list ap;

  family (s, name, type, help);
  g_string_append_printf (s, "%s ", name);
  va_start (ap, fmt);
  g_string_append_vprintf (s, fmt, ap);
  va_end (ap);
  g_string_append_c (s, '\n');
}

/* One labelled sample: name{host="H"} value.  By hand, not printf:
 * a region has tens of thousands of hosts and the metrics are rendered
 * after every pass (at most once a second). */
static void
sample_host (GString *s, const char *name, const char *host, const char *value)
{
  g_string_append (s, name);
  g_string_append (s, "{host=\"");
  escape_label (s, host);
  g_string_append (s, "\"} ");
  g_string_append (s, value);
  g_string_append_c (s, '\n');
}

static void
sample_label (GString *s, const char *name, const char *label, const char *value, guint n)
{
  g_string_append_printf (s, "%s{%s=\"%s\"} %u\n", name, label, value, n);
}

/* One host's lines of twed_host_up and twed_host_ratio, back to back. */
typedef struct {
  GString *text;
  gsize up_len;
} HostSamples;

static void
host_samples_free (gpointer p)
{
  HostSamples *hs = p;

  g_string_free (hs->text, TRUE);
  g_free (hs);
}

static HostSamples *
host_samples (TwedPlanStore *store, guint index)
{
  HostSamples *hs = twed_plan_store_nth_derived (store, index);
  const TwedPlan *p;

  if (hs)
    return hs;
  p = twed_plan_store_nth (store, index);
  hs = g_new0 (HostSamples, 1);
  hs->text = g_string_new (NULL);
  for (guint j = 0; j < p->hosts->len; j++)
    {
      const TwedPlanHost *h = g_ptr_array_index (p->hosts, j);

      sample_host (hs->text, "twed_host_up", h->name, h->reachable ? "1" : "0");
    }
  hs->up_len = hs->text->len;
  for (guint j = 0; j < p->hosts->len; j++)
    {
      const TwedPlanHost *h = g_ptr_array_index (p->hosts, j);
      char num[G_ASCII_DTOSTR_BUF_SIZE];

      if (h->reachable)
        sample_host (hs->text, "twed_host_ratio", h->name, g_ascii_formatd (num, sizeof num, "%.6g", h->ratio));
    }
  twed_plan_store_set_nth_derived (store, index, hs, host_samples_free);
  return hs;
}

static void
render_per_vm (GString *s, TwedPlanStore *store)
{
  const TwedPlan *plan = twed_plan_store_view (store);

  /* Each family's samples must form one group. */
  for (guint k = 0; k < 3; k++)
    {
      static const char *const names[] = { "twed_vm_ratio", "twed_vm_delay", "twed_vm_target_delay" };
      static const char *const help[] = {
        "Mean load of the pCPUs the VM may run on.",
        "Current TWEDEL of the VM (0 when off), by mode.",
        "TWEDEL the plan wants for the VM, by mode.",
      };

      family (s, names[k], "gauge", help[k]);
      for (guint i = 0; i < plan->entries->len; i++)
        {
          const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);
          const TwedSetting *st = k == 1 ? &e->current : &e->target;

          g_string_append_printf (s, "%s{host=\"", names[k]);
          escape_label (s, e->host);
          g_string_append (s, "\",domain=\"");
          escape_label (s, e->domain);
          if (k == 0)
            g_string_append_printf (s, "\"} %.6g\n", e->ratio);
          else
            g_string_append_printf (s, "\",mode=\"%s\"} %u\n", twed_mode_to_string (st->mode), st->delay);
        }
    }
}

void
twed_metrics_render_into (GString *s, TwedPlanStore *store, const TwedCounters *c, gboolean per_vm)
{
  const TwedPlanSummary *sum;
  guint nhosts;

  g_string_truncate (s, 0);
  scalar (s, "twed_cycles_total", "counter", "Passes run (one host each).",
          "%" G_GUINT64_FORMAT, c->cycles);
  scalar (s, "twed_changes_applied_total", "counter", "TWED changes applied.",
          "%" G_GUINT64_FORMAT, c->changes_applied);
  scalar (s, "twed_changes_failed_total", "counter", "TWED changes that failed.",
          "%" G_GUINT64_FORMAT, c->changes_failed);
  scalar (s, "twed_policy_errors_total", "counter", "Policy loads rejected (last good kept).",
          "%" G_GUINT64_FORMAT, c->policy_errors);
  scalar (s, "twed_policy_ok", "gauge", "1 if the last policy load succeeded.",
          "%d", c->policy_ok ? 1 : 0);
  scalar (s, "twed_policy_loaded_timestamp_seconds", "gauge", "When the policy in force was loaded.",
          "%" G_GINT64_FORMAT, c->policy_loaded_at);
  scalar (s, "twed_libvirt_reads_total", "counter", "libvirt read calls.",
          "%" G_GUINT64_FORMAT, c->libvirt_reads);
  scalar (s, "twed_libvirt_writes_total", "counter", "libvirt write calls.",
          "%" G_GUINT64_FORMAT, c->libvirt_writes);
  scalar (s, "twed_cycle_seconds", "gauge", "Wall time of the last pass.",
          "%.6f", c->cycle_seconds);
  scalar (s, "twed_last_cycle_success_timestamp_seconds", "gauge",
          "When a pass last read its host and planned it (0: never).",
          "%" G_GINT64_FORMAT, c->last_success_at);
  scalar (s, "twed_passes_stuck", "gauge",
          "Passes inside a libvirt call for longer than max(2 x interval, 120 s); their hosts count as down.",
          "%u", c->passes_stuck);
  if (!store)
    return;

  sum = twed_plan_store_summary (store);
  family (s, "twed_hosts", "gauge", "Hosts by state in their last pass.");
  sample_label (s, "twed_hosts", "state", "up", sum->hosts_up);
  sample_label (s, "twed_hosts", "state", "down", sum->hosts - sum->hosts_up);
  family (s, "twed_vms", "gauge", "VMs by the action of their host's last plan.");
  for (guint a = 0; a < G_N_ELEMENTS (sum->actions); a++)
    sample_label (s, "twed_vms", "action", twed_action_to_string (a), sum->actions[a]);
  family (s, "twed_vms_mode", "gauge", "VMs by their current TWED mode.");
  for (guint m = 0; m < G_N_ELEMENTS (sum->current_modes); m++)
    sample_label (s, "twed_vms_mode", "mode", twed_mode_to_string (m), sum->current_modes[m]);

  /* The per-host samples are rendered once per plan of the host and
   * kept in the store: after a pass over one host, only its lines are
   * redone. */
  nhosts = twed_plan_store_size (store);
  family (s, "twed_host_up", "gauge", "1 if the host answered in its last pass.");
  for (guint i = 0; i < nhosts; i++)
    {
      HostSamples *hs = host_samples (store, i);

      g_string_append_len (s, hs->text->str, (gssize) hs->up_len);
    }
  family (s, "twed_host_ratio", "gauge", "vCPUs per pCPU of the host's shared pool.");
  for (guint i = 0; i < nhosts; i++)
    {
      HostSamples *hs = twed_plan_store_nth_derived (store, i);

      g_string_append_len (s, hs->text->str + hs->up_len, (gssize) (hs->text->len - hs->up_len));
    }
  if (per_vm)
    render_per_vm (s, store);
}

gboolean
twed_metrics_write_textfile (const char *path, GBytes *text, GError **error)
{
  gsize len;
  const char *data = g_bytes_get_data (text, &len);

  /* g_file_set_contents writes a temporary file and renames it, so the
   * collector never reads half a file. */
  return g_file_set_contents_full (path, data, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, 0644, error);
}

#if HAVE_LIBSOUP
#include <libsoup/soup.h>

struct _TwedMetricsServer {
  SoupServer *server;
  GBytes *text;             /* the latest render, shared with each response */
  TwedHealthFunc health;
  gpointer health_data;
};

static void
handle_health (SoupServer *server G_GNUC_UNUSED, SoupServerMessage *msg, const char *path G_GNUC_UNUSED,
               GHashTable *query G_GNUC_UNUSED, gpointer data)
{
  TwedMetricsServer *self = data;
  g_autofree char *text = NULL;
  gboolean ok;
  gsize len;

  if (g_strcmp0 (soup_server_message_get_method (msg), "GET") != 0 &&
      g_strcmp0 (soup_server_message_get_method (msg), "HEAD") != 0)
    {
      soup_server_message_set_status (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL);
      return;
    }
  ok = self->health ? self->health (&text, self->health_data) : TRUE;
  if (!text)
    text = g_strdup (ok ? "ok\n" : "unhealthy\n");
  len = strlen (text);
  soup_server_message_set_status (msg, ok ? SOUP_STATUS_OK : SOUP_STATUS_SERVICE_UNAVAILABLE, NULL);
  soup_server_message_set_response (msg, "text/plain", SOUP_MEMORY_TAKE, g_steal_pointer (&text), len);
}

static void
handle_metrics (SoupServer *server G_GNUC_UNUSED, SoupServerMessage *msg, const char *path G_GNUC_UNUSED,
                GHashTable *query G_GNUC_UNUSED, gpointer data)
{
  TwedMetricsServer *self = data;

  if (g_strcmp0 (soup_server_message_get_method (msg), "GET") != 0)
    {
      soup_server_message_set_status (msg, SOUP_STATUS_METHOD_NOT_ALLOWED, NULL);
      return;
    }
  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_message_headers_set_content_type (soup_server_message_get_response_headers (msg),
                                         "text/plain; version=0.0.4", NULL);
  /* A reference, not a copy: a region's metrics are megabytes. */
  if (self->text)
    soup_message_body_append_bytes (soup_server_message_get_response_body (msg), self->text);
  soup_message_body_complete (soup_server_message_get_response_body (msg));
}

TwedMetricsServer *
twed_metrics_server_new (const char *listen, GError **error)
{
  g_autoptr(GSocketAddress) addr = NULL;
  g_autoptr(GSocketConnectable) conn = NULL;
  g_autoptr(GError) local = NULL;
  TwedMetricsServer *self;

  if (!(conn = g_network_address_parse (listen, 0, &local)))
    {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "[metrics] listen '%s': %s", listen,
                   local->message);
      return NULL;
    }
  {
    GNetworkAddress *na = G_NETWORK_ADDRESS (conn);
    g_autoptr(GInetAddress) ia = g_inet_address_new_from_string (g_network_address_get_hostname (na));

    if (!ia || g_network_address_get_port (na) == 0)
      {
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                     "[metrics] listen '%s': want IP:PORT (e.g. 127.0.0.1:9777)", listen);
        return NULL;
      }
    addr = g_inet_socket_address_new (ia, g_network_address_get_port (na));
  }
  self = g_new0 (TwedMetricsServer, 1);
  self->server = soup_server_new ("server-header", "twedd", NULL);
  soup_server_add_handler (self->server, "/metrics", handle_metrics, self, NULL);
  soup_server_add_handler (self->server, "/healthz", handle_health, self, NULL);
  if (!soup_server_listen (self->server, addr, 0, error))
    {
      twed_metrics_server_free (self);
      return NULL;
    }
  return self;
}

void
twed_metrics_server_update (TwedMetricsServer *self, GBytes *text)
{
  g_clear_pointer (&self->text, g_bytes_unref);
  self->text = g_bytes_ref (text);
}

void
twed_metrics_server_set_health (TwedMetricsServer *self, TwedHealthFunc func, gpointer data)
{
  self->health = func;
  self->health_data = data;
}

void
twed_metrics_server_free (TwedMetricsServer *self)
{
  if (!self)
    return;
  g_clear_object (&self->server);
  g_clear_pointer (&self->text, g_bytes_unref);
  g_free (self);
}

#else

struct _TwedMetricsServer {
  int unused;
};

TwedMetricsServer *
twed_metrics_server_new (const char *listen, GError **error)
{
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
               "[metrics] listen=%s needs twed built with libsoup-3.0 (-Dmetrics_http=enabled)", listen);
  return NULL;
}

void
twed_metrics_server_update (TwedMetricsServer *self G_GNUC_UNUSED, GBytes *text G_GNUC_UNUSED)
{
}

void
twed_metrics_server_set_health (TwedMetricsServer *self G_GNUC_UNUSED, TwedHealthFunc func G_GNUC_UNUSED,
                                gpointer data G_GNUC_UNUSED)
{
}

void
twed_metrics_server_free (TwedMetricsServer *self)
{
  g_free (self);
}

#endif
