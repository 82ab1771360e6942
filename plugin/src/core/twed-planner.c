/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-planner.h"

#include <math.h>
#include <stdlib.h>

const char *
twed_action_to_string (TwedAction action)
{
  switch (action)
    {
    case TWED_ACTION_CHANGE:
      return "change";
    case TWED_ACTION_KEEP:
      return "keep";
    case TWED_ACTION_SKIP:
      return "skip";
    case TWED_ACTION_DEFER:
    default:
      return "defer";
    }
}

const char *
twed_result_to_string (TwedResult result)
{
  switch (result)
    {
    case TWED_RESULT_APPLIED:
      return "applied";
    case TWED_RESULT_FAILED:
      return "failed";
    case TWED_RESULT_DRY_RUN:
      return "dry-run";
    case TWED_RESULT_NONE:
    default:
      return "none";
    }
}

static void
entry_free (TwedPlanEntry *e)
{
  g_clear_pointer (&e->host, g_ref_string_release);
  g_free (e->domain);
  g_free (e->uuid);
  g_clear_pointer (&e->policy, g_ref_string_release);
  g_clear_pointer (&e->band, g_ref_string_release);
  g_free (e->reason);
  g_free (e->error);
  g_free (e);
}

static void
plan_host_free (TwedPlanHost *h)
{
  g_free (h->name);
  g_free (h->uri);
  g_free (h->error);
  g_free (h);
}

void
twed_plan_free (TwedPlan *plan)
{
  if (!plan)
    return;
  g_free (plan->generated);
  g_ptr_array_unref (plan->hosts);
  g_ptr_array_unref (plan->entries);
  g_free (plan);
}

static char *
band_label (const TwedPolicy *pol, guint index)
{
  double lo, hi;

  twed_policy_band_range (pol, index, &lo, &hi);
  if (pol->bands->len == 0)
    return g_strdup ("[0, inf)");
  if (index >= pol->bands->len)
    return g_strdup_printf ("(%.2f, inf)", lo);
  if (index == 0)
    return g_strdup_printf ("[0, %.2f]", hi);
  return g_strdup_printf ("(%.2f, %.2f]", lo, hi);
}

/* The strings an entry shares with the other entries of its host or
 * policy: a fleet's plan holds one copy of each (GRefString) rather
 * than one per VM. */
typedef struct {
  GRefString *name;
  GPtrArray *bands; /* band_label () by index, made on first use */
} PolicyLabels;

typedef struct {
  GRefString *host;
  GHashTable *policies; /* TwedPolicy * -> PolicyLabels */
} PlanLabels;

static void
policy_labels_free (PolicyLabels *pl)
{
  g_ref_string_release (pl->name);
  g_ptr_array_unref (pl->bands);
  g_free (pl);
}

static void
plan_labels_clear (PlanLabels *labels)
{
  g_clear_pointer (&labels->host, g_ref_string_release);
  g_clear_pointer (&labels->policies, g_hash_table_unref);
}

static void
release_label (gpointer label)
{
  if (label)
    g_ref_string_release (label);
}

static PolicyLabels *
policy_labels (PlanLabels *labels, const TwedPolicy *pol)
{
  PolicyLabels *pl = g_hash_table_lookup (labels->policies, pol);

  if (!pl)
    {
      pl = g_new0 (PolicyLabels, 1);
      pl->name = g_ref_string_new (pol->name);
      pl->bands = g_ptr_array_new_with_free_func (release_label);
      g_ptr_array_set_size (pl->bands, pol->bands->len + 1);
      g_hash_table_insert (labels->policies, (gpointer) pol, pl);
    }
  return pl;
}

/* band_label (), shared: acquire it to keep it. */
static GRefString *
shared_band_label (PlanLabels *labels, const TwedPolicy *pol, guint index)
{
  PolicyLabels *pl = policy_labels (labels, pol);
  g_autofree char *label = NULL;

  if (!g_ptr_array_index (pl->bands, index))
    {
      label = band_label (pol, index);
      g_ptr_array_index (pl->bands, index) = g_ref_string_new (label);
    }
  return g_ptr_array_index (pl->bands, index);
}

