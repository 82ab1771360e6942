/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-types.h"

G_DEFINE_QUARK (twed-error-quark, twed_error)

static const char *const mode_names[] = { "off", "fixed", "dynamic" };

const char *
twed_mode_to_string (TwedMode mode)
{
  if ((guint) mode < G_N_ELEMENTS (mode_names))
    return mode_names[mode];
  return "unknown";
}

gboolean
twed_mode_from_string (const char *str, TwedMode *mode)
{
  for (guint i = 0; str && i < G_N_ELEMENTS (mode_names); i++)
    {
      if (g_str_equal (str, mode_names[i]))
        {
          *mode = (TwedMode) i;
          return TRUE;
        }
    }
  return FALSE;
}

const char *
twed_support_to_string (TwedSupport support)
{
  switch (support)
    {
    case TWED_SUPPORT_YES:
      return "yes";
    case TWED_SUPPORT_NO:
      return "no";
    case TWED_SUPPORT_UNKNOWN:
    default:
      return "unknown";
    }
}

/* Canonical form so that comparisons ignore fields the mode ignores:
 * off reports zeros, fixed reports min = max = delay (contract, section 0). */
void
twed_setting_normalize (TwedSetting *s)
{
  switch (s->mode)
    {
    case TWED_MODE_OFF:
      s->delay = s->min = s->max = 0;
      break;
    case TWED_MODE_FIXED:
      s->min = s->max = s->delay;
      break;
    case TWED_MODE_DYNAMIC:
    default:
      break;
    }
}

gboolean
twed_setting_equal (const TwedSetting *a, const TwedSetting *b)
{
  TwedSetting x = *a, y = *b;

  twed_setting_normalize (&x);
  twed_setting_normalize (&y);
  return x.mode == y.mode && x.delay == y.delay && x.min == y.min && x.max == y.max;
}

gboolean
twed_setting_check (const TwedSetting *s, GError **error)
{
  if (s->mode > TWED_MODE_DYNAMIC)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "unknown mode");
      return FALSE;
    }
  if (s->delay > TWED_DELAY_LIMIT || s->min > TWED_DELAY_LIMIT || s->max > TWED_DELAY_LIMIT)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "values must be in 0..%d", TWED_DELAY_LIMIT);
      return FALSE;
    }
  if (s->mode == TWED_MODE_DYNAMIC && !(s->min <= s->delay && s->delay <= s->max))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                   "dynamic mode needs min <= delay <= max (got min=%u delay=%u max=%u)",
                   s->min, s->delay, s->max);
      return FALSE;
    }
  return TRUE;
}

char *
twed_setting_to_string (const TwedSetting *s)
{
  switch (s->mode)
    {
    case TWED_MODE_FIXED:
      return g_strdup_printf ("fixed:%u", s->delay);
    case TWED_MODE_DYNAMIC:
      return g_strdup_printf ("dynamic:%u[%u..%u]", s->delay, s->min, s->max);
    case TWED_MODE_OFF:
    default:
      return g_strdup ("off");
    }
}
