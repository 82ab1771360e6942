/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the policy parser: it must never crash, and a
 * document it accepts must satisfy every invariant the planner relies
 * on (the same ones the JSON Schema states). */
#include "twed-policy.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
check_setting (const TwedPolicy *pol, const TwedSetting *s)
{
  guint limit = pol->allow_long_delays ? TWED_DELAY_LIMIT : TWED_DELAY_SAFE_LIMIT;

  if (!twed_setting_check (s, NULL) || s->delay > limit || s->min > limit || s->max > limit)
    abort ();
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  TwedPolicy *pol = twed_policy_parse ((const char *) data, size, "fuzz", &error);

  if (!pol)
    {
      if (!error || !error->message || !g_str_has_prefix (error->message, "fuzz: "))
        abort ();
      return 0;
    }
  if (!pol->name || !*pol->name || pol->bands->len > 16)
    abort ();
  for (guint i = 0; i < pol->bands->len; i++)
    {
      const TwedBand *b = &g_array_index (pol->bands, TwedBand, i);

      check_setting (pol, &b->setting);
      if (!(b->up_to > 0) || (i && !(b->up_to > g_array_index (pol->bands, TwedBand, i - 1).up_to)))
        abort ();
    }
  check_setting (pol, &pol->beyond);
  for (double r = 0; r < 8; r += 0.25)
    if (twed_policy_band_index (pol, r) > pol->bands->len)
      abort ();
  twed_policy_free (pol);
  return 0;
}
