/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's state file: what is written reads back the same, and
 * anything else (truncated, edited, another version) is refused whole
 * with the reason, never half read. */
#include "twed-state.h"
#include "twed-types.h"

#include <string.h>

/* A VM's back-off bar: @from and above until @until (Unix usec). */
static TwedAutoBars *
bars (const char *host, const char *vm, int from, gint64 until)
{
  TwedAutoBars *b = twed_auto_bars_new (host, vm);

  b->domain_id = 3;
  b->barred_from = from;
  b->barred_until = until;
  return b;
}

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
  r->failed_raise = TRUE;
  g_ptr_array_add (s->vms, r);
  g_ptr_array_add (s->bars, bars ("h1", "6695eb01-f6a4-8304-79aa-97f2502e193f", 7, 1764500600000000));
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
  /* A lowering may pass the backoff of a failed raise after a restart too. */
  g_assert_true (r->failed_raise);
  g_assert_nonnull (strstr (json, "\"raise\":true"));
  /* The controller's bars: the parts it has, the others none. */
  g_assert_cmpuint (back->bars->len, ==, 1);
  {
    const TwedAutoBars *b = g_ptr_array_index (back->bars, 0);

    g_assert_cmpstr (b->host, ==, "h1");
    g_assert_cmpint (b->domain_id, ==, 3);
    g_assert_cmpint (b->barred_from, ==, 7);
    g_assert_cmpint (b->barred_until, ==, 1764500600000000);
    g_assert_cmpint (b->refused_from, ==, -1);
    g_assert_cmpint (b->remeasured_at, ==, 0);
  }
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
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],\"bars\":{}}", "\"bars\": want an array" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"barred_from\":16,\"barred_until\":5}]}",
      "\"bars\"[0]: \"barred_from\": 16 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"barred_from\":6}]}",
      "\"bars\"[0]: \"barred_from\" and \"barred_until\": want both or neither" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"refused_from\":9,\"refused_until\":5}]}",
      "\"refused_from\", \"refused_until\" and \"refused_bar\": want all or none" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"refused_from\":9,\"refused_until\":5,\"refused_bar\":0}]}",
      "\"bars\"[0]: \"refused_bar\": 0 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"refused_from\":9,\"refused_until\":5,\"refused_bar\":604800001}]}",
      "\"bars\"[0]: \"refused_bar\": 604800001 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"domain_id\":0,\"remeasured\":5}]}",
      "\"bars\"[0]: \"domain_id\": 0 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"remeasured\":\"5\"}]}",
      "\"bars\"[0]: \"remeasured\": want an integer" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"remeasured\":0}]}",
      "\"bars\"[0]: \"remeasured\": 0 out of range" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"domain_id\":3}]}",
      "\"bars\"[0]: holds nothing" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"remeasured\":5},{\"host\":\"h\",\"vm\":\"v\",\"remeasured\":6}]}",
      "\"bars\"[1]: VM v on host h twice" },
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},\"vms\":[],"
      "\"bars\":[{\"host\":\"h\",\"vm\":\"v\",\"cooldown\":5}]}",
      "\"bars\"[0]: \"cooldown\": not a member of a VM's bars" },
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
    { "{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,\"per_policy\":{},\"per_host\":{}},"
      "\"vms\":[{\"host\":\"h\",\"vm\":\"v\",\"changed\":0,\"failures\":1,\"backoff\":30,\"retry\":0,\"raise\":1}]}",
      "\"vms\"[0]: \"raise\": want true or false" },
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

static TwedVmRecord *
changed (const char *host, const char *vm, gint64 at)
{
  TwedVmRecord *r = twed_vm_record_new (host, vm);

  r->changed_at = at;
  return r;
}

static const TwedVmRecord *
find_vm (const TwedState *s, const char *vm, gboolean failed)
{
  for (guint i = 0; i < s->vms->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (s->vms, i);

      if (g_str_equal (r->vm, vm) && (r->failures || r->retry_at) == failed)
        return r;
    }
  return NULL;
}

