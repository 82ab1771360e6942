/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twedd-engine.h"
#include "twed-libvirt.h"
#include "twed-log.h"

#include <glib-unix.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#if HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

typedef struct {
  GMainLoop *loop;
  TwedEngine *engine;
  char *config_path;
  char *policy_dir;
  char **connect;
  int interval;
  char *textfile;
  guint64 watchdog_usec;    /* WATCHDOG_USEC, 0 = no watchdog */
  gboolean wedged_logged;
} Daemon;

static void
notify (const char *state)
{
#if HAVE_LIBSYSTEMD
  sd_notify (0, state);
#else
  (void) state;
#endif
}

/* Runs on the main loop, so a blocked main loop stops the pets as well
 * as passes that no longer end do. */
static gboolean
on_status_tick (gpointer data)
{
  Daemon *d = data;
  g_autofree char *status = twed_engine_status (d->engine);
  g_autofree char *line = g_strdup_printf ("STATUS=%s", status);

  notify (line);
  if (!d->watchdog_usec)
    return G_SOURCE_CONTINUE;
  if (twed_engine_progressing (d->engine))
    {
      notify ("WATCHDOG=1");
      d->wedged_logged = FALSE;
    }
  else if (!d->wedged_logged)
    {
      g_warning ("no pass has ended for two intervals: not petting the watchdog");
      d->wedged_logged = TRUE;
    }
  return G_SOURCE_CONTINUE;
}

static void
setup_watchdog (Daemon *d)
{
  guint period_ms = 10000;

#if HAVE_LIBSYSTEMD
  uint64_t usec = 0;

  if (sd_watchdog_enabled (0, &usec) > 0 && usec > 0)
    {
      d->watchdog_usec = usec;
      /* Twice per period, as sd_watchdog_enabled(3) advises. */
      period_ms = (guint) MAX (usec / 2000, 1);
      g_message ("systemd watchdog: %" G_GUINT64_FORMAT " ms", (guint64) (usec / 1000));
    }
#endif
  g_timeout_add (MIN (period_ms, 10000u), on_status_tick, d);
}

static gboolean
apply_overrides (Daemon *d, TwedConfig *config, GError **error)
{
  if (d->policy_dir)
    {
      g_free (config->policy_dir);
      config->policy_dir = g_strdup (d->policy_dir);
    }
  if (d->connect)
    {
      g_ptr_array_set_size (config->hosts, 0);
      for (guint i = 0; d->connect[i]; i++)
        if (!twed_config_add_host_item (config, d->connect[i], error))
          {
            g_prefix_error (error, "--connect: ");
            return FALSE;
          }
    }
  if (d->interval)
    {
      if (d->interval < 1 || d->interval > 86400)
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "--interval: want 1..86400, got %d", d->interval);
          return FALSE;
        }
      config->interval = (guint) d->interval;
    }
  if (d->textfile)
    {
      g_free (config->metrics_textfile);
      config->metrics_textfile = g_strdup (d->textfile);
    }
  if (config->hosts->len == 0)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "no hosts: set [twed] hosts or hosts_file in the configuration, or use --connect");
      return FALSE;
    }
  return TRUE;
}

static TwedConfig *
load_config (Daemon *d, GError **error)
{
  g_autoptr(TwedConfig) config = twed_config_load (d->config_path, error);

  if (!config || !apply_overrides (d, config, error))
    return NULL;
  return g_steal_pointer (&config);
}

static gboolean
on_sighup (gpointer data)
{
  Daemon *d = data;
  g_autoptr(GError) error = NULL;
  TwedConfig *config;

  {
    /* systemd matches the reload's READY=1 by this timestamp. */
    g_autofree char *reloading = g_strdup_printf ("RELOADING=1\nMONOTONIC_USEC=%" G_GINT64_FORMAT,
                                                  g_get_monotonic_time ());

    notify (reloading);
  }
  g_message ("SIGHUP: reloading configuration and policies");
  if (!(config = load_config (d, &error)))
    g_warning ("configuration rejected, keeping the current one: %s", error->message);
  else
    twed_engine_reload_config (d->engine, config);
  notify ("READY=1");
  return G_SOURCE_CONTINUE;
}

static gboolean
on_sigterm (gpointer data)
{
  Daemon *d = data;

  g_message ("shutting down");
  notify ("STOPPING=1");
  g_main_loop_quit (d->loop);
  return G_SOURCE_CONTINUE;
}