/* Whether an auto band's @bounds allow @s: off, or a fixed delay within
 * them (the only settings the controller moves a VM between). */
static gboolean
auto_allows (const TwedSetting *bounds, const TwedSetting *s)
{
  return s->mode == TWED_MODE_OFF ||
         (s->mode == TWED_MODE_FIXED && s->delay >= bounds->min && s->delay <= bounds->max);
}

/* Whether band @i may have left a VM at @current: its setting, or for
 * an auto band a setting its bounds allow (where the controller may
 * have moved it). */
static gboolean
band_holds (const TwedPolicy *pol, guint i, const TwedSetting *current)
{
  const TwedSetting *b = twed_policy_band_setting (pol, i);

  if (b->mode != TWED_MODE_AUTO)
    return twed_setting_equal (b, current);
  return auto_allows (b, current);
}

/* Stateless hysteresis: keep the current setting if a band near the
 * ratio may have set it, "near" meaning within the margin of that
 * band's range. A VM sitting on a boundary then never flaps; one kept
 * in an auto band stays under the controller. */
static gboolean
within_hysteresis (const TwedPolicy *pol, double ratio, const TwedSetting *current,
                   guint *band_out)
{
  for (guint i = 0; i <= pol->bands->len; i++)
    {
      double lo, hi;

      if (!band_holds (pol, i, current))
        continue;
      twed_policy_band_range (pol, i, &lo, &hi);
      if (twed_ratio_at_most (lo - pol->hysteresis, ratio) &&
          (hi == G_MAXDOUBLE || twed_ratio_at_most (ratio, hi + pol->hysteresis)))
        {
          *band_out = i;
          return TRUE;
        }
    }
  return FALSE;
}

/* Whether a running domain of @host falls under a policy with an auto
 * band: only such hosts feed the controller (all of their domains, for
 * the co-located run-queue wait).  Any auto band of the policy counts,
 * so hysteresis keeping a VM in its auto band is covered. */
static gboolean
host_has_auto (const TwedHost *host, const TwedPolicySet *set)
{
  for (guint d = 0; d < host->domains->len; d++)
    {
      const TwedDomain *dom = g_ptr_array_index (host->domains, d);
      const TwedPolicy *pol;

      if (!dom->active || !dom->uuid)
        continue;
      pol = twed_policy_set_lookup (set, host->name, dom);
      for (guint b = 0; b <= pol->bands->len; b++)
        if (twed_policy_band_setting (pol, b)->mode == TWED_MODE_AUTO)
          return TRUE;
    }
  return FALSE;
}

/* A band in mode auto: the controller's step for a running domain, or,
 * without its reads (a single run, or a domain that is not running),
 * what the domain has where the bounds allow it. */
static void
plan_auto (const TwedHost *host, const TwedDomain *dom, const TwedPolicy *pol, const TwedSetting *bounds,
           TwedAuto *ctl, TwedPlanEntry *e)
{
  e->is_auto = TRUE;
  e->auto_bounds = *bounds;
  if (ctl && dom->active)
    {
      TwedAutoVerdict v = { 0 };

      twed_auto_decide (ctl, host, dom, bounds, &pol->auto_params, &v);
      /* The controller only ever asks for off or a fixed delay within
       * the bounds in force now; a daemon that met a bug of its own
       * turns the delay off rather than abort or set something else. */
      if (!auto_allows (bounds, &v.target))
        {
          g_critical ("auto %u..%u: the controller asked %s for %s: off instead", bounds->min,
                      bounds->max, dom->name, twed_mode_to_string (v.target.mode));
          v.target = (TwedSetting) { TWED_MODE_OFF, 0, 0, 0 };
          v.decision = TWED_AUTO_FALLBACK;
          v.protective = TRUE;
        }
      e->target = v.target;
      e->auto_decision = v.decision;
      e->auto_exits_per_s = v.exits_per_s;
      e->auto_off_exits_per_s = v.off_exits_per_s;
      e->auto_wait_change = v.wait_change;
      e->auto_waiting = v.waiting;
      e->auto_protective = v.protective;
      e->auto_set_off = v.set_off;
      e->reason = g_strdup_printf ("auto %u..%u: %s", bounds->min, bounds->max, v.reason);
      twed_auto_verdict_clear (&v);
      return;
    }
  /* A domain that stopped: no step awaited, no window spanning the time
   * it was down. */
  if (ctl)
    twed_auto_skip (ctl, host, dom);
  e->auto_decision = TWED_AUTO_HOLD;
  if (auto_allows (bounds, &e->current))
    e->target = e->current;
  else
    {
      e->target = (TwedSetting) { TWED_MODE_OFF, 0, 0, 0 };
      e->auto_decision = TWED_AUTO_STEP_DOWN;
      /* Only a running domain pays for a delay outside the bounds now:
       * the definition of one that is not running waits its turn. */
      e->auto_protective = dom->active;
    }
  if (dom->active)
    e->reason = g_strdup_printf ("auto %u..%u: a single run has no signal history; twedd moves the delay",
                                 bounds->min, bounds->max);
  else
    e->reason = g_strdup_printf ("auto %u..%u: not running; the controller moves the delay once it runs",
                                 bounds->min, bounds->max);
}

