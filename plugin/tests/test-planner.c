/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "test-util.h"

/* One host of @ncpus pCPUs with one unpinned VM per entry of @vcpus. */
static TwedHost *
make_host (const char *name, guint ncpus, const guint *vcpus, guint n)
{
  TwedHost *h = twed_host_new (name, "test:///x");

  h->reachable = TRUE;
  h->support = TWED_SUPPORT_YES;
  h->ncpus = ncpus;
  for (guint i = 0; i < n; i++)
    {
      g_autofree char *dn = g_strdup_printf ("%s-vm%u", name, i);

      add_dom (h, dn, vcpus[i], NULL);
    }
  twed_host_compute (h);
  return h;
}

static TwedPlan *
plan_hosts (GPtrArray *hosts, TwedPolicySet *set)
{
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0 };

  return twed_plan_build (hosts, set, &o);
}

static TwedPlanEntry *
entry (TwedPlan *plan, guint i)
{
  return g_ptr_array_index (plan->entries, i);
}

/* Built-in bands: <=1 off, (1,2] fixed:3, >2 dynamic:3[1..5]. */
static void
test_band_edges (void)
{
  static const struct { guint vcpus; guint ncpus; TwedMode mode; } cases[] = {
    { 4, 4, TWED_MODE_OFF }, { 3, 4, TWED_MODE_OFF }, { 5, 4, TWED_MODE_FIXED },
    { 8, 4, TWED_MODE_FIXED }, { 9, 4, TWED_MODE_DYNAMIC }, { 64, 4, TWED_MODE_DYNAMIC },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      g_autoptr(TwedPlan) plan = NULL;

      g_ptr_array_add (hosts, make_host ("h", cases[i].ncpus, &cases[i].vcpus, 1));
      plan = plan_hosts (hosts, set);
      g_assert_cmpuint (plan->entries->len, ==, 1);
      g_assert_cmpuint (entry (plan, 0)->target.mode, ==, cases[i].mode);
      g_assert_cmpuint (entry (plan, 0)->action, ==,
                        cases[i].mode == TWED_MODE_OFF ? TWED_ACTION_KEEP : TWED_ACTION_CHANGE);
    }
}

/* Ratios that are exact in rational arithmetic land on the band they
 * bound, whatever floating point makes of 1/|affinity| summed over
 * 1..64 pCPUs: 20 vCPUs floating over 10 pCPUs are 2:1, not above. */
static void
test_band_boundary_grid (void)
{
  static const double bounds[] = { 1.0, 1.25, 1.5, 2.0, 3.0, 4.0 };
  g_autoptr(TwedPolicy) pol = twed_policy_new_default ();

  g_array_set_size (pol->bands, 0);
  for (guint b = 0; b < G_N_ELEMENTS (bounds); b++)
    {
      TwedBand band = { bounds[b], { TWED_MODE_FIXED, b, b, b } };

      g_array_append_val (pol->bands, band);
    }
  for (guint p = 1; p <= 64; p++)
    for (guint b = 0; b < G_N_ELEMENTS (bounds); b++)
      for (guint shape = 0; shape < 3; shape++)
        {
          double want = bounds[b] * p;
          guint vcpus = (guint) want;
          g_autoptr(TwedHost) h = twed_host_new ("h", "test:///x");
          g_autofree char *half = NULL;

          if ((double) vcpus != want)
            continue;
          h->reachable = TRUE;
          h->support = TWED_SUPPORT_YES;
          h->ncpus = p;
          if (shape == 0)
            add_dom (h, "one", vcpus, NULL);      /* one VM, every vCPU floating */
          else if (shape == 1)
            for (guint v = 0; v < vcpus; v++)     /* single-vCPU VMs */
              {
                g_autofree char *name = g_strdup_printf ("vm%u", v);

                add_dom (h, name, 1, NULL);
              }
          else
            {
              /* Half the vCPUs pinned to half the pCPUs (weights of
               * 1/(p/2)): the same ratio on the pCPUs the VM may use. */
              g_autofree char **pins = NULL;

              if (p % 2 || (vcpus % 2))
                continue;
              half = g_strdup_printf ("0-%u", p / 2 - 1);
              pins = g_new0 (char *, vcpus / 2 + 1);
              for (guint v = 0; v < vcpus / 2; v++)
                pins[v] = half;
              add_dom (h, "pinned", vcpus / 2, (const char *const *) pins);
            }
          twed_host_compute (h);
          for (guint d = 0; d < h->domains->len; d++)
            {
              const TwedDomain *dom = g_ptr_array_index (h->domains, d);

              if (twed_policy_band_index (pol, dom->ratio) != b)
                g_error ("%u pCPUs, shape %u, %s: ratio %.17g lands in band %u, not %u (up to %g)",
                         p, shape, dom->name, dom->ratio, twed_policy_band_index (pol, dom->ratio), b,
                         bounds[b]);
            }
        }
}

