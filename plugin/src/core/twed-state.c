/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-state.h"
#include "twed-json-strict.h"

#include <json-glib/json-glib.h>
#include <stdlib.h>
#include <string.h>

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

char *
twed_state_to_json (const TwedState *s)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, STATE_VERSION);
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
  json_builder_set_member_name (b, "vms");
  json_builder_begin_array (b);
  for (guint i = 0; i < s->vms->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (s->vms, i);

      json_builder_begin_object (b);
      json_builder_set_member_name (b, "host");
      json_builder_add_string_value (b, r->host);
      json_builder_set_member_name (b, "vm");
      json_builder_add_string_value (b, r->vm);
      json_builder_set_member_name (b, "changed");
      json_builder_add_int_value (b, r->changed_at / 1000);
      json_builder_set_member_name (b, "failures");
      json_builder_add_int_value (b, r->failures);
      json_builder_set_member_name (b, "backoff");
      json_builder_add_int_value (b, r->backoff);
      json_builder_set_member_name (b, "retry");
      json_builder_add_int_value (b, r->retry_at / 1000);
      if (r->error)
        {
          json_builder_set_member_name (b, "error");
          json_builder_add_string_value (b, r->error);
        }
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  return json_generator_to_data (gen, NULL);
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

static gboolean
parse_vm (JsonNode *n, TwedState *s, GError **error)
{
  JsonObject *o;
  const char *host, *vm, *err;
  gint64 changed, failures, backoff, retry;
  TwedVmRecord *r;

  if (!JSON_NODE_HOLDS_OBJECT (n))
    return bad (error, "want an object");
  o = json_node_get_object (n);
  if (!(host = get_string (o, "host", FALSE, error)) || !(vm = get_string (o, "vm", FALSE, error)) ||
      !(err = get_string (o, "error", TRUE, error)) ||
      !get_int (o, "changed", MAX_MS, &changed, error) || !get_int (o, "failures", MAX_COUNT, &failures, error) ||
      !get_int (o, "backoff", MAX_COUNT, &backoff, error) || !get_int (o, "retry", MAX_MS, &retry, error))
    return FALSE;
  r = twed_vm_record_new (host, vm);
  r->changed_at = changed * 1000;
  r->failures = (guint) failures;
  r->backoff = (guint) backoff;
  r->retry_at = retry * 1000;
  r->error = *err ? g_strdup (err) : NULL;
  g_ptr_array_add (s->vms, r);
  return TRUE;
}

TwedState *
twed_state_from_json (const char *data, gssize len, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(TwedState) s = twed_state_new ();
  gsize n = len < 0 ? strlen (data) : (gsize) len;
  JsonNode *root, *iv, *vms;
  JsonObject *o, *io;
  const char *hold;
  gint64 version, started, seconds, granted;

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
  o = json_node_get_object (root);
  if (!get_int (o, "version", G_MAXINT, &version, error))
    return NULL;
  if (version != STATE_VERSION)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "version %" G_GINT64_FORMAT ", want %d", version,
                   STATE_VERSION);
      return NULL;
    }
  iv = json_object_get_member (o, "interval");
  if (!iv || !JSON_NODE_HOLDS_OBJECT (iv))
    {
      bad (error, "\"interval\": want an object");
      return NULL;
    }
  io = json_node_get_object (iv);
  if (!get_int (io, "started", MAX_MS, &started, error) || !get_int (io, "seconds", 86400, &seconds, error) ||
      !get_int (io, "granted", MAX_COUNT, &granted, error) ||
      !get_counts (io, "per_policy", s->per_policy, error) || !get_counts (io, "per_host", s->per_host, error) ||
      !(hold = get_string (io, "hold", TRUE, error)))
    {
      g_prefix_error (error, "\"interval\": ");
      return NULL;
    }
  s->interval_started = started * 1000;
  s->interval = (guint) seconds;
  s->granted = (guint) granted;
  s->hold = *hold ? g_strdup (hold) : NULL;
  vms = json_object_get_member (o, "vms");
  if (!vms || !JSON_NODE_HOLDS_ARRAY (vms))
    {
      bad (error, "\"vms\": want an array");
      return NULL;
    }
  for (guint i = 0; i < json_array_get_length (json_node_get_array (vms)); i++)
    if (!parse_vm (json_array_get_element (json_node_get_array (vms), i), s, error))
      {
        g_prefix_error (error, "\"vms\"[%u]: ", i);
        return NULL;
      }
  return g_steal_pointer (&s);
}