/* Whether an auto entry asks for a change: another setting, or off
 * written explicitly over the host's default delay. */
static gboolean
auto_asks_step (const TwedPlanEntry *e)
{
  return !twed_setting_equal (&e->target, &e->current) || e->auto_set_off;
}

/* An auto change to a lower delay, whatever the decision's name: a
 * step down, a fallback, or a hold that sends a pending lower target
 * again. */
static gboolean
lowers_delay (const TwedPlanEntry *e)
{
  /* The host's default delay set to off explicitly lowers it too. */
  return e->is_auto && (twed_setting_lowers (&e->current, &e->target) || e->auto_set_off);
}

static TwedPlanEntry *
plan_domain (const TwedHost *host, const TwedDomain *dom, const TwedPolicySet *set, TwedAuto *ctl,
             PlanLabels *labels)
{
  TwedPlanEntry *e = g_new0 (TwedPlanEntry, 1);
  const TwedPolicy *pol;
  guint band, keep_band = 0;
  gboolean kept;
  g_autofree char *in_band = NULL;

  e->host = g_ref_string_acquire (labels->host);
  e->domain = g_strdup (dom->name);
  e->uuid = g_strdup (dom->uuid);
  e->active = dom->active;
  e->persistent = dom->persistent;
  e->nvcpus = dom->nvcpus;
  e->ratio = dom->ratio;
  e->manage = dom->manage;
  e->current = dom->twed;
  twed_setting_normalize (&e->current);
  e->target = e->current;
  e->auto_exits_per_s = e->auto_off_exits_per_s = e->auto_wait_change = NAN;

  pol = twed_policy_set_lookup (set, host->name, dom);
  e->policy = g_ref_string_acquire (policy_labels (labels, pol)->name);
  band = twed_policy_band_index (pol, dom->ratio);
  e->band = g_ref_string_acquire (shared_band_label (labels, pol, band));
  /* The band in force: the ratio's, or a neighbour that may have set
   * the current setting while the ratio is within its hysteresis. */
  kept = !band_holds (pol, band, &e->current) && within_hysteresis (pol, dom->ratio, &e->current, &keep_band);
  if (kept)
    {
      band = keep_band;
      in_band = g_strdup_printf ("within hysteresis %.2f of band %s", pol->hysteresis,
                                 shared_band_label (labels, pol, keep_band));
    }
  else
    in_band = g_strdup_printf ("in band %s", e->band);

  if (dom->manage == TWED_MANAGE_OPTOUT)
    {
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup ("opted out by <twed:policy manage='no'>");
    }
  else if (dom->manage == TWED_MANAGE_PINNED)
    {
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup ("pinned by hand (<twed:policy manage='pinned'>)");
    }
  else if (dom->load_error)
    {
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup_printf ("definition not read (%s): its last known %u vCPU(s) and pinning "
                                   "are counted until it is read again",
                                   dom->load_error, dom->nvcpus);
    }
  else if (host->support == TWED_SUPPORT_NO)
    {
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup ("host reports no TWED support (domain capabilities)");
    }
  else if (host->support == TWED_SUPPORT_UNKNOWN)
    {
      /* Fail closed: a change to a host that may not support TWED (an
       * x86 host, a read-only connection) fails every cycle and, sorted
       * by ratio, takes the budget from hosts that do. */
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup_printf ("TWED support unknown (%s)",
                                   host->support_reason ? host->support_reason : "not reported");
    }
  else if (!dom->active && !dom->persistent)
    {
      e->action = TWED_ACTION_SKIP;
      e->reason = g_strdup ("transient domain not running");
    }
  else if (twed_policy_band_setting (pol, band)->mode == TWED_MODE_AUTO)
    {
      g_autofree char *why = NULL;

      plan_auto (host, dom, pol, twed_policy_band_setting (pol, band), ctl, e);
      why = g_steal_pointer (&e->reason);
      if (!auto_asks_step (e))
        {
          e->action = TWED_ACTION_KEEP;
          e->reason = g_strdup_printf ("ratio %.2f %s, %s", dom->ratio, in_band, why);
        }
      /* The back-off after a failed step up (above the host's
       * ceiling, say) must not keep a delay that costs more than it
       * saves for up to an hour: a lower delay may pass it.  The
       * backend marks a hold so only when the change that failed was
       * a raise; a lowering that failed (a domain job, a hung
       * monitor) waits its back-off like any change, and so does the
       * definition of a domain that is not running (nothing pays for
       * its delay until it runs). */
      else if (dom->hold && !(dom->hold_after_failure && dom->active && lowers_delay (e)))
        {
          e->action = TWED_ACTION_DEFER;
          e->reason = g_strdup_printf ("ratio %.2f %s, %s; deferred: %s", dom->ratio, in_band, why,
                                       dom->hold);
        }
      else
        {
          e->action = TWED_ACTION_CHANGE;
          e->reason = g_strdup_printf ("ratio %.2f %s, %s", dom->ratio, in_band, why);
        }
    }
  else
    {
      e->target = *twed_policy_band_setting (pol, band);
      if (twed_setting_equal (&e->target, &e->current))
        {
          e->action = TWED_ACTION_KEEP;
          e->reason = g_strdup_printf ("ratio %.2f %s", dom->ratio, in_band);
        }
      else if (dom->hold)
        {
          e->action = TWED_ACTION_DEFER;
          e->reason = g_strdup_printf ("ratio %.2f in band %s; deferred: %s", dom->ratio, e->band, dom->hold);
        }
      else
        {
          e->action = TWED_ACTION_CHANGE;
          e->reason = g_strdup_printf ("ratio %.2f in band %s", dom->ratio, e->band);
        }
    }
  /* Not planned by the controller this pass (skipped, or kept by a
   * neighbouring band): it must not await a step or judge a window that
   * spans the time it was left alone. */
  if (ctl && !e->is_auto)
    twed_auto_skip (ctl, host, dom);
  return e;
}

