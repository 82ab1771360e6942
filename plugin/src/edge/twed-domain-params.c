/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The only file that calls the twed libvirt API (interfaces.md
 * section 3); everything else works against stock libvirt. */
#include "config.h"
#include "twed-domain-params.h"

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
  /* off takes no values; fixed only a delay; dynamic all three. */
  if (s->mode != TWED_MODE_OFF &&
      virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_DELAY, s->delay) < 0)
    goto out;
  if (s->mode == TWED_MODE_DYNAMIC &&
      (virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_MIN, s->min) < 0 ||
       virTypedParamsAddUInt (&params, &nparams, &maxparams, VIR_DOMAIN_TWED_MAX, s->max) < 0))
    goto out;
  if (virDomainSetTwedParameters (dom, params, nparams, flags) < 0)
    goto out;
  ok = TRUE;

out:
  if (!ok)
    twed_set_libvirt_error (error, "virDomainSetTwedParameters");
  virTypedParamsFree (params, nparams);
  return ok;
}

gboolean
twed_domain_params_get (virDomainPtr dom, TwedSetting *s, GError **error)
{
  virTypedParameterPtr params = NULL;
  int nparams = 0;
  const char *mode = NULL;
  unsigned int v;
  gboolean ok = FALSE;

  /* First call sizes the array, as with the other *Parameters APIs. */
  if (virDomainGetTwedParameters (dom, NULL, &nparams, 0) < 0)
    goto out;
  params = g_new0 (virTypedParameter, nparams);
  if (virDomainGetTwedParameters (dom, params, &nparams, 0) < 0)
    goto out;
  *s = (TwedSetting) { TWED_MODE_OFF, 0, 0, 0 };
  if (virTypedParamsGetString (params, nparams, VIR_DOMAIN_TWED_MODE, &mode) == 1 &&
      !twed_mode_from_string (mode, &s->mode))
    {
      virTypedParamsClear (params, nparams);
      g_free (params);
      g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "libvirt reported unknown TWED mode '%s'", mode);
      return FALSE;
    }
  if (virTypedParamsGetUInt (params, nparams, VIR_DOMAIN_TWED_DELAY, &v) == 1)
    s->delay = v;
  if (virTypedParamsGetUInt (params, nparams, VIR_DOMAIN_TWED_MIN, &v) == 1)
    s->min = v;
  if (virTypedParamsGetUInt (params, nparams, VIR_DOMAIN_TWED_MAX, &v) == 1)
    s->max = v;
  twed_setting_normalize (s);
  ok = TRUE;

out:
  if (!ok)
    twed_set_libvirt_error (error, "virDomainGetTwedParameters");
  if (params)
    {
      virTypedParamsClear (params, nparams);
      g_free (params);
    }
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

gboolean
twed_domain_params_get (virDomainPtr dom G_GNUC_UNUSED, TwedSetting *s G_GNUC_UNUSED, GError **error)
{
  g_set_error_literal (error, TWED_ERROR, TWED_ERROR_UNSUPPORTED, TWED_API_MISSING_MESSAGE);
  return FALSE;
}

#endif
