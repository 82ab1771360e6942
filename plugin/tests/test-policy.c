/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "test-util.h"

#define HEAD "{\"version\":1,\"name\":\"p\","

static TwedPolicy *
parse (const char *json, GError **error)
{
  return twed_policy_parse (json, strlen (json), "t.json", error);
}

/* Every invalid form names its JSON path. */
static void
test_errors (void)
{
  static const struct { const char *json; const char *msg; } cases[] = {
    { "[]", "t.json: $: expected an object" },
    { "{\"name\":\"p\",\"beyond\":{\"mode\":\"off\"}}", "$: missing required member 'version'" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"x\":1}", "$.x: unknown member" },
    { HEAD "\"beyond\":{\"mode\":\"fast\"}}", "$.beyond.mode: must be \"off\", \"fixed\", \"dynamic\" or \"auto\"" },
    { HEAD "\"beyond\":{\"mode\":\"fixed\"}}", "$.beyond: mode \"fixed\" needs \"delay\"" },
    { HEAD "\"beyond\":{\"mode\":\"off\",\"delay\":1}}", "$.beyond: mode \"off\" takes no" },
    { HEAD "\"beyond\":{\"mode\":\"fixed\",\"delay\":6}}", "$.beyond.delay: 6 exceeds 5" },
    { HEAD "\"beyond\":{\"mode\":\"fixed\",\"delay\":1.5}}", "$.beyond.delay: expected an integer" },
    { HEAD "\"beyond\":{\"mode\":\"dynamic\",\"delay\":1,\"min\":2,\"max\":3}}", "$.beyond: \"min\" (2) must not exceed \"delay\" (1)" },
    { HEAD "\"bands\":[{\"up_to\":1,\"mode\":\"off\"},{\"up_to\":\"2\",\"mode\":\"off\"}],\"beyond\":{\"mode\":\"off\"}}", "$.bands[1].up_to: expected a number" },
    { HEAD "\"bands\":[{\"up_to\":2,\"mode\":\"off\"},{\"up_to\":1,\"mode\":\"off\"}],\"beyond\":{\"mode\":\"off\"}}", "$.bands[1].up_to: 1 must be greater than" },
    { HEAD "\"match\":{\"hosts\":[\"a\",3]},\"beyond\":{\"mode\":\"off\"}}", "$.match.hosts[1]: expected a string" },
    { HEAD "\"match\":{\"metadata\":[{\"namespace\":\"u\"}]},\"beyond\":{\"mode\":\"off\"}}", "$.match.metadata[0]: missing required member 'element'" },
    { HEAD "\"max_changes_per_cycle\":{\"host\":0},\"beyond\":{\"mode\":\"off\"}}", "$.max_changes_per_cycle.host: must be in 1..100000" },
    { HEAD "\"hysteresis\":3,\"beyond\":{\"mode\":\"off\"}}", "$.hysteresis: must be in 0..2" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"min_gain\":0.5}}", "$.auto.min_gain: must be below 0.5, got 0.5" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"min_gain\":0}}", "$.auto.min_gain: must be at least 0.02, got 0" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"dwell_seconds\":60,\"baseline_seconds\":300}}",
      "$.auto.baseline_seconds: must be 0 (never by age) or at least 1800 (10 x dwell_seconds 60, and cooldown_seconds 1800), got 300" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"dwell_seconds\":600,\"baseline_seconds\":5400}}",
      "$.auto.baseline_seconds: must be 0 (never by age) or at least 6000 (10 x dwell_seconds 600, and cooldown_seconds 1800), got 5400" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"dwell_seconds\":60,\"cooldown_seconds\":90}}",
      "$.auto.cooldown_seconds: must be at least 120 (2 x dwell_seconds 60), got 90: a shorter one bars nothing" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":{\"wait_margin\":0.005}}",
      "$.auto.wait_margin: must be at least 0.01, got 0.005" },
    { "{\"version\":1,\"name\":\"a b\",\"beyond\":{\"mode\":\"off\"}}", "$.name: 'a b' may only contain" },
    { HEAD "\"beyond\":{\"mode\":\"off\"},}", "JSON syntax error at line 1 column" },
    { "", "JSON syntax error" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) e = NULL;
      g_autoptr(TwedPolicy) p = parse (cases[i].json, &e);

      g_assert_null (p);
      g_assert_error (e, TWED_ERROR, TWED_ERROR_INVALID);
      if (!strstr (e->message, cases[i].msg))
        g_error ("case %u: got '%s', want '%s'", i, e->message, cases[i].msg);
    }
}

