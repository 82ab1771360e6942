/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The only file that calls the twed libvirt API (interfaces.md
 * section 3); everything else works against stock libvirt. */
#include "config.h"
#include "twed-domain-params.h"

#include <string.h>

gboolean
twed_domain_params_refused (const GError *error)
{
  /* set-twed's own message for KVM_ENABLE_CAP failing (QEMU runs with
   * LC_ALL=C under libvirt: strerror (EINVAL) in English), not any
   * libvirt error that ends the same way. */
  const char *ours = error && error->domain == TWED_LIBVIRT_ERROR ? strstr (error->message, "Setting TWED mode '")
                                                                  : NULL;

  return ours && strstr (ours, "failed: Invalid argument");
}

#if HAVE_VIR_DOMAIN_TWED_API

gboolean
twed_domain_params_available (void)
{
  return TRUE;
}

gboolean
twed_domain_params_set (virDomainPtr dom, const TwedSetting *s, gboolean live, gboolean config,
                    GError **error)
{
  virTypedParameterPtr params = NULL;
  int nparams = 0, maxparams = 0;
  unsigned int flags = (live ? VIR_DOMAIN_AFFECT_LIVE : 0) | (config ? VIR_DOMAIN_AFFECT_CONFIG : 0);
  gboolean ok = FALSE;

  if (virTypedParamsAddString (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_MODE,
                               twed_mode_to_string (s->mode)) < 0)
    goto out;
  /* off takes no values. fixed and dynamic send all three: libvirt keeps
   * min/max in every mode and checks min <= delay <= max against the
   * stored bounds too, so a fixed delay outside them would be refused.
   * fixed sends the bounds it was given when they hold the delay, else
   * min = max = delay (what Get reports in fixed). */
  if (s->mode != TWED_MODE_OFF)
    {
      gboolean bounded = s->mode == TWED_MODE_DYNAMIC || (s->min <= s->delay && s->delay <= s->max);
      guint lo = bounded ? s->min : s->delay;
      guint hi = bounded ? s->max : s->delay;

      if (virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_DELAY, s->delay) < 0 ||
          virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_MIN, lo) < 0 ||
          virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_MAX, hi) < 0)
        goto out;
    }
  if (virDomainSetTwedParameters (dom, params, nparams, flags) < 0)
    goto out;
  ok = TRUE;

out:
  if (!ok)
    twed_set_libvirt_error (error, "virDomainSetTwedParameters");
  virTypedParamsFree (params, nparams);
  return ok;
}

#else /* !HAVE_VIR_DOMAIN_TWED_API */

gboolean
twed_domain_params_available (void)
{
  return FALSE;
}

gboolean
twed_domain_params_set (virDomainPtr dom G_GNUC_UNUSED, const TwedSetting *s G_GNUC_UNUSED,
                    gboolean live G_GNUC_UNUSED, gboolean config G_GNUC_UNUSED, GError **error)
{
  g_set_error_literal (error, TWED_ERROR, TWED_ERROR_UNSUPPORTED, TWED_API_MISSING_MESSAGE);
  return FALSE;
}

#endif
