/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* JSON-GLib accepts more than RFC 8259 (comments, single quotes, hex
 * and leading-zero numbers, trailing garbage after the first value,
 * an empty document). Policies come from other programs, so they are
 * checked against the strict grammar first; a document is then read
 * the same way by every consumer, including the JSON Schema tooling. */
gboolean twed_json_check_strict (const char *data, gsize len, GError **error);

G_END_DECLS