static void
test_parse_full (void)
{
  const char *json = HEAD "\"priority\":5,\"match\":{\"flavors\":[\"c1.*\"]},"
                     "\"bands\":[{\"up_to\":1,\"mode\":\"off\"},{\"up_to\":2.5,\"mode\":\"fixed\",\"delay\":2}],"
                     "\"beyond\":{\"mode\":\"dynamic\",\"delay\":3,\"min\":1,\"max\":5},"
                     "\"hysteresis\":0.2,\"max_changes_per_cycle\":{\"host\":2,\"global\":3}}";
  g_autoptr(GError) e = NULL;
  g_autoptr(TwedPolicy) p = parse (json, &e);

  g_assert_no_error (e);
  g_assert_cmpstr (p->name, ==, "p");
  g_assert_cmpint (p->priority, ==, 5);
  g_assert_cmpuint (p->bands->len, ==, 2);
  g_assert_cmpuint (twed_policy_band_index (p, 0.5), ==, 0);
  g_assert_cmpuint (twed_policy_band_index (p, 1.0), ==, 0);
  g_assert_cmpuint (twed_policy_band_index (p, 1.01), ==, 1);
  g_assert_cmpuint (twed_policy_band_index (p, 2.5), ==, 1);
  g_assert_cmpuint (twed_policy_band_index (p, 2.51), ==, 2);
  g_assert_cmpuint (twed_policy_band_setting (p, 1)->delay, ==, 2);
  g_assert_cmpuint (twed_policy_band_setting (p, 2)->mode, ==, TWED_MODE_DYNAMIC);
  g_assert_cmpuint (p->max_per_host, ==, 2);
  g_assert_cmpuint (p->max_global, ==, 3);
  g_assert_cmpuint (twed_policy_specificity (p), ==, 1);
}

/* An unset cooldown_seconds follows a long dwell, an unset
 * baseline_seconds a long dwell or cooldown, instead of refusing their
 * own defaults; a set one is kept. */
static void
test_auto_defaults (void)
{
  static const struct { const char *auto_json; guint cooldown, baseline; } cases[] = {
    { "{}", 1800, 5400 },
    { "{\"dwell_seconds\":600}", 1800, 6000 },
    { "{\"dwell_seconds\":1200}", 2400, 12000 },
    { "{\"cooldown_seconds\":7200}", 7200, 7200 },
    { "{\"dwell_seconds\":60,\"baseline_seconds\":0}", 1800, 0 },
    { "{\"dwell_seconds\":60,\"baseline_seconds\":1800}", 1800, 1800 },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *json = g_strdup_printf (HEAD "\"beyond\":{\"mode\":\"off\"},\"auto\":%s}",
                                               cases[i].auto_json);
      g_autoptr(GError) e = NULL;
      g_autoptr(TwedPolicy) p = parse (json, &e);

      g_test_message ("%s", json);
      g_assert_no_error (e);
      g_assert_cmpuint (p->auto_params.cooldown_seconds, ==, cases[i].cooldown);
      g_assert_cmpuint (p->auto_params.baseline_seconds, ==, cases[i].baseline);
    }
}

static TwedPolicy *
policy_with (const char *name, int prio, const char *match)
{
  g_autofree char *json = g_strdup_printf ("{\"version\":1,\"name\":\"%s\",\"priority\":%d%s%s,"
                                           "\"beyond\":{\"mode\":\"off\"}}", name, prio,
                                           match ? ",\"match\":" : "", match ? match : "");
  g_autofree char *src = g_strdup_printf ("%s.json", name);
  TwedPolicy *p = twed_policy_parse (json, strlen (json), src, NULL);

  g_assert_nonnull (p);
  return p;
}

