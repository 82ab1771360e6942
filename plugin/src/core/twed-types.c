/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-types.h"

G_DEFINE_QUARK (twed-error-quark, twed_error)

static const char *const mode_names[] = { "off", "fixed", "dynamic", "auto" };

const char *
twed_mode_to_string (TwedMode mode)
{
  if ((guint) mode < G_N_ELEMENTS (mode_names))
    return mode_names[mode];
  return "unknown";
}

static gboolean
mode_lookup (const char *str, guint n, TwedMode *mode)
{
  for (guint i = 0; str && i < n; i++)
    {
      if (g_str_equal (str, mode_names[i]))
        {
          *mode = (TwedMode) i;
          return TRUE;
        }
    }
  return FALSE;
}

gboolean
twed_mode_from_string (const char *str, TwedMode *mode)
{
  return mode_lookup (str, TWED_MODE_AUTO, mode);
}

gboolean
twed_policy_mode_from_string (const char *str, TwedMode *mode)
{
  return mode_lookup (str, G_N_ELEMENTS (mode_names), mode);
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
    case TWED_MODE_AUTO:
      /* Bounds only: the controller chooses the delay. */
      s->delay = s->min;
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
twed_setting_lowers (const TwedSetting *from, const TwedSetting *to)
{
  if (to->mode == TWED_MODE_OFF)
    return from->mode != TWED_MODE_OFF;
  return from->mode == TWED_MODE_FIXED && to->mode == TWED_MODE_FIXED && to->delay < from->delay;
}

static const TwedFieldNames plain_names = { "delay", "min", "max", "a higher limit" };

gboolean
twed_setting_validate (const TwedSetting *s, TwedFields present, guint limit,
                       const TwedFieldNames *names, TwedFields *field, GError **error)
{
  const struct { TwedFields bit; guint value; const char *name; } values[] = {
    { TWED_FIELD_DELAY, s->delay, names->delay },
    { TWED_FIELD_MIN, s->min, names->min },
    { TWED_FIELD_MAX, s->max, names->max },
  };

  if (field)
    *field = 0;
  switch (s->mode)
    {
    case TWED_MODE_OFF:
      if (present)
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "mode \"off\" takes no %s, %s or %s",
                       names->delay, names->min, names->max);
          return FALSE;
        }
      break;
    case TWED_MODE_FIXED:
      if (!(present & TWED_FIELD_DELAY))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "mode \"fixed\" needs %s", names->delay);
          return FALSE;
        }
      if (present & (TWED_FIELD_MIN | TWED_FIELD_MAX))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "mode \"fixed\" takes no %s or %s",
                       names->min, names->max);
          return FALSE;
        }
      break;
    case TWED_MODE_DYNAMIC:
      if (present != (TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "mode \"dynamic\" needs %s, %s and %s",
                       names->delay, names->min, names->max);
          return FALSE;
        }
      break;
    case TWED_MODE_AUTO:
      if (present != (TWED_FIELD_MIN | TWED_FIELD_MAX))
        {
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                       "mode \"auto\" needs %s and %s and takes no %s (the controller sets it)",
                       names->min, names->max, names->delay);
          return FALSE;
        }
      break;
    default:
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "unknown mode");
      return FALSE;
    }
  for (guint i = 0; i < G_N_ELEMENTS (values); i++)
    if ((present & values[i].bit) && values[i].value > limit)
      {
        if (field)
          *field = values[i].bit;
        if (limit < TWED_DELAY_LIMIT)
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID,
                       "%u exceeds %u; delays of 6 and more collapse throughput and need %s",
                       values[i].value, limit, names->allow_long);
        else
          g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%u exceeds %u: values are 0..%u",
                       values[i].value, limit, limit);
        return FALSE;
      }
  if ((present & TWED_FIELD_MIN) && (present & TWED_FIELD_DELAY) && s->min > s->delay)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s (%u) must not exceed %s (%u)",
                   names->min, s->min, names->delay, s->delay);
      return FALSE;
    }
  if (s->mode == TWED_MODE_AUTO && s->min > s->max)
    {
      if (field)
        *field = TWED_FIELD_MIN;
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s (%u) must not exceed %s (%u)",
                   names->min, s->min, names->max, s->max);
      return FALSE;
    }
  if ((present & TWED_FIELD_MAX) && (present & TWED_FIELD_DELAY) && s->delay > s->max)
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s (%u) must not exceed %s (%u)",
                   names->delay, s->delay, names->max, s->max);
      return FALSE;
    }
  return TRUE;
}

gboolean
twed_setting_check (const TwedSetting *s, GError **error)
{
  TwedFields present = s->mode == TWED_MODE_OFF ? 0 : s->mode == TWED_MODE_FIXED ? TWED_FIELD_DELAY
                       : s->mode == TWED_MODE_AUTO ? TWED_FIELD_MIN | TWED_FIELD_MAX
                       : TWED_FIELD_DELAY | TWED_FIELD_MIN | TWED_FIELD_MAX;

  return twed_setting_validate (s, present, TWED_DELAY_LIMIT, &plain_names, NULL, error);
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
    case TWED_MODE_AUTO:
      return g_strdup_printf ("auto[%u..%u]", s->min, s->max);
    case TWED_MODE_OFF:
    default:
      return g_strdup ("off");
    }
}
