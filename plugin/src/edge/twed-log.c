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

static TwedLogFormat log_format = TWED_LOG_TEXT;

static const char *
field_value (const GLogField *fields, gsize n, const char *key)
{
  for (gsize i = 0; i < n; i++)
    if (fields[i].length < 0 && g_str_equal (fields[i].key, key))
      return fields[i].value;
  return NULL;
}

static void
json_string (GString *out, const char *str)
{
  g_string_append_c (out, '"');
  for (const unsigned char *p = (const unsigned char *) str; *p; p++)
    {
      if (*p == '"' || *p == '\\')
        g_string_append_printf (out, "\\%c", *p);
      else if (*p == '\n')
        g_string_append (out, "\\n");
      else if (*p < 0x20)
        g_string_append_printf (out, "\\u%04x", *p);
      else
        g_string_append_c (out, (char) *p);
    }
  g_string_append_c (out, '"');
}

/* {"ts":"…","level":"info","message":"…","host":"…",…}: the TWED_*
 * fields as lower-case members, for log shippers that parse JSON. */
static char *
format_json (GLogLevelFlags level, const GLogField *fields, gsize n)
{
  g_autoptr(GDateTime) now = g_date_time_new_now_utc ();
  g_autofree char *ts = g_date_time_format_iso8601 (now);
  GString *line = g_string_new ("{\"ts\":");
  const char *message = field_value (fields, n, "MESSAGE");

  json_string (line, ts);
  g_string_append (line, ",\"level\":");
  json_string (line, level_name (level));
  g_string_append (line, ",\"message\":");
  json_string (line, message ? message : "");
  for (gsize i = 0; i < n; i++)
    if (g_str_has_prefix (fields[i].key, "TWED_") && fields[i].length < 0)
      {
        g_autofree char *key = g_ascii_strdown (fields[i].key + 5, -1);

        g_string_append_c (line, ',');
        json_string (line, key);
        g_string_append_c (line, ':');
        json_string (line, fields[i].value);
      }
  g_string_append (line, "}\n");
  return g_string_free (line, FALSE);
}

static char *
format_text (GLogLevelFlags level, const GLogField *fields, gsize n)
{
  GString *line = g_string_new (level_name (level));
  const char *message = field_value (fields, n, "MESSAGE");

  for (gsize i = 0; i < n; i++)
    if (g_str_has_prefix (fields[i].key, "TWED_") && fields[i].length < 0)
      {
        g_autofree char *key = g_ascii_strdown (fields[i].key + 5, -1);

        g_string_append_printf (line, " %s=%s", key, (const char *) fields[i].value);
      }
  g_string_append_printf (line, ": %s\n", message ? message : "");
  return g_string_free (line, FALSE);
}

/* What the verbosity drops, unless G_MESSAGES_DEBUG asks for it. */
static gboolean
dropped (GLogLevelFlags level)
{
  if ((level & G_LOG_LEVEL_DEBUG) && log_verbosity < TWED_LOG_DEBUG)
    return g_log_writer_default_would_drop (G_LOG_LEVEL_DEBUG, "twed");
  if ((level & (G_LOG_LEVEL_INFO | G_LOG_LEVEL_MESSAGE)) && log_verbosity < TWED_LOG_NORMAL)
    return g_log_writer_default_would_drop (G_LOG_LEVEL_INFO, "twed");
  return FALSE;
}

static GLogWriterOutput
writer (GLogLevelFlags level, const GLogField *fields, gsize n, gpointer data G_GNUC_UNUSED)
{
  g_autofree char *line = NULL;
  gboolean to_journal = g_log_writer_is_journald (fileno (stderr));

  if (dropped (level))
    {
      /* A change made is recorded in the journal even when the output
       * is quiet, whether or not stderr goes there too. */
      if (field_value (fields, n, TWED_LOG_FIELD_CHANGE))
        g_log_writer_journald (level, fields, n, NULL);
      return G_LOG_WRITER_HANDLED;
    }
  if (to_journal && g_log_writer_journald (level, fields, n, NULL) == G_LOG_WRITER_HANDLED)
    return G_LOG_WRITER_HANDLED;
  line = log_format == TWED_LOG_JSON ? format_json (level, fields, n) : format_text (level, fields, n);
  fputs (line, stderr);
  fflush (stderr);
  return G_LOG_WRITER_HANDLED;
}

void
twed_log_set_format (TwedLogFormat format)
{
  log_format = format;
}

gboolean
twed_log_format_from_string (const char *str, TwedLogFormat *format)
{
  if (g_strcmp0 (str, "text") == 0)
    *format = TWED_LOG_TEXT;
  else if (g_strcmp0 (str, "json") == 0)
    *format = TWED_LOG_JSON;
  else
    return FALSE;
  return TRUE;
}

void
twed_log_init (TwedLogVerbosity verbosity)
{
  static gsize done = 0;

  log_verbosity = verbosity;
  if (g_once_init_enter (&done))
    {
      TwedLogFormat f;

      if (twed_log_format_from_string (g_getenv ("TWED_LOG_FORMAT"), &f))
        log_format = f;
      g_log_set_writer_func (writer, NULL, NULL);
      g_once_init_leave (&done, 1);
    }
}

static void
emit_auto (GLogLevelFlags level, const char *host, const char *domain, const char *change,
           const char *event, const char *decision, const char *message)
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
  if (decision)
    fields[n++] = (GLogField) { TWED_LOG_FIELD_AUTO, decision, -1 };
  g_log_structured_array (level, fields, n);
}

static void
emit (GLogLevelFlags level, const char *host, const char *domain, const char *change,
      const char *event, const char *message)
{
  emit_auto (level, host, domain, change, event, NULL, message);
}

gboolean
twed_log_enabled (GLogLevelFlags level)
{
  return !dropped (level);
}

void
twed_log_auto (const char *host, const char *domain, const char *decision, const char *fmt, ...)
{
  va_list ap;
  g_autofree char *msg = NULL;

  if (dropped (G_LOG_LEVEL_DEBUG))
    return;
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  emit_auto (G_LOG_LEVEL_DEBUG, host, domain, NULL, NULL, decision, msg);
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
