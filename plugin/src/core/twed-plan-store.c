/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-plan-store.h"

#include <string.h>

typedef struct {
  char *host;
  TwedPlan *plan;
  TwedPlanSummary sum;    /* this plan's share of the store's summary */
  gpointer derived;       /* twed_plan_store_set_nth_derived */
  GDestroyNotify derived_free;
} Stored;

static void
derived_clear (Stored *st)
{
  if (st->derived && st->derived_free)
    st->derived_free (st->derived);
  st->derived = NULL;
  st->derived_free = NULL;
}

struct _TwedPlanStore {
  GHashTable *plans;      /* host -> Stored */
  TwedPlanSummary sum;
  GPtrArray *order;       /* Stored sorted by host; NULL = stale */
  TwedPlan *view;         /* NULL = stale */
};

static void
stored_free (gpointer p)
{
  Stored *st = p;

  derived_clear (st);
  twed_plan_free (st->plan);
  g_free (st->host);
  g_free (st);
}

static void
summarize (const TwedPlan *plan, TwedPlanSummary *sum)
{
  memset (sum, 0, sizeof *sum);
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      sum->hosts++;
      sum->hosts_up += ((const TwedPlanHost *) g_ptr_array_index (plan->hosts, i))->reachable;
    }
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      sum->vms++;
      sum->actions[e->action]++;
      sum->results[e->result]++;
      sum->current_modes[e->current.mode]++;
    }
}

/* @sign: +1 adds @part to @total, -1 takes it away. */
static void
account (TwedPlanSummary *total, const TwedPlanSummary *part, int sign)
{
  guint *t = (guint *) total;
  const guint *p = (const guint *) part;

  G_STATIC_ASSERT (sizeof (TwedPlanSummary) % sizeof (guint) == 0);
  for (gsize i = 0; i < sizeof (TwedPlanSummary) / sizeof (guint); i++)
    t[i] = sign > 0 ? t[i] + p[i] : t[i] - p[i];
}

static void
views_stale (TwedPlanStore *store, gboolean order_too)
{
  g_clear_pointer (&store->view, twed_plan_free);
  if (order_too)
    g_clear_pointer (&store->order, g_ptr_array_unref);
}

TwedPlanStore *
twed_plan_store_new (void)
{
  TwedPlanStore *store = g_new0 (TwedPlanStore, 1);

  store->plans = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, stored_free);
  return store;
}

void
twed_plan_store_free (TwedPlanStore *store)
{
  if (!store)
    return;
  views_stale (store, TRUE);
  g_hash_table_unref (store->plans);
  g_free (store);
}

void
twed_plan_store_replace (TwedPlanStore *store, const char *host, TwedPlan *plan)
{
  Stored *st = g_hash_table_lookup (store->plans, host);

  if (st)
    {
      account (&store->sum, &st->sum, -1);
      derived_clear (st);
      twed_plan_free (st->plan);
    }
  else
    {
      st = g_new0 (Stored, 1);
      st->host = g_strdup (host);
      g_hash_table_insert (store->plans, g_strdup (host), st);
      views_stale (store, TRUE);
    }
  st->plan = plan;
  summarize (plan, &st->sum);
  account (&store->sum, &st->sum, +1);
  views_stale (store, FALSE);
}

void
twed_plan_store_remove (TwedPlanStore *store, const char *host)
{
  Stored *st = g_hash_table_lookup (store->plans, host);

  if (!st)
    return;
  account (&store->sum, &st->sum, -1);
  g_hash_table_remove (store->plans, host);
  views_stale (store, TRUE);
}

void
twed_plan_store_retain (TwedPlanStore *store, gboolean (*keep) (const char *host, gpointer data),
                        gpointer data)
{
  GHashTableIter it;
  gpointer key, value;

  g_hash_table_iter_init (&it, store->plans);
  while (g_hash_table_iter_next (&it, &key, &value))
    if (!keep (key, data))
      {
        account (&store->sum, &((Stored *) value)->sum, -1);
        g_hash_table_iter_remove (&it);
        views_stale (store, TRUE);
      }
}

void
twed_plan_store_mark_down (TwedPlanStore *store, const char *host, const char *error)
{
  Stored *st = g_hash_table_lookup (store->plans, host);
  TwedPlanHost *h;

  if (!st || !st->plan->hosts->len || !(h = g_ptr_array_index (st->plan->hosts, 0))->reachable)
    return;
  account (&store->sum, &st->sum, -1);
  derived_clear (st);
  h->reachable = FALSE;
  g_free (h->error);
  h->error = g_strdup (error);
  g_ptr_array_set_size (st->plan->entries, 0);
  summarize (st->plan, &st->sum);
  account (&store->sum, &st->sum, +1);
  views_stale (store, FALSE);
}

const TwedPlan *
twed_plan_store_lookup (TwedPlanStore *store, const char *host)
{
  Stored *st = g_hash_table_lookup (store->plans, host);

  return st ? st->plan : NULL;
}

const TwedPlanSummary *
twed_plan_store_summary (TwedPlanStore *store)
{
  return &store->sum;
}

static int
cmp_stored (gconstpointer a, gconstpointer b)
{
  return strcmp ((*(Stored *const *) a)->host, (*(Stored *const *) b)->host);
}

static GPtrArray *
order (TwedPlanStore *store)
{
  GHashTableIter it;
  gpointer value;

  if (store->order)
    return store->order;
  store->order = g_ptr_array_sized_new (g_hash_table_size (store->plans));
  g_hash_table_iter_init (&it, store->plans);
  while (g_hash_table_iter_next (&it, NULL, &value))
    g_ptr_array_add (store->order, value);
  g_ptr_array_sort (store->order, cmp_stored);
  return store->order;
}

guint
twed_plan_store_size (TwedPlanStore *store)
{
  return g_hash_table_size (store->plans);
}

const TwedPlan *
twed_plan_store_nth (TwedPlanStore *store, guint index)
{
  GPtrArray *o = order (store);

  g_return_val_if_fail (index < o->len, NULL);
  return ((Stored *) g_ptr_array_index (o, index))->plan;
}

gpointer
twed_plan_store_nth_derived (TwedPlanStore *store, guint index)
{
  GPtrArray *o = order (store);

  g_return_val_if_fail (index < o->len, NULL);
  return ((Stored *) g_ptr_array_index (o, index))->derived;
}

void
twed_plan_store_set_nth_derived (TwedPlanStore *store, guint index, gpointer data, GDestroyNotify destroy)
{
  GPtrArray *o = order (store);
  Stored *st;

  g_return_if_fail (index < o->len);
  st = g_ptr_array_index (o, index);
  derived_clear (st);
  st->derived = data;
  st->derived_free = destroy;
}

const TwedPlan *
twed_plan_store_view (TwedPlanStore *store)
{
  GPtrArray *o;

  if (store->view)
    return store->view;
  o = order (store);
  store->view = g_new0 (TwedPlan, 1);
  store->view->generated = g_strdup ("");
  store->view->hosts = g_ptr_array_sized_new (store->sum.hosts);
  store->view->entries = g_ptr_array_sized_new (store->sum.vms);
  for (guint i = 0; i < o->len; i++)
    {
      const TwedPlan *p = ((Stored *) g_ptr_array_index (o, i))->plan;

      g_ptr_array_extend (store->view->hosts, p->hosts, NULL, NULL);
      g_ptr_array_extend (store->view->entries, p->entries, NULL, NULL);
    }
  return store->view;
}
