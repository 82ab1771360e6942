/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twedctl.h"

int
twedctl_set (Twedctl *ctl, int argc, char **argv)
{
  g_autofree char *mode = NULL;
  int delay = -1, min = -1, max = -1;
  gboolean automatic = FALSE, optout = FALSE, allow_long = FALSE;
  const GOptionEntry entries[] = {
    { "mode", 'm', 0, G_OPTION_ARG_STRING, &mode, "off, fixed or dynamic", "MODE" },
    { "delay", 'd', 0, G_OPTION_ARG_INT, &delay, "TWEDEL 0..15 (fixed; start value for dynamic)", "N" },
    { "min", 0, 0, G_OPTION_ARG_INT, &min, "Lower clamp 0..15 (dynamic; stored bound for fixed)", "N" },
    { "max", 0, 0, G_OPTION_ARG_INT, &max, "Upper clamp 0..15 (dynamic; stored bound for fixed)", "N" },
    { "allow-long-delays", 0, 0, G_OPTION_ARG_NONE, &allow_long, "Allow values above 5", NULL },
    { "auto", 0, 0, G_OPTION_ARG_NONE, &automatic, "Unpin: let the policies manage the VM again", NULL },
    { "opt-out", 0, 0, G_OPTION_ARG_NONE, &optout, "Opt the VM out: never touched by the plugin", NULL },
    { NULL }
  };
  g_autoptr(GError) error = NULL;
  TwedSetting s = { TWED_MODE_OFF, 0, 0, 0 };
  int rc = TWEDCTL_EXIT_OK;

  if (!twedctl_parse (ctl, "set", "DOMAIN", "Set a VM's TWED by hand, live and in its config, and mark "
                      "it pinned in its metadata (<twed:policy manage='pinned'>) so that the daemon "
                      "leaves it alone. --auto removes the mark, --opt-out marks it manage='no'.",
                      entries, &argc, &argv, &rc))
    return rc;
  if (argc != 2)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: want exactly one DOMAIN");
  if (automatic + optout + (mode != NULL) != 1)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: give exactly one of --mode, --auto, --opt-out");
  if (mode)
    {
      static const TwedFieldNames names = { "--delay", "--min", "--max", "--allow-long-delays" };
      guint limit = allow_long ? TWED_DELAY_LIMIT : TWED_DELAY_SAFE_LIMIT;
      TwedFields field = 0;

      if (!twed_mode_from_string (mode, &s.mode))
        return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: --mode: want off, fixed or dynamic, got '%s'", mode);
      s.delay = delay < 0 ? 0 : (guint) delay;
      s.min = min < 0 ? 0 : (guint) min;
      s.max = max < 0 ? 0 : (guint) max;
      if (s.mode == TWED_MODE_FIXED)
        {
          TwedSetting bounds = { TWED_MODE_DYNAMIC, s.delay, min < 0 ? s.delay : s.min,
                                 max < 0 ? s.delay : s.max };

          /* fixed takes --min/--max as the bounds libvirt stores for a
           * later change to dynamic (interfaces.md section 3); they must
           * hold the delay, and default to it. */
          if (!twed_setting_validate (&s, delay >= 0 ? TWED_FIELD_DELAY : 0, limit, &names, &field, &error) ||
              !twed_setting_validate (&bounds, TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX, limit,
                                      &names, &field, &error))
            return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: %s%s%s",
                                 field == TWED_FIELD_DELAY ? names.delay : field == TWED_FIELD_MIN ? names.min
                                 : field == TWED_FIELD_MAX ? names.max : "", field ? ": " : "", error->message);
          s.min = bounds.min;
          s.max = bounds.max;
        }
      else
        {
          if (!twed_setting_validate (&s, (delay >= 0 ? TWED_FIELD_DELAY : 0) | (min >= 0 ? TWED_FIELD_MIN : 0) |
                                      (max >= 0 ? TWED_FIELD_MAX : 0), limit, &names, &field, &error))
            return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: %s%s%s",
                                 field == TWED_FIELD_DELAY ? names.delay : field == TWED_FIELD_MIN ? names.min
                                 : field == TWED_FIELD_MAX ? names.max : "", field ? ": " : "", error->message);
          twed_setting_normalize (&s);
        }
    }
  else if (delay >= 0 || min >= 0 || max >= 0 || allow_long)
    return twedctl_fail (TWEDCTL_EXIT_USAGE, "set: --delay/--min/--max need --mode");

  if (!twedctl_setup (ctl, TRUE, FALSE, FALSE, &rc))
    return rc;
  if (!twed_backend_set_manual (ctl->backend, argv[1], mode ? &s : NULL, optout, &error))
    return twedctl_fail (g_error_matches (error, TWED_ERROR, TWED_ERROR_UNSUPPORTED) ? TWEDCTL_EXIT_UNSUPPORTED :
                         g_error_matches (error, TWED_ERROR, TWED_ERROR_INVALID) ? TWEDCTL_EXIT_USAGE
                                                                                 : TWEDCTL_EXIT_FAILED,
                         "set %s: %s", argv[1], error->message);
  {
    g_autofree char *what = mode ? twed_setting_to_string (&s) : NULL;
    g_autofree char *line = g_strdup_printf ("%s: %s\n", argv[1],
                                             optout ? "opted out" : automatic ? "managed automatically again" : what);

    twedctl_print (line);
  }
  return TWEDCTL_EXIT_OK;
}