/* An auto step down or fallback that undoes a delay costing more than
 * it saves, or that nothing measures any more; not one that only saves
 * nothing (exits not cut), which can wait its turn like any change. */
static gboolean
is_protective (const TwedPlanEntry *e)
{
  return e->is_auto && e->auto_protective;
}

/* Protective auto steps first, then the most overcommitted: they gain
 * or lose most. */
static int
cmp_change_priority (gconstpointer a, gconstpointer b)
{
  const TwedPlanEntry *x = *(TwedPlanEntry *const *) a, *y = *(TwedPlanEntry *const *) b;
  int c;

  if (is_protective (x) != is_protective (y))
    return is_protective (x) ? -1 : 1;
  if (x->ratio != y->ratio)
    return x->ratio > y->ratio ? -1 : 1;
  if ((c = g_strcmp0 (x->host, y->host)))
    return c;
  return g_strcmp0 (x->domain, y->domain);
}

static int
cmp_entry_domain (gconstpointer a, gconstpointer b)
{
  const TwedPlanEntry *x = *(TwedPlanEntry *const *) a, *y = *(TwedPlanEntry *const *) b;

  return g_strcmp0 (x->domain, y->domain);
}

static int
cmp_host_name (gconstpointer a, gconstpointer b)
{
  const TwedHost *x = *(TwedHost *const *) a, *y = *(TwedHost *const *) b;

  return g_strcmp0 (x->name, y->name);
}

