/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-log.h"

#include <stdio.h>
#include <unistd.h>

static TwedLogVerbosity log_verbosity = TWED_LOG_QUIET;

static const char *
level_name (GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "error";
  if (level & G_LOG_LEVEL_CRITICAL)
    return "critical";
  if (level & G_LOG_LEVEL_WARNING)
    return "warning";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "notice";
  if (level & G_LOG_LEVEL_INFO)
    return "info";
  return "debug";
}

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer data G_GNUC_UNUSED)
{
  g_autoptr(GString) line = NULL;
  const char *message = NULL;

  if ((level & G_LOG_LEVEL_DEBUG) && log_verbosity < TWED_LOG_DEBUG)
    return G_LOG_WRITER_HANDLED;
  if ((level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_MESSAGE)) && log_verbosity < TWED_LOG_NORMAL)
    return G_LOG_WRITER_HANDLED;
  if (g_log_writer_is_journald (fileno (stderr)) &&
      g_log_writer_journald (level, fields, n, NULL) == G_LOG_WRITER_HANDLED)
    return G_LOG_WRITER_HANDLED;

  line = g_string_new (level_name (level));
  for (gsize i = 0; i < n; i++)
    {
      if (g_str_equal (fields[i].key, "MESSAGE"))
        message = fields[i].value;
      else if (g_str_has_prefix (fields[i].key, "TWED_") && fields[i].length < 0)
        {
          g_autofree char *key = g_ascii_strdown (fields[i].key + 5, -1);

          g_string_append_printf (line, " %s=%s", key, (const char *) fields[i].value);
        }
    }
  g_string_append_printf (line, ": %s\n", message ? message : "");
  fputs (line->str, stderr);
  fflush (stderr);
  return G_LOG_WRITER_HANDLED;
}

void
twed_log_init (TwedLogVerbosity verbosity)
{
  static gsize done = 0;

  log_verbosity = verbosity;
  if (g_once_init_enter (&done))
    {
      g_log_set_writer_func (writer, NULL, NULL);
      g_once_init_leave (&done, 1);
    }
}

static void
emit (GLogLevelFlags level, const char *host, const char *domain, const char *change,
      const char *event, const char *message)
{
  GLogField fields[8];
  gsize n = 0;

  fields[n++] = (GLogField) { "GLIB_DOMAIN", "twed", -1 };
  fields[n++] = (GLogField) { "MESSAGE", message, -1 };
  fields[n++] = (GLogField) { "PRIORITY", level & G_LOG_LEVEL_WARNING ? "4" :
                              level & G_LOG_LEVEL_INFO ? "6" : level & G_LOG_LEVEL_DEBUG ? "7" : "5", -1 };
  if (host)
    fields[n++] = (GLogField) { TWED_LOG_FIELD_HOST, host, -1 };
  if (domain)
    fields[n++] = (GLogField) { TWED_LOG_FIELD_DOMAIN, domain, -1 };
  if (change)
    fields[n++] = (GLogField) { TWED_LOG_FIELD_CHANGE, change, -1 };
  if (event)
    fields[n++] = (GLogField) { TWED_LOG_FIELD_EVENT, event, -1 };
  g_log_structured_array (level, fields, n);
}

void
twed_log_host (GLogLevelFlags level, const char *host, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  emit (level, host, NULL, NULL, NULL, msg);
}

void
twed_log_domain (GLogLevelFlags level, const char *host, const char *domain, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  emit (level, host, domain, NULL, NULL, msg);
}

void
twed_log_change (const char *host, const char *domain, const char *from, const char *to,
                 const char *reason)
{
  g_autofree char *change = g_strdup_printf ("%s->%s", from, to);
  g_autofree char *msg = g_strdup_printf ("TWED %s -> %s (%s)", from, to, reason);

  emit (G_LOG_LEVEL_MESSAGE, host, domain, change, NULL, msg);
}

void
twed_log_event (const char *host, const char *domain, const char *what)
{
  g_autofree char *msg = g_strdup_printf ("event: %s", what);

  emit (G_LOG_LEVEL_INFO, host, domain, NULL, what, msg);
}
