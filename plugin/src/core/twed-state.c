/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-state.h"
#include "twed-json-strict.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

/* "bars" is optional: a state of a twedd before the controller's bars
 * were kept has none, and such a twedd ignores them (a rollback keeps
 * its budget and VM history). */
#define STATE_VERSION 1
/* Counts and seconds beyond these are no state this daemon wrote. */
#define MAX_COUNT 100000000
/* Times are written in milliseconds: microseconds since 1970 are beyond
 * the numbers the strict JSON check lets through (1e15). */
#define MAX_MS ((gint64) 100000000000000)

static GHashTable *
counts_new (void)
{
  return g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
}

TwedState *
twed_state_new (void)
{
  TwedState *s = g_new0 (TwedState, 1);

  s->per_policy = counts_new ();
  s->per_host = counts_new ();
  s->vms = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  s->bars = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  return s;
}

void
twed_state_free (TwedState *s)
{
  if (!s)
    return;
  g_hash_table_unref (s->per_policy);
  g_hash_table_unref (s->per_host);
  g_ptr_array_unref (s->vms);
  g_ptr_array_unref (s->bars);
  g_free (s->hold);
  g_free (s);
}

TwedVmRecord *
twed_vm_record_new (const char *host, const char *vm)
{
  TwedVmRecord *r = g_new0 (TwedVmRecord, 1);

  r->host = g_strdup (host);
  r->vm = g_strdup (vm);
  return r;
}

void
twed_vm_record_free (TwedVmRecord *r)
{
  if (!r)
    return;
  g_free (r->host);
  g_free (r->vm);
  g_free (r->error);
  g_free (r);
}

static int
cmp_str (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}

/* Sorted keys: the same state gives the same file. */
static void
add_counts (JsonBuilder *b, const char *member, GHashTable *counts)
{
  g_autofree gpointer *keys = g_hash_table_get_keys_as_array (counts, NULL);
  guint n = g_hash_table_size (counts);

  qsort (keys, n, sizeof *keys, cmp_str);
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  for (guint i = 0; i < n; i++)
    {
      json_builder_set_member_name (b, keys[i]);
      json_builder_add_int_value (b, GPOINTER_TO_UINT (g_hash_table_lookup (counts, keys[i])));
    }
  json_builder_end_object (b);
}

/* The interval's members: the snapshot's whole, a record's part. */
static void
add_interval (JsonBuilder *b, const TwedState *s)
{
  json_builder_set_member_name (b, "interval");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "started");
  json_builder_add_int_value (b, s->interval_started / 1000);
  json_builder_set_member_name (b, "seconds");
  json_builder_add_int_value (b, s->interval);
  json_builder_set_member_name (b, "granted");
  json_builder_add_int_value (b, s->granted);
  if (s->hold)
    {
      json_builder_set_member_name (b, "hold");
      json_builder_add_string_value (b, s->hold);
    }
  add_counts (b, "per_policy", s->per_policy);
  add_counts (b, "per_host", s->per_host);
  json_builder_end_object (b);
}

static void
add_vm_key (JsonBuilder *b, const TwedVmRecord *r)
{
  json_builder_set_member_name (b, "host");
  json_builder_add_string_value (b, r->host);
  json_builder_set_member_name (b, "vm");
  json_builder_add_string_value (b, r->vm);
}

static void
add_changed (JsonBuilder *b, const TwedVmRecord *r)
{
  json_builder_set_member_name (b, "changed");
  json_builder_add_int_value (b, r->changed_at / 1000);
}

static void
add_failures (JsonBuilder *b, const TwedVmRecord *r)
{
  json_builder_set_member_name (b, "failures");
  json_builder_add_int_value (b, r->failures);
  json_builder_set_member_name (b, "backoff");
  json_builder_add_int_value (b, r->backoff);
  json_builder_set_member_name (b, "retry");
  json_builder_add_int_value (b, r->retry_at / 1000);
  if (r->failed_raise)
    {
      json_builder_set_member_name (b, "raise");
      json_builder_add_boolean_value (b, TRUE);
    }
  if (r->error)
    {
      json_builder_set_member_name (b, "error");
      json_builder_add_string_value (b, r->error);
    }
}

static void
add_int (JsonBuilder *b, const char *name, gint64 value)
{
  json_builder_set_member_name (b, name);
  json_builder_add_int_value (b, value);
}

