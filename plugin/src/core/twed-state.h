/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the daemon keeps across a restart (a crash loop, an upgrade):
 * the interval in progress with what its budget granted, and what it
 * did to each VM lately, so that the rate limits, min_change_interval
 * and failure backoffs hold whatever restarts it.  Times are Unix
 * microseconds (the monotonic clock does not survive a reboot), kept to
 * the millisecond. */
#pragma once

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
} TwedVmRecord;

typedef struct {
  gint64 interval_started;  /* 0 = none recorded */
  guint interval;           /* its length, seconds */
  guint granted;            /* the budget's overall total */
  GHashTable *per_policy;   /* policy -> GUINT granted */
  GHashTable *per_host;     /* "policy\nhost" -> GUINT granted */
  char *hold;               /* the interval grants nothing, why; NULL = it grants */
  GPtrArray *vms;           /* TwedVmRecord */
} TwedState;

TwedState    *twed_state_new (void);
void          twed_state_free (TwedState *state);
TwedVmRecord *twed_vm_record_new (const char *host, const char *vm);
void          twed_vm_record_free (TwedVmRecord *record);

/* JSON, version 1. */
char         *twed_state_to_json (const TwedState *state);
/* NULL with TWED_ERROR_INVALID naming what is wrong: anything but a
 * complete, well-typed version 1 document is refused whole. */
TwedState    *twed_state_from_json (const char *data, gssize len, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedState, twed_state_free)

G_END_DECLS
