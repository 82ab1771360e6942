/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* twedd's state directory: the state written whole (state.json), and
 * the record log (state.log) of what changed since.  A grant appends a
 * record, small whatever the number of VMs held; the log is folded into
 * the state now and then (compaction).  Every write is durable when it
 * returns: the log fdatasync'd, a whole state written to a temporary
 * file, fsync'd, renamed and the directory fsync'd. */
#pragma once

#include "twed-state.h"

G_BEGIN_DECLS

#define TWEDD_STATE_FILE "state.json"
#define TWEDD_STATE_LOG "state.log"

typedef struct {
  gsize state_bytes;        /* of state.json */
  gsize log_bytes;          /* of state.log, its records taken */
  gboolean fresh_log_due;   /* the log cannot be appended to as it is
                             * (missing, of an older state, cut short):
                             * a whole write must come first */
  gboolean log_stale;       /* of an older state (a crash between the
                             * two renames of a whole write) */
  gboolean log_torn;        /* ends in a record cut short, at log_bytes */
} TwedStateLoad;

/* The state in @dir: state.json with state.log replayed onto it, what
 * no longer holds anything back at Unix usec @now dropped (@min_change:
 * min_change_interval, usec).  A last record cut short by a crash is
 * not taken, with a warning naming the file and the offset.  NULL with
 * G_FILE_ERROR_NOENT when there is no state yet; with another error
 * naming the file when either cannot be read or is damaged. */
TwedState *twedd_state_load (const char *dir, gint64 now, gint64 min_change, TwedStateLoad *info,
                             GError **error);
/* Makes the log that @info (from twedd_state_load) found one records
 * can be appended to, at once and durably: one of an older state is
 * removed (the state holds it), one cut short is cut back to its last
 * whole record.  Then no append depends on a whole write, which a full
 * disk may refuse while a record still fits. */
gboolean   twedd_state_mend_log (const char *dir, const TwedStateLoad *info, GError **error);
/* Writes @state whole, then a log of its generation (state->log) with
 * no record yet.  *@generation: the log's generation from then on (that
 * of @state once state.json is in place, even when its log could not be
 * started: then there is none, and the next append starts it).  @bytes:
 * the size of state.json. */
gboolean   twedd_state_write (const char *dir, const TwedState *state, guint64 *generation, gsize *bytes,
                              GError **error);
/* Appends @len bytes of records to the log of @generation (created when
 * missing): written whole or not at all.  Fails, appending nothing, when
 * the log there is of another generation or does not end in a whole
 * line: the next start could not take what was appended. */
gboolean   twedd_state_append (const char *dir, guint64 generation, const char *data, gsize len,
                               GError **error);
/* Folds the log into the state: load, then write with the next
 * generation (*@generation; *@bytes the size of state.json). */
gboolean   twedd_state_compact (const char *dir, gint64 now, gint64 min_change, guint64 *generation,
                                gsize *bytes, GError **error);

G_END_DECLS