/* A VM's bars: only the parts it has; none at all says it has none. */
static void
add_bars (JsonBuilder *b, const TwedAutoBars *r)
{
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "host");
  json_builder_add_string_value (b, r->host);
  json_builder_set_member_name (b, "vm");
  json_builder_add_string_value (b, r->vm);
  if (r->domain_id > 0)
    add_int (b, "domain_id", r->domain_id);
  if (r->barred_from >= 0)
    {
      add_int (b, "barred_from", r->barred_from);
      add_int (b, "barred_until", r->barred_until / 1000);
    }
  if (r->refused_from >= 0)
    {
      add_int (b, "refused_from", r->refused_from);
      add_int (b, "refused_until", r->refused_until / 1000);
      add_int (b, "refused_bar", r->refused_bar / 1000);
    }
  if (r->remeasured_at)
    add_int (b, "remeasured", r->remeasured_at / 1000);
  json_builder_end_object (b);
}

static void
add_bars_list (JsonBuilder *b, const GPtrArray *bars)
{
  if (!bars || !bars->len)
    return;
  json_builder_set_member_name (b, "bars");
  json_builder_begin_array (b);
  for (guint i = 0; i < bars->len; i++)
    add_bars (b, g_ptr_array_index (bars, i));
  json_builder_end_array (b);
}

static char *
generate (JsonBuilder *b)
{
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = json_builder_get_root (b);

  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
}

char *
twed_state_to_json (const TwedState *s)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, STATE_VERSION);
  json_builder_set_member_name (b, "log");
  json_builder_add_int_value (b, (gint64) s->log);
  add_interval (b, s);
  json_builder_set_member_name (b, "vms");
  json_builder_begin_array (b);
  for (guint i = 0; i < s->vms->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (s->vms, i);

      json_builder_begin_object (b);
      add_vm_key (b, r);
      add_changed (b, r);
      add_failures (b, r);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  add_bars_list (b, s->bars);
  json_builder_end_object (b);
  return generate (b);
}

char *
twed_state_log_header (guint64 generation)
{
  return g_strdup_printf ("{\"log\":%" G_GUINT64_FORMAT "}\n", generation);
}

/* Member NAME: an array of the VMs of RECORDS, each with its key and what
 * ADD writes of it; nothing when there are none. */
static void
add_records (JsonBuilder *b, const char *name, const GPtrArray *records,
             void (*add) (JsonBuilder *, const TwedVmRecord *))
{
  if (!records || !records->len)
    return;
  json_builder_set_member_name (b, name);
  json_builder_begin_array (b);
  for (guint i = 0; i < records->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (records, i);

      json_builder_begin_object (b);
      add_vm_key (b, r);
      add (b, r);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
}

char *
twed_state_log_record (const TwedState *interval, const GPtrArray *changed, const GPtrArray *failed,
                       const GPtrArray *bars)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autofree char *text = NULL;

  json_builder_begin_object (b);
  if (interval)
    add_interval (b, interval);
  add_records (b, "changed", changed, add_changed);
  add_records (b, "failed", failed, add_failures);
  add_bars_list (b, bars);
  json_builder_end_object (b);
  text = generate (b);
  /* One line: the generator writes none inside (no pretty printing). */
  g_assert (!strchr (text, '\n'));
  return g_strconcat (text, "\n", NULL);
}

static gboolean
bad (GError **error, const char *what)
{
  g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s", what);
  return FALSE;
}

/* An integer member in 0..@max. */
static gboolean
get_int (JsonObject *o, const char *name, gint64 max, gint64 *out, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);

  if (!n || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_INT64)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": want an integer", name);
      return FALSE;
    }
  *out = json_node_get_int (n);
  if (*out < 0 || *out > max)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": %" G_GINT64_FORMAT " out of range",
                   name, *out);
      return FALSE;
    }
  return TRUE;
}

static const char *
get_string (JsonObject *o, const char *name, gboolean optional, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);

  if (!n && optional)
    return "";
  if (!n || !JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_STRING ||
      !*json_node_get_string (n))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": want a non-empty string", name);
      return NULL;
    }
  return json_node_get_string (n);
}

