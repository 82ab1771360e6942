/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "test-util.h"
#include "twed-domxml.h"

static const char *xml_full =
  "<domain type='kvm' id='3'>\n"
  "  <name>vm1</name>\n"
  "  <uuid>0f9d8b0e-1b7a-4a1e-9e0a-2d1b5b6c7d8e</uuid>\n"
  "  <metadata>\n"
  "    <nova:instance xmlns:nova='http://openstack.org/xmlns/libvirt/nova/1.1'>\n"
  "      <nova:flavor name='m1.large'><nova:vcpus>4</nova:vcpus></nova:flavor>\n"
  "    </nova:instance>\n"
  "    <twed:policy xmlns:twed='urn:twed:libvirt:1' manage='pinned' mode='dynamic' delay='2' min='1' max='4'/>\n"
  "  </metadata>\n"
  "  <vcpu placement='static' current='3' cpuset='0-7'>4</vcpu>\n"
  "  <cputune>\n"
  "    <vcpupin vcpu='0' cpuset='1'/>\n"
  "    <vcpupin vcpu='2' cpuset='2-3'/>\n"
  "    <twed mode='fixed' delay='3'/>\n"
  "  </cputune>\n"
  "</domain>\n";

static void
test_full (void)
{
  g_autoptr(GError) e = NULL;
  g_autoptr(TwedDomain) d = twed_domain_parse_xml (xml_full, &e);
  g_autofree char *da = NULL, *p0 = NULL, *p2 = NULL;

  g_assert_no_error (e);
  g_assert_cmpstr (d->name, ==, "vm1");
  g_assert_cmpstr (d->uuid, ==, "0f9d8b0e-1b7a-4a1e-9e0a-2d1b5b6c7d8e");
  g_assert_cmpuint (d->nvcpus, ==, 3);
  da = twed_cpuset_format (d->default_affinity);
  g_assert_cmpstr (da, ==, "0-7");
  p0 = twed_cpuset_format (g_ptr_array_index (d->affinity, 0));
  g_assert_cmpstr (p0, ==, "1");
  g_assert_null (g_ptr_array_index (d->affinity, 1));
  p2 = twed_cpuset_format (g_ptr_array_index (d->affinity, 2));
  g_assert_cmpstr (p2, ==, "2-3");
  g_assert_true (d->has_twed);
  g_assert_cmpuint (d->twed.mode, ==, TWED_MODE_FIXED);
  g_assert_cmpuint (d->twed.delay, ==, 3);
  g_assert_cmpuint (d->twed.max, ==, 3);
  g_assert_cmpstr (d->flavor, ==, "m1.large");
  g_assert_cmpuint (d->manage, ==, TWED_MANAGE_PINNED);
  g_assert_cmpuint (d->pinned.mode, ==, TWED_MODE_DYNAMIC);
  g_assert_cmpuint (d->pinned.max, ==, 4);
  g_assert_cmpstr (twed_domain_meta_lookup (d, TWED_NOVA_NS, "vcpus", NULL), ==, "4");
}

static void
test_minimal (void)
{
  g_autoptr(TwedDomain) d = twed_domain_parse_xml ("<domain><name>x</name><vcpu>2</vcpu></domain>", NULL);

  g_assert_nonnull (d);
  g_assert_cmpuint (d->nvcpus, ==, 2);
  g_assert_false (d->has_twed);
  g_assert_cmpuint (d->twed.mode, ==, TWED_MODE_OFF);
  g_assert_cmpuint (d->manage, ==, TWED_MANAGE_AUTO);
}

static void
test_optout (void)
{
  g_autoptr(TwedDomain) d = twed_domain_parse_xml (
    "<domain><name>x</name><vcpu>1</vcpu><metadata><t:policy xmlns:t='urn:twed:libvirt:1' manage='no'/>"
    "<policy manage='yes'/></metadata></domain>", NULL);

  g_assert_nonnull (d);
  /* Only the twed namespace counts, whatever the prefix. */
  g_assert_cmpuint (d->manage, ==, TWED_MANAGE_OPTOUT);
}

static void
test_errors (void)
{
  static const char *const bad[] = {
    "<domain><name>x</name><vcpu>two</vcpu></domain>",
    "<domain><vcpu>1</vcpu></domain>",
    "<domain><name>x</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='z'/></cputune></domain>",
    "<domain><name>x</name><vcpu>1</vcpu><cputune><twed mode='dynamic' delay='5' min='6' max='7'/></cputune></domain>",
    "<domain><name>x</name><vcpu>1</vcpu><metadata><t:policy xmlns:t='urn:twed:libvirt:1' manage='maybe'/></metadata></domain>",
    "<domain><name>x</name>",
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      g_autoptr(GError) e = NULL;
      TwedDomain *d = twed_domain_parse_xml (bad[i], &e);

      g_assert_null (d);
      g_assert_nonnull (e);
    }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/domxml/full", test_full);
  g_test_add_func ("/domxml/minimal", test_minimal);
  g_test_add_func ("/domxml/optout", test_optout);
  g_test_add_func ("/domxml/errors", test_errors);
  return g_test_run ();
}
