/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twed-config.h"
#include "twed-types.h"

#include <string.h>

TwedHostSpec *
twed_host_spec_new (const char *name, const char *uri)
{
  TwedHostSpec *spec = g_new0 (TwedHostSpec, 1);

  spec->name = g_strdup (name);
  spec->uri = g_strdup (uri);
  return spec;
}

void
twed_host_spec_free (TwedHostSpec *spec)
{
  if (!spec)
    return;
  g_free (spec->name);
  g_free (spec->uri);
  g_free (spec);
}

TwedConfig *
twed_config_new (void)
{
  TwedConfig *c = g_new0 (TwedConfig, 1);

  c->policy_dir = g_strdup (TWED_DEFAULT_POLICY_DIR);
  c->hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_spec_free);
  c->interval = 60;
  c->threads = 8;
  c->keepalive_interval = 5;
  c->keepalive_count = 3;
  c->reconnect_max = 60;
  c->health_intervals = 3;
  c->hung_pass_after = 120;
  c->connect_timeout = 30;
  c->definition_max_age = 600;
  /* systemd's StateDirectory= (the unit's): the first of its paths. */
  if (g_getenv ("STATE_DIRECTORY") && *g_getenv ("STATE_DIRECTORY"))
    {
      g_auto(GStrv) dirs = g_strsplit (g_getenv ("STATE_DIRECTORY"), ":", 2);

      c->state_dir = g_strdup (dirs[0]);
    }
  return c;
}

void
twed_config_free (TwedConfig *c)
{
  if (!c)
    return;
  g_free (c->path);
  g_free (c->policy_dir);
  g_ptr_array_unref (c->hosts);
  g_free (c->metrics_textfile);
  g_free (c->metrics_listen);
  g_free (c->state_dir);
  g_free (c);
}

gboolean
twed_uri_check (const char *uri, char **name_out, GError **error)
{
  g_autoptr(GUri) parsed = NULL;
  g_autoptr(GError) local = NULL;
  const char *scheme;

  if (!uri || !*uri)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "empty libvirt URI");
      return FALSE;
    }
  if (!(parsed = g_uri_parse (uri, G_URI_FLAGS_NON_DNS | G_URI_FLAGS_ENCODED, &local)))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "libvirt URI '%s': %s", uri, local->message);
      return FALSE;
    }
  scheme = g_uri_get_scheme (parsed);
  for (const char *p = scheme; *p; p++)
    if (!g_ascii_isalnum (*p) && *p != '+')
      {
        g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                     "libvirt URI '%s': bad scheme '%s' (want DRIVER[+TRANSPORT])", uri, scheme);
        return FALSE;
      }
  if (g_str_equal (scheme, "test") && strlen (g_uri_get_path (parsed)) < 2)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "libvirt URI '%s': the test driver needs a node file path or /default", uri);
      return FALSE;
    }
  if (name_out)
    {
      const char *host = g_uri_get_host (parsed);

      if (host && *host)
        *name_out = g_strdup (host);
      else if (g_str_equal (scheme, "test"))
        {
          g_autofree char *base = g_path_get_basename (g_uri_get_path (parsed));
          char *dot = strrchr (base, '.');

          if (dot && dot != base)
            *dot = '\0';
          *name_out = g_steal_pointer (&base);
        }
      else
        *name_out = g_strdup (g_get_host_name ());
    }
  return TRUE;
}

gboolean
twed_config_add_host (TwedConfig *config, const char *name, const char *uri, GError **error)
{
  g_autofree char *derived = NULL;

  if (!twed_uri_check (uri, &derived, error))
    return FALSE;
  if (!name)
    name = derived;
  for (guint i = 0; i < config->hosts->len; i++)
    {
      TwedHostSpec *h = g_ptr_array_index (config->hosts, i);

      if (g_str_equal (h->name, name))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                       "host name '%s' used twice (%s and %s); name them with NAME=URI",
                       name, h->uri, uri);
          return FALSE;
        }
    }
  g_ptr_array_add (config->hosts, twed_host_spec_new (name, uri));
  return TRUE;
}