/* An optional boolean member, FALSE when absent (files of older twedd). */
static gboolean
get_bool (JsonObject *o, const char *name, gboolean *out, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);

  if (!n)
    return TRUE;
  if (!JSON_NODE_HOLDS_VALUE (n) || json_node_get_value_type (n) != G_TYPE_BOOLEAN)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": want true or false", name);
      return FALSE;
    }
  *out = json_node_get_boolean (n);
  return TRUE;
}

static gboolean
get_counts (JsonObject *o, const char *name, GHashTable *out, GError **error)
{
  JsonNode *n = json_object_get_member (o, name);
  g_autoptr(GList) members = NULL;

  if (!n || !JSON_NODE_HOLDS_OBJECT (n))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": want an object", name);
      return FALSE;
    }
  members = json_object_get_members (json_node_get_object (n));
  for (GList *l = members; l; l = l->next)
    {
      gint64 v;

      if (!get_int (json_node_get_object (n), l->data, MAX_COUNT, &v, error))
        {
          g_prefix_error (error, "\"%s\": ", name);
          return FALSE;
        }
      g_hash_table_insert (out, g_strdup (l->data), GUINT_TO_POINTER ((guint) v));
    }
  return TRUE;
}

/* A VM's record: its key, and when it was changed (@changed) and its
 * failures (@failures), each required when asked for. */
static TwedVmRecord *
parse_vm (JsonNode *n, gboolean changed, gboolean failures, GError **error)
{
  JsonObject *o;
  const char *host, *vm, *err = "";
  gint64 at = 0, count = 0, backoff = 0, retry = 0;
  gboolean raise = FALSE;
  TwedVmRecord *r;

  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      bad (error, "want an object");
      return NULL;
    }
  o = json_node_get_object (n);
  if (!(host = get_string (o, "host", FALSE, error)) || !(vm = get_string (o, "vm", FALSE, error)) ||
      (changed && !get_int (o, "changed", MAX_MS, &at, error)) ||
      (failures && (!(err = get_string (o, "error", TRUE, error)) ||
                    !get_int (o, "failures", MAX_COUNT, &count, error) ||
                    !get_int (o, "backoff", MAX_COUNT, &backoff, error) ||
                    !get_int (o, "retry", MAX_MS, &retry, error) ||
                    !get_bool (o, "raise", &raise, error))))
    return NULL;
  r = twed_vm_record_new (host, vm);
  r->changed_at = at * 1000;
  r->failures = (guint) count;
  r->backoff = (guint) backoff;
  r->retry_at = retry * 1000;
  r->error = *err ? g_strdup (err) : NULL;
  r->failed_raise = raise;
  return r;
}

/* An optional integer member in @min..@max: FALSE with @error when it
 * is there and not one; *@has whether it is there. */
static gboolean
get_opt_int (JsonObject *o, const char *name, gint64 min, gint64 max, gboolean *has, gint64 *out, GError **error)
{
  *has = json_object_has_member (o, name);
  *out = 0;
  if (!*has)
    return TRUE;
  if (!get_int (o, name, max, out, error))
    return FALSE;
  if (*out < min)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": %" G_GINT64_FORMAT " out of range", name, *out);
      return FALSE;
    }
  return TRUE;
}

static const char *const bars_members[] = {
  "host", "vm", "domain_id", "barred_from", "barred_until", "refused_from", "refused_until", "refused_bar",
  "remeasured", NULL
};

