/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reads what the planner needs from a libvirt domain XML document.
 * GMarkup keeps the core free of another XML library; namespaces are
 * resolved here because <metadata> children carry their own prefixes. */
#include "twed-domxml.h"

#include <string.h>

typedef struct {
  TwedDomain *dom;
  GPtrArray *path;   /* element names as written */
  GPtrArray *nsmaps; /* per depth: GHashTable prefix -> uri, or NULL */
  GString *text;
  guint vcpu_current;
  gboolean vcpu_has_current;
  guint vcpu_max;
  GPtrArray *pins;   /* (vcpu, cpuset) pairs parsed before vCPU count known */
  GArray *pin_ids;
  GPtrArray *meta_stack; /* TwedMetaItem per depth inside <metadata>, borrowed */
  guint meta_depth;      /* depth of <metadata>, 0 when outside */
} ParseState;

static const char *
resolve_ns (ParseState *st, const char *prefix)
{
  for (guint i = st->nsmaps->len; i > 0; i--)
    {
      GHashTable *map = g_ptr_array_index (st->nsmaps, i - 1);
      const char *uri;

      if (map && (uri = g_hash_table_lookup (map, prefix)))
        return uri;
    }
  return "";
}

static const char *
local_name (const char *qname)
{
  const char *colon = strchr (qname, ':');

  return colon ? colon + 1 : qname;
}

static gboolean
at_path (ParseState *st, const char *const *want)
{
  guint n = g_strv_length ((char **) want);

  if (st->path->len != n)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (!g_str_equal (g_ptr_array_index (st->path, i), want[i]))
      return FALSE;
  return TRUE;
}

static gboolean
parse_uint_attr (const char *val, guint limit, guint *out, const char *what, GError **error)
{
  guint64 v;

  if (!val || !g_ascii_string_to_unsigned (val, 10, 0, limit, &v, NULL))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "invalid %s value '%s'", what, val ? val : "");
      return FALSE;
    }
  *out = (guint) v;
  return TRUE;
}

static gboolean
parse_setting_attrs (const char **names, const char **values, TwedSetting *s,
                     const char *what, GError **error)
{
  TwedSetting r = { TWED_MODE_OFF, 0, 0, TWED_DELAY_LIMIT };
  gboolean have_min = FALSE, have_max = FALSE;

  for (guint i = 0; names[i]; i++)
    {
      const char *n = names[i];

      if (g_str_equal (n, "mode"))
        {
          if (!twed_mode_from_string (values[i], &r.mode))
            {
              g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                           "%s: unknown mode '%s'", what, values[i]);
              return FALSE;
            }
        }
      else if (g_str_equal (n, "delay"))
        {
          if (!parse_uint_attr (values[i], TWED_DELAY_LIMIT, &r.delay, "delay", error))
            return FALSE;
        }
      else if (g_str_equal (n, "min"))
        {
          if (!parse_uint_attr (values[i], TWED_DELAY_LIMIT, &r.min, "min", error))
            return FALSE;
          have_min = TRUE;
        }
      else if (g_str_equal (n, "max"))
        {
          if (!parse_uint_attr (values[i], TWED_DELAY_LIMIT, &r.max, "max", error))
            return FALSE;
          have_max = TRUE;
        }
    }
  /* min/max default to the widest range around delay. */
  if (r.mode == TWED_MODE_DYNAMIC)
    {
      if (!have_min)
        r.min = 0;
      if (!have_max)
        r.max = TWED_DELAY_LIMIT;
    }
  twed_setting_normalize (&r);
  if (!twed_setting_check (&r, error))
    {
      g_prefix_error (error, "%s: ", what);
      return FALSE;
    }
  *s = r;
  return TRUE;
}

static const char *
attr (const char **names, const char **values, const char *want)
{
  for (guint i = 0; names[i]; i++)
    if (g_str_equal (names[i], want))
      return values[i];
  return NULL;
}

