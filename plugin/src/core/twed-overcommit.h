/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-inventory.h"

G_BEGIN_DECLS

/* Fills host->ratio, shared/dedicated pCPU counts and every domain's
 * ratio following interfaces.md section 4:
 *  - a vCPU spreads weight 1/|affinity| over its allowed online pCPUs;
 *  - a pCPU's load is the sum of the weights on it;
 *  - a VM's ratio is the mean load of the pCPUs it may run on;
 *  - the host ratio is vCPUs / pCPUs of the shared pool (pCPUs not
 *    dedicated to a single vCPU pinned to it alone).
 * Inactive domains get the ratio they would see if started now. */
void twed_host_compute (TwedHost *host);

G_END_DECLS