struct _TwedBudget {
  guint cap;              /* changes over all hosts and policies, 0 = none */
  guint total;
  GHashTable *per_host;   /* "policy\nhost" -> changes */
  GHashTable *per_policy; /* policy -> changes */
  char *hold;             /* grants nothing, deferring with this reason */
};

TwedBudget *
twed_budget_new (guint cap)
{
  TwedBudget *b = g_new0 (TwedBudget, 1);

  b->cap = cap;
  b->per_host = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  b->per_policy = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  return b;
}

void
twed_budget_free (TwedBudget *b)
{
  if (!b)
    return;
  g_hash_table_unref (b->per_host);
  g_hash_table_unref (b->per_policy);
  g_free (b->hold);
  g_free (b);
}

void
twed_budget_set_cap (TwedBudget *b, guint cap)
{
  b->cap = cap;
}

guint
twed_budget_total (const TwedBudget *b)
{
  return b->total;
}

void
twed_budget_charge (TwedBudget *b, guint changes)
{
  b->total += changes;
}

void
twed_budget_hold (TwedBudget *b, const char *why)
{
  g_free (b->hold);
  b->hold = g_strdup (why);
}

const char *
twed_budget_get_hold (const TwedBudget *b)
{
  return b->hold;
}

static GHashTable *
counts_copy (GHashTable *from)
{
  GHashTable *to = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, from);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_hash_table_insert (to, g_strdup (k), v);
  return to;
}

static void
counts_add (GHashTable *to, GHashTable *from)
{
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, from);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_hash_table_insert (to, g_strdup (k),
                         GUINT_TO_POINTER (GPOINTER_TO_UINT (g_hash_table_lookup (to, k)) + GPOINTER_TO_UINT (v)));
}

void
twed_budget_export (const TwedBudget *b, guint *total, GHashTable **per_policy, GHashTable **per_host)
{
  *total = b->total;
  *per_policy = counts_copy (b->per_policy);
  *per_host = counts_copy (b->per_host);
}

void
twed_budget_import (TwedBudget *b, guint total, GHashTable *per_policy, GHashTable *per_host)
{
  b->total += total;
  counts_add (b->per_policy, per_policy);
  counts_add (b->per_host, per_host);
}

/* Sets @key's count to @n; copies @key only the first time (a fleet's
 * plan counts hundreds of thousands of changes under a few keys). */
static void
count_set (GHashTable *counts, const char *key, guint n)
{
  gpointer stored;

  if (g_hash_table_steal_extended (counts, key, &stored, NULL))
    g_hash_table_insert (counts, stored, GUINT_TO_POINTER (n));
  else
    g_hash_table_insert (counts, g_strdup (key), GUINT_TO_POINTER (n));
}

static void
count_down (GHashTable *counts, const char *key)
{
  guint n = GPOINTER_TO_UINT (g_hash_table_lookup (counts, key));

  if (n)
    count_set (counts, key, n - 1);
}

/* The per_host key of a change, its policy and host, in @key (reused
 * across the changes of a plan). */
static const char *
budget_host_key (GString *key, const TwedPlanEntry *e)
{
  g_string_assign (key, e->policy);
  g_string_append_c (key, '\n');
  g_string_append (key, e->host);
  return key->str;
}

void
twed_budget_export_entry (const TwedBudget *b, const TwedPlanEntry *e, GHashTable *per_policy,
                          GHashTable *per_host)
{
  GString *key = g_string_new (NULL);
  gpointer count = g_hash_table_lookup (b->per_host, budget_host_key (key, e));

  g_hash_table_insert (per_host, g_string_free (key, FALSE), count);
  g_hash_table_insert (per_policy, g_strdup (e->policy), g_hash_table_lookup (b->per_policy, e->policy));
}

