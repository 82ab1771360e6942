/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"
#include "twed-domain-params.h"

int
twedctl_apply (Twedctl *ctl, int argc, char **argv)
{
  gboolean dry_run = FALSE, status = FALSE;
  const GOptionEntry entries[] = {
    { "dry-run", 'n', 0, G_OPTION_ARG_NONE, &dry_run, "Show what would be applied, change nothing", NULL },
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctl->json, "Print the plan with results as JSON", NULL },
    { "status", 0, 0, G_OPTION_ARG_NONE, &status, "Afterwards, print the status read back over the same connections", NULL },
    { NULL }
  };
  g_autoptr(TwedPlan) plan = NULL;
  guint changes, failed = 0, applied;
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "apply", NULL, "Plan, then set TWED on the VMs whose setting changes, live and "
                      "in the persistent config. VMs that keep their setting are not touched.",
                      entries, &argc, &argv, &rc) ||
      !twedctl_setup (ctl, TRUE, TRUE, dry_run, &rc))
    return rc;
  if (argc > 1)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "apply: unexpected argument '%s'", argv[1]);

  plan = twedctl_make_plan (ctl);
  changes = twed_plan_count (plan, TWED_ACTION_CHANGE);
  if (changes && !dry_run && !twed_domain_params_available ())
    {
      if (ctl->json)
        twedctl_print_json (plan);
      else
        {
          g_autofree char *out = twed_plan_to_table (plan, FALSE);

          twedctl_print (out);
        }
      return twedctl_fail (TWEDCTL_EXIT_UNSUPPORTED, "%u change(s) planned, none applied: %s", changes,
                           TWED_API_MISSING_MESSAGE);
    }
  if (changes)
    failed = twed_backend_apply (ctl->backend, plan, dry_run);
  applied = twed_plan_count_result (plan, TWED_RESULT_APPLIED);
  if (ctl->json)
    twedctl_print_json (plan);
  else
    {
      g_autofree char *out = twed_plan_to_table (plan, FALSE);

      twedctl_print (out);
    }
  if (!ctl->json)
    {
      g_autofree char *line = dry_run ? g_strdup_printf ("dry run: %u change(s) would be applied\n", changes)
                                      : g_strdup_printf ("applied %u, failed %u\n", applied, failed);

      twedctl_print (line);
    }
  if (status && !dry_run)
    {
      twedctl_print ("\n");
      twedctl_print_status (ctl);
    }
  if (failed)
    return applied ? TWEDCTL_EXIT_PARTIAL : TWEDCTL_EXIT_FAILED;
  return twed_plan_unreachable (plan) ? TWEDCTL_EXIT_PARTIAL : TWEDCTL_EXIT_OK;
}
