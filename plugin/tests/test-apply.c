/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plan → apply → status through the twed libvirt API on the patched
 * test driver, several hosts at once. Skipped (77) without the API. */
#include "config.h"
#include "twed-backend.h"
#include "twed-libvirt.h"
#include "twed-log.h"
#include "twed-policydir.h"
#include "twed-state.h"

#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>

static const char *demo_dir;

static TwedBackend *
make_backend (void)
{
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  TwedBackendOptions o = { .threads = 4 };
  const char *hosts[] = { "host-a", "host-b", "host-c" };

  for (guint i = 0; i < G_N_ELEMENTS (hosts); i++)
    {
      g_autofree char *uri = g_strdup_printf ("test://%s/%s.xml", demo_dir, hosts[i]);

      g_ptr_array_add (specs, twed_host_spec_new (hosts[i], uri));
    }
  g_ptr_array_add (specs, twed_host_spec_new ("down", "test:///nonexistent/down.xml"));
  return twed_backend_new (specs, &o);
}

static TwedPlan *
plan (TwedBackend *b, TwedPolicySet *set)
{
  g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);
  TwedPlanOptions po = { "now", 0 };

  return twed_plan_build (hosts, set, &po);
}

static TwedPlanEntry *
find (TwedPlan *p, const char *dom)
{
  for (guint i = 0; i < p->entries->len; i++)
    {
      TwedPlanEntry *en = g_ptr_array_index (p->entries, i);

      if (g_str_equal (en->domain, dom))
        return en;
    }
  g_assert_not_reached ();
  return NULL;
}

/* The inventory's @dom, on whichever host. */
static const TwedDomain *
find_dom (GPtrArray *hosts, const char *dom)
{
  for (guint h = 0; h < hosts->len; h++)
    {
      TwedHost *host = g_ptr_array_index (hosts, h);

      for (guint i = 0; i < host->domains->len; i++)
        {
          const TwedDomain *d = g_ptr_array_index (host->domains, i);

          if (g_str_equal (d->name, dom))
            return d;
        }
    }
  g_assert_not_reached ();
  return NULL;
}

