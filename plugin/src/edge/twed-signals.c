/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-signals.h"

#include <stdio.h>

static gboolean
get_ull (virDomainStatsRecordPtr r, const char *name, unsigned long long *out)
{
  return virTypedParamsGetULLong (r->params, r->nparams, name, out) == 1;
}

TwedDomainSignals *
twed_signals_from_record (virDomainStatsRecordPtr r, gint64 at)
{
  g_autoptr(TwedDomainSignals) sig = NULL;
  unsigned int n = 0;
  int id = (int) virDomainGetID (r->dom); /* kept in the handle: no call */

  if (virTypedParamsGetUInt (r->params, r->nparams, "vcpu.current", &n) != 1 || n == 0)
    return NULL;
  sig = twed_domain_signals_new (at, id);
  for (unsigned int v = 0; v < n; v++)
    {
      TwedVcpuSignals *s = twed_domain_signals_vcpu (sig, v);
      char name[64];
      unsigned long long x;

      /* An offline vCPU (hot-unplugged slot) reports nothing; the
       * controller then sees the signal as missing and stays off. */
      snprintf (name, sizeof name, "vcpu.%u.wfe_exit_stat.sum", v);
      if (get_ull (r, name, &x))
        {
          s->wfe_exits = x;
          s->have |= TWED_SIGNAL_WFE_EXITS;
        }
      snprintf (name, sizeof name, "vcpu.%u.twed_delay.cur", v);
      if (get_ull (r, name, &x))
        {
          s->twed_delay = (guint) MIN (x, (unsigned long long) G_MAXUINT);
          s->have |= TWED_SIGNAL_TWED_DELAY;
        }
      snprintf (name, sizeof name, "vcpu.%u.delay", v);
      if (get_ull (r, name, &x))
        {
          s->wait_ns = x;
          s->have |= TWED_SIGNAL_WAIT;
        }
      snprintf (name, sizeof name, "vcpu.%u.time", v);
      if (get_ull (r, name, &x))
        {
          s->time_ns = x;
          s->have |= TWED_SIGNAL_TIME;
        }
    }
  return g_steal_pointer (&sig);
}
