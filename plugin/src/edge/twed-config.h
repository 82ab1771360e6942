/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  char *name;
  char *uri;
} TwedHostSpec;

typedef struct {
  char *path;               /* file read, NULL when defaults only */
  char *policy_dir;
  GPtrArray *hosts;         /* TwedHostSpec */
  guint interval;           /* seconds between scheduled cycles */
  gboolean dry_run;
  gboolean allow_builtin_default; /* a policy directory without policies is not an error */
  char *state_dir;          /* where twedd keeps what must survive a restart, NULL = none */
  guint max_changes;        /* global cap per cycle, 0 = none */
  guint min_change_interval; /* seconds between two changes of one VM, 0 = none */
  guint threads;
  guint hung_pass_after;    /* seconds (at least 2 x interval) before a pass
                             * inside a libvirt call is reported hung */
  guint keepalive_interval;
  guint keepalive_count;
  guint reconnect_max;
  guint connect_timeout;    /* seconds an open may take */
  guint definition_max_age; /* seconds, drivers without bulk vCPU stats */
  char *metrics_textfile;   /* NULL = none */
  char *metrics_listen;     /* "ADDR:PORT", NULL = none */
  gboolean metrics_per_vm;  /* per-VM families besides the fleet's */
  guint health_intervals;   /* /healthz: a pass succeeded within these */
} TwedConfig;

#define TWED_DEFAULT_CONFIG SYSCONFDIR "/twed/twed.conf"
#define TWED_DEFAULT_POLICY_DIR SYSCONFDIR "/twed/policies.d"

TwedConfig   *twed_config_new (void);
void          twed_config_free (TwedConfig *config);
/* @path NULL: the default path, silently skipped when absent. */
TwedConfig   *twed_config_load (const char *path, GError **error);
/* "NAME URI" or "URI" per line, '#' comments. */
gboolean      twed_config_load_hosts_file (TwedConfig *config, const char *path, GError **error);
gboolean      twed_config_add_host (TwedConfig *config, const char *name, const char *uri,
                                    GError **error);
/* "NAME=URI" or "URI" (the name then derived from the URI): the form of
 * [twed] hosts, hosts files and --connect. */
gboolean      twed_config_add_host_item (TwedConfig *config, const char *item, GError **error);
TwedHostSpec *twed_host_spec_new (const char *name, const char *uri);
void          twed_host_spec_free (TwedHostSpec *spec);
/* Checks a libvirt URI's shape and derives a short host name. */
gboolean      twed_uri_check (const char *uri, char **name_out, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedConfig, twed_config_free)

G_END_DECLS