/* "NAME=URI" or "URI"; '=' cannot start a URI so it is unambiguous. */
gboolean
twed_config_add_host_item (TwedConfig *config, const char *item, GError **error)
{
  const char *eq = strchr (item, '=');
  const char *colon = strchr (item, ':');

  if (eq && (!colon || eq < colon))
    {
      g_autofree char *name = g_strstrip (g_strndup (item, eq - item));
      g_autofree char *uri = g_strstrip (g_strdup (eq + 1));

      if (!*name)
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "empty host name in '%s'", item);
          return FALSE;
        }
      return twed_config_add_host (config, name, uri, error);
    }
  return twed_config_add_host (config, NULL, item, error);
}

gboolean
twed_config_load_hosts_file (TwedConfig *config, const char *path, GError **error)
{
  g_autofree char *data = NULL;
  g_auto(GStrv) lines = NULL;

  if (!g_file_get_contents (path, &data, NULL, error))
    return FALSE;
  lines = g_strsplit (data, "\n", -1);
  for (guint i = 0; lines[i]; i++)
    {
      g_autofree char *line = g_strstrip (g_strdup (lines[i]));
      g_auto(GStrv) words = NULL;
      gboolean ok;

      if (!*line || *line == '#')
        continue;
      words = g_strsplit_set (line, " \t", -1);
      {
        g_autoptr(GPtrArray) w = g_ptr_array_new ();

        for (guint j = 0; words[j]; j++)
          if (*words[j])
            g_ptr_array_add (w, words[j]);
        if (w->len == 1)
          ok = twed_config_add_host_item (config, g_ptr_array_index (w, 0), error);
        else if (w->len == 2)
          ok = twed_config_add_host (config, g_ptr_array_index (w, 0), g_ptr_array_index (w, 1), error);
        else
          {
            g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "want 'URI' or 'NAME URI'");
            ok = FALSE;
          }
      }
      if (!ok)
        {
          g_prefix_error (error, "%s:%u: ", path, i + 1);
          return FALSE;
        }
    }
  return TRUE;
}

static gboolean
get_uint (GKeyFile *kf, const char *group, const char *key, guint min, guint max,
          guint *out, GError **error)
{
  g_autofree char *s = g_key_file_get_value (kf, group, key, NULL);
  guint64 v;

  if (!s)
    return TRUE;
  g_strstrip (s);
  if (!g_ascii_string_to_unsigned (s, 10, min, max, &v, NULL))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "[%s] %s: want an integer in %u..%u, got '%s'",
                   group, key, min, max, s);
      return FALSE;
    }
  *out = (guint) v;
  return TRUE;
}

static gboolean
get_bool (GKeyFile *kf, const char *group, const char *key, gboolean *out, GError **error)
{
  g_autoptr(GError) local = NULL;
  gboolean v;

  if (!g_key_file_has_key (kf, group, key, NULL))
    return TRUE;
  v = g_key_file_get_boolean (kf, group, key, &local);
  if (local)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "[%s] %s: want true or false", group, key);
      return FALSE;
    }
  *out = v;
  return TRUE;
}

static gboolean
check_keys (GKeyFile *kf, GError **error)
{
  static const char *const twed_keys[] = { "policy_dir", "hosts", "hosts_file", "interval", "dry_run",
                                           "max_changes_per_cycle", "min_change_interval", "threads",
                                           "allow_builtin_default", "state_dir", "hung_pass_after", NULL };
  static const char *const libvirt_keys[] = { "keepalive_interval", "keepalive_count",
                                              "reconnect_max", "connect_timeout", "definition_max_age", NULL };
  static const char *const metrics_keys[] = { "textfile", "listen", "per_vm", "health_intervals", NULL };
  g_auto(GStrv) groups = g_key_file_get_groups (kf, NULL);

  for (guint i = 0; groups[i]; i++)
    {
      const char *const *allowed;
      g_auto(GStrv) keys = NULL;

      if (g_str_equal (groups[i], "twed"))
        allowed = twed_keys;
      else if (g_str_equal (groups[i], "libvirt"))
        allowed = libvirt_keys;
      else if (g_str_equal (groups[i], "metrics"))
        allowed = metrics_keys;
      else
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "unknown group [%s]", groups[i]);
          return FALSE;
        }
      keys = g_key_file_get_keys (kf, groups[i], NULL, NULL);
      for (guint j = 0; keys && keys[j]; j++)
        if (!g_strv_contains (allowed, keys[j]))
          {
            g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "[%s] unknown key '%s'",
                         groups[i], keys[j]);
            return FALSE;
          }
    }
  return TRUE;
}

