/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The backend's inventory on the libvirt test driver when a definition
 * cannot be used: the domain still counts in its host's load, with the
 * vCPUs and pinning libvirt reports live, and the plan leaves it alone
 * and says why. */
#include "config.h"
#include "twed-domcaps.h"
#include "twed-backend.h"
#include "twed-domain-params.h"
#include "twed-libvirt.h"
#include "twed-log.h"
#include "twed-state.h"
#include "twed-signals.h"

#include <glib/gstdio.h>
#include <string.h>

static const char node_xml[] =
  "<node>\n"
  "  <domain type='test'>\n"
  "    <name>good</name>\n"
  "    <memory unit='MiB'>256</memory>\n"
  "    <vcpu placement='static'>2</vcpu>\n"
  "    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/></cputune>\n"
  "    <os><type arch='aarch64'>hvm</type></os>\n"
  "  </domain>\n"
  "  <domain type='test'>\n"
  "    <name>unparsable</name>\n"
  "    <metadata><twed:policy xmlns:twed='urn:twed:libvirt:1' manage='maybe'/></metadata>\n"
  "    <memory unit='MiB'>256</memory>\n"
  "    <vcpu placement='static'>4</vcpu>\n"
  "    <cputune><vcpupin vcpu='0' cpuset='2'/><vcpupin vcpu='1' cpuset='3'/>"
  "<vcpupin vcpu='2' cpuset='2'/><vcpupin vcpu='3' cpuset='3'/></cputune>\n"
  "    <os><type arch='aarch64'>hvm</type></os>\n"
  "  </domain>\n"
  "  <cpu><mhz>2600</mhz><model>aarch64</model><active>4</active><nodes>1</nodes>"
  "<sockets>1</sockets><cores>4</cores><threads>1</threads></cpu>\n"
  "  <memory>8388608</memory>\n"
  "</node>\n";

static const TwedDomain *
find_domain (const TwedHost *h, const char *name)
{
  for (guint i = 0; i < h->domains->len; i++)
    {
      const TwedDomain *d = g_ptr_array_index (h->domains, i);

      if (g_str_equal (d->name, name))
        return d;
    }
  return NULL;
}

static void
test_unparsable_counted (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-inventory-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "node.xml", NULL);
  g_autofree char *uri = g_strdup_printf ("test://%s", path);
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  TwedBackendOptions o = { .threads = 1 };
  g_autoptr(TwedBackend) b = NULL;
  g_autoptr(GPtrArray) hosts = NULL;
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedPlan) plan = NULL;
  TwedPlanOptions po = { "now", 0 };
  const TwedHost *h;
  const TwedDomain *bad, *good;

  g_assert_true (g_file_set_contents (path, node_xml, -1, NULL));
  g_ptr_array_add (specs, twed_host_spec_new ("host", uri));
  b = twed_backend_new (specs, &o);
  hosts = twed_backend_inventory (b, NULL);
  h = g_ptr_array_index (hosts, 0);
  g_assert_true (h->reachable);
  g_assert_cmpuint (h->domains->len, ==, 2);

  bad = find_domain (h, "unparsable");
  g_assert (bad != NULL);
  g_assert_nonnull (bad->load_error);
  g_assert_nonnull (strstr (bad->load_error, "manage must be yes, no or pinned"));
  g_assert_cmpuint (bad->nvcpus, ==, 4);
  /* Pinning as libvirt reports it live: vCPU 2 on pCPU 2 only. */
  g_assert_nonnull (g_ptr_array_index (bad->affinity, 2));
  g_assert_cmpuint (((GArray *) g_ptr_array_index (bad->affinity, 2))->len, ==, 1);
  g_assert_cmpuint (g_array_index ((GArray *) g_ptr_array_index (bad->affinity, 2), guint, 0), ==, 2);
  /* 6 vCPUs on pCPUs 2 and 3: 3:1, the unparsable domain included. */
  good = find_domain (h, "good");
  g_assert (good != NULL);
  g_assert_cmpfloat_with_epsilon (good->ratio, 3.0, 1e-9);
  g_assert_cmpfloat_with_epsilon (bad->ratio, 3.0, 1e-9);

  plan = twed_plan_build (hosts, set, &po);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      if (!g_str_equal (e->domain, "unparsable"))
        continue;
      g_assert_cmpint (e->action, ==, TWED_ACTION_SKIP);
      g_assert_nonnull (strstr (e->reason, "definition not read"));
      g_assert_nonnull (strstr (e->reason, "4 vCPU(s)"));
    }
  g_unlink (path);
  g_rmdir (dir);
}