/* A VM's bars: its key, and each part whole or absent. */
static TwedAutoBars *
parse_bars (JsonNode *n, GError **error)
{
  g_autoptr(GList) members = NULL;
  JsonObject *o;
  const char *host, *vm;
  gint64 id, from, until, rfrom, runtil, rbar, remeasured;
  gboolean has_id, has_from, has_until, has_rfrom, has_runtil, has_rbar, has_remeasured;
  TwedAutoBars *r;

  if (!JSON_NODE_HOLDS_OBJECT (n))
    {
      bad (error, "want an object");
      return NULL;
    }
  o = json_node_get_object (n);
  members = json_object_get_members (o);
  for (GList *l = members; l; l = l->next)
    if (!g_strv_contains (bars_members, l->data))
      {
        g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": not a member of a VM's bars",
                     (const char *) l->data);
        return NULL;
      }
  if (!(host = get_string (o, "host", FALSE, error)) || !(vm = get_string (o, "vm", FALSE, error)) ||
      !get_opt_int (o, "domain_id", 1, G_MAXINT, &has_id, &id, error) ||
      !get_opt_int (o, "barred_from", 0, TWED_DELAY_LIMIT, &has_from, &from, error) ||
      !get_opt_int (o, "barred_until", 1, MAX_MS, &has_until, &until, error) ||
      !get_opt_int (o, "refused_from", 0, TWED_DELAY_LIMIT, &has_rfrom, &rfrom, error) ||
      !get_opt_int (o, "refused_until", 1, MAX_MS, &has_runtil, &runtil, error) ||
      /* A bar of 0 would never double: asked again every dwell. */
      !get_opt_int (o, "refused_bar", 1, (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * 1000, &has_rbar, &rbar, error) ||
      !get_opt_int (o, "remeasured", 1, MAX_MS, &has_remeasured, &remeasured, error))
    return NULL;
  if (has_from != has_until)
    {
      bad (error, "\"barred_from\" and \"barred_until\": want both or neither");
      return NULL;
    }
  if (has_rfrom != has_runtil || has_rfrom != has_rbar)
    {
      bad (error, "\"refused_from\", \"refused_until\" and \"refused_bar\": want all or none");
      return NULL;
    }
  r = twed_auto_bars_new (host, vm);
  r->domain_id = (int) id;
  r->barred_from = has_from ? (int) from : -1;
  r->barred_until = until * 1000;
  r->refused_from = has_rfrom ? (int) rfrom : -1;
  r->refused_until = runtil * 1000;
  r->refused_bar = rbar * 1000;
  r->remeasured_at = remeasured * 1000;
  return r;
}

static gboolean
bars_none (const TwedAutoBars *b)
{
  return b->barred_from < 0 && b->refused_from < 0 && !b->remeasured_at;
}

/* The key of a VM on a host, for records kept by both. */
static char *
host_vm_key (const char *host, const char *vm)
{
  return g_strdup_printf ("%s\n%s", host, vm);
}

static char *
bars_key (const TwedAutoBars *b)
{
  return host_vm_key (b->host, b->vm);
}

/* The member "bars" (absent: none) into @out.  In a state written whole
 * (@whole) each VM on a host once, each holding something; a record may
 * say that a VM's bars are gone. */
static gboolean
parse_bars_list (JsonObject *o, gboolean whole, GPtrArray *out, GError **error)
{
  JsonNode *a = json_object_get_member (o, "bars");
  g_autoptr(GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  if (!a)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (a))
    return bad (error, "\"bars\": want an array");
  for (guint i = 0; i < json_array_get_length (json_node_get_array (a)); i++)
    {
      TwedAutoBars *r = parse_bars (json_array_get_element (json_node_get_array (a), i), error);

      if (r && whole && bars_none (r))
        {
          bad (error, "holds nothing: want barred_from, refused_from or remeasured");
          g_clear_pointer (&r, twed_auto_bars_free);
        }
      if (r && whole && !g_hash_table_add (seen, bars_key (r)))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "VM %s on host %s twice", r->vm, r->host);
          g_clear_pointer (&r, twed_auto_bars_free);
        }
      if (!r)
        {
          g_prefix_error (error, "\"bars\"[%u]: ", i);
          return FALSE;
        }
      g_ptr_array_add (out, r);
    }
  return TRUE;
}

/* The interval's members into @s. */
static gboolean
parse_interval (JsonObject *o, TwedState *s, GError **error)
{
  JsonNode *iv = json_object_get_member (o, "interval");
  JsonObject *io;
  const char *hold;
  gint64 started, seconds, granted;

  if (!iv || !JSON_NODE_HOLDS_OBJECT (iv))
    return bad (error, "\"interval\": want an object");
  io = json_node_get_object (iv);
  if (!get_int (io, "started", MAX_MS, &started, error) || !get_int (io, "seconds", 86400, &seconds, error) ||
      !get_int (io, "granted", MAX_COUNT, &granted, error) ||
      !get_counts (io, "per_policy", s->per_policy, error) || !get_counts (io, "per_host", s->per_host, error) ||
      !(hold = get_string (io, "hold", TRUE, error)))
    {
      g_prefix_error (error, "\"interval\": ");
      return FALSE;
    }
  s->interval_started = started * 1000;
  s->interval = (guint) seconds;
  s->granted = (guint) granted;
  g_free (s->hold);
  s->hold = *hold ? g_strdup (hold) : NULL;
  return TRUE;
}