static void
test_round_trip (void)
{
  g_autofree char *pdir = g_build_filename (demo_dir, "policies.d", NULL);
  g_autoptr(TwedPolicySet) set = twed_policy_dir_load (pdir, FALSE, NULL);
  g_autoptr(TwedBackend) b = make_backend ();
  g_autoptr(TwedPlan) p1 = plan (b, set);
  g_autoptr(TwedPlan) p2 = NULL;
  g_autoptr(virDomain) web2 = NULL;
  guint changes = twed_plan_count (p1, TWED_ACTION_CHANGE);
  guint failed;

  g_assert_cmpuint (twed_plan_unreachable (p1), ==, 1);
  g_assert_cmpuint (changes, >=, 4);
  g_assert_cmpuint (find (p1, "web-2")->action, ==, TWED_ACTION_CHANGE);

  /* web-2 stops between plan and apply: its live change must fail,
   * leave it as it was, and not stop the others. */
  web2 = virDomainLookupByName (twed_backend_get_connection (b, "host-b"), "web-2");
  g_assert_nonnull (web2);
  g_assert_cmpint (virDomainDestroy (web2), ==, 0);

  failed = twed_backend_apply (b, p1, FALSE);
  g_assert_cmpuint (failed, ==, 1);
  g_assert_cmpuint (find (p1, "web-2")->result, ==, TWED_RESULT_FAILED);
  /* libvirt's error code is kept in the report. */
  g_assert_nonnull (strstr (find (p1, "web-2")->error, "(libvirt error "));
  g_assert_cmpuint (twed_plan_count_result (p1, TWED_RESULT_APPLIED), ==, changes - 1);

  p2 = plan (b, set);
  for (guint i = 0; i < p1->entries->len; i++)
    {
      TwedPlanEntry *before = g_ptr_array_index (p1->entries, i);
      TwedPlanEntry *after = find (p2, before->domain);

      if (before->result == TWED_RESULT_APPLIED)
        g_assert_true (twed_setting_equal (&after->current, &before->target));
      else
        g_assert_true (twed_setting_equal (&after->current, &before->current));
    }
  g_assert_cmpuint (find (p2, "web-1")->action, ==, TWED_ACTION_KEEP);
  /* The failed VM backs off with its error instead of failing again
   * every cycle (web-2 is shut off now: its config change would work). */
  g_assert_cmpuint (find (p2, "web-2")->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (find (p2, "web-2")->reason, "its last change failed (1 in a row, next try in "));
  g_assert_nonnull (strstr (find (p2, "web-2")->reason, "(libvirt error "));
  g_assert_cmpuint (find (p2, "legacy-1")->current.mode, ==, TWED_MODE_OFF);
  /* That hold is the failure back-off alone, which an auto step down
   * may pass; a hold from min_change_interval is not. */
  {
    g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);

    g_assert_nonnull (find_dom (hosts, "web-2")->hold);
    g_assert_true (find_dom (hosts, "web-2")->hold_after_failure);
    g_assert_null (find_dom (hosts, "web-1")->hold);
  }
  twed_backend_set_min_change_interval (b, 300);
  {
    g_autoptr(GPtrArray) hosts = twed_backend_inventory (b, NULL);

    g_assert_nonnull (strstr (find_dom (hosts, "web-1")->hold, "min_change_interval 300 s"));
    g_assert_false (find_dom (hosts, "web-1")->hold_after_failure);
    g_assert_true (find_dom (hosts, "web-2")->hold_after_failure);
  }
  /* A daemon started again from the state keeps both: the back-off,
   * and that it followed a failed raise. */
  {
    g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
    g_autoptr(TwedBackend) restarted = make_backend ();
    g_autoptr(GPtrArray) hosts = NULL;

    twed_backend_save_vms (b, records);
    twed_backend_restore_vms (restarted, records);
    hosts = twed_backend_inventory (restarted, NULL);
    g_assert_nonnull (strstr (find_dom (hosts, "web-2")->hold, "its last change failed (1 in a row"));
    g_assert_true (find_dom (hosts, "web-2")->hold_after_failure);
  }
}

static TwedPolicySet *
policy_all_fixed (guint delay)
{
  g_autofree char *json = g_strdup_printf ("{\"version\":1,\"name\":\"all-fixed\",\"priority\":100,"
                                           "\"beyond\":{\"mode\":\"fixed\",\"delay\":%u}}", delay);
  TwedPolicySet *set = twed_policy_set_new ();

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (json, strlen (json), "all-fixed.json", NULL), NULL));
  return set;
}

static TwedPolicySet *
policy_all_auto (guint min, guint max)
{
  g_autofree char *json = g_strdup_printf ("{\"version\":1,\"name\":\"all-auto\",\"priority\":100,"
                                           "\"beyond\":{\"mode\":\"auto\",\"min\":%u,\"max\":%u}}", min, max);
  TwedPolicySet *set = twed_policy_set_new ();

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (json, strlen (json), "all-auto.json", NULL), NULL));
  return set;
}

/* Plan with @set, stop @dom between plan and apply so that its live
 * change fails, start it again: the plan, applied. */