/* 0 when the domain is missing: the comparisons then fail. */
static guint
vcpus_of (const TwedHost *h, const char *name)
{
  const TwedDomain *d = find_domain (h, name);

  return d ? d->nvcpus : 0;
}

static const char hotplug_xml[] =
  "<node>\n"
  "  <domain type='test'>\n"
  "    <name>grows</name>\n"
  "    <memory unit='MiB'>256</memory>\n"
  "    <vcpu placement='static' current='2'>8</vcpu>\n"
  "    <os><type arch='aarch64'>hvm</type></os>\n"
  "  </domain>\n"
  "  <cpu><mhz>2600</mhz><model>aarch64</model><active>4</active><nodes>1</nodes>"
  "<sockets>1</sockets><cores>4</cores><threads>1</threads></cpu>\n"
  "  <memory>8388608</memory>\n"
  "</node>\n";

/* vCPU hot-plug emits no event: the load follows it all the same (from
 * the bulk stats' vcpu.current where the driver reports it; the test
 * driver does not, so from the definition read again once it is older
 * than definition_max_age). */
static void
test_hotplug_followed (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-inventory-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "node.xml", NULL);
  g_autofree char *uri = g_strdup_printf ("test://%s", path);
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  TwedBackendOptions o = { .threads = 1, .definition_max_age = 1 };
  g_autoptr(TwedBackend) b = NULL;
  g_autoptr(GPtrArray) before = NULL;
  g_autoptr(GPtrArray) soon = NULL;
  g_autoptr(GPtrArray) after = NULL;
  g_autoptr(virDomain) dom = NULL;
  const TwedHost *h;

  g_assert_true (g_file_set_contents (path, hotplug_xml, -1, NULL));
  g_ptr_array_add (specs, twed_host_spec_new ("hp", uri));
  b = twed_backend_new (specs, &o);
  before = twed_backend_inventory (b, NULL);
  h = g_ptr_array_index (before, 0);
  g_assert_true (h->reachable);
  g_assert_cmpuint (vcpus_of (h, "grows"), ==, 2);
  g_assert_cmpuint (h->nvcpus_active, ==, 2);

  dom = virDomainLookupByName (twed_backend_get_connection (b, "hp"), "grows");
  g_assert_nonnull (dom);
  g_assert_cmpint (virDomainSetVcpusFlags (dom, 6, VIR_DOMAIN_AFFECT_LIVE), ==, 0);
  /* Within the age the cached definition stands (no read per cycle)... */
  soon = twed_backend_inventory (b, NULL);
  g_assert_cmpuint (vcpus_of (g_ptr_array_index (soon, 0), "grows"), ==, 2);
  /* ...after it, the load follows. */
  g_usleep (1100 * 1000);
  after = twed_backend_inventory (b, NULL);
  h = g_ptr_array_index (after, 0);
  g_assert_cmpuint (vcpus_of (h, "grows"), ==, 6);
  g_assert_cmpuint (h->nvcpus_active, ==, 6);
  g_assert_cmpfloat (h->ratio, ==, 1.5);
  g_unlink (path);
  g_rmdir (dir);
}

static gboolean
saved (TwedBackend *b, const char *vm)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);

  twed_backend_save_vms (b, records);
  for (guint i = 0; i < records->len; i++)
    if (g_str_equal (((TwedVmRecord *) g_ptr_array_index (records, i))->vm, vm))
      return TRUE;
  return FALSE;
}

static gint
compare_strings (gconstpointer a, gconstpointer b)
{
  return strcmp (*(const char *const *) a, *(const char *const *) b);
}

/* The records of no failure twed_backend_take_forgotten gives, as
 * "host/vm" sorted and joined by spaces; each of them clears. */
