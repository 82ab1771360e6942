/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"

int
twedctl_hosts (Twedctl *ctl, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctl->json, "Print the plan document (hosts and VMs) as JSON", NULL },
    { NULL }
  };
  g_autoptr(TwedPlan) plan = NULL;
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "hosts", NULL, "Show each host: reachability, pCPUs (shared and dedicated), "
                      "vCPUs, overcommit ratio of the shared pool, TWED support.",
                      entries, &argc, &argv, &rc) ||
      !twedctl_setup (ctl, TRUE, FALSE, TRUE, &rc))
    return rc;
  if (argc > 1)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "hosts: unexpected argument '%s'", argv[1]);
  plan = twedctl_make_plan (ctl);
  if (ctl->json)
    twedctl_print_json (plan);
  else
    {
      g_autofree char *out = twed_plan_hosts_to_table (plan);

      twedctl_print (out);
    }
  return twed_plan_unreachable (plan) ? TWEDCTL_EXIT_PARTIAL : TWEDCTL_EXIT_OK;
}
