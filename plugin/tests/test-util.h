/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-overcommit.h"
#include "twed-planner.h"

/* Adds a running domain with @nvcpus; @pins: one cpuset string per
 * vCPU or NULL (unpinned), may be shorter than nvcpus. */
static inline TwedDomain *
add_dom (TwedHost *host, const char *name, guint nvcpus, const char *const *pins)
{
  TwedDomain *dom = twed_domain_new (name);

  dom->active = TRUE;
  twed_domain_set_vcpus (dom, nvcpus);
  for (guint i = 0; pins && i < nvcpus && pins[i]; i++)
    {
      g_autoptr(GArray) set = twed_cpuset_parse (pins[i], NULL);

      g_assert_nonnull (set);
      twed_domain_pin_vcpu (dom, i, set);
    }
  g_ptr_array_add (host->domains, dom);
  return dom;
}

static inline TwedDomain *
find_dom (TwedHost *host, const char *name)
{
  for (guint i = 0; i < host->domains->len; i++)
    {
      TwedDomain *d = g_ptr_array_index (host->domains, i);

      if (g_str_equal (d->name, name))
        return d;
    }
  g_assert_not_reached ();
  return NULL;
}
