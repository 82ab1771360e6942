/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-policy.h"

G_BEGIN_DECLS

/* Reads every *.json in @dir into a new set. All or nothing: any bad
 * file fails the whole load, naming the file and the JSON path, so the
 * caller keeps the last good set. A missing directory is an empty set. */
TwedPolicySet *twed_policy_dir_load (const char *dir, GError **error);

/* Reads the given files (twedctl policy check; twedctl --policy). */
TwedPolicySet *twed_policy_files_load (const char *const *files, GError **error);

G_END_DECLS
