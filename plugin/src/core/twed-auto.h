/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The closed-loop controller of policy bands in mode "auto": from one
 * read of a host to the next it turns each VM's cumulative signals
 * (wfe_exit_stat, twed_delay, run-queue wait vcpu.N.delay, CPU time
 * vcpu.N.time) into deltas, and moves the VM's fixed delay one step per
 * decision within the band's bounds.  It lowers WFE trap exits per
 * second of vCPU time, measured against those at off, only while no VM
 * among the VM itself and the co-located VMs (their vCPUs that may run
 * on its pCPUs) waits a larger share of its runnable time, wait /
 * (wait + CPU time), than it did with TWED off, beyond a margin: the
 * time a vCPU spins in the window is paid by whoever waits for that
 * pCPU.  Pure: no I/O, times come from the reads. */

#include "twed-inventory.h"

G_BEGIN_DECLS

typedef struct {
  double wait_margin;     /* a run-queue wait share may rise by this (points, as a fraction) over off */
  double min_gain;        /* a delay must save this fraction of the exits/s at off to be kept, and
                           * more than this fraction must be left for a longer one to be tried */
  guint dwell_seconds;    /* minimum time (and two reads) at a setting before judging it */
  guint stale_seconds;    /* signals older than this: fall back to off */
  guint cooldown_seconds; /* after a back-off, the levels above stay barred */
  guint baseline_seconds; /* a reference at off older than this is measured again, 0 = never */
} TwedAutoParams;

/* The least min_gain a policy may ask for. */
#define TWED_AUTO_MIN_GAIN_FLOOR 0.02
/* The least wait_margin a policy may ask for. */
#define TWED_AUTO_MIN_WAIT_MARGIN 0.01
/* baseline_seconds, when not 0, is at least this many dwells (and the
 * cooldown); unset, at least that too.  cooldown_seconds is at least
 * two dwells. */
#define TWED_AUTO_BASELINE_DWELLS 10u

void twed_auto_params_init (TwedAutoParams *params);

typedef enum {
  TWED_AUTO_HOLD = 0,   /* keep the setting (dwelling, settled, at a bound) */
  TWED_AUTO_STEP_UP,
  TWED_AUTO_STEP_DOWN,
  TWED_AUTO_FALLBACK,   /* signals missing or stale: off */
  TWED_AUTO_BASELINE,   /* counters (re)started: measuring from here */
} TwedAutoDecision;

const char *twed_auto_decision_to_string (TwedAutoDecision decision);
/* The decision twed_auto_decision_to_string() names @str; FALSE when none. */
gboolean    twed_auto_decision_from_string (const char *str, TwedAutoDecision *decision);

/* One decision with the figures it rests on (NAN where not known). */
typedef struct {
  TwedAutoDecision decision;
  TwedSetting target;     /* off or fixed */
  double exits_per_s;     /* WFE exits per second of vCPU time at the current setting, pooled */
  double off_exits_per_s; /* the same at off, which the setting is judged against */
  double wait_change;     /* largest rise of a wait share (VM or co-located) over off, fraction */
  gboolean waiting;       /* a hold that only waits for time to pass (a dwell, a decided step) */
  gboolean protective;    /* a step down or to off that undoes a cost (a wait share above the
                           * margin, a co-runner not measured) or a setting nothing measures */
  gboolean set_off;       /* off, asked for although the domain counts as off: it has no <twed>
                           * and the host's default delay (kvm-arm.twed=) is in force */
  char *reason;
} TwedAutoVerdict;

void twed_auto_verdict_clear (TwedAutoVerdict *verdict);

typedef struct _TwedAuto TwedAuto;

/* Reference counted: twedd's passes run on workers that may end after
 * the daemon's engine. */
TwedAuto *twed_auto_new (void);
TwedAuto *twed_auto_ref (TwedAuto *ctl);
void      twed_auto_unref (TwedAuto *ctl);

/* Takes one read of @host (after twed_host_compute()): the deltas of
 * every domain since its previous read, and for each the run-queue
 * wait of the VMs sharing a pCPU with it.  Domains not seen for
 * @forget_after usec are forgotten. */
void twed_auto_observe (TwedAuto *ctl, const TwedHost *host, gint64 forget_after);

/* The setting @dom should have next under bounds @bounds (mode auto),
 * from what twed_auto_observe() saw.  Reads the domain's current
 * setting, so a change that was deferred, failed or made by hand is
 * what the controller continues from. */
void twed_auto_decide (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom,
                       const TwedSetting *bounds, const TwedAutoParams *params,
                       TwedAutoVerdict *out);

/* Whether the decisions are applied (twedd's dry_run): in a dry run no
 * decided step is awaited or counted as refused. */
void twed_auto_set_dry_run (TwedAuto *ctl, gboolean dry_run);

/* @dom was planned without the controller this pass (pinned, opted
 * out, definition not read): its decided step is dropped and its
 * window starts again. */
void twed_auto_skip (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedAuto, twed_auto_unref)

G_END_DECLS