void
twed_budget_refund (TwedBudget *b, const TwedPlanEntry *e)
{
  g_autoptr(GString) key = g_string_new (NULL);

  count_down (b->per_host, budget_host_key (key, e));
  count_down (b->per_policy, e->policy);
  if (b->total)
    b->total--;
}

void
twed_plan_apply_budget (TwedPlan *plan, const TwedPolicySet *set, TwedBudget *budget)
{
  TwedPlan *one[] = { plan };

  twed_plans_apply_budget (one, 1, set, budget);
}

void
twed_plans_apply_budget (TwedPlan **plans, guint nplans, const TwedPolicySet *set, TwedBudget *budget)
{
  g_autoptr(GPtrArray) changes = g_ptr_array_new ();
  g_autoptr(GHashTable) policies = g_hash_table_new (g_str_hash, g_str_equal);
  g_autoptr(GString) key = g_string_new (NULL);

  for (guint p = 0; p < nplans; p++)
    for (guint i = 0; i < plans[p]->entries->len; i++)
      {
        TwedPlanEntry *e = g_ptr_array_index (plans[p]->entries, i);

        if (e->action == TWED_ACTION_CHANGE)
          g_ptr_array_add (changes, e);
      }
  g_ptr_array_sort (changes, cmp_change_priority);
  for (guint i = 0; i < set->policies->len; i++)
    {
      TwedPolicy *p = g_ptr_array_index (set->policies, i);

      g_hash_table_insert (policies, p->name, p);
    }

  for (guint i = 0; i < changes->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (changes, i);
      const TwedPolicy *pol = g_hash_table_lookup (policies, e->policy);
      guint nh, np;
      char *why = NULL;

      if (!pol)
        pol = set->fallback;
      nh = GPOINTER_TO_UINT (g_hash_table_lookup (budget->per_host, budget_host_key (key, e)));
      np = GPOINTER_TO_UINT (g_hash_table_lookup (budget->per_policy, e->policy));
      if (budget->hold)
        why = g_strdup (budget->hold);
      else if (pol->max_per_host && nh >= pol->max_per_host)
        why = g_strdup_printf ("max_changes_per_cycle.host %u of policy %s reached",
                               pol->max_per_host, pol->name);
      else if (pol->max_global && np >= pol->max_global)
        why = g_strdup_printf ("max_changes_per_cycle.global %u of policy %s reached",
                               pol->max_global, pol->name);
      else if (budget->cap && budget->total >= budget->cap)
        why = g_strdup_printf ("configured max_changes_per_cycle %u reached", budget->cap);
      if (why)
        {
          g_autofree char *old = e->reason;

          e->action = TWED_ACTION_DEFER;
          e->reason = g_strdup_printf ("%s; deferred: %s", old, why);
          g_free (why);
          continue;
        }
      count_set (budget->per_host, key->str, nh + 1);
      count_set (budget->per_policy, e->policy, np + 1);
      budget->total++;
    }
}

