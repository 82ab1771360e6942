/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-types.h"

G_BEGIN_DECLS

/* Namespace of the per-VM intent element, interfaces.md section 4. */
#define TWED_METADATA_NS "urn:twed:libvirt:1"
#define TWED_NOVA_NS "http://openstack.org/xmlns/libvirt/nova/1.1"

typedef enum {
  TWED_MANAGE_AUTO = 0, /* no <twed:policy>, or manage='yes' */
  TWED_MANAGE_OPTOUT,   /* manage='no': never touched */
  TWED_MANAGE_PINNED,   /* manage='pinned': set by hand, left alone */
} TwedManage;

/* One element found under the domain's <metadata>, any depth. */
typedef struct {
  char *ns;
  char *element;
  GHashTable *attrs; /* local name -> value */
  char *text;
} TwedMetaItem;

/* Which of a vCPU's signals the bulk stats' VCPU group carried. */
typedef enum {
  TWED_SIGNAL_WFE_EXITS = 1 << 0,  /* vcpu.N.wfe_exit_stat.sum (kernel) */
  TWED_SIGNAL_TWED_DELAY = 1 << 1, /* vcpu.N.twed_delay.cur (kernel) */
  TWED_SIGNAL_WAIT = 1 << 2,       /* vcpu.N.delay: run-queue wait, ns */
  TWED_SIGNAL_TIME = 1 << 3,       /* vcpu.N.time: CPU time, ns */
} TwedSignalBits;
#define TWED_SIGNALS_ALL (TWED_SIGNAL_WFE_EXITS | TWED_SIGNAL_TWED_DELAY | TWED_SIGNAL_WAIT | TWED_SIGNAL_TIME)

/* One vCPU's counters as read: cumulative ones are raw, their deltas
 * are the controller's business (twed-auto.h). */
typedef struct {
  guint64 wfe_exits;
  guint64 wait_ns;
  guint64 time_ns;
  guint twed_delay;   /* instant: what HCR_EL2 is programmed with */
  guint have;         /* TwedSignalBits */
} TwedVcpuSignals;

/* A running domain's signals from one read of the bulk stats. */
typedef struct {
  gint64 at;          /* monotonic usec of the read */
  int id;             /* libvirt domain id: a restart or an incoming
                       * migration gives a new one */
  GArray *vcpus;      /* TwedVcpuSignals, by vCPU number */
} TwedDomainSignals;

TwedDomainSignals *twed_domain_signals_new (gint64 at, int id);
TwedDomainSignals *twed_domain_signals_copy (const TwedDomainSignals *src);
void               twed_domain_signals_free (TwedDomainSignals *sig);
/* Slot for vCPU @vcpu, growing the array (zeroed slots have nothing). */
TwedVcpuSignals   *twed_domain_signals_vcpu (TwedDomainSignals *sig, guint vcpu);

typedef struct {
  char *name;
  char *uuid;
  gboolean active;
  gboolean persistent;
  guint nvcpus;
  GArray *default_affinity; /* <vcpu cpuset=…>, NULL = all pCPUs */
  GPtrArray *affinity;      /* per vCPU GArray<guint> or NULL */
  gboolean has_twed;        /* <cputune><twed> present */
  TwedSetting twed;         /* current; mode off when absent */
  TwedManage manage;
  TwedSetting pinned;       /* meaningful when manage == PINNED */
  GPtrArray *meta;          /* TwedMetaItem */
  char *flavor;             /* Nova flavor name, if any */
  /* Why the definition could not be read this cycle (busy with a
   * migration or another job, or unparsable); NULL when it was read.
   * The load then counts the last known vCPUs and pinning, and the
   * planner leaves the domain alone until it is read again. */
  char *load_error;
  /* Why the domain must not be changed now (changed too recently, or
   * its last change failed and backs off); NULL when it may be. */
  char *hold;
  /* The hold is only the back-off after a failed change: a change the
   * host always takes (an auto step down, off) need not wait for it. */
  gboolean hold_after_failure;
  /* From the bulk stats of this read; NULL when it carried none (not
   * running, or a driver without the VCPU group). */
  TwedDomainSignals *signals;

  /* Filled by twed_host_compute(). */
  double ratio;
} TwedDomain;

typedef struct {
  char *name;
  char *uri;
  gboolean reachable;
  char *error;
  gint64 retry_at;         /* unreachable: monotonic usec of the next
                            * attempt (backoff), 0 = none due */
  guint ncpus;             /* pCPUs the host has (ids 0..ncpus-1) */
  GArray *online;          /* online pCPU ids, NULL = all */
  TwedSupport support;
  char *support_reason;    /* why support is unknown, NULL = not said */
  GPtrArray *domains;      /* TwedDomain */
  guint session;           /* changes each time the connection to the host is
                            * opened anew: a domain id read before may now be
                            * another process's (the host rebooted) */

  /* Filled by twed_host_compute(). */
  guint nvcpus_active;
  guint shared_pcpus;
  guint dedicated_pcpus;
  double ratio;
} TwedHost;

TwedMetaItem *twed_meta_item_new (const char *ns, const char *element);
void          twed_meta_item_free (TwedMetaItem *item);

TwedDomain *twed_domain_new (const char *name);
TwedDomain *twed_domain_copy (const TwedDomain *dom);
void        twed_domain_free (TwedDomain *dom);
void        twed_domain_set_vcpus (TwedDomain *dom, guint nvcpus);
void        twed_domain_pin_vcpu (TwedDomain *dom, guint vcpu, GArray *cpus);
const char *twed_domain_meta_lookup (const TwedDomain *dom, const char *ns,
                                     const char *element, const char *attr);

TwedHost *twed_host_new (const char *name, const char *uri);
void      twed_host_free (TwedHost *host);

/* cpuset syntax of libvirt: "0-3,^2,8". Returns a sorted unique list. */
GArray  *twed_cpuset_parse (const char *str, GError **error);
char    *twed_cpuset_format (GArray *set);
GArray  *twed_cpuset_copy (GArray *set);


G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedDomain, twed_domain_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedDomainSignals, twed_domain_signals_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedHost, twed_host_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedMetaItem, twed_meta_item_free)

G_END_DECLS
