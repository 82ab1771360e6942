/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the daemon keeps across a restart (a crash loop, an upgrade):
 * the interval in progress with what its budget granted, and what it
 * did to each VM lately, so that the rate limits, min_change_interval,
 * failure backoffs and the auto bands' bars (TwedAutoBars) hold
 * whatever restarts it.  Times are Unix
 * microseconds (the monotonic clock does not survive a reboot), kept to
 * the millisecond. */
#pragma once

#include "twed-auto.h"
#include "twed-planner.h"

G_BEGIN_DECLS

typedef struct {
  char *host;
  char *vm;                 /* uuid (or name) */
  gint64 changed_at;        /* last change made, 0 = none */
  guint failures;           /* changes failed in a row */
  guint backoff;            /* seconds of the current failure backoff */
  gint64 retry_at;          /* no change before, 0 = none */
  char *error;              /* the last failure, NULL when none */
  gboolean failed_raise;    /* the last failure was of a change to no
                             * lower delay: a lowering may pass its backoff */
} TwedVmRecord;

typedef struct {
  gint64 interval_started;  /* 0 = none recorded */
  guint interval;           /* its length, seconds */
  guint granted;            /* the budget's overall total */
  GHashTable *per_policy;   /* policy -> GUINT granted */
  GHashTable *per_host;     /* "policy\nhost" -> GUINT granted */
  char *hold;               /* the interval grants nothing, why; NULL = it grants */
  GPtrArray *vms;           /* TwedVmRecord */
  GPtrArray *bars;          /* TwedAutoBars, by host and VM */
  guint64 log;              /* the generation of the record log that goes
                             * on from this state */
} TwedState;

TwedState    *twed_state_new (void);
void          twed_state_free (TwedState *state);
TwedVmRecord *twed_vm_record_new (const char *host, const char *vm);
void          twed_vm_record_free (TwedVmRecord *record);

/* JSON, version 1 ("bars" optional: a twedd before the controller's
 * bars were kept neither writes nor reads them). */
char         *twed_state_to_json (const TwedState *state);
/* NULL with TWED_ERROR_INVALID naming what is wrong: anything but a
 * complete, well-typed version 1 document is refused whole. */
TwedState    *twed_state_from_json (const char *data, gssize len, GError **error);

/* The record log: what changed since the state was written whole, a
 * line (a JSON object) per record, after a header line naming the
 * generation of the state it goes on from.  A record holds the values
 * now of what it names (not increments), so the last one for a key
 * wins:
 *  - @interval (may be NULL): its start, length, total and hold, and the
 *    per-policy and per-host counts it has (the others are unchanged);
 *    a start other than the current one begins a new interval;
 *  - @changed: when each VM (by TwedVmRecord vm) was last changed and
 *    where, changed_at 0 meaning never (forgotten);
 *  - @failed: the failures of a VM on a host, 0 failures and no
 *    retry_at meaning none;
 *  - @bars: the controller's bars of a VM on a host (TwedAutoBars), one
 *    that holds nothing meaning none.
 * Both return a line with its newline. */
char         *twed_state_log_header (guint64 generation);
char         *twed_state_log_record (const TwedState *interval, const GPtrArray *changed,
                                     const GPtrArray *failed, const GPtrArray *bars);
/* Replays the log @data onto @state (the state the log goes on from).
 * A log of another generation (one that the state written since
 * already holds) is not replayed: *@stale.  A last record that is cut
 * short (no newline, or not a whole record: a crash while it was
 * written) is not taken: *@torn is its offset, -1 when there is none.
 * Any other damage is an error naming the record's offset, and @state
 * is then not to be used. */
gboolean      twed_state_replay (TwedState *state, const char *data, gsize len, gboolean *stale,
                                 gssize *torn, GError **error);
/* Drops the records that no longer hold anything back at Unix usec
 * @now: changes @min_change usec old or more, failures with no backoff
 * left, bars that twed_auto_bars_hold() no longer holds. */
void          twed_state_prune (TwedState *state, gint64 now, gint64 min_change);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedState, twed_state_free)

G_END_DECLS