int
main (int argc, char **argv)
{
  Daemon d = { 0 };
  gboolean dry_run = FALSE, debug = FALSE, version = FALSE;
  g_autofree char *log_format = NULL;
  TwedLogFormat format;
  const GOptionEntry entries[] = {
    { "config", 0, 0, G_OPTION_ARG_FILENAME, &d.config_path, "Configuration file (default " TWED_DEFAULT_CONFIG ")", "FILE" },
    { "policy-dir", 'P', 0, G_OPTION_ARG_FILENAME, &d.policy_dir, "Policy directory", "DIR" },
    { "connect", 'c', 0, G_OPTION_ARG_STRING_ARRAY, &d.connect, "Host URI, NAME=URI (repeatable; replaces the configured hosts)", "URI" },
    { "interval", 'i', 0, G_OPTION_ARG_INT, &d.interval, "Seconds between cycles", "N" },
    { "metrics-textfile", 0, 0, G_OPTION_ARG_FILENAME, &d.textfile, "Prometheus textfile to write", "FILE" },
    { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Plan and log, apply nothing", NULL },
    { "debug", 'd', 0, G_OPTION_ARG_NONE, &debug, "Log debug messages", NULL },
    { "log-format", 0, 0, G_OPTION_ARG_STRING, &log_format, "Log lines on stderr as text or json (default: TWED_LOG_FORMAT, else text)", "FORMAT" },
    { "version", 0, 0, G_OPTION_ARG_NONE, &version, "Print the version", NULL },
    { NULL }
  };
  g_autoptr(GOptionContext) oc = g_option_context_new (NULL);
  g_autoptr(GError) error = NULL;
  TwedConfig *config;
  sigset_t held;
  int rc = 0;

  /* Until its handler below exists, a SIGHUP would end the daemon
   * mid-start (a reload sent right after a restart, on a loaded host):
   * hold it, in every thread the start creates too, and take it once the
   * main loop can.  SIGTERM and SIGINT keep their default action until
   * then: a start held up by a hung state mount must still stop, and
   * nothing has been granted yet. */
  sigemptyset (&held);
  sigaddset (&held, SIGHUP);
  pthread_sigmask (SIG_BLOCK, &held, NULL);

  setlocale (LC_ALL, "");
  g_option_context_set_summary (oc, "Keeps TWED of the VMs on the configured hosts in line with the policies.");
  g_option_context_add_main_entries (oc, entries, NULL);
  if (!g_option_context_parse (oc, &argc, &argv, &error))
    {
      fprintf (stderr, "twedd: %s\n", error->message);
      return 2;
    }
  if (version)
    {
      printf ("twedd %s (twed libvirt API: %s)\n", PACKAGE_VERSION, HAVE_VIR_DOMAIN_TWED_API ? "yes" : "no");
      return 0;
    }
  twed_log_init (debug ? TWED_LOG_DEBUG : TWED_LOG_NORMAL);
  if (log_format)
    {
      if (!twed_log_format_from_string (log_format, &format))
        {
          fprintf (stderr, "twedd: --log-format: want text or json, got '%s'\n", log_format);
          return 2;
        }
      twed_log_set_format (format);
    }
  if (!(config = load_config (&d, &error)))
    {
      /* Not g_critical: G_DEBUG=fatal-criticals would make it an abort. */
      g_printerr ("twedd: %s\n", error->message);
      return 2;
    }
  twed_libvirt_init (TRUE);
  d.loop = g_main_loop_new (NULL, FALSE);
  d.engine = twed_engine_new (config, dry_run);
  if (!twed_engine_start (d.engine, &error))
    {
      g_printerr ("twedd: %s\n", error->message);
      rc = 2;
      goto out;
    }
  g_unix_signal_add (SIGHUP, on_sighup, &d);
  g_unix_signal_add (SIGTERM, on_sigterm, &d);
  g_unix_signal_add (SIGINT, on_sigterm, &d);
  pthread_sigmask (SIG_UNBLOCK, &held, NULL);
  g_message ("started (version %s)", PACKAGE_VERSION);
  notify ("READY=1");
  setup_watchdog (&d);
  g_main_loop_run (d.loop);

  {
    guint waited;

    /* A write stuck in the kernel (a hung state mount) cannot be
     * interrupted: leave it rather than hang the stop.  The grants
     * waiting on it were not applied. */
    if (!twed_engine_writes_settle (d.engine, &waited))
      {
        g_warning ("a file write has not returned in %u s: exiting without it; changes granted "
                   "before it were not made, and the state file may still count them", waited);
        _exit (EXIT_FAILURE);
      }
  }

out:
  twed_engine_free (d.engine);
  g_main_loop_unref (d.loop);
  g_free (d.config_path);
  g_free (d.policy_dir);
  g_free (d.textfile);
  g_strfreev (d.connect);
  return rc;
}
