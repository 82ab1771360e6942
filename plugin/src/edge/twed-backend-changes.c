/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Apply side of the backend: plan changes and manual settings. */
#include "config.h"
#include "twed-backend-private.h"
#include "twed-domain-params.h"
#include "twed-log.h"
#include "twed-domxml.h"

static gboolean
apply_entry (BackendHost *h, TwedPlanEntry *e, GError **error)
{
  g_autoptr(virDomain) dom = NULL;
  gboolean live = e->active, config = e->persistent;

  if (!twed_domain_params_available ())
    return twed_domain_params_set (NULL, &e->target, live, config, error);
  if (!h->conn)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "not connected");
      return FALSE;
    }
  backend_count_read (h);
  dom = e->uuid ? virDomainLookupByUUIDString (h->conn, e->uuid) : virDomainLookupByName (h->conn, e->domain);
  if (!dom)
    {
      twed_set_libvirt_error (error, "domain lookup");
      return FALSE;
    }
  backend_count_write (h);
  /* Before the call: libvirt may deliver the event before it returns. */
  if (live)
    backend_expect_own_change (h, dom, &e->target);
  if (!twed_domain_params_set (dom, &e->target, live, config, error))
    {
      /* No event comes of it: a later one with these values is not ours. */
      if (live)
        backend_forget_own_change (h, dom);
      return FALSE;
    }
  backend_mark_dirty (h, dom);
  return TRUE;
}

/* One host's changes: the plan's entries are indexed by host once, so
 * that applying costs the same per change however many hosts the plan
 * covers. */
typedef struct {
  BackendHost *host;
  GPtrArray *changes;   /* TwedPlanEntry, borrowed */
} HostChanges;

static void
host_changes_free (HostChanges *hc)
{
  g_ptr_array_unref (hc->changes);
  g_free (hc);
}

static gpointer
apply_func (gpointer item, gpointer data)
{
  HostChanges *hc = item;
  BackendHost *h = hc->host;
  gboolean dry_run = GPOINTER_TO_INT (data);
  guint failed = 0;

  for (guint i = 0; i < hc->changes->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (hc->changes, i);
      g_autoptr(GError) error = NULL;
      g_autofree char *from = NULL, *to = NULL;
      gboolean raise;

      if (dry_run)
        {
          e->result = TWED_RESULT_DRY_RUN;
          continue;
        }
      /* auto's explicit off for a domain without <twed>: it leaves the
       * host's default delay, a lowering. */
      from = e->auto_set_off ? g_strdup ("default") : twed_setting_to_string (&e->current);
      to = twed_setting_to_string (&e->target);
      raise = !twed_setting_lowers (&e->current, &e->target) && !e->auto_set_off;
      if (apply_entry (h, e, &error))
        {
          e->result = TWED_RESULT_APPLIED;
          backend_vm_changed (h, e->uuid ? e->uuid : e->domain, NULL, raise);
          twed_log_change (h->name, e->domain, from, to, e->reason);
        }
      else
        {
          /* Without the API nothing was tried: nothing to back off. */
          if (twed_domain_params_available ())
            backend_vm_changed (h, e->uuid ? e->uuid : e->domain, error, raise);
          e->result = TWED_RESULT_FAILED;
          e->error = g_strdup (error->message);
          e->refused = twed_domain_params_refused (error);
          failed++;
          twed_log_domain (G_LOG_LEVEL_WARNING, h->name, e->domain, "change %s -> %s failed: %s",
                           from, to, error->message);
        }
    }
  return GUINT_TO_POINTER (failed);
}

guint
twed_backend_apply (TwedBackend *b, TwedPlan *plan, gboolean dry_run)
{
  g_autoptr(HostTable) t = backend_hosts (b);
  g_autoptr(GHashTable) by_host = g_hash_table_new (NULL, NULL);
  g_autoptr(GPtrArray) todo = g_ptr_array_new_with_free_func ((GDestroyNotify) host_changes_free);
  g_autofree gpointer *results = NULL;
  guint failed = 0;

  /* Only the hosts the plan changes something on: a daemon's pass over
   * one host must not cost one allocation per configured host. */
  for (guint j = 0; j < plan->entries->len; j++)
    {
      TwedPlanEntry *e = g_ptr_array_index (plan->entries, j);
      BackendHost *h;
      HostChanges *hc;

      if (e->action != TWED_ACTION_CHANGE || !(h = g_hash_table_lookup (t->by_name, e->host)))
        continue;
      if (!(hc = g_hash_table_lookup (by_host, h)))
        {
          hc = g_new0 (HostChanges, 1);
          hc->host = h;
          hc->changes = g_ptr_array_new ();
          g_hash_table_insert (by_host, h, hc);
          g_ptr_array_add (todo, hc);
        }
      g_ptr_array_add (hc->changes, e);
    }
  results = backend_fan_out (todo, BACKEND_OPT (b, threads), apply_func, GINT_TO_POINTER (dry_run));
  for (guint i = 0; i < todo->len; i++)
    failed += GPOINTER_TO_UINT (results[i]);
  return failed;
}

