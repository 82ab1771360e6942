/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-policy.h"

static gboolean
any_glob (const GPtrArray *globs, const char *value)
{
  if (!globs)
    return TRUE;
  if (!value)
    return FALSE;
  for (guint i = 0; i < globs->len; i++)
    if (g_pattern_spec_match_string (g_ptr_array_index (globs, i), value))
      return TRUE;
  return FALSE;
}

static gboolean
meta_matches (const TwedMetaMatch *m, const TwedDomain *dom)
{
  for (guint i = 0; i < dom->meta->len; i++)
    {
      const TwedMetaItem *item = g_ptr_array_index (dom->meta, i);
      const char *val;

      if (!g_str_equal (item->ns, m->ns) || !g_str_equal (item->element, m->element))
        continue;
      val = m->attribute ? g_hash_table_lookup (item->attrs, m->attribute) : item->text;
      if (m->attribute && !val)
        continue;
      if (!m->value || g_pattern_spec_match_string (m->value, val ? val : ""))
        return TRUE;
    }
  return FALSE;
}

guint
twed_policy_specificity (const TwedPolicy *pol)
{
  return (pol->hosts != NULL) + (pol->domains != NULL) + (pol->flavors != NULL) +
         (pol->metadata != NULL);
}

/* Keys are ANDed, the entries of one key ORed. */
gboolean
twed_policy_matches (const TwedPolicy *pol, const char *host, const TwedDomain *dom)
{
  if (!any_glob (pol->hosts, host) || !any_glob (pol->domains, dom->name) ||
      !any_glob (pol->flavors, dom->flavor))
    return FALSE;
  if (pol->metadata)
    {
      gboolean any = FALSE;

      for (guint i = 0; i < pol->metadata->len && !any; i++)
        any = meta_matches (g_ptr_array_index (pol->metadata, i), dom);
      if (!any)
        return FALSE;
    }
  return TRUE;
}

gboolean
twed_ratio_at_most (double ratio, double bound)
{
  return ratio <= bound + TWED_RATIO_EPSILON;
}

guint
twed_policy_band_index (const TwedPolicy *pol, double ratio)
{
  for (guint i = 0; i < pol->bands->len; i++)
    if (twed_ratio_at_most (ratio, g_array_index (pol->bands, TwedBand, i).up_to))
      return i;
  return pol->bands->len;
}

const TwedSetting *
twed_policy_band_setting (const TwedPolicy *pol, guint index)
{
  if (index < pol->bands->len)
    return &g_array_index (pol->bands, TwedBand, index).setting;
  return &pol->beyond;
}

void
twed_policy_band_range (const TwedPolicy *pol, guint index, double *lo, double *hi)
{
  *lo = index == 0 ? 0.0 : g_array_index (pol->bands, TwedBand, index - 1).up_to;
  *hi = index < pol->bands->len ? g_array_index (pol->bands, TwedBand, index).up_to : G_MAXDOUBLE;
}

TwedPolicySet *
twed_policy_set_new (void)
{
  TwedPolicySet *set = g_atomic_rc_box_new0 (TwedPolicySet);

  set->policies = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_policy_free);
  set->fallback = twed_policy_new_default ();
  return set;
}

TwedPolicySet *
twed_policy_set_ref (TwedPolicySet *set)
{
  return g_atomic_rc_box_acquire (set);
}

static void
policy_set_clear (gpointer p)
{
  TwedPolicySet *set = p;

  g_ptr_array_unref (set->policies);
  twed_policy_free (set->fallback);
}

void
twed_policy_set_unref (TwedPolicySet *set)
{
  if (set)
    g_atomic_rc_box_release_full (set, policy_set_clear);
}

static int
cmp_source (gconstpointer a, gconstpointer b)
{
  const TwedPolicy *x = *(TwedPolicy *const *) a, *y = *(TwedPolicy *const *) b;

  return g_strcmp0 (x->source, y->source);
}

gboolean
twed_policy_set_add (TwedPolicySet *set, TwedPolicy *pol, GError **error)
{
  for (guint i = 0; i < set->policies->len; i++)
    {
      TwedPolicy *other = g_ptr_array_index (set->policies, i);

      if (g_str_equal (other->name, pol->name))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                       "%s: $.name: \"%s\" is already used by %s",
                       pol->source, pol->name, other->source);
          twed_policy_free (pol);
          return FALSE;
        }
    }
  g_ptr_array_add (set->policies, pol);
  g_ptr_array_sort (set->policies, cmp_source);
  return TRUE;
}

const TwedPolicy *
twed_policy_set_lookup (const TwedPolicySet *set, const char *host, const TwedDomain *dom)
{
  const TwedPolicy *best = NULL;

  /* Sorted by source, so ">=" lets the later file win a full tie. */
  for (guint i = 0; i < set->policies->len; i++)
    {
      const TwedPolicy *p = g_ptr_array_index (set->policies, i);

      if (!twed_policy_matches (p, host, dom))
        continue;
      if (!best || p->priority > best->priority ||
          (p->priority == best->priority &&
           twed_policy_specificity (p) >= twed_policy_specificity (best)))
        best = p;
    }
  return best ? best : set->fallback;
}
