/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-planner.h"

G_BEGIN_DECLS

/* Counts over every stored host's plan, kept up to date as plans come
 * and go (what fleet-level metrics show without visiting every VM). */
typedef struct {
  guint hosts;
  guint hosts_up;
  guint vms;
  guint actions[TWED_ACTION_DEFER + 1];     /* by TwedAction */
  guint results[TWED_RESULT_DRY_RUN + 1];   /* by TwedResult */
  guint current_modes[TWED_MODE_DYNAMIC + 1]; /* by TwedMode */
} TwedPlanSummary;

/* The daemon's last plan of every host, one plan per host: a pass over
 * one host replaces that host's plan and costs what its VMs cost,
 * however many hosts the store holds. */
typedef struct _TwedPlanStore TwedPlanStore;

TwedPlanStore *twed_plan_store_new (void);
void           twed_plan_store_free (TwedPlanStore *store);
/* Takes @plan, the plan of @host alone. */
void           twed_plan_store_replace (TwedPlanStore *store, const char *host, TwedPlan *plan);
void           twed_plan_store_remove (TwedPlanStore *store, const char *host);
/* Keeps only the hosts @keep says yes to. */
void           twed_plan_store_retain (TwedPlanStore *store,
                                       gboolean (*keep) (const char *host, gpointer data),
                                       gpointer data);
/* The host went down: reported unreachable with @error, no entries. */
void           twed_plan_store_mark_down (TwedPlanStore *store, const char *host, const char *error);
const TwedPlan *twed_plan_store_lookup (TwedPlanStore *store, const char *host);
const TwedPlanSummary *twed_plan_store_summary (TwedPlanStore *store);
/* The stored plans by host name: @index 0 .. size-1.  The order is
 * kept between calls while the set of hosts stays the same, so that
 * walking the hosts after a pass over one costs no sort. */
guint           twed_plan_store_size (TwedPlanStore *store);
const TwedPlan *twed_plan_store_nth (TwedPlanStore *store, guint index);
/* A slot per host for what a consumer derives from its plan (the
 * metrics' samples): emptied (@destroy called) whenever that host's
 * plan changes, so that the derived data is redone only for the hosts a
 * pass touched.  One consumer per store. */
gpointer        twed_plan_store_nth_derived (TwedPlanStore *store, guint index);
void            twed_plan_store_set_nth_derived (TwedPlanStore *store, guint index, gpointer data,
                                                 GDestroyNotify destroy);
/* Every host's plan in one, sorted by host; it borrows the stored hosts
 * and entries and stays valid until the store changes.  Costs a pass
 * over every entry when the store changed since the last call. */
const TwedPlan *twed_plan_store_view (TwedPlanStore *store);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (TwedPlanStore, twed_plan_store_free)

G_END_DECLS