/* A VM whose ratio wanders around the 2.0 boundary changes at most
 * once in 100 cycles thanks to the hysteresis margin. */
static void
test_hysteresis (void)
{
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  TwedSetting current = { TWED_MODE_OFF, 0, 0, 0 };
  guint changes = 0;

  for (guint cycle = 0; cycle < 100; cycle++)
    {
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      g_autoptr(TwedPlan) plan = NULL;
      /* 100 pCPUs, 195..205 vCPUs: ratio 1.95..2.05 */
      guint vcpus = 195 + (cycle * 7) % 11;
      TwedHost *h = make_host ("h", 100, &vcpus, 1);

      ((TwedDomain *) g_ptr_array_index (h->domains, 0))->twed = current;
      g_ptr_array_add (hosts, h);
      plan = plan_hosts (hosts, set);
      if (entry (plan, 0)->action == TWED_ACTION_CHANGE)
        {
          changes++;
          current = entry (plan, 0)->target;
        }
    }
  g_assert_cmpuint (changes, <=, 1);

  /* Without hysteresis the same walk flaps. */
  {
    g_autoptr(TwedPolicySet) flappy = twed_policy_set_new ();
    TwedSetting cur = { TWED_MODE_FIXED, 3, 3, 3 };
    guint flaps = 0;

    flappy->fallback->hysteresis = 0;
    for (guint cycle = 0; cycle < 100; cycle++)
      {
        g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
        g_autoptr(TwedPlan) plan = NULL;
        guint vcpus = 195 + (cycle * 7) % 11;
        TwedHost *h = make_host ("h", 100, &vcpus, 1);

        ((TwedDomain *) g_ptr_array_index (h->domains, 0))->twed = cur;
        g_ptr_array_add (hosts, h);
        plan = plan_hosts (hosts, flappy);
        if (entry (plan, 0)->action == TWED_ACTION_CHANGE)
          {
            flaps++;
            cur = entry (plan, 0)->target;
          }
      }
    g_assert_cmpuint (flaps, >, 10);
  }
}

/* Hysteresis between an auto band and a fixed one: a VM the controller
 * left at a delay within the auto bounds, or one the fixed band set,
 * stays where it is while its ratio wanders around the boundary, and
 * one kept in the auto band stays under the controller. */
static void
test_hysteresis_auto (void)
{
  const char *json = "{\"version\":1,\"name\":\"hy\",\"hysteresis\":0.1,"
                     "\"bands\":[{\"up_to\":2.0,\"mode\":\"fixed\",\"delay\":3}],"
                     "\"beyond\":{\"mode\":\"auto\",\"min\":4,\"max\":5}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  static const TwedSetting starts[] = {
    { TWED_MODE_FIXED, 4, 4, 4 },  /* where the controller left it */
    { TWED_MODE_FIXED, 3, 3, 3 },  /* what the fixed band set */
  };
  g_autoptr(GError) error = NULL;
  TwedPolicy *pol = twed_policy_parse (json, strlen (json), "hy.json", &error);

  g_assert_no_error (error);
  g_assert_true (twed_policy_set_add (set, pol, NULL));
  for (guint s = 0; s < G_N_ELEMENTS (starts); s++)
    for (guint cycle = 0; cycle < 20; cycle++)
      {
        g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
        g_autoptr(TwedPlan) plan = NULL;
        /* 100 pCPUs, 195..205 vCPUs: ratio 1.95..2.05 */
        guint vcpus = 195 + (cycle * 7) % 11;
        TwedHost *h = make_host ("h", 100, &vcpus, 1);
        TwedPlanEntry *e;

        ((TwedDomain *) g_ptr_array_index (h->domains, 0))->twed = starts[s];
        ((TwedDomain *) g_ptr_array_index (h->domains, 0))->has_twed = TRUE;
        g_ptr_array_add (hosts, h);
        plan = plan_hosts (hosts, set);
        e = entry (plan, 0);
        if (e->action != TWED_ACTION_KEEP)
          g_error ("start fixed:%u, %u vCPUs: %s", starts[s].delay, vcpus, e->reason);
        /* Kept in the auto band: planned by the controller's rules. */
        g_assert_cmpint (e->is_auto, ==, s == 0);
      }
}