/* A complete, strict JSON object. */
static JsonParser *
parse_object (const char *data, gsize n, JsonObject **o, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *root;

  /* The same strictness as policies: duplicate members, trailing
   * garbage or deep nesting mean the file is not what was written. */
  if (!twed_json_check_strict (data, n, error) || !json_parser_load_from_data (parser, data, (gssize) n, error))
    return NULL;
  root = json_parser_get_root (parser);
  if (!root || !JSON_NODE_HOLDS_OBJECT (root))
    {
      bad (error, "want a JSON object");
      return NULL;
    }
  *o = json_node_get_object (root);
  return g_steal_pointer (&parser);
}

TwedState *
twed_state_from_json (const char *data, gssize len, GError **error)
{
  g_autoptr(TwedState) s = twed_state_new ();
  gsize n = len < 0 ? strlen (data) : (gsize) len;
  g_autoptr(JsonParser) parser = NULL;
  JsonNode *vms;
  JsonObject *o;
  gint64 version, log = 0;

  if (!(parser = parse_object (data, n, &o, error)) || !get_int (o, "version", G_MAXINT, &version, error))
    return NULL;
  if (version != STATE_VERSION)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "version %" G_GINT64_FORMAT ", want %d", version,
                   STATE_VERSION);
      return NULL;
    }
  if (!parse_bars_list (o, TRUE, s->bars, error))
    return NULL;
  /* Written by every daemon with a record log; 0 before. */
  if (json_object_has_member (o, "log") && !get_int (o, "log", MAX_MS, &log, error))
    return NULL;
  s->log = (guint64) log;
  if (!parse_interval (o, s, error))
    return NULL;
  vms = json_object_get_member (o, "vms");
  if (!vms || !JSON_NODE_HOLDS_ARRAY (vms))
    {
      bad (error, "\"vms\": want an array");
      return NULL;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (vms)); i++)
    {
      TwedVmRecord *r = parse_vm (json_array_get_element (json_node_get_array (vms), i), TRUE, TRUE, error);

      if (!r)
        {
          g_prefix_error (error, "\"vms\"[%u]: ", i);
          return NULL;
        }
      g_ptr_array_add (s->vms, r);
    }
  return g_steal_pointer (&s);
}

/* Replaying: the state's records by what a log record names them by.
 * A VM's last change is kept by VM (fleet-wide), its failures by host
 * and VM; a state record that has both is split in two. */
typedef struct {
  TwedState *s;
  GHashTable *changed;          /* vm (the record's) -> TwedVmRecord in s->vms */
  GHashTable *failed;           /* "host\nvm" -> TwedVmRecord in s->vms */
  GHashTable *bars;             /* "host\nvm" -> TwedAutoBars (owned) */
} Replay;

static gboolean
record_failed (const TwedVmRecord *r)
{
  return r->failures || r->retry_at;
}

static char *
failed_key (const TwedVmRecord *r)
{
  return host_vm_key (r->host, r->vm);
}

static void
replay_init (Replay *rp, TwedState *s)
{
  guint n = s->vms->len;

  rp->s = s;
  rp->changed = g_hash_table_new (g_str_hash, g_str_equal);
  rp->failed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  rp->bars = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) twed_auto_bars_free);
  for (guint i = 0; i < s->bars->len; i++)
    {
      TwedAutoBars *b = g_ptr_array_index (s->bars, i);

      s->bars->pdata[i] = NULL;
      g_hash_table_replace (rp->bars, bars_key (b), b);
    }
  g_ptr_array_set_size (s->bars, 0);
  for (guint i = 0; i < n; i++)
    {
      TwedVmRecord *r = g_ptr_array_index (s->vms, i);

      if (record_failed (r) && r->changed_at)
        {
          TwedVmRecord *c = twed_vm_record_new (r->host, r->vm);

          c->changed_at = r->changed_at;
          r->changed_at = 0;
          g_ptr_array_add (s->vms, c);
        }
    }
  for (guint i = 0; i < s->vms->len; i++)
    {
      TwedVmRecord *r = g_ptr_array_index (s->vms, i);
      TwedVmRecord *had;

      if (record_failed (r))
        g_hash_table_insert (rp->failed, failed_key (r), r);
      else if (r->changed_at)
        {
          /* Two of one VM (states written before records were kept by
           * VM): the later change holds. */
          had = g_hash_table_lookup (rp->changed, r->vm);
          if (!had || had->changed_at < r->changed_at)
            g_hash_table_replace (rp->changed, r->vm, r);
        }
    }
}