/* Highest priority, then most specific, then later file; else built-in. */
static void
test_precedence (void)
{
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedDomain) d = twed_domain_new ("web-1");
  g_autoptr(TwedDomain) other = twed_domain_new ("db");
  g_autoptr(GError) e = NULL;
  TwedMetaItem *item = twed_meta_item_new ("urn:x", "tier");

  d->flavor = g_strdup ("m1.large");
  g_hash_table_insert (item->attrs, g_strdup ("level"), g_strdup ("gold"));
  g_ptr_array_add (d->meta, item);

  g_assert_true (twed_policy_set_add (set, policy_with ("a-any", 0, "{\"domains\":[\"web-*\"]}"), NULL));
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", d)->name, ==, "a-any");
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", other)->name, ==, "builtin-default");
  /* more specific wins at equal priority */
  g_assert_true (twed_policy_set_add (set, policy_with ("b-spec", 0, "{\"domains\":[\"web-*\"],\"hosts\":[\"h?\"]}"), NULL));
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", d)->name, ==, "b-spec");
  g_assert_cmpstr (twed_policy_set_lookup (set, "host2", d)->name, ==, "a-any");
  /* equal priority and specificity: the later file */
  g_assert_true (twed_policy_set_add (set, policy_with ("c-spec", 0, "{\"flavors\":[\"m1.*\"],\"hosts\":[\"h1\"]}"), NULL));
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", d)->name, ==, "c-spec");
  /* priority beats specificity */
  g_assert_true (twed_policy_set_add (set, policy_with ("d-prio", 1, "{\"metadata\":[{\"namespace\":\"urn:x\",\"element\":\"tier\",\"attribute\":\"level\",\"value\":\"g*\"}]}"), NULL));
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", d)->name, ==, "d-prio");
  g_assert_cmpstr (twed_policy_set_lookup (set, "h1", other)->name, ==, "builtin-default");
  /* duplicate names are refused */
  g_assert_false (twed_policy_set_add (set, policy_with ("a-any", 0, NULL), &e));
  g_assert_error (e, TWED_ERROR, TWED_ERROR_INVALID);
}

static void
test_default_policy (void)
{
  g_autoptr(TwedPolicy) p = twed_policy_new_default ();

  g_assert_cmpuint (twed_policy_band_setting (p, twed_policy_band_index (p, 1.0))->mode, ==, TWED_MODE_OFF);
  g_assert_cmpuint (twed_policy_band_setting (p, twed_policy_band_index (p, 2.0))->mode, ==, TWED_MODE_FIXED);
  g_assert_cmpuint (twed_policy_band_setting (p, twed_policy_band_index (p, 9.0))->max, <=, TWED_DELAY_SAFE_LIMIT);
}

/* The one check of a written setting, as twedctl set and the policy
 * parser both use it: what each mode takes, the limit, the order. */
static void
test_setting_validate (void)
{
  static const TwedFieldNames cli = { "--delay", "--min", "--max", "--allow-long-delays" };
  static const struct {
    TwedSetting s;
    TwedFields present;
    guint limit;
    TwedFields field;
    const char *msg;
  } cases[] = {
    { { TWED_MODE_OFF, 0, 0, 0 }, 0, 5, 0, NULL },
    { { TWED_MODE_OFF, 1, 0, 0 }, TWED_FIELD_DELAY, 5, 0, "mode \"off\" takes no --delay, --min or --max" },
    { { TWED_MODE_FIXED, 0, 0, 0 }, 0, 5, 0, "mode \"fixed\" needs --delay" },
    { { TWED_MODE_FIXED, 2, 1, 0 }, TWED_FIELD_DELAY | TWED_FIELD_MIN, 5, 0, "takes no --min or --max" },
    { { TWED_MODE_FIXED, 6, 0, 0 }, TWED_FIELD_DELAY, 5, TWED_FIELD_DELAY, "6 exceeds 5; delays of 6 and more" },
    { { TWED_MODE_FIXED, 6, 0, 0 }, TWED_FIELD_DELAY, 15, 0, NULL },
    { { TWED_MODE_DYNAMIC, 2, 1, 9 }, TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX, 5, TWED_FIELD_MAX, "9 exceeds 5" },
    { { TWED_MODE_DYNAMIC, 2, 1, 4 }, TWED_FIELD_DELAY | TWED_FIELD_MAX, 5, 0, "needs --delay, --min and --max" },
    { { TWED_MODE_DYNAMIC, 4, 1, 3 }, TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX, 5, 0, "--delay (4) must not exceed --max (3)" },
    { { TWED_MODE_DYNAMIC, 2, 1, 4 }, TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX, 5, 0, NULL },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) e = NULL;
      TwedFields field = 7;
      gboolean ok = twed_setting_validate (&cases[i].s, cases[i].present, cases[i].limit, &cli, &field, &e);

      g_assert_cmpint (ok, ==, cases[i].msg == NULL);
      g_assert_cmpint (field, ==, cases[i].field);
      if (cases[i].msg && !strstr (e->message, cases[i].msg))
        g_error ("case %u: got '%s', want '%s'", i, e->message, cases[i].msg);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/policy/errors", test_errors);
  g_test_add_func ("/policy/parse-full", test_parse_full);
  g_test_add_func ("/policy/auto-defaults", test_auto_defaults);
  g_test_add_func ("/policy/precedence", test_precedence);
  g_test_add_func ("/policy/default", test_default_policy);
  g_test_add_func ("/policy/setting-validate", test_setting_validate);
  return g_test_run ();
}
