/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twedctl.h"
#include "twed-libvirt.h"

#include <errno.h>
#include <stdio.h>

int
twedctl_fail (int code, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  fprintf (stderr, "twedctl: %s\n", msg);
  return code;
}

void
twedctl_print (const char *text)
{
  fputs (text, stdout);
  fflush (stdout);
}

/* Streamed: a region's plan is hundreds of megabytes of JSON. */
void
twedctl_print_json (const TwedPlan *plan)
{
  if (!twed_plan_write_json (plan, TRUE, stdout))
    g_printerr ("twedctl: writing the plan failed: %s\n", g_strerror (errno));
}

char *
twedctl_now_iso (void)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();

  return g_date_time_format_iso8601 (now);
}

gboolean
twedctl_parse (Twedctl *ctl, const char *verb, const char *params, const char *summary,
               const GOptionEntry *entries, int *argc, char ***argv, int *exit_code)
{
  const GOptionEntry common[] = {
    { "connect", 'c', 0, G_OPTION_ARG_STRING_ARRAY, &ctl->connect,
      "libvirt URI of a host, NAME=URI to name it (repeatable)", "URI" },
    { "hosts-file", 'H', 0, G_OPTION_ARG_FILENAME, &ctl->hosts_file,
      "File with one 'URI' or 'NAME URI' per line", "FILE" },
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &ctl->config_path,
      "Configuration file (default " TWED_DEFAULT_CONFIG ")", "FILE" },
    { "policy-dir", 'P', 0, G_OPTION_ARG_FILENAME, &ctl->policy_dir,
      "Policy directory (default from the configuration)", "DIR" },
    { "policy", 'p', 0, G_OPTION_ARG_FILENAME_ARRAY, &ctl->policy_files,
      "Use this policy file instead of the directory (repeatable)", "FILE" },
    { "threads", 0, 0, G_OPTION_ARG_INT, &ctl->threads, "Hosts read in parallel", "N" },
    { "verbose", 'v', 0, G_OPTION_ARG_NONE, &ctl->verbose, "Log what happens to stderr", NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) oc = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *name = g_strdup_printf ("%s%s%s", verb, params ? " " : "", params ? params : "");

  oc = g_option_context_new (name);
  g_option_context_set_summary (oc, summary);
  if (entries)
    g_option_context_add_main_entries (oc, entries, NULL);
  {
    GOptionGroup *g = g_option_group_new ("common", "Common options:", "Show common options", NULL, NULL);

    g_option_group_add_entries (g, common);
    g_option_context_add_group (oc, g);
  }
  if (!g_option_context_parse (oc, argc, argv, &error))
    {
      *exit_code = twedctl_fail (TWEDCTL_EXIT_USAGE, "%s: %s (see twedctl %s --help)", verb,
                                 error->message, verb);
      return FALSE;
    }
  twed_log_init (ctl->verbose ? TWED_LOG_DEBUG : TWED_LOG_QUIET);
  return TRUE;
}

gboolean
twedctl_setup (Twedctl *ctl, gboolean need_hosts, gboolean need_policies, gboolean reads_only,
               int *exit_code)
{
  g_autoptr(GError) error = NULL;
  TwedBackendOptions bo = { 0 };

  if (!(ctl->config = twed_config_load (ctl->config_path, &error)))
    goto usage;
  if (ctl->connect || ctl->hosts_file)
    g_ptr_array_set_size (ctl->config->hosts, 0);
  for (guint i = 0; ctl->connect && ctl->connect[i]; i++)
    if (!twed_config_add_host_item (ctl->config, ctl->connect[i], &error))
      {
        g_prefix_error (&error, "--connect: ");
        goto usage;
      }
  if (ctl->hosts_file && !twed_config_load_hosts_file (ctl->config, ctl->hosts_file, &error))
    goto usage;
  if (need_hosts && ctl->config->hosts->len == 0)
    {
      *exit_code = twedctl_fail (TWEDCTL_EXIT_USAGE,
                                 "no hosts: give --connect URI, --hosts-file FILE or [twed] hosts in %s",
                                 ctl->config->path ? ctl->config->path : TWED_DEFAULT_CONFIG);
      return FALSE;
    }
  if (ctl->threads < 0 || ctl->threads > 256)
    {
      *exit_code = twedctl_fail (TWEDCTL_EXIT_USAGE, "--threads: want 1..256, got %d", ctl->threads);
      return FALSE;
    }

  if (ctl->policy_files)
    ctl->policies = twed_policy_files_load ((const char *const *) ctl->policy_files, &error);
  else
    {
      const char *dir = ctl->policy_dir ? ctl->policy_dir : ctl->config->policy_dir;

      /* Commands that only show hosts or set a VM by hand plan nothing
       * from policies: they work where none are installed. */
      if (!need_policies && !g_file_test (dir, G_FILE_TEST_EXISTS))
        ctl->policies = twed_policy_set_new ();
      else
        ctl->policies = twed_policy_dir_load (dir, !need_policies || ctl->config->allow_builtin_default, &error);
    }
  if (!ctl->policies)
    goto usage;

  /* With libvirt's event loop running (on a thread: twedctl has no
   * main loop), remote connections get keepalive, the timeout of every
   * call. */
  twed_libvirt_init (TRUE);
  twed_libvirt_run_events ();
  bo.keepalive_interval = ctl->config->keepalive_interval;
  bo.keepalive_count = ctl->config->keepalive_count;
  bo.connect_timeout = ctl->config->connect_timeout;
  bo.min_change_interval = ctl->config->min_change_interval;
  bo.threads = ctl->threads ? (guint) ctl->threads : ctl->config->threads;
  /* Commands that only read still open read-write when they may: libvirt
   * gives domain capabilities (TWED support) to writers only, and a plan
   * must say what apply would do. */
  bo.readonly_fallback = reads_only;
  bo.reconnect_max = ctl->config->reconnect_max;
  ctl->backend = twed_backend_new (ctl->config->hosts, &bo);
  return TRUE;

usage:
  *exit_code = twedctl_fail (TWEDCTL_EXIT_USAGE, "%s", error->message);
  return FALSE;
}

TwedPlan *
twedctl_make_plan (Twedctl *ctl)
{
  g_autoptr(GPtrArray) hosts = twed_backend_inventory (ctl->backend, NULL);
  g_autofree char *now = twedctl_now_iso ();
  TwedPlanOptions po = { now, ctl->config->max_changes };

  return twed_plan_build (hosts, ctl->policies, &po);
}
