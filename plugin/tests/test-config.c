/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twed-config.h"
#include "twed-types.h"

#include <glib/gstdio.h>

static char *
write_tmp (const char *name, const char *text)
{
  g_autofree char *dir = g_dir_make_tmp ("twed-config-XXXXXX", NULL);
  char *path = g_build_filename (dir, name, NULL);

  g_assert_true (g_file_set_contents (path, text, -1, NULL));
  return path;
}

static void
remove_tmp (const char *path)
{
  g_autofree char *dir = g_path_get_dirname (path);

  g_unlink (path);
  g_rmdir (dir);
}

static void
test_full (void)
{
  g_autofree char *path = write_tmp ("twed.conf",
                                     "[twed]\npolicy_dir=/srv/p\nhosts=a=qemu+ssh://n1/system; qemu+tls://n2.example.org/system\n"
                                     "interval=30\ndry_run=true\nmax_changes_per_cycle=7\n"
                                     "allow_builtin_default=true\nstate_dir=/var/lib/twed\n"
                                     "[libvirt]\nkeepalive_interval=10\nreconnect_max=120\n"
                                     "[metrics]\ntextfile=/tmp/t.prom\nlisten=127.0.0.1:9777\n");
  g_autoptr(GError) e = NULL;
  g_autoptr(TwedConfig) c = twed_config_load (path, &e);
  TwedHostSpec *h;

  g_assert_no_error (e);
  g_assert_cmpstr (c->policy_dir, ==, "/srv/p");
  g_assert_cmpuint (c->hosts->len, ==, 2);
  h = g_ptr_array_index (c->hosts, 0);
  g_assert_cmpstr (h->name, ==, "a");
  g_assert_cmpstr (h->uri, ==, "qemu+ssh://n1/system");
  h = g_ptr_array_index (c->hosts, 1);
  g_assert_cmpstr (h->name, ==, "n2.example.org");
  g_assert_cmpuint (c->interval, ==, 30);
  g_assert_true (c->dry_run);
  g_assert_true (c->allow_builtin_default);
  g_assert_cmpstr (c->state_dir, ==, "/var/lib/twed");
  g_assert_cmpuint (c->max_changes, ==, 7);
  g_assert_cmpuint (c->keepalive_interval, ==, 10);
  g_assert_cmpuint (c->reconnect_max, ==, 120);
  g_assert_cmpstr (c->metrics_listen, ==, "127.0.0.1:9777");
  remove_tmp (path);
}

/* Each bad configuration is refused with the culprit named. */
static void
test_errors (void)
{
  static const struct { const char *text; const char *msg; } cases[] = {
    { "[twed]\ninterval=0\n", "[twed] interval: want an integer in 1..86400, got '0'" },
    { "[twed]\ninterval=soon\n", "[twed] interval" },
    { "[twed]\nbogus=1\n", "[twed] unknown key 'bogus'" },
    { "[other]\na=1\n", "unknown group [other]" },
    { "[twed]\ndry_run=maybe\n", "[twed] dry_run: want true or false" },
    { "[twed]\nallow_builtin_default=1x\n", "[twed] allow_builtin_default: want true or false" },
    { "[metrics]\nper_vm=yes please\n", "[metrics] per_vm: want true or false" },
    { "[twed]\nhosts=not a uri\n", "[twed] hosts: libvirt URI 'not a uri'" },
    { "[twed]\nhosts=test://\n", "the test driver needs a node file path" },
    { "[twed]\nhosts=qemu:///system;qemu:///session\n", "used twice" },
    { "[libvirt]\nkeepalive_count=0\n", "[libvirt] keepalive_count" },
    { "no group\n", "twed.conf" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *path = write_tmp ("twed.conf", cases[i].text);
      g_autoptr(GError) e = NULL;
      g_autoptr(TwedConfig) c = twed_config_load (path, &e);

      g_assert_null (c);
      g_assert_nonnull (e);
      if (!strstr (e->message, cases[i].msg))
        g_error ("case %u: got '%s', want '%s'", i, e->message, cases[i].msg);
      remove_tmp (path);
    }
}

static void
test_hosts_file (void)
{
  g_autofree char *path = write_tmp ("hosts", "# comment\n\nqemu+tls://n1/system\nn2  qemu+ssh://root@n2/system\n"
                                              "x=test:///default\n");
  g_autofree char *bad = write_tmp ("hosts", "a b c\n");
  g_autoptr(TwedConfig) c = twed_config_new ();
  g_autoptr(GError) e = NULL;

  g_assert_true (twed_config_load_hosts_file (c, path, &e));
  g_assert_cmpuint (c->hosts->len, ==, 3);
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 1))->name, ==, "n2");
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 2))->name, ==, "x");
  g_assert_false (twed_config_load_hosts_file (c, bad, &e));
  g_assert_nonnull (strstr (e->message, ":1: want 'URI' or 'NAME URI'"));
  remove_tmp (path);
  remove_tmp (bad);
}

static void
test_uri_names (void)
{
  static const struct { const char *uri; const char *name; } cases[] = {
    { "test:///srv/demo/host-a.xml", "host-a" },
    { "qemu+ssh://root@node7/system", "node7" },
    { "qemu+tls://node8.example.org:16514/system", "node8.example.org" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autofree char *name = NULL;

      g_assert_true (twed_uri_check (cases[i].uri, &name, NULL));
      g_assert_cmpstr (name, ==, cases[i].name);
    }
  g_assert_false (twed_uri_check ("", NULL, NULL));
  g_assert_false (twed_uri_check ("qemu_x://h/system", NULL, NULL));
}

/* The one NAME=URI parser: [twed] hosts, --connect of twedd and twedctl. */
static void
test_host_items (void)
{
  g_autoptr(TwedConfig) c = twed_config_new ();
  g_autoptr(GError) e = NULL;

  g_assert_true (twed_config_add_host_item (c, " n1 = qemu+tls://node1/system", NULL));
  g_assert_true (twed_config_add_host_item (c, "test:///srv/demo/host-a.xml", NULL));
  /* '=' after the scheme's ':' belongs to the URI. */
  g_assert_true (twed_config_add_host_item (c, "qemu+ssh://node2/system?keyfile=/k", NULL));
  g_assert_cmpuint (c->hosts->len, ==, 3);
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 0))->name, ==, "n1");
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 0))->uri, ==, "qemu+tls://node1/system");
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 1))->name, ==, "host-a");
  g_assert_cmpstr (((TwedHostSpec *) g_ptr_array_index (c->hosts, 2))->name, ==, "node2");
  g_assert_false (twed_config_add_host_item (c, "=test:///default", &e));
  g_assert_nonnull (strstr (e->message, "empty host name"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/config/full", test_full);
  g_test_add_func ("/config/errors", test_errors);
  g_test_add_func ("/config/hosts-file", test_hosts_file);
  g_test_add_func ("/config/uri-names", test_uri_names);
  g_test_add_func ("/config/host-items", test_host_items);
  return g_test_run ();
}
