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

/* A VM not listed on its host for this long is forgotten by the
 * controller (gone, or migrated away for good): twedd's @forget_after. */
#define TWED_AUTO_FORGET_USEC (G_GINT64_CONSTANT (3600) * G_USEC_PER_SEC)

/* Takes one read of @host (after twed_host_compute()): the deltas of
 * every domain since its previous read, and for each the run-queue
 * wait of the VMs sharing a pCPU with it.  Domains not listed for
 * @forget_after usec are forgotten. */
void twed_auto_observe (TwedAuto *ctl, const TwedHost *host, gint64 forget_after);
/* For a host twed_auto_observe () is not called for (none of its
 * running domains under auto): forgets only the domains not listed on
 * it for @forget_after usec, as observe would, refreshing nothing. */
void twed_auto_forget_unseen (TwedAuto *ctl, const TwedHost *host, gint64 forget_after);
/* The hosts the controller may hold from now on (twedd's configured
 * ones; NULL = any, as before the first call): every domain read on
 * another is forgotten, its saved bars at the next save, and a pass over
 * such a host that still runs keeps nothing. */
void twed_auto_retain_hosts (TwedAuto *ctl, const char *const *hosts);

/* The setting @dom should have next under bounds @bounds (mode auto),
 * from what twed_auto_observe() saw.  Reads the domain's current
 * setting, so a change that was deferred, failed or made by hand is
 * what the controller continues from. */
void twed_auto_decide (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom,
                       const TwedSetting *bounds, const TwedAutoParams *params,
                       TwedAutoVerdict *out);

/* What became of a step twed_auto_decide() asked for that was not
 * made: the planner and twedd know why, the controller only sees that
 * the setting did not move. */
typedef enum {
  TWED_AUTO_STEP_DEFERRED = 1, /* not tried: rate limits, a back-off, min_change_interval, a reload */
  TWED_AUTO_STEP_FAILED,       /* tried, failed for another reason than its values (a domain job,
                                * a hung monitor) */
  TWED_AUTO_STEP_REFUSED,      /* the host refused its values (EINVAL: kvm-arm.twed_max) */
} TwedAutoStepOutcome;

/* Tells the controller that the step to @target it decided for the VM
 * @uuid on @host was not made, and why.  Only a refusal counts as the
 * host's ceiling (its levels barred, asked again ever less often); a
 * step deferred or failed otherwise is asked again while it stays
 * pending, and dropped without a bar after a dwell, the VM judged
 * afresh.  A report of another step than the one pending is ignored. */
void twed_auto_step_not_made (TwedAuto *ctl, const char *host, const char *uuid, const TwedSetting *target,
                              TwedAutoStepOutcome outcome);

/* Whether the decisions are applied (twedd's dry_run): in a dry run no
 * decided step is awaited or counted as refused. */
void twed_auto_set_dry_run (TwedAuto *ctl, gboolean dry_run);

/* @dom was planned without the controller this pass (pinned, opted
 * out, definition not read): its decided step is dropped and its
 * window starts again. */
void twed_auto_skip (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom);

/* What the controller holds back for a VM on a host beyond its
 * measurements, kept across a restart of twedd (its state directory):
 * the bar after a step down (cooldown_seconds), the levels not taken
 * when asked (the host ceiling) and when off was last measured again for
 * a newcomer (once per cooldown).  Times are Unix usec in a saved or
 * restored record: the controller's own are the reads' (monotonic). */
typedef struct {
  char *host;
  char *vm;                 /* uuid */
  int domain_id;            /* the domain's id then: a refusal holds for that process only */
  int barred_from;          /* this level and those above are barred until barred_until;
                             * -1 = none */
  gint64 barred_until;
  int refused_from;         /* lowest level not taken when asked, -1 = none */
  gint64 refused_until;     /* it and those above are not asked for before */
  gint64 refused_bar;       /* usec: how long they were barred last time (it doubles) */
  gint64 remeasured_at;     /* off last measured again for a newcomer, 0 = never */
} TwedAutoBars;

/* The longest cooldown a policy may ask for: no bar is longer, and a
 * saved remeasure of off is kept no longer. */
#define TWED_AUTO_COOLDOWN_MAX_SECONDS 604800u

TwedAutoBars *twed_auto_bars_new (const char *host, const char *vm);
void          twed_auto_bars_free (TwedAutoBars *bars);
/* Whether @bars holds anything back at Unix usec @now: a back-off bar
 * that runs, a refusal whose bar runs or ended less than its length ago,
 * a remeasure less than TWED_AUTO_COOLDOWN_MAX_SECONDS ago.  One with no
 * part at all is a record that the VM's bars are gone. */
gboolean      twed_auto_bars_hold (const TwedAutoBars *bars, gint64 now);
/* GCompareFunc of a GPtrArray of TwedAutoBars: by host, then VM. */
int           twed_auto_bars_compare (gconstpointer a, gconstpointer b);

/* Appends to @out the bars of the VMs on @host (every host when NULL):
 * all that hold something, or (@changed_only) those that changed since
 * they were last appended, including bars gone (a record that holds
 * nothing) and VMs forgotten.  @mono_now and @real_now are the same
 * instant on the reads' clock and in Unix usec. */
void twed_auto_save_bars (TwedAuto *ctl, const char *host, gboolean changed_only, gint64 mono_now,
                          gint64 real_now, GPtrArray *out);
/* Takes the bars saved before a restart into a controller that has not
 * read their VMs yet (twedd's start), those that still hold something
 * at @real_now; returns how many VMs.  A refusal holds only if the
 * VM's first read shows the same domain id (the same QEMU process). */
guint twed_auto_restore_bars (TwedAuto *ctl, const GPtrArray *bars, gint64 mono_now, gint64 real_now);
/* What the last saves returned may not have been kept (an append that
 * failed): the next save of each host returns again every VM's bars that
 * hold something. */
void  twed_auto_bars_unsaved (TwedAuto *ctl);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedAuto, twed_auto_unref)

G_END_DECLS