static gboolean
set_policy_metadata (virDomainPtr dom, const char *xml, unsigned int flags, GError **error)
{
  if (virDomainSetMetadata (dom, VIR_DOMAIN_METADATA_ELEMENT, xml, xml ? "twed" : NULL,
                            TWED_METADATA_NS, flags) < 0)
    {
      twed_set_libvirt_error (error, "virDomainSetMetadata");
      return FALSE;
    }
  return TRUE;
}

static virDomainPtr
find_domain (TwedBackend *b, const char *name, BackendHost **host_out, GError **error)
{
  virDomainPtr found = NULL;
  g_autoptr(GString) where = g_string_new (NULL);
  g_autoptr(HostTable) t = backend_hosts (b);

  for (guint i = 0; i < t->list->len; i++)
    {
      BackendHost *h = g_ptr_array_index (t->list, i);
      g_autoptr(GError) local = NULL;
      virDomainPtr dom;

      g_mutex_lock (&h->lock);
      if (!backend_connect_locked (h, &local))
        {
          g_mutex_unlock (&h->lock);
          g_string_append_printf (where, "%s%s: %s", where->len ? "; " : "", h->name, local->message);
          continue;
        }
      backend_count_read (h);
      dom = virDomainLookupByName (h->conn, name);
      virResetLastError ();
      g_mutex_unlock (&h->lock);
      if (!dom)
        continue;
      if (found)
        {
          virDomainFree (dom);
          virDomainFree (found);
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                       "domain '%s' exists on %s and %s; pick one host with --connect",
                       name, (*host_out)->name, h->name);
          return NULL;
        }
      found = dom;
      *host_out = h;
    }
  if (!found)
    g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "domain '%s' not found%s%s%s", name,
                 where->len ? " (unreachable: " : "", where->len ? where->str : "",
                 where->len ? ")" : "");
  return found;
}

gboolean
twed_backend_set_manual (TwedBackend *b, const char *name, const TwedSetting *s,
                         gboolean optout, GError **error)
{
  g_autoptr(virDomain) dom = NULL;
  g_autoptr(TwedDomain) before = NULL;
  g_autofree char *xml = NULL;
  g_autofree char *meta = NULL;
  BackendHost *h = NULL;
  unsigned int flags;
  int active, persistent;

  if (s && !twed_domain_params_available ())
    {
      g_set_error_literal (error, TWED_ERROR, TWED_ERROR_UNSUPPORTED, TWED_API_MISSING_MESSAGE);
      return FALSE;
    }
  if (!(dom = find_domain (b, name, &h, error)))
    return FALSE;
  backend_count_read (h);
  if (!(xml = virDomainGetXMLDesc (dom, 0)))
    {
      twed_set_libvirt_error (error, "virDomainGetXMLDesc");
      return FALSE;
    }
  if (!(before = twed_domain_parse_xml (xml, error)))
    return FALSE;
  active = virDomainIsActive (dom);
  persistent = virDomainIsPersistent (dom);
  flags = (active == 1 ? VIR_DOMAIN_AFFECT_LIVE : 0) | (persistent == 1 ? VIR_DOMAIN_AFFECT_CONFIG : 0);

  if (optout)
    meta = g_strdup ("<policy manage='no'/>");
  else if (s && s->mode == TWED_MODE_DYNAMIC)
    meta = g_strdup_printf ("<policy manage='pinned' mode='dynamic' delay='%u' min='%u' max='%u'/>",
                            s->delay, s->min, s->max);
  else if (s && s->mode == TWED_MODE_FIXED)
    meta = g_strdup_printf ("<policy manage='pinned' mode='fixed' delay='%u'/>", s->delay);
  else if (s)
    meta = g_strdup ("<policy manage='pinned' mode='off'/>");

  if (s)
    {
      backend_count_write (h);
      if (!twed_domain_params_set (dom, s, active == 1, persistent == 1, error))
        return FALSE;
    }
  backend_count_write (h);
  if (!set_policy_metadata (dom, meta, flags, error))
    {
      /* All or nothing: put the old parameters back. */
      if (s)
        {
          g_autoptr(GError) undo = NULL;

          backend_count_write (h);
          if (!twed_domain_params_set (dom, &before->twed, active == 1, persistent == 1, &undo))
            g_prefix_error (error, "(and restoring the previous TWED setting failed: %s) ",
                            undo->message);
        }
      return FALSE;
    }
  backend_mark_dirty (h, dom);
  if (s)
    {
      char uuid[VIR_UUID_STRING_BUFLEN];

      /* A manual setting is the operator's to make at any time, but it
       * counts as the VM's last change for what this process plans. */
      if (virDomainGetUUIDString (dom, uuid) == 0)
        backend_vm_changed (h, uuid, NULL, !twed_setting_lowers (&before->twed, s));
    }
  /* A change like apply's: in the journal whatever the verbosity. */
  {
    g_autofree char *from = twed_setting_to_string (&before->twed);
    g_autofree char *to = s ? twed_setting_to_string (s) : g_strdup (from);
    g_autofree char *why = g_strdup_printf ("manual setting: %s", meta ? meta : "automatic");

    twed_log_change (h->name, name, from, to, why);
  }
  return TRUE;
}
