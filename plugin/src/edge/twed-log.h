/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Structured fields, so that journalctl TWED_HOST=… TWED_DOMAIN=… works. */
#define TWED_LOG_FIELD_HOST "TWED_HOST"
#define TWED_LOG_FIELD_DOMAIN "TWED_DOMAIN"
#define TWED_LOG_FIELD_CHANGE "TWED_CHANGE"
#define TWED_LOG_FIELD_EVENT "TWED_EVENT"
#define TWED_LOG_FIELD_AUTO "TWED_AUTO"

typedef enum {
  TWED_LOG_QUIET,   /* warnings and errors only */
  TWED_LOG_NORMAL,  /* + info */
  TWED_LOG_DEBUG,   /* + debug */
} TwedLogVerbosity;

typedef enum {
  TWED_LOG_TEXT,    /* "level key=value ...: message" */
  TWED_LOG_JSON,    /* one JSON object per line, the fields as members */
} TwedLogFormat;

/* Installs the writer: journald when stderr is the journal, otherwise
 * one line per message on stderr, as text or (TWED_LOG_FORMAT=json or
 * twed_log_set_format) JSON.  Debug and info messages that @verbosity
 * drops still show when G_MESSAGES_DEBUG names "twed" or "all".
 * Changes made (twed_log_change) always reach the journal when there is
 * one, whatever @verbosity: a quiet twedctl apply leaves a record. */
void twed_log_init (TwedLogVerbosity verbosity);
void twed_log_set_format (TwedLogFormat format);
/* "text" or "json"; FALSE for anything else. */
gboolean twed_log_format_from_string (const char *str, TwedLogFormat *format);

void twed_log_host (GLogLevelFlags level, const char *host, const char *fmt, ...) G_GNUC_PRINTF (3, 4);
void twed_log_domain (GLogLevelFlags level, const char *host, const char *domain,
                      const char *fmt, ...) G_GNUC_PRINTF (4, 5);
void twed_log_change (const char *host, const char *domain, const char *from, const char *to,
                      const char *reason);
void twed_log_event (const char *host, const char *domain, const char *what);
/* A debug message about an auto decision that changed nothing, with
 * the decision (hold, step-up, ...) in TWED_AUTO. */
void twed_log_auto (const char *host, const char *domain, const char *decision,
                    const char *fmt, ...) G_GNUC_PRINTF (4, 5);
/* Whether a message at @level would be written: a caller that logs
 * many of them can skip formatting them. */
gboolean twed_log_enabled (GLogLevelFlags level);

G_END_DECLS
