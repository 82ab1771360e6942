/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"

int
twedctl_plan (Twedctl *ctl, int argc, char **argv)
{
  gboolean all = FALSE;
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctl->json, "Print JSON (schemas/twed-plan.schema.json)", NULL },
    { "all", 'a', 0, G_OPTION_ARG_NONE, &all, "Also list VMs that keep their setting", NULL },
    { NULL }
  };
  g_autoptr(TwedPlan) plan = NULL;
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "plan", NULL, "Read every host, match each VM to its policy and print what "
                      "would change and why. Changes nothing.", entries, &argc, &argv, &rc) ||
      !twedctl_setup (ctl, TRUE, TRUE, TRUE, &rc))
    return rc;
  if (argc > 1)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "plan: unexpected argument '%s'", argv[1]);
  plan = twedctl_make_plan (ctl);
  if (ctl->json)
    twedctl_print_json (plan);
  else
    {
      g_autofree char *out = twed_plan_to_table (plan, all);

      twedctl_print (out);
    }
  return twed_plan_unreachable (plan) ? TWEDCTL_EXIT_PARTIAL : TWEDCTL_EXIT_OK;
}