static char *
get_string (GKeyFile *kf, const char *group, const char *key)
{
  char *s = g_key_file_get_string (kf, group, key, NULL);

  if (s && !*g_strstrip (s))
    g_clear_pointer (&s, g_free);
  return s;
}

static gboolean
parse_keyfile (TwedConfig *c, GKeyFile *kf, GError **error)
{
  g_autofree char *s = NULL;
  g_auto(GStrv) hosts = NULL;
  g_autoptr(GError) local = NULL;

  if (!check_keys (kf, error))
    return FALSE;
  if ((s = get_string (kf, "twed", "policy_dir")))
    {
      g_free (c->policy_dir);
      c->policy_dir = g_steal_pointer (&s);
    }
  if ((hosts = g_key_file_get_string_list (kf, "twed", "hosts", NULL, NULL)))
    for (guint i = 0; hosts[i]; i++)
      {
        g_strstrip (hosts[i]);
        if (*hosts[i] && !twed_config_add_host_item (c, hosts[i], error))
          {
            g_prefix_error (error, "[twed] hosts: ");
            return FALSE;
          }
      }
  if ((s = get_string (kf, "twed", "hosts_file")) && !twed_config_load_hosts_file (c, s, error))
    return FALSE;
  if (!get_bool (kf, "twed", "dry_run", &c->dry_run, error) ||
      !get_bool (kf, "twed", "allow_builtin_default", &c->allow_builtin_default, error) ||
      !get_bool (kf, "metrics", "per_vm", &c->metrics_per_vm, error))
    return FALSE;
  g_clear_pointer (&s, g_free);
  if ((s = get_string (kf, "twed", "state_dir")))
    {
      g_free (c->state_dir);
      c->state_dir = g_steal_pointer (&s);
    }
  if ((s = get_string (kf, "metrics", "textfile")))
    c->metrics_textfile = g_steal_pointer (&s);
  if ((s = get_string (kf, "metrics", "listen")))
    c->metrics_listen = g_steal_pointer (&s);
  return get_uint (kf, "twed", "interval", 1, 86400, &c->interval, error) &&
         get_uint (kf, "twed", "max_changes_per_cycle", 0, 1000000, &c->max_changes, error) &&
         get_uint (kf, "twed", "threads", 1, 256, &c->threads, error) &&
         get_uint (kf, "twed", "min_change_interval", 0, 86400, &c->min_change_interval, error) &&
         get_uint (kf, "twed", "hung_pass_after", 1, 86400, &c->hung_pass_after, error) &&
         get_uint (kf, "libvirt", "keepalive_interval", 0, 3600, &c->keepalive_interval, error) &&
         get_uint (kf, "libvirt", "keepalive_count", 1, 100, &c->keepalive_count, error) &&
         get_uint (kf, "libvirt", "reconnect_max", 1, 3600, &c->reconnect_max, error) &&
         get_uint (kf, "libvirt", "connect_timeout", 1, 3600, &c->connect_timeout, error) &&
         get_uint (kf, "libvirt", "definition_max_age", 1, 86400, &c->definition_max_age, error) &&
         get_uint (kf, "metrics", "health_intervals", 1, 1000, &c->health_intervals, error);
}

TwedConfig *
twed_config_load (const char *path, GError **error)
{
  g_autoptr(TwedConfig) c = twed_config_new ();
  g_autoptr(GKeyFile) kf = g_key_file_new ();
  g_autoptr(GError) local = NULL;
  const char *file = path ? path : TWED_DEFAULT_CONFIG;

  g_autofree char *data = NULL;
  gsize len = 0;

  /* Read first, so that /dev/null works as an empty configuration. */
  if (!g_file_get_contents (file, &data, &len, &local))
    {
      if (!path && g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
        return g_steal_pointer (&c);
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s", local->message);
      return NULL;
    }
  if (!g_key_file_load_from_data (kf, data, len, G_KEY_FILE_NONE, &local))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s: %s", file, local->message);
      return NULL;
    }
  c->path = g_strdup (file);
  if (!parse_keyfile (c, kf, error))
    {
      g_prefix_error (error, "%s: ", file);
      return NULL;
    }
  return g_steal_pointer (&c);
}