static char *
forgotten (TwedBackend *b)
{
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  g_autoptr(GPtrArray) keys = g_ptr_array_new_with_free_func (g_free);

  twed_backend_take_forgotten (b, records);
  for (guint i = 0; i < records->len; i++)
    {
      const TwedVmRecord *r = g_ptr_array_index (records, i);

      g_assert_cmpuint (r->failures, ==, 0);
      g_assert_cmpint (r->retry_at, ==, 0);
      g_assert_cmpint (r->changed_at, ==, 0);
      g_ptr_array_add (keys, g_strdup_printf ("%s/%s", r->host, r->vm));
    }
  g_ptr_array_sort (keys, compare_strings);
  g_ptr_array_add (keys, NULL);
  return g_strjoinv (" ", (char **) keys->pdata);
}

/* What the backend knows of VMs that left the host goes once it holds
 * nothing back: a VM gone whose failure backoff is over is forgotten,
 * one whose backoff still runs is kept (it may come back, migrating),
 * and a VM still there keeps its history.  Each failure forgotten, and
 * those of a host not configured, are given back as records that clear
 * them from the state; those of a host removed, at the reconfiguration. */
static void
test_vms_pruned (void)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-inventory-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "node.xml", NULL);
  g_autofree char *uri = g_strdup_printf ("test://%s", path);
  g_autoptr(GPtrArray) specs = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  g_autoptr(GPtrArray) records = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_vm_record_free);
  TwedBackendOptions o = { .threads = 1 };
  g_autoptr(TwedBackend) b = NULL;
  g_autoptr(GPtrArray) first = NULL, second = NULL;
  gint64 now = g_get_real_time ();
  const TwedDomain *d;
  const char *good;
  g_autofree char *text = NULL, *both = NULL;
  TwedVmRecord *r;

  g_assert_true (g_file_set_contents (path, node_xml, -1, NULL));
  g_ptr_array_add (specs, twed_host_spec_new ("hp", uri));
  b = twed_backend_new (specs, &o);
  first = twed_backend_inventory (b, NULL);
  if (!(d = find_domain (g_ptr_array_index (first, 0), "good")) || !(good = d->uuid))
    g_error ("no uuid for the domain 'good'");

  r = twed_vm_record_new ("hp", good);
  r->failures = 1;
  r->retry_at = now - G_USEC_PER_SEC;
  g_ptr_array_add (records, r);
  r = twed_vm_record_new ("hp", "gone");
  r->failures = 2;
  r->backoff = 60;
  r->retry_at = now - G_USEC_PER_SEC;
  g_ptr_array_add (records, r);
  r = twed_vm_record_new ("hp", "gone-but-held");
  r->failures = 1;
  r->backoff = 60;
  r->retry_at = now + 60 * G_USEC_PER_SEC;
  g_ptr_array_add (records, r);
  r = twed_vm_record_new ("elsewhere", "on-a-host-removed");
  r->failures = 1;
  r->backoff = 60;
  r->retry_at = now + 60 * G_USEC_PER_SEC;
  g_ptr_array_add (records, r);
  g_assert_cmpuint (twed_backend_restore_vms (b, records), ==, 3);
  g_assert_true (saved (b, "gone"));
  text = forgotten (b);
  g_assert_cmpstr (text, ==, "elsewhere/on-a-host-removed");
  g_clear_pointer (&text, g_free);

  second = twed_backend_inventory (b, NULL);
  g_assert_true (saved (b, good));
  g_assert_false (saved (b, "gone"));
  g_assert_true (saved (b, "gone-but-held"));
  text = forgotten (b);
  g_assert_cmpstr (text, ==, "hp/gone");
  g_clear_pointer (&text, g_free);

  g_ptr_array_set_size (specs, 0);
  twed_backend_reconfigure (b, specs, &o);
  text = forgotten (b);
  both = g_strdup_printf ("hp/%s hp/gone-but-held", good);
  g_assert_cmpstr (text, ==, both);
  g_clear_pointer (&text, g_free);
  g_unlink (path);
  g_rmdir (dir);
}

/* The echo of twedd's own change: the same values soon after; the same
 * values later are someone else's change. */
