/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"

#include <stdio.h>

static int
policy_check (int argc, char **argv)
{
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  int bad = 0;

  if (argc < 2)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "policy check: want one or more FILEs");
  /* Every file is checked, not just up to the first bad one. */
  for (int i = 1; i < argc; i++)
    {
      g_autoptr(GError) error = NULL;
      g_autofree char *data = NULL;
      gsize len = 0;
      TwedPolicy *pol = NULL;

      if (g_file_get_contents (argv[i], &data, &len, &error) &&
          (pol = twed_policy_parse (data, len, argv[i], &error)))
        {
          guint nauto = pol->beyond.mode == TWED_MODE_AUTO;
          g_autofree char *autos = NULL;
          g_autofree char *line = NULL;
          g_autofree char *baseline = pol->auto_params.baseline_seconds
                                      ? g_strdup_printf ("after %u s", pol->auto_params.baseline_seconds)
                                      : g_strdup ("never by age");

          for (guint b = 0; b < pol->bands->len; b++)
            nauto += g_array_index (pol->bands, TwedBand, b).setting.mode == TWED_MODE_AUTO;
          /* What the controller will do with the auto bands, so that a
           * typo in its tuning shows before a fleet runs on it. */
          if (nauto)
            autos = g_strdup_printf ("; %u auto band(s) for twedd: dwell %u s, run-queue wait share margin %.0f pts, "
                                     "min gain %.0f %%, stale after %u s, cooldown %u s, off again %s",
                                     nauto, pol->auto_params.dwell_seconds, pol->auto_params.wait_margin * 100,
                                     pol->auto_params.min_gain * 100, pol->auto_params.stale_seconds,
                                     pol->auto_params.cooldown_seconds, baseline);
          line = g_strdup_printf ("%s: ok (name %s, priority %d, %u band(s), %s%s)\n", argv[i],
                                  pol->name, pol->priority, pol->bands->len,
                                  twed_policy_specificity (pol) ? "selective" : "matches every VM",
                                  autos ? autos : "");

          if (twed_policy_set_add (set, pol, &error))
            {
              twedctl_print (line);
              continue;
            }
        }
      fprintf (stderr, "%s\n", error->message);
      bad++;
    }
  return bad ? TWEDCTL_EXIT_USAGE : TWEDCTL_EXIT_OK;
}

int
twedctl_policy (Twedctl *ctl, int argc, char **argv)
{
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "policy", "check FILE...", "Validate policy documents against the schema "
                      "(schemas/twed-policy.schema.json) and the band order rule; errors name the file "
                      "and the JSON path.", NULL, &argc, &argv, &rc))
    return rc;
  if (argc < 2 || !g_str_equal (argv[1], "check"))
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "policy: the only subcommand is 'check FILE...'");
  return policy_check (argc - 1, argv + 1);
}