static void
append_record (GString *log, const TwedState *iv, const GPtrArray *ch, const GPtrArray *fa)
{
  g_autofree char *line = twed_state_log_record (iv, ch, fa, NULL);

  g_string_append (log, line);
}

static const TwedAutoBars *
find_bars (const TwedState *s, const char *host, const char *vm)
{
  for (guint i = 0; i < s->bars->len; i++)
    {
      const TwedAutoBars *b = g_ptr_array_index (s->bars, i);

      if (g_str_equal (b->host, host) && g_str_equal (b->vm, vm))
        return b;
    }
  return NULL;
}

/* The controller's bars in the log: the last record of a VM on a host
 * holds, one with none removes it, a whole write reads back the same,
 * and what no longer holds anything back is pruned. */
static void
test_log_bars (void)
{
  g_autoptr(TwedState) s = sample_state ();
  g_autoptr(GPtrArray) b = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(GString) log = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *header = twed_state_log_header (5);
  g_autofree char *json = NULL;
  g_autoptr(TwedState) back = NULL;
  const char *uuid = "6695eb01-f6a4-8304-79aa-97f2502e193f";
  const TwedAutoBars *r;
  TwedAutoBars *x;
  gboolean stale;
  gssize torn;
  char *line;

  s->log = 5;
  g_string_append (log, header);
  /* The same VM on another host is another key; a refusal and a
   * remeasure; then the first VM's bar gone (a record holding none). */
  x = twed_auto_bars_new ("h2", uuid);
  x->refused_from = 12;
  x->refused_until = 1764500300000000;
  x->refused_bar = 240 * G_USEC_PER_SEC;
  x->remeasured_at = 1764500100000000;
  g_ptr_array_add (b, x);
  g_ptr_array_add (b, bars ("h1", "other", 4, 1764500900000000));
  line = twed_state_log_record (NULL, NULL, NULL, b);
  g_string_append (log, line);
  g_free (line);
  g_ptr_array_set_size (b, 0);
  g_ptr_array_add (b, twed_auto_bars_new ("h1", uuid));
  line = twed_state_log_record (NULL, NULL, NULL, b);
  g_assert_null (strstr (line, "barred_from"));
  g_string_append (log, line);
  g_free (line);

  g_assert_true (twed_state_replay (s, log->str, log->len, &stale, &torn, &error));
  g_assert_no_error (error);
  g_assert_null (find_bars (s, "h1", uuid));
  r = find_bars (s, "h2", uuid);
  g_assert_nonnull (r);
  g_assert_cmpint (r->refused_from, ==, 12);
  g_assert_cmpint (r->refused_until, ==, 1764500300000000);
  g_assert_cmpint (r->refused_bar, ==, 240 * G_USEC_PER_SEC);
  g_assert_cmpint (r->remeasured_at, ==, 1764500100000000);
  g_assert_cmpint (r->barred_from, ==, -1);
  g_assert_nonnull (find_bars (s, "h1", "other"));
  g_assert_cmpuint (s->bars->len, ==, 2);

  /* Written whole and read back: the same bars, sorted. */
  json = twed_state_to_json (s);
  back = twed_state_from_json (json, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->bars->len, ==, 2);
  g_assert_cmpstr (((TwedAutoBars *) g_ptr_array_index (back->bars, 0))->vm, ==, "other");

  /* After the back-off bar ran out, the refusal and the remeasure still
   * count (a refusal doubles the next bar; once per cooldown); a week
   * later nothing holds. */
  twed_state_prune (s, 1764500900000000, G_USEC_PER_SEC);
  g_assert_null (find_bars (s, "h1", "other"));
  g_assert_nonnull (find_bars (s, "h2", uuid));
  twed_state_prune (s, 1764500300000000 + (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * G_USEC_PER_SEC, G_USEC_PER_SEC);
  g_assert_cmpuint (s->bars->len, ==, 0);
}

/* A state and the records of what changed since: the log replayed onto
 * the state is what it would have been written whole. */
static void
test_log_replay (void)
{
  g_autoptr(TwedState) s = sample_state ();
  g_autoptr(TwedState) iv = twed_state_new ();
  g_autoptr(GPtrArray) ch = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GPtrArray) fa = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GString) log = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autofree char *header = NULL;
  const TwedVmRecord *r;
  TwedVmRecord *f;
  gboolean stale;
  gssize torn;

  s->log = 3;
  header = twed_state_log_header (3);
  g_string_append (log, header);
  /* A grant in the same interval: its counts now, and two VMs. */
  iv->interval_started = s->interval_started;
  iv->interval = 60;
  iv->granted = 9;
  g_hash_table_insert (iv->per_policy, g_strdup ("default"), GUINT_TO_POINTER (7));
  g_ptr_array_add (ch, changed ("h1", "6695eb01-f6a4-8304-79aa-97f2502e193f", 1764500002000000));
  g_ptr_array_add (ch, changed ("h3", "new-vm", 1764500002000000));
  append_record (log, iv, ch, NULL);
  /* Its apply: one refunded (back to never changed), one failure
   * cleared, one failure new. */
  g_ptr_array_set_size (ch, 0);
  g_ptr_array_add (ch, changed ("h3", "new-vm", 0));
  iv->granted = 8;
  g_hash_table_insert (iv->per_policy, g_strdup ("default"), GUINT_TO_POINTER (6));
  g_ptr_array_add (fa, twed_vm_record_new ("h2", "web-1"));
  f = twed_vm_record_new ("h3", "new-vm");
  f->failures = 1;
  f->backoff = 30;
  f->retry_at = 1764500032000000;
  f->error = g_strdup ("boom");
  f->failed_raise = TRUE;
  g_ptr_array_add (fa, f);
  append_record (log, iv, ch, fa);

  g_assert_true (twed_state_replay (s, log->str, log->len, &stale, &torn, &error));
  g_assert_no_error (error);
  g_assert_false (stale);
  g_assert_cmpint (torn, ==, -1);
  g_assert_cmpuint (s->granted, ==, 8);
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (s->per_policy, "default")), ==, 6);
  /* Not named since: as it was. */
  g_assert_cmpuint (GPOINTER_TO_UINT (g_hash_table_lookup (s->per_host, "default\nh1")), ==, 3);
  r = find_vm (s, "6695eb01-f6a4-8304-79aa-97f2502e193f", FALSE);
  g_assert_nonnull (r);
  g_assert_cmpint (r->changed_at, ==, 1764500002000000);
  g_assert_null (find_vm (s, "new-vm", FALSE));
  g_assert_null (find_vm (s, "web-1", TRUE));
  r = find_vm (s, "new-vm", TRUE);
  g_assert_nonnull (r);
  g_assert_cmpuint (r->failures, ==, 1);
  g_assert_cmpstr (r->error, ==, "boom");
  g_assert_true (r->failed_raise);
  g_assert_cmpuint (s->vms->len, ==, 2);

  /* A new interval: the counts start again. */
  g_hash_table_remove_all (iv->per_policy);
  iv->interval_started += 60 * G_USEC_PER_SEC;
  iv->granted = 0;
  g_string_assign (log, header);
  append_record (log, iv, NULL, NULL);
  g_assert_true (twed_state_replay (s, log->str, log->len, &stale, &torn, &error));
  g_assert_cmpint (s->interval_started, ==, iv->interval_started);
  g_assert_cmpuint (s->granted, ==, 0);
  g_assert_cmpuint (g_hash_table_size (s->per_policy), ==, 0);
  g_assert_cmpuint (g_hash_table_size (s->per_host), ==, 0);

  /* What no longer holds anything back goes: the change 1 s old with
   * min_change_interval 1 s, and a failure once its backoff is over
   * only when no failure is left. */
  twed_state_prune (s, 1764500003000000, G_USEC_PER_SEC);
  g_assert_null (find_vm (s, "6695eb01-f6a4-8304-79aa-97f2502e193f", FALSE));
  g_assert_nonnull (find_vm (s, "new-vm", TRUE));
}