/* The bars of @table, taken from it, into @out sorted by host and VM:
 * the same bars give the same file. */
static void
bars_from_table (GPtrArray *out, GHashTable *table)
{
  GHashTableIter it;
  gpointer value;

  g_hash_table_iter_init (&it, table);
  while (g_hash_table_iter_next (&it, NULL, &value))
    {
      g_ptr_array_add (out, value);
      g_hash_table_iter_steal (&it);
    }
  g_ptr_array_sort (out, twed_auto_bars_compare);
}

/* A record of a VM's bars: the last one holds; one with none removes. */
static void
replay_bars (Replay *rp, TwedAutoBars *in)
{
  if (bars_none (in))
    {
      g_autofree char *key = bars_key (in);

      g_hash_table_remove (rp->bars, key);
      twed_auto_bars_free (in);
      return;
    }
  g_hash_table_replace (rp->bars, bars_key (in), in);
}

/* Ends a replay: the records still indexed, in their order. */
static void
replay_finish (Replay *rp)
{
  GPtrArray *vms = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);

  for (guint i = 0; i < rp->s->vms->len; i++)
    {
      TwedVmRecord *r = g_ptr_array_index (rp->s->vms, i);
      g_autofree char *key = record_failed (r) ? failed_key (r) : NULL;
      gboolean live = key ? g_hash_table_lookup (rp->failed, key) == r
                          : g_hash_table_lookup (rp->changed, r->vm) == r;

      if (live)
        {
          g_ptr_array_add (vms, r);
          rp->s->vms->pdata[i] = NULL;
        }
    }
  g_hash_table_unref (rp->changed);
  g_hash_table_unref (rp->failed);
  g_ptr_array_unref (rp->s->vms);
  rp->s->vms = vms;
  bars_from_table (rp->s->bars, rp->bars);
  g_hash_table_unref (rp->bars);
}

static void
replay_changed (Replay *rp, TwedVmRecord *in)
{
  TwedVmRecord *r = g_hash_table_lookup (rp->changed, in->vm);

  if (!in->changed_at)
    {
      g_hash_table_remove (rp->changed, in->vm);
      twed_vm_record_free (in);
      return;
    }
  if (r)
    {
      r->changed_at = in->changed_at;
      g_free (r->host);
      r->host = g_strdup (in->host);
      twed_vm_record_free (in);
      return;
    }
  g_ptr_array_add (rp->s->vms, in);
  g_hash_table_insert (rp->changed, in->vm, in);
}

static void
replay_failed (Replay *rp, TwedVmRecord *in)
{
  char *key = failed_key (in);
  TwedVmRecord *r = g_hash_table_lookup (rp->failed, key);

  if (!record_failed (in))
    {
      g_hash_table_remove (rp->failed, key);
      g_free (key);
      twed_vm_record_free (in);
      return;
    }
  if (r)
    {
      r->failures = in->failures;
      r->backoff = in->backoff;
      r->retry_at = in->retry_at;
      r->failed_raise = in->failed_raise;
      g_free (r->error);
      r->error = g_steal_pointer (&in->error);
      g_free (key);
      twed_vm_record_free (in);
      return;
    }
  g_ptr_array_add (rp->s->vms, in);
  g_hash_table_insert (rp->failed, key, in);
}

static void
counts_set (GHashTable *to, GHashTable *from)
{
  GHashTableIter it;
  gpointer k, v;

  g_hash_table_iter_init (&it, from);
  while (g_hash_table_iter_next (&it, &k, &v))
    g_hash_table_insert (to, g_strdup (k), v);
}

/* A record's list @name (absent: empty) into @out. */
static gboolean
parse_list (JsonObject *o, const char *name, gboolean failures, GPtrArray *out, GError **error)
{
  JsonNode *a = json_object_get_member (o, name);

  if (!a)
    return TRUE;
  if (!JSON_NODE_HOLDS_ARRAY (a))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "\"%s\": want an array", name);
      return FALSE;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (a)); i++)
    {
      TwedVmRecord *r = parse_vm (json_array_get_element (json_node_get_array (a), i), !failures, failures, error);

      if (!r)
        {
          g_prefix_error (error, "\"%s\"[%u]: ", name, i);
          return FALSE;
        }
      g_ptr_array_add (out, r);
    }
  return TRUE;
}