static TwedPlan *
plan_failing (TwedBackend *b, TwedPolicySet *set, virDomainPtr dom, const char *name)
{
  TwedPlan *p = plan (b, set);

  g_test_message ("%s: %s", twed_action_to_string (find (p, name)->action), find (p, name)->reason);
  g_assert_cmpuint (find (p, name)->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpint (virDomainDestroy (dom), ==, 0);
  twed_backend_apply (b, p, FALSE);
  g_assert_cmpuint (find (p, name)->result, ==, TWED_RESULT_FAILED);
  g_assert_cmpint (virDomainCreate (dom), ==, 0);
  return p;
}

/* Plan with @set into *@p: its entry of @name, logged. */
static TwedPlanEntry *
plan_vm (TwedBackend *b, TwedPolicySet *set, const char *name, TwedPlan **p)
{
  TwedPlanEntry *e;

  *p = plan (b, set);
  e = find (*p, name);
  g_test_message ("%s: %s", twed_action_to_string (e->action), e->reason);
  return e;
}

/* A backend whose web-2 is at fixed:4 after a failed raise to fixed:5
 * (stopped between plan and apply, started again), and web-2. */
static TwedBackend *
backend_after_failed_raise (virDomainPtr *web2)
{
  g_autoptr(TwedPolicySet) fixed4 = policy_all_fixed (4);
  g_autoptr(TwedPolicySet) fixed5 = policy_all_fixed (5);
  TwedBackend *b = make_backend ();
  g_autoptr(TwedPlan) p1 = plan (b, fixed4);
  g_autoptr(TwedPlan) p2 = NULL;
  g_autoptr(GPtrArray) hosts = NULL;

  *web2 = virDomainLookupByName (twed_backend_get_connection (b, "host-b"), "web-2");
  g_assert_nonnull (*web2);
  g_assert_cmpuint (twed_backend_apply (b, p1, FALSE), ==, 0);
  p2 = plan_failing (b, fixed5, *web2, "web-2");
  hosts = twed_backend_inventory (b, NULL);
  g_assert_true (find_dom (hosts, "web-2")->hold_after_failure);
  return b;
}

/* The back-off after a failed raise lets an auto change to a lower
 * delay through (the host's ceiling refuses raises, never lowerings);
 * when that lowering fails too (a domain job, a hung monitor), the
 * next one waits out the back-off instead of failing every pass. */
static void
test_failure_backoff_lowering (void)
{
  g_autoptr(TwedPolicySet) lo = policy_all_auto (1, 3);
  g_autoptr(virDomain) web2 = NULL;
  g_autoptr(TwedBackend) b = backend_after_failed_raise (&web2);
  g_autoptr(TwedPlan) p3 = NULL;
  g_autoptr(TwedPlan) p4 = NULL;
  TwedPlanEntry *e;

  /* fixed:4 is above auto 1..3: off passes the raise's back-off, and
   * fails as well. */
  p3 = plan_failing (b, lo, web2, "web-2");
  g_assert_cmpuint (find (p3, "web-2")->target.mode, ==, TWED_MODE_OFF);
  e = plan_vm (b, lo, "web-2", &p4);
  g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
  g_assert_cmpuint (e->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (e->reason, "its last change failed (2 in a row, next try in "));
}

/* A lowering made during the back-off of a failed raise says nothing of
 * the raise: the back-off runs on, and the raise is not asked again (of
 * a host whose ceiling refuses it) before it ends. */
static void
test_failure_backoff_after_lowering (void)
{
  g_autoptr(TwedPolicySet) fixed5 = policy_all_fixed (5);
  g_autoptr(TwedPolicySet) lo = policy_all_auto (1, 3);
  g_autoptr(virDomain) web2 = NULL;
  g_autoptr(TwedBackend) b = backend_after_failed_raise (&web2);
  g_autoptr(TwedPlan) p3 = NULL;
  g_autoptr(TwedPlan) p4 = NULL;
  TwedPlanEntry *e;

  /* fixed:4 is above auto 1..3: off passes the raise's back-off, and is made. */
  e = plan_vm (b, lo, "web-2", &p3);
  g_assert_cmpuint (e->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
  twed_backend_apply (b, p3, FALSE);
  g_assert_cmpuint (e->result, ==, TWED_RESULT_APPLIED);
  e = plan_vm (b, fixed5, "web-2", &p4);
  g_assert_cmpuint (e->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (e->reason, "its last change failed (1 in a row, next try in "));
}

/* A VM changed less than min_change_interval ago is not changed again,
 * whatever the policy now asks; the others are. */
static void
test_min_change_interval (void)
{
  g_autofree char *pdir = g_build_filename (demo_dir, "policies.d", NULL);
  g_autoptr(TwedPolicySet) set = twed_policy_dir_load (pdir, FALSE, NULL);
  g_autoptr(TwedPolicySet) fixed1 = policy_all_fixed (1);
  g_autoptr(TwedBackend) b = make_backend ();
  g_autoptr(TwedPlan) p1 = plan (b, set);
  g_autoptr(TwedPlan) p2 = NULL;
  g_autoptr(TwedPlan) p3 = NULL;
  guint held = 0, changed = 0;

  twed_backend_set_min_change_interval (b, 300);
  g_assert_cmpuint (twed_backend_apply (b, p1, FALSE), ==, 0);
  p2 = plan (b, fixed1);
  for (guint i = 0; i < p2->entries->len; i++)
    {
      TwedPlanEntry *after = g_ptr_array_index (p2->entries, i);
      TwedPlanEntry *before = find (p1, after->domain);

      if (before->result == TWED_RESULT_APPLIED && after->action != TWED_ACTION_KEEP)
        {
          g_assert_cmpuint (after->action, ==, TWED_ACTION_DEFER);
          g_assert_nonnull (strstr (after->reason, "min_change_interval 300 s"));
          held++;
        }
      else if (before->result != TWED_RESULT_APPLIED && after->action == TWED_ACTION_CHANGE)
        changed++;
    }
  g_assert_cmpuint (held, >=, 3);
  g_assert_cmpuint (changed, >=, 1);
  /* A reload that lowers the interval releases them. */
  twed_backend_set_min_change_interval (b, 0);
  p3 = plan (b, fixed1);
  g_assert_cmpuint (twed_plan_count (p3, TWED_ACTION_DEFER), ==, 0);
}

#define MOVER_XML "<domain type='test'><name>mover</name><uuid>5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a01</uuid>" \
  "<memory>1048576</memory><vcpu>4</vcpu><os><type>hvm</type></os></domain>"

/* A test:/// host of 2 pCPUs with @domains, in @dir/@name.xml: its URI. */
static char *
node_file (const char *dir, const char *name, const char *domains)
{
  g_autofree char *path = g_strdup_printf ("%s/%s.xml", dir, name);
  g_autofree char *xml = g_strdup_printf ("<node>%s<cpu><mhz>2600</mhz><active>2</active><nodes>1</nodes>"
                                          "<sockets>1</sockets><cores>2</cores><threads>1</threads></cpu>"
                                          "<memory>8388608</memory></node>", domains);

  g_assert_true (g_file_set_contents (path, xml, -1, NULL));
  return g_strdup_printf ("test://%s", path);
}

static TwedBackend *
backend_of (const char *name, const char *uri, const char *name2, const char *uri2)
{
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  TwedBackendOptions o = { .threads = 2, .min_change_interval = 300 };

  g_ptr_array_add (specs, twed_host_spec_new (name, uri));
  if (name2)
    g_ptr_array_add (specs, twed_host_spec_new (name2, uri2));
  return twed_backend_new (specs, &o);
}

/* min_change_interval follows a VM that migrates: changed on one host,
 * it is not changed again at once on the next, even by a daemon started
 * again that knows only the new host. */
static void
test_min_interval_follows_migration (void)
{
  g_autofree char *pdir = g_build_filename (demo_dir, "policies.d", NULL);
  g_autoptr(TwedPolicySet) set = twed_policy_dir_load (pdir, FALSE, NULL);
  g_autofree char *dir = g_dir_make_tmp ("twed-migrate-XXXXXX", NULL);
  g_autofree char *src_uri = node_file (dir, "src", MOVER_XML);
  g_autofree char *dst_uri = node_file (dir, "dst", "");
  g_autofree char *after_uri = node_file (dir, "dst-after", MOVER_XML);
  g_autoptr(TwedBackend) b = backend_of ("src", src_uri, "dst", dst_uri);
  g_autoptr(TwedBackend) restarted = NULL;
  g_autoptr(TwedPlan) p1 = plan (b, set);
  g_autoptr(TwedPlan) p2 = NULL;
  g_autoptr(TwedPlan) p3 = NULL;
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(virDomain) gone = NULL;
  g_autoptr(virDomain) arrived = NULL;
  TwedPlanEntry *en;

  /* Changed on src... */
  en = find (p1, "mover");
  g_assert_cmpstr (en->host, ==, "src");
  g_assert_cmpuint (en->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpuint (twed_backend_apply (b, p1, FALSE), ==, 0);
  g_assert_cmpuint (en->result, ==, TWED_RESULT_APPLIED);

  /* ...migrates to dst, where it runs with what its definition says
   * (off), which the policy would change at once. */
  gone = virDomainLookupByName (twed_backend_get_connection (b, "src"), "mover");
  g_assert_nonnull (gone);
  g_assert_cmpint (virDomainDestroy (gone), ==, 0);
  virDomainUndefine (gone);
  arrived = virDomainDefineXML (twed_backend_get_connection (b, "dst"), MOVER_XML);
  g_assert_nonnull (arrived);
  g_assert_cmpint (virDomainCreate (arrived), ==, 0);
  p2 = plan (b, set);
  en = find (p2, "mover");
  g_assert_cmpstr (en->host, ==, "dst");
  g_assert_cmpuint (en->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (en->reason, "on src, min_change_interval 300 s"));

  /* A daemon started again over dst alone, from the state file. */
  twed_backend_save_vms (b, records);
  restarted = backend_of ("dst", after_uri, NULL, NULL);
  g_assert_cmpuint (twed_backend_restore_vms (restarted, records), ==, 1);
  p3 = plan (restarted, set);
  en = find (p3, "mover");
  g_assert_cmpuint (en->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (en->reason, "min_change_interval 300 s"));

  for (const char *const *n = (const char *const[]) { "src", "dst", "dst-after", NULL }; *n; n++)
    {
      g_autofree char *path = g_strdup_printf ("%s/%s.xml", dir, *n);

      g_remove (path);
    }
  g_rmdir (dir);
}

/* Two hosts list one VM (mid-migration, or an inactive copy left on the
 * source) and their passes, read together, both plan to change it: one
 * change is granted, whatever the budget. */
static void
test_min_interval_same_uuid_one_batch (void)
{
  g_autoptr(TwedPolicySet) set = policy_all_fixed (3);
  g_autofree char *dir = g_dir_make_tmp ("twed-twice-XXXXXX", NULL);
  g_autofree char *a_uri = node_file (dir, "a", MOVER_XML);
  g_autofree char *b_uri = node_file (dir, "b", MOVER_XML);
  g_autoptr(TwedBackend) b = backend_of ("a", a_uri, "b", b_uri);
  g_autoptr(TwedPlan) pa = NULL;
  g_autoptr(TwedPlan) pb = NULL;
  g_autoptr(TwedPlan) again = NULL;
  const char *const only_a[] = { "a", NULL }, *const only_b[] = { "b", NULL };
  g_autoptr(GPtrArray) ha = NULL;
  g_autoptr(GPtrArray) hb = NULL;
  TwedPlan *batch[2];
  TwedPlanOptions po = { "now", 0 };
  guint changes = 0, applied = 0;

  twed_backend_set_min_change_interval (b, 600);
  /* Both passes read before either is granted: both see the VM free. */
  ha = twed_backend_inventory (b, only_a);
  hb = twed_backend_inventory (b, only_b);
  batch[0] = pa = twed_plan_build (ha, set, &po);
  batch[1] = pb = twed_plan_build (hb, set, &po);
  g_assert_cmpuint (find (pa, "mover")->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpuint (find (pb, "mover")->action, ==, TWED_ACTION_CHANGE);

  twed_backend_hold_granted (b, batch, 2);
  for (guint i = 0; i < 2; i++)
    {
      TwedPlanEntry *en = find (batch[i], "mover");

      if (en->action == TWED_ACTION_CHANGE)
        {
          g_assert_true (twed_backend_grant (b, en));
          changes++;
        }
      else
        {
          g_assert_cmpuint (en->action, ==, TWED_ACTION_DEFER);
          g_assert_nonnull (strstr (en->reason, "a change of it is planned on a too"));
        }
    }
  g_assert_cmpuint (changes, ==, 1);
  /* A grant is not given twice. */
  g_assert_false (twed_backend_grant (b, find (pa, "mover")));

  /* A pass read meanwhile, granted while the change is in flight. */
  again = twed_plan_build (hb, set, &po);
  twed_backend_hold_granted (b, &again, 1);
  g_assert_cmpuint (find (again, "mover")->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (find (again, "mover")->reason, "already granted on a"));

  for (guint i = 0; i < 2; i++)
    {
      g_assert_cmpuint (twed_backend_apply (b, batch[i], FALSE), ==, 0);
      if (find (batch[i], "mover")->result == TWED_RESULT_APPLIED)
        applied++;
    }
  g_assert_cmpuint (applied, ==, 1);

  /* Made: min_change_interval holds it on both hosts now. */
  g_clear_pointer (&again, twed_plan_free);
  again = plan (b, set);
  for (guint i = 0; i < again->entries->len; i++)
    {
      TwedPlanEntry *en = g_ptr_array_index (again->entries, i);

      g_assert_cmpuint (en->action, !=, TWED_ACTION_CHANGE);
    }

  for (const char *const *n = (const char *const[]) { "a", "b", NULL }; *n; n++)
    {
      g_autofree char *path = g_strdup_printf ("%s/%s.xml", dir, *n);

      g_remove (path);
    }
  g_rmdir (dir);
}

/* A grant given back (its change failed, or was never tried) leaves the
 * VM as it was before it: last changed when it was, and held for that,
 * not for a change that was never made. */
static void
test_ungrant_restores_before (void)
{
  g_autoptr(TwedPolicySet) set = policy_all_fixed (3);
  g_autofree char *dir = g_dir_make_tmp ("twed-ungrant-XXXXXX", NULL);
  g_autofree char *uri = node_file (dir, "a", MOVER_XML);
  g_autoptr(TwedBackend) b = backend_of ("a", uri, NULL, NULL);
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GPtrArray) saved = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(TwedPlan) p1 = NULL;
  g_autoptr(TwedPlan) p2 = NULL;
  g_autoptr(TwedPlan) p3 = NULL;
  gint64 then = g_get_real_time () - 300 * G_USEC_PER_SEC;
  const TwedVmRecord *r;
  TwedVmRecord *old;
  TwedPlanEntry *en;

  old = twed_vm_record_new ("elsewhere", "5b0c1b6e-62a4-4a5c-9a39-3f0e9c1d2a01");
  old->changed_at = then;
  g_ptr_array_add (records, old);
  g_assert_cmpuint (twed_backend_restore_vms (b, records), ==, 1);

  /* Changed 300 s ago on another host; min_change_interval 200 s (a
   * reload lowered it): free, granted. */
  twed_backend_set_min_change_interval (b, 200);
  p1 = plan (b, set);
  en = find (p1, "mover");
  g_assert_cmpuint (en->action, ==, TWED_ACTION_CHANGE);
  g_assert_true (twed_backend_grant (b, en));
  p2 = plan (b, set);
  g_assert_cmpuint (find (p2, "mover")->action, ==, TWED_ACTION_DEFER);
  g_assert_nonnull (strstr (find (p2, "mover")->reason, "changed 0 s ago, min_change_interval 200 s"));

  /* Given back: the change of 300 s ago is the last again, wherever
   * it was, and with min_change_interval back at 600 s it holds. */
  twed_backend_ungrant (b, en);
  twed_backend_set_min_change_interval (b, 600);
  p3 = plan (b, set);
  en = find (p3, "mover");
  g_assert_cmpuint (en->action, ==, TWED_ACTION_DEFER);
  g_test_message ("%s", en->reason);
  g_assert_true (strstr (en->reason, "changed 300 s ago on elsewhere") ||
                 strstr (en->reason, "changed 301 s ago on elsewhere"));
  twed_backend_save_vms (b, saved);
  g_assert_cmpuint (saved->len, ==, 1);
  r = g_ptr_array_index (saved, 0);
  g_assert_cmpstr (r->host, ==, "elsewhere");
  /* Through the monotonic clock and back. */
  g_assert_cmpint (ABS (r->changed_at - then), <, G_USEC_PER_SEC);

  {
    g_autofree char *path = g_strdup_printf ("%s/a.xml", dir);

    g_remove (path);
  }
  g_rmdir (dir);
}

/* When VMs were changed is forgotten once min_change_interval no longer
 * holds them, with no state file to prune it on a write. */
static void
test_changes_pruned_without_state (void)
{
  g_autoptr(TwedPolicySet) set = policy_all_fixed (2);
  g_autoptr(TwedBackend) b = make_backend ();
  g_autoptr(TwedPlan) p = plan (b, set);
  guint n;

  twed_backend_set_min_change_interval (b, 1);
  g_assert_cmpuint (twed_backend_apply (b, p, FALSE), ==, 0);
  n = twed_backend_count_changes (b);
  g_assert_cmpuint (n, >=, 3);
  g_assert_cmpuint (n, ==, twed_plan_count (p, TWED_ACTION_CHANGE));
  /* Still holding them: kept. */
  twed_backend_prune_changes (b);
  g_assert_cmpuint (twed_backend_count_changes (b), ==, n);
  g_usleep (1100 * G_TIME_SPAN_MILLISECOND);
  twed_backend_prune_changes (b);
  g_assert_cmpuint (twed_backend_count_changes (b), ==, 0);
}

static void
test_manual_pin (void)
{
  g_autofree char *pdir = g_build_filename (demo_dir, "policies.d", NULL);
  g_autoptr(TwedPolicySet) set = twed_policy_dir_load (pdir, FALSE, NULL);
  g_autoptr(TwedBackend) b = make_backend ();
  g_autoptr(GError) error = NULL;
  g_autoptr(TwedPlan) p = NULL;
  TwedSetting s = { TWED_MODE_FIXED, 1, 1, 1 };

  g_assert_true (twed_backend_set_manual (b, "web-1", &s, FALSE, &error));
  g_assert_no_error (error);
  p = plan (b, set);
  g_assert_cmpuint (find (p, "web-1")->action, ==, TWED_ACTION_SKIP);
  g_assert_cmpuint (find (p, "web-1")->manage, ==, TWED_MANAGE_PINNED);
  g_assert_true (twed_setting_equal (&find (p, "web-1")->current, &s));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (!HAVE_VIR_DOMAIN_TWED_API)
    {
      printf ("1..0 # SKIP built against a libvirt without the twed API (virDomainSetTwedParameters)\n");
      return 77;
    }
  demo_dir = argv[1];
  twed_log_init (g_getenv ("TWED_TEST_VERBOSE") ? TWED_LOG_DEBUG : TWED_LOG_QUIET);
  twed_libvirt_init (FALSE);
  g_test_add_func ("/apply/round-trip", test_round_trip);
  g_test_add_func ("/apply/manual-pin", test_manual_pin);
  g_test_add_func ("/apply/min-change-interval", test_min_change_interval);
  g_test_add_func ("/apply/failure-backoff-lowering", test_failure_backoff_lowering);
  g_test_add_func ("/apply/failure-backoff-after-lowering", test_failure_backoff_after_lowering);
  g_test_add_func ("/apply/min-interval-follows-migration", test_min_interval_follows_migration);
  g_test_add_func ("/apply/min-interval-same-uuid-one-batch", test_min_interval_same_uuid_one_batch);
  g_test_add_func ("/apply/changes-pruned-without-state", test_changes_pruned_without_state);
  g_test_add_func ("/apply/ungrant-restores-before", test_ungrant_restores_before);
  return g_test_run ();
}
