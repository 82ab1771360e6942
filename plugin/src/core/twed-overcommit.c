/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-overcommit.h"

#include <string.h>

typedef struct {
  guint ncpus;
  gboolean *online;
  double *load;
  guint *users;     /* vCPUs that may run on the pCPU */
  gboolean *exclusive; /* some vCPU is pinned to this pCPU alone */
} HostCpus;

/* The online pCPUs one vCPU may use. An affinity that names no online
 * pCPU falls back to all online pCPUs, as the scheduler would. */
static guint
vcpu_cpus (const HostCpus *hc, const TwedDomain *dom, guint vcpu, guint *out)
{
  GArray *set = g_ptr_array_index (dom->affinity, vcpu);
  guint n = 0;

  if (!set)
    set = dom->default_affinity;
  if (set)
    for (guint i = 0; i < set->len; i++)
      {
        guint c = g_array_index (set, guint, i);

        if (c < hc->ncpus && hc->online[c])
          out[n++] = c;
      }
  if (n == 0)
    for (guint c = 0; c < hc->ncpus; c++)
      if (hc->online[c])
        out[n++] = c;
  return n;
}

static void
add_domain (HostCpus *hc, const TwedDomain *dom, double *load, guint *users,
            gboolean *exclusive, guint *scratch)
{
  for (guint v = 0; v < dom->nvcpus; v++)
    {
      guint n = vcpu_cpus (hc, dom, v, scratch);

      for (guint i = 0; i < n; i++)
        {
          load[scratch[i]] += 1.0 / n;
          if (users)
            users[scratch[i]]++;
        }
      if (n == 1 && exclusive)
        exclusive[scratch[0]] = TRUE;
    }
}

/* Mean load over the union of the pCPUs the domain may use; @load
 * already includes the domain itself. */
static double
domain_ratio (HostCpus *hc, const TwedDomain *dom, const double *load,
              guint *scratch, gboolean *mark)
{
  double sum = 0;
  guint count = 0;

  memset (mark, 0, hc->ncpus * sizeof (gboolean));
  for (guint v = 0; v < dom->nvcpus; v++)
    {
      guint n = vcpu_cpus (hc, dom, v, scratch);

      for (guint i = 0; i < n; i++)
        if (!mark[scratch[i]])
          {
            mark[scratch[i]] = TRUE;
            sum += load[scratch[i]];
            count++;
          }
    }
  return count ? sum / count : 0.0;
}

void
twed_host_compute (TwedHost *host)
{
  HostCpus hc = { 0 };
  g_autofree gboolean *online = NULL;
  g_autofree double *load = NULL;
  g_autofree double *tmp = NULL;
  g_autofree guint *users = NULL;
  g_autofree gboolean *exclusive = NULL;
  g_autofree guint *scratch = NULL;
  g_autofree gboolean *mark = NULL;
  guint shared = 0, dedicated = 0;
  double weight = 0;

  hc.ncpus = host->ncpus;
  online = g_new0 (gboolean, hc.ncpus + 1);
  if (host->online)
    {
      for (guint i = 0; i < host->online->len; i++)
        {
          guint c = g_array_index (host->online, guint, i);

          if (c < hc.ncpus)
            online[c] = TRUE;
        }
    }
  else
    for (guint c = 0; c < hc.ncpus; c++)
      online[c] = TRUE;
  hc.online = online;
  load = g_new0 (double, hc.ncpus + 1);
  tmp = g_new0 (double, hc.ncpus + 1);
  users = g_new0 (guint, hc.ncpus + 1);
  exclusive = g_new0 (gboolean, hc.ncpus + 1);
  scratch = g_new0 (guint, hc.ncpus + 1);
  mark = g_new0 (gboolean, hc.ncpus + 1);

  host->nvcpus_active = 0;
  for (guint d = 0; d < host->domains->len; d++)
    {
      TwedDomain *dom = g_ptr_array_index (host->domains, d);

      if (!dom->active)
        continue;
      add_domain (&hc, dom, load, users, exclusive, scratch);
      host->nvcpus_active += dom->nvcpus;
    }

  for (guint d = 0; d < host->domains->len; d++)
    {
      TwedDomain *dom = g_ptr_array_index (host->domains, d);

      if (dom->active)
        dom->ratio = domain_ratio (&hc, dom, load, scratch, mark);
      else
        {
          memcpy (tmp, load, hc.ncpus * sizeof (double));
          add_domain (&hc, dom, tmp, NULL, NULL, scratch);
          dom->ratio = domain_ratio (&hc, dom, tmp, scratch, mark);
        }
    }

  /* A pCPU is dedicated when one vCPU is pinned to it alone and
   * nothing else may run there: KVM never traps WFE on it. The shared
   * pool's vCPU count is the weight that lands on it. */
  for (guint c = 0; c < hc.ncpus; c++)
    {
      if (!online[c])
        continue;
      if (exclusive[c] && users[c] == 1)
        dedicated++;
      else
        {
          shared++;
          weight += load[c];
        }
    }
  host->shared_pcpus = shared;
  host->dedicated_pcpus = dedicated;
  if (shared && weight > 0)
    host->ratio = weight / shared;
  else
    host->ratio = dedicated ? 1.0 : 0.0;
}
