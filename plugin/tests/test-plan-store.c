/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's per-host plan storage: plans replaced one host at a
 * time, fleet totals kept without a walk over every VM, the combined
 * view and the order by host. */
#include "test-util.h"
#include "twed-plan-store.h"

static TwedPlan *
one_host_plan (const char *name, guint nvms, guint vcpus, gboolean reachable)
{
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  TwedPlanOptions o = { "t", 0 };
  TwedHost *h = twed_host_new (name, "test:///x");

  h->reachable = reachable;
  h->support = TWED_SUPPORT_YES;
  h->ncpus = 4;
  for (guint i = 0; i < nvms; i++)
    {
      g_autofree char *dn = g_strdup_printf ("%s-vm%u", name, nvms - i);

      add_dom (h, dn, vcpus, NULL);
    }
  twed_host_compute (h);
  g_ptr_array_add (hosts, h);
  return twed_plan_build (hosts, set, &o);
}

static guint derived_freed;

static void
count_free (gpointer p)
{
  derived_freed++;
  g_free (p);
}

/* The store's totals must equal a count over its view. */
static void
assert_summary_matches (TwedPlanStore *store)
{
  const TwedPlanSummary *sum = twed_plan_store_summary (store);
  const TwedPlan *view = twed_plan_store_view (store);

  g_assert_cmpuint (sum->hosts, ==, view->hosts->len);
  g_assert_cmpuint (sum->hosts_up, ==, view->hosts->len - twed_plan_unreachable (view));
  g_assert_cmpuint (sum->vms, ==, view->entries->len);
  for (guint a = TWED_ACTION_CHANGE; a <= TWED_ACTION_DEFER; a++)
    g_assert_cmpuint (sum->actions[a], ==, twed_plan_count (view, a));
}

static gboolean
keep_not_b (const char *host, gpointer data G_GNUC_UNUSED)
{
  return !g_str_equal (host, "b");
}

static void
test_store (void)
{
  g_autoptr(TwedPlanStore) store = twed_plan_store_new ();
  const TwedPlan *view;

  /* 1 VM of 8 vCPUs on 4 pCPUs: a change (fixed); 3 of 1: keep (off). */
  twed_plan_store_replace (store, "c", one_host_plan ("c", 1, 8, TRUE));
  twed_plan_store_replace (store, "a", one_host_plan ("a", 3, 1, TRUE));
  twed_plan_store_replace (store, "b", one_host_plan ("b", 2, 4, TRUE));
  assert_summary_matches (store);
  g_assert_cmpuint (twed_plan_store_summary (store)->vms, ==, 6);
  g_assert_cmpuint (twed_plan_store_summary (store)->actions[TWED_ACTION_CHANGE], ==, 3);

  /* Sorted by host, then domain. */
  view = twed_plan_store_view (store);
  g_assert_cmpstr (((TwedPlanEntry *) g_ptr_array_index (view->entries, 0))->domain, ==, "a-vm1");
  g_assert_cmpstr (((TwedPlanEntry *) g_ptr_array_index (view->entries, 5))->host, ==, "c");
  g_assert_cmpstr (twed_plan_store_nth (store, 0)->generated, ==, "t");
  g_assert_cmpstr (((TwedPlanHost *) g_ptr_array_index (twed_plan_store_nth (store, 2)->hosts, 0))->name, ==, "c");

  /* What a consumer derives per host goes with that host's plan only. */
  for (guint i = 0; i < 3; i++)
    twed_plan_store_set_nth_derived (store, i, g_strdup ("x"), count_free);

  /* A pass over one host replaces its plan, nothing else. */
  twed_plan_store_replace (store, "a", one_host_plan ("a", 5, 2, TRUE));
  g_assert_cmpuint (derived_freed, ==, 1);
  g_assert_null (twed_plan_store_nth_derived (store, 0));
  g_assert_cmpstr (twed_plan_store_nth_derived (store, 1), ==, "x");
  assert_summary_matches (store);
  g_assert_cmpuint (twed_plan_store_summary (store)->vms, ==, 8);

  twed_plan_store_mark_down (store, "c", "connection lost");
  g_assert_cmpuint (derived_freed, ==, 2);
  g_assert_null (twed_plan_store_nth_derived (store, 2));
  assert_summary_matches (store);
  g_assert_cmpuint (twed_plan_store_summary (store)->hosts_up, ==, 2);
  g_assert_cmpuint (twed_plan_store_summary (store)->vms, ==, 7);
  g_assert_cmpstr (((TwedPlanHost *) g_ptr_array_index (twed_plan_store_lookup (store, "c")->hosts, 0))->error,
                   ==, "connection lost");

  twed_plan_store_retain (store, keep_not_b, NULL);
  g_assert_cmpuint (derived_freed, ==, 3);
  assert_summary_matches (store);
  g_assert_cmpuint (twed_plan_store_size (store), ==, 2);
  g_assert_null (twed_plan_store_lookup (store, "b"));
  twed_plan_store_remove (store, "a");
  twed_plan_store_remove (store, "c");
  assert_summary_matches (store);
  g_assert_cmpuint (twed_plan_store_summary (store)->hosts, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/plan-store/replace-summary-view", test_store);
  return g_test_run ();
}