/* One record (a line without its newline) onto the state: all of it,
 * or, when it is damaged, none. */
static gboolean
replay_record (Replay *rp, const char *line, gsize n, GError **error)
{
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GPtrArray) failed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GPtrArray) bars = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(TwedState) iv = NULL;
  TwedState *s = rp->s;
  JsonObject *o;

  if (!(parser = parse_object (line, n, &o, error)))
    return FALSE;
  if (json_object_has_member (o, "interval"))
    {
      iv = twed_state_new ();
      if (!parse_interval (o, iv, error))
        return FALSE;
    }
  if (!parse_list (o, "changed", FALSE, changed, error) || !parse_list (o, "failed", TRUE, failed, error) ||
      !parse_bars_list (o, FALSE, bars, error))
    return FALSE;
  if (iv)
    {
      if (iv->interval_started != s->interval_started)
        {
          g_hash_table_remove_all (s->per_policy);
          g_hash_table_remove_all (s->per_host);
          g_clear_pointer (&s->hold, g_free);
          s->interval_started = iv->interval_started;
        }
      s->interval = iv->interval;
      s->granted = iv->granted;
      if (iv->hold)
        {
          g_free (s->hold);
          s->hold = g_steal_pointer (&iv->hold);
        }
      counts_set (s->per_policy, iv->per_policy);
      counts_set (s->per_host, iv->per_host);
    }
  for (guint i = 0; i < changed->len; i++)
    replay_changed (rp, g_steal_pointer (&changed->pdata[i]));
  for (guint i = 0; i < failed->len; i++)
    replay_failed (rp, g_steal_pointer (&failed->pdata[i]));
  for (guint i = 0; i < bars->len; i++)
    replay_bars (rp, g_steal_pointer (&bars->pdata[i]));
  return TRUE;
}

gboolean
twed_state_replay (TwedState *s, const char *data, gsize len, gboolean *stale, gssize *torn, GError **error)
{
  const char *nl = memchr (data, '\n', len);
  g_autoptr(JsonParser) parser = NULL;
  Replay rp;
  gsize at;
  gint64 gen;
  JsonObject *o;

  *stale = FALSE;
  *torn = -1;
  /* Not even a whole header: the log's creation was cut short. */
  if (!nl)
    {
      *torn = 0;
      return TRUE;
    }
  if (!(parser = parse_object (data, (gsize) (nl - data), &o, error)) || !get_int (o, "log", MAX_MS, &gen, error))
    {
      g_prefix_error (error, "header: ");
      return FALSE;
    }
  if ((guint64) gen != s->log)
    {
      *stale = TRUE;
      return TRUE;
    }
  replay_init (&rp, s);
  for (at = (gsize) (nl - data) + 1; at < len; at = (gsize) (nl - data) + 1)
    {
      g_autoptr(GError) local = NULL;

      nl = memchr (data + at, '\n', len - at);
      if (!nl)
        {
          *torn = (gssize) at;
          break;
        }
      if (!replay_record (&rp, data + at, (gsize) (nl - data) - at, &local))
        {
          /* The last record, whole as far as the newline but not as a
           * record: what a crash leaves of a write (zeros, a part). */
          if ((gsize) (nl - data) + 1 == len)
            {
              *torn = (gssize) at;
              break;
            }
          replay_finish (&rp);
          g_propagate_prefixed_error (error, g_steal_pointer (&local), "record at offset %" G_GSIZE_FORMAT ": ", at);
          return FALSE;
        }
    }
  replay_finish (&rp);
  return TRUE;
}

void
twed_state_prune (TwedState *s, gint64 now, gint64 min_change)
{
  for (guint i = 0; i < s->vms->len;)
    {
      const TwedVmRecord *r = g_ptr_array_index (s->vms, i);
      gboolean holds = record_failed (r) ? r->failures || r->retry_at > now : r->changed_at + min_change > now;

      if (holds)
        i++;
      else
        g_ptr_array_remove_index (s->vms, i);
    }
  for (guint i = 0; i < s->bars->len;)
    if (twed_auto_bars_hold (g_ptr_array_index (s->bars, i), now))
      i++;
    else
      g_ptr_array_remove_index (s->bars, i);
}
