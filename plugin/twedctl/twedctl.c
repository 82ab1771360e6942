/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twedctl.h"

#include <locale.h>
#include <stdio.h>

static const struct {
  const char *name;
  TwedctlVerb func;
  const char *help;
} verbs[] = {
  { "hosts", twedctl_hosts, "Reachability, pCPUs, overcommit ratio and TWED support per host" },
  { "status", twedctl_status, "Per VM: vCPUs, ratio, current TWED and the policy that matches" },
  { "plan", twedctl_plan, "What would change and why (--json: schemas/twed-plan.schema.json)" },
  { "apply", twedctl_apply, "Plan, then apply the changes live and to the config" },
  { "set", twedctl_set, "Set one VM by hand and pin it, or hand it back (--auto, --opt-out)" },
  { "policy", twedctl_policy, "policy check FILE...: validate policy documents" },
};

static void
usage (FILE *out)
{
  fprintf (out, "Usage: twedctl VERB [OPTIONS]\n\n"
                "Manage Armv8.6 FEAT_TWED (delayed WFE trapping) of KVM guests across hosts.\n\n"
                "Verbs:\n");
  for (guint i = 0; i < G_N_ELEMENTS (verbs); i++)
    fprintf (out, "  %-8s %s\n", verbs[i].name, verbs[i].help);
  fprintf (out, "\nRun 'twedctl VERB --help' for the verb's options; see twedctl(1).\n"
                "Exit status: 0 ok, 1 failed, 2 bad input, 3 partial (unreachable hosts or\n"
                "failed changes), 4 needs the twed libvirt API.\n");
}

int
main (int argc, char **argv)
{
  Twedctl ctl = { 0 };
  int rc = TWEDCTL_EXIT_USAGE;

  setlocale (LC_ALL, "");
  if (argc < 2)
    {
      usage (stderr);
      return TWEDCTL_EXIT_USAGE;
    }
  if (g_str_equal (argv[1], "--help") || g_str_equal (argv[1], "-h") || g_str_equal (argv[1], "help"))
    {
      usage (stdout);
      return TWEDCTL_EXIT_OK;
    }
  if (g_str_equal (argv[1], "--version"))
    {
      printf ("twedctl %s (twed libvirt API: %s)\n", PACKAGE_VERSION,
              HAVE_VIR_DOMAIN_TWED_API ? "yes" : "no");
      return TWEDCTL_EXIT_OK;
    }
  for (guint i = 0; i < G_N_ELEMENTS (verbs); i++)
    if (g_str_equal (argv[1], verbs[i].name))
      {
        /* The verb sees argv[0] = "twedctl VERB" for its messages. */
        rc = verbs[i].func (&ctl, argc - 1, argv + 1);
        goto out;
      }
  fprintf (stderr, "twedctl: unknown verb '%s'\n\n", argv[1]);
  usage (stderr);

out:
  g_clear_pointer (&ctl.backend, twed_backend_unref);
  g_clear_pointer (&ctl.policies, twed_policy_set_unref);
  g_clear_pointer (&ctl.config, twed_config_free);
  g_strfreev (ctl.connect);
  g_strfreev (ctl.policy_files);
  g_free (ctl.config_path);
  g_free (ctl.hosts_file);
  g_free (ctl.policy_dir);
  return rc;
}
