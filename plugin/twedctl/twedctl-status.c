/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"

static const char *
manage_string (TwedManage m)
{
  switch (m)
    {
    case TWED_MANAGE_OPTOUT:
      return "opted-out";
    case TWED_MANAGE_PINNED:
      return "pinned";
    case TWED_MANAGE_AUTO:
    default:
      return "auto";
    }
}

static char *
status_table (const TwedPlan *plan)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "%-12s %-20s %-8s %5s %6s %-16s %-16s %s\n", "HOST", "DOMAIN", "STATE",
                          "VCPUS", "RATIO", "TWED", "POLICY", "MANAGED");
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);
      g_autofree char *cur = twed_setting_to_string (&e->current);

      g_string_append_printf (s, "%-12s %-20s %-8s %5u %6.2f %-16s %-16s %s\n", e->host, e->domain,
                              e->active ? "running" : "shutoff", e->nvcpus, e->ratio, cur,
                              e->policy ? e->policy : "-", manage_string (e->manage));
    }
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      const TwedPlanHost *h = g_ptr_array_index (plan->hosts, i);

      if (!h->reachable)
        g_string_append_printf (s, "%-12s unreachable: %s\n", h->name, h->error ? h->error : "");
    }
  return g_string_free (s, FALSE);
}

int
twedctl_print_status (Twedctl *ctl)
{
  g_autoptr(TwedPlan) plan = twedctl_make_plan (ctl);
  if (ctl->json)
    twedctl_print_json (plan);
  else
    {
      g_autofree char *out = status_table (plan);

      twedctl_print (out);
    }
  return twed_plan_unreachable (plan) ? TWEDCTL_EXIT_PARTIAL : TWEDCTL_EXIT_OK;
}

int
twedctl_status (Twedctl *ctl, int argc, char **argv)
{
  const GOptionEntry entries[] = {
    { "json", 0, 0, G_OPTION_ARG_NONE, &ctl->json, "Print the plan document as JSON", NULL },
    { NULL }
  };
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "status", NULL, "Show each VM: state, vCPUs, overcommit ratio, current TWED "
                      "setting, the policy that matches it and whether it is managed.",
                      entries, &argc, &argv, &rc) ||
      !twedctl_setup (ctl, TRUE, TRUE, TRUE, &rc))
    return rc;
  if (argc > 1)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "status: unexpected argument '%s'", argv[1]);
  return twedctl_print_status (ctl);
}