TwedPlan *
twed_plan_build (GPtrArray *hosts, const TwedPolicySet *set, const TwedPlanOptions *opts)
{
  TwedPlan *plan = g_new0 (TwedPlan, 1);

  plan->generated = g_strdup (opts && opts->generated ? opts->generated : "");
  plan->hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) plan_host_free);
  plan->entries = g_ptr_array_new_with_free_func ((GDestroyNotify) entry_free);

  g_autoptr(GPtrArray) by_name = g_ptr_array_sized_new (hosts->len);
  TwedAuto *ctl = opts ? opts->controller : NULL;
  guint nentries = 0;
  PlanLabels labels = {
    NULL, g_hash_table_new_full (NULL, NULL, NULL, (GDestroyNotify) policy_labels_free)
  };

  g_ptr_array_extend (by_name, hosts, NULL, NULL);

  for (guint h = 0; h < hosts->len; h++)
    nentries += ((const TwedHost *) g_ptr_array_index (hosts, h))->domains->len;
  g_ptr_array_unref (plan->entries);
  plan->entries = g_ptr_array_new_full (nentries, (GDestroyNotify) entry_free);
  for (guint h = 0; h < hosts->len; h++)
    {
      const TwedHost *host = g_ptr_array_index (hosts, h);
      TwedPlanHost *ph = g_new0 (TwedPlanHost, 1);

      ph->name = g_strdup (host->name);
      ph->uri = g_strdup (host->uri);
      ph->reachable = host->reachable;
      ph->error = g_strdup (host->error);
      ph->pcpus = host->online ? host->online->len : host->ncpus;
      ph->shared_pcpus = host->shared_pcpus;
      ph->dedicated_pcpus = host->dedicated_pcpus;
      ph->vcpus = host->nvcpus_active;
      ph->ratio = host->ratio;
      ph->support = host->support;
      ph->ndomains = host->domains->len;
      g_ptr_array_add (plan->hosts, ph);
    }
  /* Sorted by host, then domain: hosts by name, each host's entries
   * among themselves (a sort of the whole fleet's entries compared
   * host names most of the time). */
  g_ptr_array_sort (by_name, cmp_host_name);
  for (guint h = 0; h < by_name->len; h++)
    {
      const TwedHost *host = g_ptr_array_index (by_name, h);
      guint first = plan->entries->len;

      if (!host->reachable)
        continue;
      if (ctl && host_has_auto (host, set))
        twed_auto_observe (ctl, host, TWED_AUTO_FORGET_USEC);
      else if (ctl)
        twed_auto_forget_unseen (ctl, host, TWED_AUTO_FORGET_USEC);
      g_clear_pointer (&labels.host, g_ref_string_release);
      labels.host = g_ref_string_new (host->name);
      for (guint d = 0; d < host->domains->len; d++)
        g_ptr_array_add (plan->entries,
                         plan_domain (host, g_ptr_array_index (host->domains, d), set, ctl, &labels));
      qsort (plan->entries->pdata + first, plan->entries->len - first, sizeof (gpointer), cmp_entry_domain);
    }
  {
    g_autoptr(TwedBudget) budget = twed_budget_new (opts ? opts->max_changes_global : 0);

    twed_plan_apply_budget (plan, set, budget);
  }
  plan_labels_clear (&labels);
  return plan;
}

void
twed_plan_report_auto (const TwedPlan *plan, TwedAuto *ctl, gboolean skipped)
{
  for (guint i = 0; ctl && i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);
      TwedAutoStepOutcome outcome;

      if (!e->is_auto || !e->active || !auto_asks_step (e))
        continue;
      if (e->action == TWED_ACTION_DEFER || (e->action == TWED_ACTION_CHANGE && skipped))
        outcome = TWED_AUTO_STEP_DEFERRED;
      else if (e->action == TWED_ACTION_CHANGE && e->result == TWED_RESULT_FAILED)
        outcome = e->refused ? TWED_AUTO_STEP_REFUSED : TWED_AUTO_STEP_FAILED;
      else if (e->action == TWED_ACTION_CHANGE && e->result == TWED_RESULT_NONE)
        outcome = TWED_AUTO_STEP_DEFERRED;
      else
        continue;
      twed_auto_step_not_made (ctl, e->host, e->uuid, &e->target, outcome);
    }
}

guint
twed_plan_count (const TwedPlan *plan, TwedAction action)
{
  guint n = 0;

  for (guint i = 0; i < plan->entries->len; i++)
    n += ((TwedPlanEntry *) g_ptr_array_index (plan->entries, i))->action == action;
  return n;
}

guint
twed_plan_count_result (const TwedPlan *plan, TwedResult result)
{
  guint n = 0;

  for (guint i = 0; i < plan->entries->len; i++)
    n += ((TwedPlanEntry *) g_ptr_array_index (plan->entries, i))->result == result;
  return n;
}

guint
twed_plan_unreachable (const TwedPlan *plan)
{
  guint n = 0;

  for (guint i = 0; i < plan->hosts->len; i++)
    n += !((TwedPlanHost *) g_ptr_array_index (plan->hosts, i))->reachable;
  return n;
}