static void
test_own_echo (void)
{
  const gint64 s = G_USEC_PER_SEC, at = 1000 * s;
  const TwedSetting fixed3 = { TWED_MODE_FIXED, 3, 3, 3 }, fixed5 = { TWED_MODE_FIXED, 5, 5, 5 };
  static const struct { gint64 after_s; gboolean same; gboolean want; } cases[] = {
    { 0, TRUE, TRUE },
    { 29, TRUE, TRUE },
    { 30, TRUE, TRUE },
    { 31, TRUE, FALSE },
    { 3600, TRUE, FALSE },
    { 1, FALSE, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    g_assert_cmpint (twed_own_echo (&fixed3, at, cases[i].same ? &fixed3 : &fixed5, at + cases[i].after_s * s),
                     ==, cases[i].want);
}

/* When a cached definition is read again, both branches: QEMU's bulk
 * stats carry vcpu.current (a hot-plug shows as a count that differs,
 * whatever the age), the test driver's do not (the age decides). */
static void
test_definition_stale (void)
{
  const gint64 s = G_USEC_PER_SEC, now = 1000 * s;
  static const struct {
    const char *what;
    gboolean active, has_current;
    guint current, cached;
    gboolean unread;
    gint64 age_s;
    guint max_age;
    gboolean want;
  } cases[] = {
    { "QEMU: hot-plugged 2 -> 6, read a second ago", TRUE, TRUE, 6, 2, FALSE, 1, 600, TRUE },
    { "QEMU: unplugged 4 -> 2", TRUE, TRUE, 2, 4, FALSE, 1, 600, TRUE },
    { "QEMU: same count, old definition", TRUE, TRUE, 4, 4, FALSE, 5000, 600, FALSE },
    { "test driver: younger than max_age", TRUE, FALSE, 0, 4, FALSE, 599, 600, FALSE },
    { "test driver: older than max_age", TRUE, FALSE, 0, 4, FALSE, 601, 600, TRUE },
    { "not running: never", FALSE, TRUE, 6, 2, FALSE, 5000, 600, FALSE },
    { "fallback kept until an event", TRUE, TRUE, 6, 2, TRUE, 5000, 600, FALSE },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_test_message ("%s", cases[i].what);
      g_assert_cmpint (twed_definition_stale (cases[i].active, cases[i].has_current, cases[i].current,
                                              cases[i].cached, cases[i].unread, now - cases[i].age_s * s, now,
                                              cases[i].max_age), ==, cases[i].want);
    }
}

static void
test_domcaps_support (void)
{
  static const struct { const char *xml; TwedSupport want; const char *why; } cases[] = {
    { "<domainCapabilities><features><twed supported='yes'><enum name='mode'><value>off</value>"
      "</enum></twed></features></domainCapabilities>", TWED_SUPPORT_YES, NULL },
    { "<domainCapabilities><features><gic supported='yes'/><twed supported='no'/></features>"
      "</domainCapabilities>", TWED_SUPPORT_NO, NULL },
    /* x86, or a libvirt without the series: no element at all */
    { "<domainCapabilities><arch>x86_64</arch><features><sev supported='no'/></features>"
      "</domainCapabilities>", TWED_SUPPORT_UNKNOWN, "do not mention TWED" },
    /* not where the contract puts it */
    { "<domainCapabilities><devices><twed supported='yes'/></devices></domainCapabilities>",
      TWED_SUPPORT_UNKNOWN, "do not mention TWED" },
    { "<domainCapabilities><features><twed supported='yes'>", TWED_SUPPORT_UNKNOWN, "do not parse" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *why = NULL;

      g_assert_cmpint (twed_domcaps_twed_support (cases[i].xml, &why), ==, cases[i].want);
      if (cases[i].why)
        g_assert_nonnull (strstr (why, cases[i].why));
      else
        g_assert_null (why);
    }
}

/* The auto bands' signals out of one bulk stats record: the kernel's
 * stats as query-stats names them, libvirt's run-queue wait and time;
 * what a vCPU lacks is marked missing, not read as 0. */
static void
test_signals_from_record (void)
{
  virConnectPtr conn = virConnectOpen ("test:///default");
  virDomainStatsRecord rec = { 0 };
  int maxp = 0;
  g_autoptr(TwedDomainSignals) sig = NULL;
  const TwedVcpuSignals *v0, *v1;

  g_assert_nonnull (conn);
  rec.dom = virDomainLookupByName (conn, "test");
  g_assert_nonnull (rec.dom);
  /* No VCPU group: nothing. */
  g_assert_null (twed_signals_from_record (&rec, 1));
  g_assert_cmpint (virTypedParamsAddUInt (&rec.params, &rec.nparams, &maxp, "vcpu.current", 2), ==, 0);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.0.wfe_exit_stat.sum", 1840);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.0.twed_delay.cur", 3);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.0.delay", 2000000);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.0.time", 9000000000ULL);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.1.delay", 7);
  virTypedParamsAddULLong (&rec.params, &rec.nparams, &maxp, "vcpu.1.time", 8);
  sig = twed_signals_from_record (&rec, 42);
  g_assert_nonnull (sig);
  g_assert_cmpint (sig->at, ==, 42);
  g_assert_cmpint (sig->id, ==, (int) virDomainGetID (rec.dom));
  g_assert_cmpuint (sig->vcpus->len, ==, 2);
  v0 = &g_array_index (sig->vcpus, TwedVcpuSignals, 0);
  v1 = &g_array_index (sig->vcpus, TwedVcpuSignals, 1);
  g_assert_cmpuint (v0->have, ==, TWED_SIGNALS_ALL);
  g_assert_cmpuint (v0->wfe_exits, ==, 1840);
  g_assert_cmpuint (v0->twed_delay, ==, 3);
  g_assert_cmpuint (v0->wait_ns, ==, 2000000);
  g_assert_cmpuint (v0->time_ns, ==, 9000000000ULL);
  g_assert_cmpuint (v1->have, ==, TWED_SIGNAL_WAIT | TWED_SIGNAL_TIME);
  g_assert_cmpuint (v1->wait_ns, ==, 7);
  virTypedParamsFree (rec.params, rec.nparams);
  virDomainFree (rec.dom);
  virConnectClose (conn);
}

/* Only KVM refusing the values (EINVAL, what QEMU's set-twed reports as
 * "… failed: Invalid argument", interfaces.md section 2) is the host
 * refusing a step; a job held or a monitor gone is another failure. */
static void
test_refused (void)
{
  static const struct {
    GQuark (*domain) (void);
    const char *message;
    gboolean refused;
  } cases[] = {
    { twed_libvirt_error_quark, "virDomainSetTwedParameters: internal error: unable to execute QEMU command "
      "'set-twed': Setting TWED mode 'fixed', delay 9, min 9, max 9 failed: Invalid argument (libvirt error 1)", TRUE },
    { twed_libvirt_error_quark, "virDomainSetTwedParameters: Timed out during operation: cannot acquire state "
      "change lock (held by monitor=remoteDispatchDomainGetJobInfo) (libvirt error 68)", FALSE },
    { twed_libvirt_error_quark, "virDomainSetTwedParameters: operation failed: domain is not running "
      "(libvirt error 55)", FALSE },
    { twed_libvirt_error_quark, "virDomainSetTwedParameters: Unable to write to '/sys/fs/cgroup/machine.slice/"
      "cpu.max': failed: Invalid argument (libvirt error 38)", FALSE },
    { twed_error_quark, "Setting TWED mode 'fixed', delay 9, min 9, max 9 failed: Invalid argument", FALSE },
  };

  g_assert_false (twed_domain_params_refused (NULL));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GError) e = g_error_new_literal (cases[i].domain (), 1, cases[i].message);

      g_assert_cmpint (twed_domain_params_refused (e), ==, cases[i].refused);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  twed_log_init (g_getenv ("TWED_TEST_VERBOSE") ? TWED_LOG_DEBUG : TWED_LOG_QUIET);
  twed_libvirt_init (FALSE);
  g_test_add_func ("/inventory/unparsable-counted", test_unparsable_counted);
  g_test_add_func ("/inventory/domcaps-support", test_domcaps_support);
  g_test_add_func ("/inventory/hotplug-followed", test_hotplug_followed);
  g_test_add_func ("/inventory/definition-stale", test_definition_stale);
  g_test_add_func ("/inventory/vms-pruned", test_vms_pruned);
  g_test_add_func ("/inventory/own-echo", test_own_echo);
  g_test_add_func ("/inventory/signals-from-record", test_signals_from_record);
  g_test_add_func ("/inventory/refused", test_refused);
  return g_test_run ();
}
