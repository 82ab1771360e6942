/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-inventory.h"
#include "twed-libvirt.h"

G_BEGIN_DECLS

/* The closed loop's per-vCPU signals out of one record of the bulk
 * stats (VIR_DOMAIN_STATS_VCPU) that the inventory reads anyway:
 * vcpu.N.wfe_exit_stat.sum and vcpu.N.twed_delay.cur (the kernel's
 * stats through query-stats), vcpu.N.delay and vcpu.N.time.  NULL when
 * the record has no vCPU of them (a driver without the group, a domain
 * that is not running).  @at: monotonic usec of the read. */
TwedDomainSignals *twed_signals_from_record (virDomainStatsRecordPtr record, gint64 at);

G_END_DECLS
