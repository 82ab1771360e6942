/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-policy.h"

G_BEGIN_DECLS

/* Reads every *.json in @dir into a new set. All or nothing: any bad
 * file fails the whole load, naming the file and the JSON path, so the
 * caller keeps the last good set. A missing directory is an error; so is
 * one without any *.json unless @allow_empty (then the set is empty and
 * the built-in default applies to every VM). */
TwedPolicySet *twed_policy_dir_load (const char *dir, gboolean allow_empty, GError **error);

/* Whether twed_policy_dir_load would find policies to read (or may
 * find none): the directory exists and, unless @allow_empty, holds a
 * *.json.  For a daemon's start, which refuses an empty directory. */
gboolean twed_policy_dir_check (const char *dir, gboolean allow_empty, GError **error);

/* Reads the given files (twedctl policy check; twedctl --policy). */
TwedPolicySet *twed_policy_files_load (const char *const *files, GError **error);

G_END_DECLS
