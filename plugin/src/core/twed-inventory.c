/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-inventory.h"

#include <stdlib.h>

TwedMetaItem *
twed_meta_item_new (const char *ns, const char *element)
{
  TwedMetaItem *item = g_new0 (TwedMetaItem, 1);

  item->ns = g_strdup (ns ? ns : "");
  item->element = g_strdup (element);
  item->attrs = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  return item;
}

void
twed_meta_item_free (TwedMetaItem *item)
{
  if (!item)
    return;
  g_free (item->ns);
  g_free (item->element);
  g_hash_table_unref (item->attrs);
  g_free (item->text);
  g_free (item);
}

static void
free_cpuset (gpointer p)
{
  if (p)
    g_array_unref (p);
}

TwedDomain *
twed_domain_new (const char *name)
{
  TwedDomain *dom = g_new0 (TwedDomain, 1);

  dom->name = g_strdup (name);
  dom->affinity = g_ptr_array_new_with_free_func (free_cpuset);
  dom->meta = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_meta_item_free);
  dom->persistent = TRUE;
  return dom;
}

void
twed_domain_free (TwedDomain *dom)
{
  if (!dom)
    return;
  g_free (dom->name);
  g_free (dom->uuid);
  if (dom->default_affinity)
    g_array_unref (dom->default_affinity);
  g_ptr_array_unref (dom->affinity);
  g_ptr_array_unref (dom->meta);
  g_free (dom->flavor);
  g_free (dom->hold);
  g_free (dom->load_error);
  twed_domain_signals_free (dom->signals);
  g_free (dom);
}

TwedDomainSignals *
twed_domain_signals_new (gint64 at, int id)
{
  TwedDomainSignals *sig = g_new0 (TwedDomainSignals, 1);

  sig->at = at;
  sig->id = id;
  sig->vcpus = g_array_new (FALSE, TRUE, sizeof (TwedVcpuSignals));
  return sig;
}

TwedDomainSignals *
twed_domain_signals_copy (const TwedDomainSignals *src)
{
  TwedDomainSignals *sig;

  if (!src)
    return NULL;
  sig = twed_domain_signals_new (src->at, src->id);
  g_array_append_vals (sig->vcpus, src->vcpus->data, src->vcpus->len);
  return sig;
}

void
twed_domain_signals_free (TwedDomainSignals *sig)
{
  if (!sig)
    return;
  g_array_unref (sig->vcpus);
  g_free (sig);
}

TwedVcpuSignals *
twed_domain_signals_vcpu (TwedDomainSignals *sig, guint vcpu)
{
  if (vcpu >= sig->vcpus->len)
    g_array_set_size (sig->vcpus, vcpu + 1);
  return &g_array_index (sig->vcpus, TwedVcpuSignals, vcpu);
}

TwedDomain *
twed_domain_copy (const TwedDomain *src)
{
  TwedDomain *dom = twed_domain_new (src->name);

  dom->uuid = g_strdup (src->uuid);
  dom->active = src->active;
  dom->persistent = src->persistent;
  dom->default_affinity = twed_cpuset_copy (src->default_affinity);
  twed_domain_set_vcpus (dom, src->nvcpus);
  for (guint i = 0; i < src->affinity->len; i++)
    twed_domain_pin_vcpu (dom, i, g_ptr_array_index (src->affinity, i));
  dom->has_twed = src->has_twed;
  dom->twed = src->twed;
  dom->manage = src->manage;
  dom->pinned = src->pinned;
  for (guint i = 0; i < src->meta->len; i++)
    {
      const TwedMetaItem *m = g_ptr_array_index (src->meta, i);
      TwedMetaItem *c = twed_meta_item_new (m->ns, m->element);
      GHashTableIter it;
      gpointer k, v;

      g_hash_table_iter_init (&it, m->attrs);
      while (g_hash_table_iter_next (&it, &k, &v))
        g_hash_table_insert (c->attrs, g_strdup (k), g_strdup (v));
      c->text = g_strdup (m->text);
      g_ptr_array_add (dom->meta, c);
    }
  dom->flavor = g_strdup (src->flavor);
  dom->load_error = g_strdup (src->load_error);
  dom->hold = g_strdup (src->hold);
  dom->hold_after_failure = src->hold_after_failure;
  dom->signals = twed_domain_signals_copy (src->signals);
  dom->ratio = src->ratio;
  return dom;
}

void
twed_domain_set_vcpus (TwedDomain *dom, guint nvcpus)
{
  dom->nvcpus = nvcpus;
  g_ptr_array_set_size (dom->affinity, nvcpus);
}