/* A log of an earlier state (written whole since) is not replayed; a
 * last record cut short is not taken; damage before it is an error. */
static void
test_log_damage (void)
{
  g_autofree char *header = twed_state_log_header (3);
  g_autoptr(GPtrArray) ch = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autofree char *rec = NULL;
  g_autofree char *half = NULL;
  g_autofree char *text = NULL;
  gboolean stale;
  gssize torn;

  g_ptr_array_add (ch, changed ("h1", "vm-a", 1764500002000000));
  rec = twed_state_log_record (NULL, ch, NULL, NULL);
  half = g_strndup (rec, strlen (rec) / 2);

  {
    g_autoptr(TwedState) s = twed_state_new ();

    s->log = 4;
    text = g_strconcat (header, rec, NULL);
    g_assert_true (twed_state_replay (s, text, strlen (text), &stale, &torn, NULL));
    g_assert_true (stale);
    g_assert_cmpuint (s->vms->len, ==, 0);
    g_clear_pointer (&text, g_free);
  }
  /* Cut short: no newline; zeros then a newline; no header yet. */
  for (guint c = 0; c < 3; c++)
    {
      g_autoptr(TwedState) s = twed_state_new ();
      gsize len;

      s->log = 3;
      if (c == 0)
        text = g_strconcat (header, rec, half, NULL);
      else if (c == 1)
        text = g_strconcat (header, rec, "\x01\x01\x01\n", NULL);
      else
        text = g_strndup (header, 4);
      len = strlen (text);
      g_assert_true (twed_state_replay (s, text, len, &stale, &torn, NULL));
      g_assert_false (stale);
      g_assert_cmpint (torn, ==, c == 2 ? 0 : (gssize) (strlen (header) + strlen (rec)));
      g_assert_cmpuint (s->vms->len, ==, c == 2 ? 0 : 1);
      g_clear_pointer (&text, g_free);
    }
  {
    g_autoptr(TwedState) s = twed_state_new ();
    g_autoptr(GError) error = NULL;

    s->log = 3;
    text = g_strconcat (header, half, "\n", rec, NULL);
    g_assert_false (twed_state_replay (s, text, strlen (text), &stale, &torn, &error));
    g_assert_error (error, TWED_ERROR, TWED_ERROR_INVALID);
    g_assert_nonnull (strstr (error->message, "record at offset 10: "));
  }
}

