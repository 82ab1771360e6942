/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's state file: what is written reads back the same, and
 * anything else (truncated, edited, another version) is refused whole
 * with the reason, never half read. */
#include "twed-state.h"
#include "twed-types.h"

#include <string.h>

static TwedState *
sample_state (void)
{
  TwedState *s = twed_state_new ();
  TwedVmRecord *r;

  s->interval_started = 1764500000123000;
  s->interval = 60;
  s->granted = 7;
  g_hash_table_insert (s->per_policy, g_strdup ("default"), GUINT_TO_POINTER (5));
  g_hash_table_insert (s->per_host, g_strdup ("default\nh1"), GUINT_TO_POINTER (3));
  r = twed_vm_record_new ("h1", "6695eb01-f6a4-8304-79aa-97f2502e193f");
  r->changed_at = 1764500001000000;
  g_ptr_array_add (s->vms, r);
  r = twed_vm_record_new ("h2", "web-1");
  r->failures = 2;
  r->backoff = 60;
  r->retry_at = 1764500090000000;
  r->error = g_strdup ("virDomainSetTwedParameters: \"quoted\" (libvirt error 8)");
  g_ptr_array_add (s->vms, r);
  return s;
}

static void
test_roundtrip (void)
{
  g_autoptr(TwedState) s = sample_state ();
  g_autofree char *json = twed_state_to_json (s);
  g_autoptr(GError) error = NULL;
  g_autoptr(TwedState) back = twed_state_from_json (json, -1, &error);
  g_autofree char *again = NULL;
  const TwedVmRecord *r;

  g_assert_no_error (error);
  g_assert_cmpint (back->interval_started, ==, s->interval_started);
  g_assert_cmpuint (back->interval, ==, 60);
  g_assert_cmpuint (back->granted, ==, 7);
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (back->per_policy, "default")), ==, 5);
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (back->per_host, "default\nh1")), ==, 3);
  g_assert_cmpuint (back->vms->len, ==, 2);
  r = g_ptr_array_index (back->vms, 0);
  g_assert_cmpstr (r->host, ==, "h1");
  g_assert_cmpint (r->changed_at, ==, 1764500001000000);
  g_assert_null (r->error);
  r = g_ptr_array_index (back->vms, 1);
  g_assert_cmpuint (r->failures, ==, 2);
  g_assert_cmpuint (r->backoff, ==, 60);
  g_assert_cmpstr (r->error, ==, "virDomainSetTwedParameters: \"quoted\" (libvirt error 8)");
  /* The same state, the same bytes. */
  again = twed_state_to_json (back);
  g_assert_cmpstr (again, ==, json);
}

/* Each damaged file is refused, and the reason says where. */
static void
test_corrupt (void)
{
  static const struct { const char *text; const char *want; } cases[] = {
    { "", "JSON syntax error" },
    { "{\"version\":1,\"interval\":{\"started\":1,", "JSON syntax error" },
    { "[]", "want a JSON object" },
    { "{\"version\":2,\"interval\":{},\"vms\":[]}", "version 2, want 1" },
    { "{\"version\":\"1\"}", "\"version\": want an integer" },
    { "{\"version\":1,\"vms\":[]}", "\"interval\": want an object" },
    { "{\"version\":1,\"interval\":{\"started\":-5,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[]}",
      "\"interval\": \"started\": -5 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{\"a\":1.5},\"per_host\":{}},\"vms\":[]}",
      "\"per_policy\": \"a\": want an integer" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}}}",
      "\"vms\": want an array" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},"
      "\"vms\":[{\"host\":\"h\",\"vm\":\"\",\"changed\":0,\"failures\":0,\"backoff\":0,\"retry\":0}]}",
      "\"vms\"[0]: \"vm\": want a non-empty string" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},"
      "\"vms\":[{\"host\":\"h\",\"vm\":\"v\",\"changed\":0,\"failures\":0,\"backoff\":0}]}",
      "\"vms\"[0]: \"retry\": want an integer" },
    { "{\"version\":1} {}", "JSON syntax error" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) error = NULL;
      g_autoptr(TwedState) s = twed_state_from_json (cases[i].text, -1, &error);

      g_test_message ("%s", cases[i].text);
      g_assert_null (s);
      g_assert_error (error, TWED_ERROR, TWED_ERROR_INVALID);
      if (!strstr (error->message, cases[i].want))
        g_error ("case %u: \"%s\" does not say \"%s\"", i, error->message, cases[i].want);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/state/roundtrip", test_roundtrip);
  g_test_add_func ("/state/corrupt", test_corrupt);
  return g_test_run ();
}