/* Takes a copy of @cpus; NULL clears the pin. */
void
twed_domain_pin_vcpu (TwedDomain *dom, guint vcpu, GArray *cpus)
{
  if (vcpu >= dom->affinity->len)
    return;
  free_cpuset (g_ptr_array_index (dom->affinity, vcpu));
  g_ptr_array_index (dom->affinity, vcpu) = twed_cpuset_copy (cpus);
}

const char *
twed_domain_meta_lookup (const TwedDomain *dom, const char *ns,
                         const char *element, const char *attr)
{
  for (guint i = 0; i < dom->meta->len; i++)
    {
      const TwedMetaItem *m = g_ptr_array_index (dom->meta, i);

      if (g_strcmp0 (m->ns, ns) != 0 || g_strcmp0 (m->element, element) != 0)
        continue;
      if (!attr)
        return m->text ? m->text : "";
      return g_hash_table_lookup (m->attrs, attr);
    }
  return NULL;
}

TwedHost *
twed_host_new (const char *name, const char *uri)
{
  TwedHost *host = g_new0 (TwedHost, 1);

  host->name = g_strdup (name);
  host->uri = g_strdup (uri);
  host->domains = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_domain_free);
  return host;
}

void
twed_host_free (TwedHost *host)
{
  if (!host)
    return;
  g_free (host->name);
  g_free (host->uri);
  g_free (host->support_reason);
  g_free (host->error);
  if (host->online)
    g_array_unref (host->online);
  g_ptr_array_unref (host->domains);
  g_free (host);
}

static int
cmp_uint (gconstpointer a, gconstpointer b)
{
  guint x = *(const guint *) a, y = *(const guint *) b;

  return x < y ? -1 : x > y;
}

/* Upper bound on CPU ids, only to keep a typo from allocating gigabytes. */
#define CPUSET_ID_LIMIT 65536

static gboolean
parse_cpu_id (const char **p, guint *out)
{
  char *end = NULL;
  guint64 v;

  if (!g_ascii_isdigit (**p))
    return FALSE;
  v = g_ascii_strtoull (*p, &end, 10);
  if (v >= CPUSET_ID_LIMIT)
    return FALSE;
  *out = (guint) v;
  *p = end;
  return TRUE;
}

GArray *
twed_cpuset_parse (const char *str, GError **error)
{
  g_autoptr(GHashTable) set = g_hash_table_new (NULL, NULL);
  g_autoptr(GHashTable) neg = g_hash_table_new (NULL, NULL);
  GArray *out;
  const char *p = str;
  GHashTableIter it;
  gpointer key;

  while (p && *p)
    {
      gboolean negate = FALSE;
      guint a, b;

      while (*p == ' ')
        p++;
      if (*p == '^')
        {
          negate = TRUE;
          p++;
        }
      if (!parse_cpu_id (&p, &a))
        goto bad;
      b = a;
      if (*p == '-' && !negate)
        {
          p++;
          if (!parse_cpu_id (&p, &b) || b < a)
            goto bad;
        }
      for (guint i = a; i <= b; i++)
        g_hash_table_add (negate ? neg : set, GUINT_TO_POINTER (i + 1));
      while (*p == ' ')
        p++;
      if (*p == ',')
        p++;
      else if (*p)
        goto bad;
    }

  out = g_array_new (FALSE, FALSE, sizeof (guint));
  g_hash_table_iter_init (&it, set);
  while (g_hash_table_iter_next (&it, &key, NULL))
    {
      guint id = GPOINTER_TO_UINT (key) - 1;

      if (!g_hash_table_contains (neg, key))
        g_array_append_val (out, id);
    }
  g_array_sort (out, cmp_uint);
  if (out->len == 0)
    {
      g_array_unref (out);
      goto bad;
    }
  return out;

bad:
  g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "invalid cpuset '%s'",
               str ? str : "");
  return NULL;
}

char *
twed_cpuset_format (GArray *set)
{
  GString *s = g_string_new (NULL);

  if (!set)
    return g_string_free (s, FALSE);
  for (guint i = 0; i < set->len;)
    {
      guint a = g_array_index (set, guint, i), j = i;

      while (j + 1 < set->len && g_array_index (set, guint, j + 1) == g_array_index (set, guint, j) + 1)
        j++;
      if (s->len)
        g_string_append_c (s, ',');
      if (j > i)
        g_string_append_printf (s, "%u-%u", a, g_array_index (set, guint, j));
      else
        g_string_append_printf (s, "%u", a);
      i = j + 1;
    }
  return g_string_free (s, FALSE);
}

GArray *
twed_cpuset_copy (GArray *set)
{
  GArray *c;

  if (!set)
    return NULL;
  c = g_array_sized_new (FALSE, FALSE, sizeof (guint), set->len);
  g_array_append_vals (c, set->data, set->len);
  return c;
}