static void
start_meta_element (ParseState *st, const char *qname,
                    const char **names, const char **values, GError **error)
{
  const char *colon = strchr (qname, ':');
  g_autofree char *prefix = colon ? g_strndup (qname, colon - qname) : g_strdup ("");
  TwedMetaItem *item = twed_meta_item_new (resolve_ns (st, prefix), local_name (qname));
  TwedDomain *dom = st->dom;

  for (guint i = 0; names[i]; i++)
    if (!g_str_has_prefix (names[i], "xmlns"))
      g_hash_table_insert (item->attrs, g_strdup (local_name (names[i])), g_strdup (values[i]));
  g_ptr_array_add (dom->meta, item);
  g_ptr_array_add (st->meta_stack, item);

  if (g_str_equal (item->ns, TWED_NOVA_NS) && g_str_equal (item->element, "flavor"))
    {
      const char *n = g_hash_table_lookup (item->attrs, "name");

      if (n && !dom->flavor)
        dom->flavor = g_strdup (n);
    }
  else if (g_str_equal (item->ns, TWED_METADATA_NS) && g_str_equal (item->element, "policy"))
    {
      const char *manage = g_hash_table_lookup (item->attrs, "manage");

      if (!manage || g_str_equal (manage, "yes"))
        dom->manage = TWED_MANAGE_AUTO;
      else if (g_str_equal (manage, "no"))
        dom->manage = TWED_MANAGE_OPTOUT;
      else if (g_str_equal (manage, "pinned"))
        {
          dom->manage = TWED_MANAGE_PINNED;
          if (!parse_setting_attrs (names, values, &dom->pinned, "<twed:policy>", error))
            return;
        }
      else
        g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                     "<twed:policy>: manage must be yes, no or pinned, not '%s'", manage);
    }
}

static void
on_start (GMarkupParseContext *ctx G_GNUC_UNUSED, const char *qname,
          const char **names, const char **values, gpointer data, GError **error)
{
  ParseState *st = data;
  GHashTable *map = NULL;
  static const char *const p_vcpu[] = { "domain", "vcpu", NULL };
  static const char *const p_pin[] = { "domain", "cputune", "vcpupin", NULL };
  static const char *const p_twed[] = { "domain", "cputune", "twed", NULL };
  static const char *const p_meta[] = { "domain", "metadata", NULL };

  for (guint i = 0; names[i]; i++)
    {
      const char *n = names[i];

      if (g_str_equal (n, "xmlns") || g_str_has_prefix (n, "xmlns:"))
        {
          if (!map)
            map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
          g_hash_table_insert (map, g_strdup (n[5] ? n + 6 : ""), g_strdup (values[i]));
        }
    }
  g_ptr_array_add (st->nsmaps, map);
  g_ptr_array_add (st->path, g_strdup (qname));
  g_string_truncate (st->text, 0);

  if (st->meta_depth && st->path->len > st->meta_depth)
    {
      start_meta_element (st, qname, names, values, error);
      return;
    }
  if (at_path (st, p_meta))
    st->meta_depth = st->path->len;
  else if (at_path (st, p_vcpu))
    {
      const char *cur = attr (names, values, "current");
      const char *cpuset = attr (names, values, "cpuset");

      if (cur)
        {
          if (!parse_uint_attr (cur, 65536, &st->vcpu_current, "vcpu current", error))
            return;
          st->vcpu_has_current = TRUE;
        }
      if (cpuset && !(st->dom->default_affinity = twed_cpuset_parse (cpuset, error)))
        return;
    }
  else if (at_path (st, p_pin))
    {
      guint vcpu;
      GArray *set;

      if (!parse_uint_attr (attr (names, values, "vcpu"), 65536, &vcpu, "vcpupin vcpu", error))
        return;
      if (!(set = twed_cpuset_parse (attr (names, values, "cpuset"), error)))
        return;
      g_array_append_val (st->pin_ids, vcpu);
      g_ptr_array_add (st->pins, set);
    }
  else if (at_path (st, p_twed))
    {
      st->dom->has_twed = TRUE;
      parse_setting_attrs (names, values, &st->dom->twed, "<cputune><twed>", error);
    }
}

