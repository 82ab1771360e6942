/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "test-util.h"

#define EPS 1e-9

static void
test_dedicated (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  const char *const pins[] = { "0", "1", "2", "3" };

  h->ncpus = 4;
  add_dom (h, "a", 4, pins);
  twed_host_compute (h);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "a")->ratio, 1.0, EPS);
  g_assert_cmpuint (h->dedicated_pcpus, ==, 4);
  g_assert_cmpuint (h->shared_pcpus, ==, 0);
  g_assert_cmpfloat_with_epsilon (h->ratio, 1.0, EPS);
}

static void
test_unpinned_two_to_one (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);

  h->ncpus = 2;
  add_dom (h, "a", 4, NULL);
  twed_host_compute (h);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "a")->ratio, 2.0, EPS);
  g_assert_cmpfloat_with_epsilon (h->ratio, 2.0, EPS);
  g_assert_cmpuint (h->nvcpus_active, ==, 4);
}

/* Pinning subsets: a VM on 0-1 sees only the load there. */
static void
test_pin_subsets (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  const char *const p01[] = { "0-1", "0-1", "0-1", "0-1" };
  const char *const p23[] = { "2-3" };

  h->ncpus = 4;
  add_dom (h, "busy", 4, p01);
  add_dom (h, "quiet", 1, p23);
  twed_host_compute (h);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "busy")->ratio, 2.0, EPS);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "quiet")->ratio, 0.5, EPS);
  g_assert_cmpfloat_with_epsilon (h->ratio, 5.0 / 4.0, EPS);
}

/* Overlapping pins: weights add up where sets overlap. */
static void
test_overlapping_pins (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  const char *const a[] = { "0-1" };
  const char *const b[] = { "1-2" };

  h->ncpus = 3;
  add_dom (h, "a", 1, a);
  add_dom (h, "b", 1, b);
  twed_host_compute (h);
  /* loads: cpu0 0.5, cpu1 1.0, cpu2 0.5 */
  g_assert_cmpfloat_with_epsilon (find_dom (h, "a")->ratio, 0.75, EPS);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "b")->ratio, 0.75, EPS);
}

/* Offline CPUs carry no weight; a pin to offline CPUs only falls back
 * to every online CPU. */
static void
test_offline_cpus (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  const char *const p[] = { "0-3", "3" };

  h->ncpus = 4;
  h->online = twed_cpuset_parse ("0-1", NULL);
  add_dom (h, "a", 2, p);
  twed_host_compute (h);
  /* vcpu0 on {0,1}, vcpu1 -> {0,1}: loads 1, 1 */
  g_assert_cmpfloat_with_epsilon (find_dom (h, "a")->ratio, 1.0, EPS);
  g_assert_cmpuint (h->shared_pcpus, ==, 2);
}

static void
test_no_vms (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);

  h->ncpus = 8;
  twed_host_compute (h);
  g_assert_cmpfloat_with_epsilon (h->ratio, 0.0, EPS);
  g_assert_cmpuint (h->shared_pcpus, ==, 8);
}

/* Inactive VMs do not load the host, but get the ratio they would see. */
static void
test_inactive (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  TwedDomain *off;

  h->ncpus = 2;
  add_dom (h, "a", 2, NULL);
  off = add_dom (h, "b", 2, NULL);
  off->active = FALSE;
  twed_host_compute (h);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "a")->ratio, 1.0, EPS);
  g_assert_cmpfloat_with_epsilon (off->ratio, 2.0, EPS);
  g_assert_cmpfloat_with_epsilon (h->ratio, 1.0, EPS);
}

/* Mixed: dedicated pCPUs leave the shared pool. */
static void
test_mixed (void)
{
  g_autoptr(TwedHost) h = twed_host_new ("h", NULL);
  const char *const ded[] = { "0", "1" };
  TwedDomain *shared;

  h->ncpus = 4;
  add_dom (h, "ded", 2, ded);
  shared = add_dom (h, "shared", 8, NULL);
  shared->default_affinity = twed_cpuset_parse ("2-3", NULL);
  twed_host_compute (h);
  g_assert_cmpuint (h->dedicated_pcpus, ==, 2);
  g_assert_cmpfloat_with_epsilon (h->ratio, 4.0, EPS);
  g_assert_cmpfloat_with_epsilon (find_dom (h, "ded")->ratio, 1.0, EPS);
  g_assert_cmpfloat_with_epsilon (shared->ratio, 4.0, EPS);
}

static void
test_cpuset (void)
{
  static const struct { const char *in; const char *out; } ok[] = {
    { "0", "0" }, { "0-3", "0-3" }, { "0-3,^2", "0-1,3" }, { "8,1-2, 4", "1-2,4,8" },
  };
  static const char *const bad[] = { "", "a", "3-1", "1,,", "-1", "^1", "1-", "99999999" };

  for (guint i = 0; i < G_N_ELEMENTS (ok); i++)
    {
      g_autoptr(GArray) s = twed_cpuset_parse (ok[i].in, NULL);
      g_autofree char *f = twed_cpuset_format (s);

      g_assert_cmpstr (f, ==, ok[i].out);
    }
  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) e = NULL;
      GArray *s = twed_cpuset_parse (bad[i], &e);

      g_assert_null (s);
      g_assert_error (e, TWED_ERROR, TWED_ERROR_INVALID);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/overcommit/dedicated", test_dedicated);
  g_test_add_func ("/overcommit/unpinned-2to1", test_unpinned_two_to_one);
  g_test_add_func ("/overcommit/pin-subsets", test_pin_subsets);
  g_test_add_func ("/overcommit/overlapping-pins", test_overlapping_pins);
  g_test_add_func ("/overcommit/offline-cpus", test_offline_cpus);
  g_test_add_func ("/overcommit/no-vms", test_no_vms);
  g_test_add_func ("/overcommit/inactive", test_inactive);
  g_test_add_func ("/overcommit/mixed", test_mixed);
  g_test_add_func ("/overcommit/cpuset", test_cpuset);
  return g_test_run ();
}
