/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-auto.h"
#include "twed-inventory.h"

G_BEGIN_DECLS

#define TWED_POLICY_VERSION 1

typedef struct {
  double up_to;      /* upper ratio bound, inclusive */
  TwedSetting setting;
} TwedBand;

typedef struct {
  char *ns;
  char *element;
  char *attribute;   /* NULL: match the element's text */
  GPatternSpec *value; /* NULL: presence is enough */
} TwedMetaMatch;

typedef struct {
  char *name;
  char *source;      /* file it came from, for messages */
  char *description;
  int priority;
  /* Globs, compiled when the document is parsed (a plan matches
   * every VM of the fleet against them); NULL = any. */
  GPtrArray *hosts;  /* GPatternSpec */
  GPtrArray *domains;
  GPtrArray *flavors;
  GPtrArray *metadata; /* TwedMetaMatch, NULL = any */
  GArray *bands;     /* TwedBand, ascending up_to */
  TwedSetting beyond;
  double hysteresis;
  guint max_per_host;   /* 0 = unlimited */
  guint max_global;
  gboolean allow_long_delays;
  TwedAutoParams auto_params; /* for bands in mode auto */
  gboolean builtin;
} TwedPolicy;

/* Ordered set of documents, in effect together. */
typedef struct {
  GPtrArray *policies;   /* TwedPolicy, sorted by source name */
  TwedPolicy *fallback;  /* the built-in default */
} TwedPolicySet;

TwedPolicy *twed_policy_parse (const char *data, gsize len, const char *source, GError **error);
TwedPolicy *twed_policy_new_default (void);
void        twed_policy_free (TwedPolicy *policy);

/* Number of selector keys: more keys = more specific. */
guint    twed_policy_specificity (const TwedPolicy *policy);
gboolean twed_policy_matches (const TwedPolicy *policy, const char *host, const TwedDomain *dom);
/* Ratios are sums of 1/|affinity| in floating point: 20 vCPUs floating
 * over 10 pCPUs come out as 2.0000000000000004.  A ratio within this
 * of a band's bound is on the bound (far below any meaningful
 * difference in overcommit, far above the rounding of a sum of a few
 * thousand weights). */
#define TWED_RATIO_EPSILON 1e-9
/* @ratio <= @bound, up to TWED_RATIO_EPSILON. */
gboolean twed_ratio_at_most (double ratio, double bound);
/* Index into bands of the band for @ratio; bands->len for "beyond". */
guint    twed_policy_band_index (const TwedPolicy *policy, double ratio);
const TwedSetting *twed_policy_band_setting (const TwedPolicy *policy, guint index);
void     twed_policy_band_range (const TwedPolicy *policy, guint index, double *lo, double *hi);

/* Reference counted: a pass running in a worker keeps the set it
 * started with while a reload replaces it. */
TwedPolicySet *twed_policy_set_new (void);
TwedPolicySet *twed_policy_set_ref (TwedPolicySet *set);
void           twed_policy_set_unref (TwedPolicySet *set);
/* Takes ownership. Fails if another document already uses the name. */
gboolean       twed_policy_set_add (TwedPolicySet *set, TwedPolicy *policy, GError **error);
/* Precedence: highest priority, then most specific, then the source
 * that sorts last; the built-in default when none matches. */
const TwedPolicy *twed_policy_set_lookup (const TwedPolicySet *set, const char *host,
                                          const TwedDomain *dom);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedPolicy, twed_policy_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedPolicySet, twed_policy_set_unref)

G_END_DECLS