/* The generation of the log a state goes on from is kept with it; a
 * state written before there was a log is generation 0. */
static void
test_log_generation (void)
{
  g_autoptr(TwedState) s = sample_state ();
  g_autofree char *json = NULL;
  g_autoptr(TwedState) back = NULL;
  g_autoptr(TwedState) old = NULL;

  s->log = 42;
  json = twed_state_to_json (s);
  back = twed_state_from_json (json, -1, NULL);
  g_assert_nonnull (back);
  g_assert_cmpuint (back->log, ==, 42);
  old = twed_state_from_json ("{\"version\":1,\"interval\":{\"started\":0,\"seconds\":60,\"granted\":0,"
                              "\"per_policy\":{},\"per_host\":{}},\"vms\":[]}", -1, NULL);
  g_assert_nonnull (old);
  g_assert_cmpuint (old->log, ==, 0);
  /* Of a twedd before the controller's bars were kept: none. */
  g_assert_cmpuint (old->bars->len, ==, 0);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/state/roundtrip", test_roundtrip);
  g_test_add_func ("/state/corrupt", test_corrupt);
  g_test_add_func ("/state/log-replay", test_log_replay);
  g_test_add_func ("/state/log-damage", test_log_damage);
  g_test_add_func ("/state/log-generation", test_log_generation);
  g_test_add_func ("/state/log-bars", test_log_bars);
  return g_test_run ();
}