static void
test_rate_limits (void)
{
  const char *json = "{\"version\":1,\"name\":\"lim\",\"beyond\":{\"mode\":\"fixed\",\"delay\":2},"
                     "\"max_changes_per_cycle\":{\"host\":2,\"global\":3}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPlan) plan = NULL;
  const guint vcpus[] = { 1, 1, 1 };

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (json, strlen (json), "lim.json", NULL), NULL));
  g_ptr_array_add (hosts, make_host ("a", 1, vcpus, 3));
  g_ptr_array_add (hosts, make_host ("b", 1, vcpus, 3));
  plan = plan_hosts (hosts, set);
  g_assert_cmpuint (twed_plan_count (plan, TWED_ACTION_CHANGE), ==, 3);
  g_assert_cmpuint (twed_plan_count (plan, TWED_ACTION_DEFER), ==, 3);
  for (guint h = 0; h < 2; h++)
    {
      guint n = 0;

      for (guint i = 0; i < plan->entries->len; i++)
        n += entry (plan, i)->action == TWED_ACTION_CHANGE && g_str_equal (entry (plan, i)->host, h ? "b" : "a");
      g_assert_cmpuint (n, <=, 2);
    }

  /* The configuration's global cap applies on top. */
  {
    g_autoptr(TwedPlan) capped = NULL;
    TwedPlanOptions o = { "", 1 };

    capped = twed_plan_build (hosts, set, &o);
    g_assert_cmpuint (twed_plan_count (capped, TWED_ACTION_CHANGE), ==, 1);
  }
}

static void
test_optout_pinned_notwed (void)
{
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  g_autoptr(TwedPlan) plan = NULL;
  const guint vcpus[] = { 4, 4, 4 };
  TwedHost *h = make_host ("a", 2, vcpus, 3);
  TwedHost *no = make_host ("b", 2, vcpus, 1);
  TwedHost *down = twed_host_new ("c", "qemu+ssh://c/system");
  TwedHost *unknown = make_host ("d", 2, vcpus, 1);

  ((TwedDomain *) g_ptr_array_index (h->domains, 0))->manage = TWED_MANAGE_OPTOUT;
  ((TwedDomain *) g_ptr_array_index (h->domains, 1))->manage = TWED_MANAGE_PINNED;
  no->support = TWED_SUPPORT_NO;
  /* Unknown support (an x86 host, a read-only connection) fails closed. */
  unknown->support = TWED_SUPPORT_UNKNOWN;
  unknown->support_reason = g_strdup ("read-only connection");
  down->error = g_strdup ("cannot connect");
  g_ptr_array_add (hosts, h);
  g_ptr_array_add (hosts, no);
  g_ptr_array_add (hosts, down);
  g_ptr_array_add (hosts, unknown);
  plan = plan_hosts (hosts, set);
  g_assert_cmpuint (plan->entries->len, ==, 5);
  g_assert_cmpuint (entry (plan, 4)->action, ==, TWED_ACTION_SKIP);
  g_assert_cmpstr (entry (plan, 4)->reason, ==, "TWED support unknown (read-only connection)");
  g_assert_true (twed_setting_equal (&entry (plan, 4)->target, &entry (plan, 4)->current));
  g_assert_cmpuint (entry (plan, 0)->action, ==, TWED_ACTION_SKIP);
  g_assert_nonnull (strstr (entry (plan, 0)->reason, "opted out"));
  g_assert_cmpuint (entry (plan, 1)->action, ==, TWED_ACTION_SKIP);
  g_assert_nonnull (strstr (entry (plan, 1)->reason, "pinned"));
  g_assert_cmpuint (entry (plan, 2)->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpuint (entry (plan, 3)->action, ==, TWED_ACTION_SKIP);
  g_assert_nonnull (strstr (entry (plan, 3)->reason, "no TWED support"));
  g_assert_cmpuint (twed_plan_unreachable (plan), ==, 1);

  {
    g_autofree char *json = twed_plan_to_json (plan, FALSE);
    g_autofree char *table = twed_plan_to_table (plan, TRUE);

    g_assert_nonnull (strstr (json, "\"unreachable\":1"));
    g_assert_nonnull (strstr (json, "\"action\":\"change\""));
    g_assert_nonnull (strstr (table, "c            unreachable: cannot connect"));
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/planner/band-edges", test_band_edges);
  g_test_add_func ("/planner/band-boundary-grid", test_band_boundary_grid);
  g_test_add_func ("/planner/hysteresis", test_hysteresis);
  g_test_add_func ("/planner/hysteresis-auto", test_hysteresis_auto);
  g_test_add_func ("/planner/rate-limits", test_rate_limits);
  g_test_add_func ("/planner/optout-pinned-notwed", test_optout_pinned_notwed);
  return g_test_run ();
}
