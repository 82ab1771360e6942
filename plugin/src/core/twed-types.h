/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* TWEDEL exponents, interfaces.md section 0. */
#define TWED_DELAY_LIMIT 15
/* Published data: 1..5 help, 6..7 collapse throughput. */
#define TWED_DELAY_SAFE_LIMIT 5

typedef enum {
  TWED_MODE_OFF = 0,
  TWED_MODE_FIXED,
  TWED_MODE_DYNAMIC,
  /* A policy's request only, never a domain's setting: the VM runs in
   * fixed mode and twedd's controller (twed-auto.h) moves its delay
   * within [min, max] from cycle to cycle. */
  TWED_MODE_AUTO,
} TwedMode;

typedef struct {
  TwedMode mode;
  guint delay;
  guint min;
  guint max;
} TwedSetting;

typedef enum {
  TWED_SUPPORT_UNKNOWN = 0,
  TWED_SUPPORT_YES,
  TWED_SUPPORT_NO,
} TwedSupport;

const char *twed_mode_to_string (TwedMode mode);
/* The modes of the layers below (off, fixed, dynamic): a domain's
 * setting, twedctl set. */
gboolean    twed_mode_from_string (const char *str, TwedMode *mode);
/* The same plus "auto": what a policy may ask for. */
gboolean    twed_policy_mode_from_string (const char *str, TwedMode *mode);
const char *twed_support_to_string (TwedSupport support);

void     twed_setting_normalize (TwedSetting *s);
gboolean twed_setting_equal (const TwedSetting *a, const TwedSetting *b);
/* Whether @to waits less than @from before a WFE traps: off from any
 * other setting, or a shorter fixed delay.  A change between dynamic
 * settings, or to one, is not a lowering. */
gboolean twed_setting_lowers (const TwedSetting *from, const TwedSetting *to);
/* Which of delay/min/max a setting was written with. */
typedef enum {
  TWED_FIELD_DELAY = 1 << 0,
  TWED_FIELD_MIN = 1 << 1,
  TWED_FIELD_MAX = 1 << 2,
} TwedFields;

/* How a caller names the values in messages: a policy's "delay", the
 * CLI's --delay. */
typedef struct {
  const char *delay, *min, *max;
  const char *allow_long;   /* what lifts TWED_DELAY_SAFE_LIMIT */
} TwedFieldNames;

/* The one check of a setting as written (policy, twedctl set, domain
 * XML): the values its mode takes and needs, each within @limit
 * (TWED_DELAY_SAFE_LIMIT or TWED_DELAY_LIMIT), min <= delay <= max.
 * On error *@field (if given) is the offending value, or 0 when it is
 * the setting as a whole. */
gboolean twed_setting_validate (const TwedSetting *s, TwedFields present, guint limit,
                                const TwedFieldNames *names, TwedFields *field, GError **error);
/* twed_setting_validate of a normalized setting with the values its
 * mode uses, up to TWED_DELAY_LIMIT. */
gboolean twed_setting_check (const TwedSetting *s, GError **error);
char    *twed_setting_to_string (const TwedSetting *s);

#define TWED_ERROR (twed_error_quark ())
GQuark twed_error_quark (void);

typedef enum {
  TWED_ERROR_INVALID,     /* bad input: policy, config, argument */
  TWED_ERROR_UNSUPPORTED, /* needs something this build or host lacks */
  TWED_ERROR_FAILED,      /* an operation failed */
} TwedError;

G_END_DECLS
