/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-policydir.h"

#include <gio/gio.h>

/* Policies are small; a cap keeps a stray huge file from eating memory. */
#define POLICY_MAX_BYTES (1024 * 1024)

static gboolean
load_one (TwedPolicySet *set, const char *path, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  TwedPolicy *pol;

  if (!g_file_get_contents (path, &data, &len, error))
    return FALSE;
  if (len > POLICY_MAX_BYTES)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s: larger than %d bytes", path,
                   POLICY_MAX_BYTES);
      return FALSE;
    }
  if (!(pol = twed_policy_parse (data, len, path, error)))
    return FALSE;
  return twed_policy_set_add (set, pol, error);
}

TwedPolicySet *
twed_policy_files_load (const char *const *files, GError **error)
{
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();

  for (guint i = 0; files && files[i]; i++)
    if (!load_one (set, files[i], error))
      return NULL;
  return g_steal_pointer (&set);
}

static int
cmp_str (gconstpointer a, gconstpointer b)
{
  return g_strcmp0 (*(char *const *) a, *(char *const *) b);
}

/* The policy files of @dir, sorted; NULL with @error when there is no
 * such directory, or no policy in it unless @allow_empty. */
static GPtrArray *
list_policies (const char *dir, gboolean allow_empty, GError **error)
{
  g_autoptr(GDir) d = NULL;
  g_autoptr(GError) local = NULL;
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  /* A directory that is not there is a deployment error (a typo, a
   * volume not mounted), not "no policies": failing closed keeps the
   * built-in default from being applied fleet-wide by accident. */
  if (!(d = g_dir_open (dir, 0, &local)))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "policy directory %s: %s", dir, local->message);
      return NULL;
    }
  /* Hidden and editor temp files are not policies.  A Kubernetes
   * ConfigMap volume lists its files as symlinks through "..data",
   * which g_file_get_contents follows. */
  while ((name = g_dir_read_name (d)))
    if (g_str_has_suffix (name, ".json") && name[0] != '.')
      g_ptr_array_add (files, g_build_filename (dir, name, NULL));
  /* An empty directory is what an unmounted mountpoint or a volume not
   * filled yet looks like: the same deployment error as a missing one. */
  if (!files->len && !allow_empty)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "policy directory %s holds no *.json policy (set [twed] allow_builtin_default=true "
                   "to apply the built-in default to every VM)", dir);
      return NULL;
    }
  g_ptr_array_sort (files, cmp_str);
  return g_steal_pointer (&files);
}

gboolean
twed_policy_dir_check (const char *dir, gboolean allow_empty, GError **error)
{
  g_autoptr(GPtrArray) files = list_policies (dir, allow_empty, error);

  return files != NULL;
}

TwedPolicySet *
twed_policy_dir_load (const char *dir, gboolean allow_empty, GError **error)
{
  g_autoptr(GPtrArray) files = list_policies (dir, allow_empty, error);

  if (!files)
    return NULL;
  g_ptr_array_add (files, NULL);
  return twed_policy_files_load ((const char *const *) files->pdata, error);
}