static void
on_end (GMarkupParseContext *ctx G_GNUC_UNUSED, const char *qname G_GNUC_UNUSED,
        gpointer data, GError **error)
{
  ParseState *st = data;
  static const char *const p_name[] = { "domain", "name", NULL };
  static const char *const p_uuid[] = { "domain", "uuid", NULL };
  static const char *const p_vcpu[] = { "domain", "vcpu", NULL };
  g_autofree char *text = g_strstrip (g_strdup (st->text->str));

  if (st->meta_depth && st->path->len > st->meta_depth)
    {
      TwedMetaItem *item = g_ptr_array_steal_index (st->meta_stack, st->meta_stack->len - 1);

      if (*text && !item->text)
        item->text = g_strdup (text);
    }
  else if (st->meta_depth == st->path->len)
    st->meta_depth = 0;
  else if (at_path (st, p_name))
    st->dom->name = g_strdup (text);
  else if (at_path (st, p_uuid))
    st->dom->uuid = g_strdup (text);
  else if (at_path (st, p_vcpu))
    {
      if (!parse_uint_attr (text, 65536, &st->vcpu_max, "vcpu", error))
        return;
    }
  g_ptr_array_remove_index (st->path, st->path->len - 1);
  g_ptr_array_remove_index (st->nsmaps, st->nsmaps->len - 1);
  g_string_truncate (st->text, 0);
}

static void
on_text (GMarkupParseContext *ctx G_GNUC_UNUSED, const char *text, gsize len,
         gpointer data, GError **error G_GNUC_UNUSED)
{
  ParseState *st = data;

  g_string_append_len (st->text, text, len);
}

static void
free_nsmap (gpointer p)
{
  if (p)
    g_hash_table_unref (p);
}

TwedDomain *
twed_domain_parse_xml (const char *xml, GError **error)
{
  static const GMarkupParser parser = { on_start, on_end, on_text, NULL, NULL };
  g_autoptr(TwedDomain) dom = twed_domain_new (NULL);
  g_autoptr(GMarkupParseContext) ctx = NULL;
  g_autoptr(GPtrArray) path = g_ptr_array_new_with_free_func (g_free);
  g_autoptr(GPtrArray) nsmaps = g_ptr_array_new_with_free_func (free_nsmap);
  g_autoptr(GPtrArray) pins = g_ptr_array_new_with_free_func ((GDestroyNotify) g_array_unref);
  g_autoptr(GArray) pin_ids = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr(GPtrArray) meta_stack = g_ptr_array_new ();
  g_autoptr(GString) text = g_string_new (NULL);
  ParseState st = { 0 };

  st.dom = dom;
  st.path = path;
  st.nsmaps = nsmaps;
  st.text = text;
  st.pins = pins;
  st.pin_ids = pin_ids;
  st.meta_stack = meta_stack;

  ctx = g_markup_parse_context_new (&parser, G_MARKUP_TREAT_CDATA_AS_TEXT, &st, NULL);
  if (!g_markup_parse_context_parse (ctx, xml, -1, error) ||
      !g_markup_parse_context_end_parse (ctx, error))
    {
      g_prefix_error (error, "domain XML: ");
      return NULL;
    }
  if (!dom->name || !*dom->name)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "domain XML: no <name>");
      return NULL;
    }
  twed_domain_set_vcpus (dom, st.vcpu_has_current ? st.vcpu_current : st.vcpu_max);
  for (guint i = 0; i < pins->len; i++)
    twed_domain_pin_vcpu (dom, g_array_index (pin_ids, guint, i), g_ptr_array_index (pins, i));
  return g_steal_pointer (&dom);
}
