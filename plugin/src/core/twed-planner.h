/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-policy.h"

#include <stdio.h>

G_BEGIN_DECLS

typedef enum {
  TWED_ACTION_CHANGE = 0,
  TWED_ACTION_KEEP,
  TWED_ACTION_SKIP,
  TWED_ACTION_DEFER,
} TwedAction;

typedef enum {
  TWED_RESULT_NONE = 0, /* not applied (plan only, or nothing to do) */
  TWED_RESULT_APPLIED,
  TWED_RESULT_FAILED,
  TWED_RESULT_DRY_RUN,
} TwedResult;

/* host, policy and band are shared by the entries of a plan:
 * g_ref_string_acquire () to keep one beyond the entry. */
typedef struct {
  GRefString *host;
  char *domain;
  char *uuid;
  gboolean active;
  gboolean persistent;
  guint nvcpus;
  double ratio;
  GRefString *policy; /* NULL when skipped before policy lookup */
  GRefString *band;   /* "(1.00, 2.00]" */
  TwedManage manage;
  TwedSetting current;
  TwedSetting target;
  TwedAction action;
  char *reason;
  TwedResult result;
  char *error;
  gboolean refused;   /* the failure was the host refusing the values (EINVAL) */
  /* Band in mode auto: the bounds and the controller's decision with
   * its figures (NAN where not known). */
  gboolean is_auto;
  TwedSetting auto_bounds;
  TwedAutoDecision auto_decision;
  double auto_exits_per_s;
  double auto_off_exits_per_s;
  double auto_wait_change;
  gboolean auto_waiting;  /* the decision only waits (dwell, a step not in force yet) */
  gboolean auto_protective; /* TwedAutoVerdict.protective */
  gboolean auto_set_off;    /* TwedAutoVerdict.set_off: off is a change from the host default */
} TwedPlanEntry;

typedef struct {
  char *name;
  char *uri;
  gboolean reachable;
  char *error;
  guint pcpus;
  guint shared_pcpus;
  guint dedicated_pcpus;
  guint vcpus;
  double ratio;
  TwedSupport support;
  guint ndomains;
} TwedPlanHost;

typedef struct {
  char *generated;       /* ISO 8601, supplied by the caller */
  GPtrArray *hosts;      /* TwedPlanHost */
  GPtrArray *entries;    /* TwedPlanEntry, sorted by host, domain */
} TwedPlan;

typedef struct {
  const char *generated;
  guint max_changes_global; /* extra cap from the configuration, 0 = none */
  /* State of the auto bands across plans (twedd); NULL: a single run,
   * which has no history to judge a delay by. */
  TwedAuto *controller;
} TwedPlanOptions;

/* @hosts: TwedHost, already passed through twed_host_compute(). */
TwedPlan *twed_plan_build (GPtrArray *hosts, const TwedPolicySet *set,
                           const TwedPlanOptions *opts);
void      twed_plan_free (TwedPlan *plan);

/* The changes granted so far against the policies' max_changes_per_cycle
 * and an overall cap: one plan's (twed_plan_build uses a fresh one), or
 * every plan's of an interval, so that passes over single hosts share
 * the fleet-wide limits. */
typedef struct _TwedBudget TwedBudget;
TwedBudget *twed_budget_new (guint cap /* 0 = none */);
void        twed_budget_free (TwedBudget *budget);
/* A new overall cap for what is left of the interval: what was granted
 * stays counted (a lower cap than that grants nothing more). */
void        twed_budget_set_cap (TwedBudget *budget, guint cap);
/* Changes granted against the overall cap so far. */
guint       twed_budget_total (const TwedBudget *budget);
/* Counts @changes made elsewhere (an earlier run of the same interval)
 * against the overall cap. */
void        twed_budget_charge (TwedBudget *budget, guint changes);
/* Grants nothing more, every change deferred with @why (until the next
 * budget). */
void        twed_budget_hold (TwedBudget *budget, const char *why);
/* Why the budget grants nothing, NULL when it grants. */
const char *twed_budget_get_hold (const TwedBudget *budget);
/* What was granted: the overall total, and the counts per policy and per
 * "policy\nhost" (new tables, string -> GUINT count), to keep across a
 * restart; imported counts add to what is there. */
void        twed_budget_export (const TwedBudget *budget, guint *total, GHashTable **per_policy,
                                GHashTable **per_host);
void        twed_budget_import (TwedBudget *budget, guint total, GHashTable *per_policy,
                                GHashTable *per_host);
/* The counts the change @entry draws on (its policy's, its policy's on
 * its host), as they are now, into tables keyed as twed_budget_export's
 * (keys are copied). */
void        twed_budget_export_entry (const TwedBudget *budget, const TwedPlanEntry *entry,
                                      GHashTable *per_policy, GHashTable *per_host);
/* Gives back what a granted change @entry took (it was not made). */
void        twed_budget_refund (TwedBudget *budget, const TwedPlanEntry *entry);
/* Turns the changes of @plan that exceed @budget into deferrals (most
 * overcommitted first get the budget) and counts the rest against it. */
void        twed_plan_apply_budget (TwedPlan *plan, const TwedPolicySet *set, TwedBudget *budget);
/* The same over several plans at once (passes over several hosts): the
 * most overcommitted VMs of all of them first. */
void        twed_plans_apply_budget (TwedPlan **plans, guint nplans, const TwedPolicySet *set,
                                     TwedBudget *budget);
/* Tells @ctl which of @plan's auto steps were not made and why: deferred
 * (rate limits, a back-off, or every change of the plan when @skipped),
 * refused by the host, or failed otherwise.  After the plan was applied
 * (or not). */
void      twed_plan_report_auto (const TwedPlan *plan, TwedAuto *ctl, gboolean skipped);
guint     twed_plan_count (const TwedPlan *plan, TwedAction action);
guint     twed_plan_count_result (const TwedPlan *plan, TwedResult result);
guint     twed_plan_unreachable (const TwedPlan *plan);

const char *twed_action_to_string (TwedAction action);
const char *twed_result_to_string (TwedResult result);

/* Serialisers: schemas/twed-plan.schema.json and a fixed-width table. */
char *twed_plan_to_json (const TwedPlan *plan, gboolean pretty);
/* The same, written to @out as it is produced, with a final newline;
 * FALSE when writing failed. */
gboolean twed_plan_write_json (const TwedPlan *plan, gboolean pretty, FILE *out);
char *twed_plan_to_table (const TwedPlan *plan, gboolean all);
char *twed_plan_hosts_to_table (const TwedPlan *plan);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedPlan, twed_plan_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedBudget, twed_budget_free)

G_END_DECLS
