/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The closed-loop controller (twed-auto.c) on signal traces: each
 * traces/NAME.trace is a sequence of host reads, as twedd's inventory
 * makes them, and the decisions the controller must take after each
 * (see traces/make-traces.py for the format and the models).  Like
 * twedd, the test asks for a decision on every auto VM at every read;
 * the expect lines check the last one.  Then the planner's side: pin,
 * opt-out and rate limits hold for auto steps as for every change. */
#include "test-util.h"
#include "twed-auto.h"
#include "twed-state.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  char *name;
  char *host, *uuid;      /* where and as what it was last decided on */
  TwedAutoVerdict verdict;
  gboolean decided;
  gboolean skipped;       /* planned without the controller (pinned) from a "skip" line on */
  guint never;            /* bit per TwedAutoDecision it must not take from here on */
} Decided;

static void
decided_free (Decided *d)
{
  g_free (d->name);
  g_free (d->host);
  g_free (d->uuid);
  twed_auto_verdict_clear (&d->verdict);
  g_free (d);
}

static TwedSetting
parse_setting (const char *s)
{
  TwedSetting out = { TWED_MODE_OFF, 0, 0, 0 };

  if (g_str_has_prefix (s, "fixed:"))
    out = (TwedSetting) { TWED_MODE_FIXED, (guint) atoi (s + 6), 0, 0 };
  else if (g_str_has_prefix (s, "dynamic:"))
    out = (TwedSetting) { TWED_MODE_DYNAMIC, (guint) atoi (s + 8), 0, 15 };
  else if (!g_str_equal (s, "default"))
    g_assert_cmpstr (s, ==, "off");
  twed_setting_normalize (&out);
  return out;
}

static guint64
parse_u64 (const char *s, guint bit, guint *have)
{
  if (g_str_equal (s, "-"))
    return 0;
  *have |= bit;
  return g_ascii_strtoull (s, NULL, 10);
}

/* The reads' clock, twedd's monotonic one, on a host up for ten days:
 * a trace's time t is t s after that.  (From 0, a state never read
 * completely would look seen at boot and be forgotten only an hour
 * in, where twedd forgets it at once.) */
#define TRACE_USEC(t) ((G_GINT64_CONSTANT (864000) + (t)) * G_USEC_PER_SEC)

/* "vm NAME UUID ID SETTING PCPUS none|W,D,T,L ..." at time @t (s). */
static void
add_vm (TwedHost *host, char **f, guint nf, gint64 t)
{
  TwedDomain *dom;
  guint nvcpus = g_str_equal (f[6], "none") ? 2 : nf - 6;
  g_autoptr(GArray) pcpus = twed_cpuset_parse (f[5], NULL);

  g_assert_nonnull (pcpus);
  dom = add_dom (host, f[1], nvcpus, NULL);
  dom->uuid = g_strdup (f[2]);
  dom->twed = parse_setting (f[4]);
  /* "default": no <twed>, the host's default applies. */
  dom->has_twed = !g_str_equal (f[4], "default");
  for (guint v = 0; v < nvcpus; v++)
    twed_domain_pin_vcpu (dom, v, pcpus);
  if (g_str_equal (f[6], "none"))
    return;
  dom->signals = twed_domain_signals_new (TRACE_USEC (t), atoi (f[3]));
  for (guint v = 0; v < nvcpus; v++)
    {
      g_auto(GStrv) c = g_strsplit (f[6 + v], ",", -1);
      TwedVcpuSignals *s = twed_domain_signals_vcpu (dom->signals, v);

      g_assert_cmpuint (g_strv_length (c), ==, 4);
      s->wfe_exits = parse_u64 (c[0], TWED_SIGNAL_WFE_EXITS, &s->have);
      s->wait_ns = parse_u64 (c[1], TWED_SIGNAL_WAIT, &s->have);
      s->time_ns = parse_u64 (c[2], TWED_SIGNAL_TIME, &s->have);
      s->twed_delay = (guint) parse_u64 (c[3], TWED_SIGNAL_TWED_DELAY, &s->have);
    }
}

/* Observes the read and decides for every auto VM on it, as twedd's
 * planner does (its forget time too). */
static void
finish_read (TwedAuto *ctl, TwedHost *host, GHashTable *decided, const TwedSetting *bounds,
             const TwedAutoParams *params)
{
  twed_host_compute (host);
  twed_auto_observe (ctl, host, TWED_AUTO_FORGET_USEC);
  for (guint i = 0; i < host->domains->len; i++)
    {
      TwedDomain *dom = g_ptr_array_index (host->domains, i);
      Decided *d = g_hash_table_lookup (decided, dom->name);

      if (!d)
        continue;
      if (d->skipped)
        {
          twed_auto_skip (ctl, host, dom);
          continue;
        }
      twed_auto_verdict_clear (&d->verdict);
      twed_auto_decide (ctl, host, dom, bounds, params, &d->verdict);
      d->decided = TRUE;
      g_free (d->host);
      d->host = g_strdup (host->name);
      g_free (d->uuid);
      d->uuid = g_strdup (dom->uuid);
      /* The planner's rule (plan_auto): only off or a fixed delay within
       * the bounds, whatever the decision. */
      if (!(d->verdict.target.mode == TWED_MODE_OFF ||
            (d->verdict.target.mode == TWED_MODE_FIXED && d->verdict.target.delay >= bounds->min &&
             d->verdict.target.delay <= bounds->max)))
        g_error ("%s: %s asks for a setting outside %u..%u: %s", d->name,
                 twed_auto_decision_to_string (d->verdict.decision), bounds->min, bounds->max,
                 d->verdict.reason);
      /* With --verbose, the run of decisions a failing expect line
       * comes after. */
      g_test_message ("%s %s: %s", d->name, twed_auto_decision_to_string (d->verdict.decision),
                      d->verdict.reason);
      if (d->never & (1u << d->verdict.decision))
        g_error ("%s: %s at %s, which the trace rules out: %s", d->name,
                 twed_auto_decision_to_string (d->verdict.decision), host->name, d->verdict.reason);
    }
}

static void
test_trace (gconstpointer data)
{
  const char *path = data;
  g_autofree char *text = NULL;
  g_auto(GStrv) lines = NULL;
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(TwedHost) host = NULL;
  g_autoptr(GHashTable) decided = g_hash_table_new_full (g_str_hash, g_str_equal, NULL,
                                                         (GDestroyNotify) decided_free);
  TwedSetting bounds = { TWED_MODE_AUTO, 0, 0, 0 };
  TwedAutoParams params;
  gint64 t = 0;
  guint nexpect = 0;

  twed_auto_params_init (&params);
  g_assert_true (g_file_get_contents (path, &text, NULL, NULL));
  lines = g_strsplit (text, "\n", -1);

  /* The VMs the expect lines name are the auto ones. */
  for (guint i = 0; lines[i]; i++)
    if (g_str_has_prefix (lines[i], "expect "))
      {
        g_auto(GStrv) f = g_strsplit (lines[i], " ", 3);

        if (!g_hash_table_contains (decided, f[1]))
          {
            Decided *d = g_new0 (Decided, 1);

            d->name = g_strdup (f[1]);
            g_hash_table_insert (decided, d->name, d);
          }
      }

  for (guint i = 0; lines[i]; i++)
    {
      g_auto(GStrv) f = NULL;
      guint nf;

      if (!*lines[i] || lines[i][0] == '#')
        continue;
      f = g_strsplit (lines[i], " ", -1);
      nf = g_strv_length (f);
      if (g_str_equal (f[0], "bounds"))
        {
          bounds.min = (guint) atoi (f[1]);
          bounds.max = (guint) atoi (f[2]);
        }
      else if (g_str_equal (f[0], "params"))
        {
          for (guint k = 1; k < nf; k++)
            {
              g_auto(GStrv) kv = g_strsplit (f[k], "=", 2);
              double v = g_ascii_strtod (kv[1], NULL);

              if (g_str_equal (kv[0], "margin"))
                params.wait_margin = v;
              else if (g_str_equal (kv[0], "gain"))
                params.min_gain = v;
              else if (g_str_equal (kv[0], "dwell"))
                params.dwell_seconds = (guint) v;
              else if (g_str_equal (kv[0], "stale"))
                params.stale_seconds = (guint) v;
              else if (g_str_equal (kv[0], "cooldown"))
                params.cooldown_seconds = (guint) v;
              else if (g_str_equal (kv[0], "baseline"))
                params.baseline_seconds = (guint) v;
              else
                g_error ("%s: unknown parameter %s", path, kv[0]);
            }
        }
      else if (g_str_equal (f[0], "read"))
        {
          if (host)
            finish_read (ctl, host, decided, &bounds, &params);
          g_clear_pointer (&host, twed_host_free);
          t = atoi (f[1]);
          host = twed_host_new (f[2], "test:///trace");
          /* "read T HOST [SESSION]": the connection it was read over. */
          host->session = nf > 3 ? (guint) atoi (f[3]) : 0;
          host->reachable = TRUE;
          host->support = TWED_SUPPORT_YES;
          host->ncpus = 2;
        }
      else if (g_str_equal (f[0], "vm"))
        add_vm (host, f, nf, t);
      else if (g_str_equal (f[0], "never"))
        {
          /* "never VM DECISION": checked at every decision after this line. */
          Decided *d;
          TwedAutoDecision k;

          g_assert_cmpuint (nf, ==, 3);
          d = g_hash_table_lookup (decided, f[1]);
          g_assert_nonnull (d);
          g_assert_true (twed_auto_decision_from_string (f[2], &k));
          d->never |= 1u << k;
        }
      else if (g_str_equal (f[0], "skip") || g_str_equal (f[0], "unskip"))
        {
          /* "skip VM": from the next read on, the planner skips it (a
           * pin) and tells the controller so; "unskip VM" ends that. */
          Decided *d;

          g_assert_cmpuint (nf, ==, 2);
          d = g_hash_table_lookup (decided, f[1]);
          g_assert_nonnull (d);
          if (host)
            {
              finish_read (ctl, host, decided, &bounds, &params);
              g_clear_pointer (&host, twed_host_free);
            }
          d->skipped = g_str_equal (f[0], "skip");
        }
      else if (g_str_equal (f[0], "dryrun"))
        {
          /* "dryrun 1|0": twedd's dry_run, from the next read on. */
          g_assert_cmpuint (nf, ==, 2);
          if (host)
            {
              finish_read (ctl, host, decided, &bounds, &params);
              g_clear_pointer (&host, twed_host_free);
            }
          twed_auto_set_dry_run (ctl, atoi (f[1]) != 0);
        }
      else if (g_str_equal (f[0], "restart"))
        {
          /* "restart": twedd stops after the last read and starts again:
           * a new controller with the bars the old one saved (its state
           * directory), in Unix time 1.7e15 us ahead of the reads'. */
          const gint64 to_real = G_GINT64_CONSTANT (1700000000000000);
          g_autoptr(GPtrArray) saved = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);

          g_assert_cmpuint (nf, ==, 1);
          if (host)
            {
              finish_read (ctl, host, decided, &bounds, &params);
              g_clear_pointer (&host, twed_host_free);
            }
          twed_auto_save_bars (ctl, NULL, FALSE, TRACE_USEC (t), TRACE_USEC (t) + to_real, saved);
          g_clear_pointer (&ctl, twed_auto_unref);
          ctl = twed_auto_new ();
          twed_auto_restore_bars (ctl, saved, TRACE_USEC (t), TRACE_USEC (t) + to_real);
        }
      else if (g_str_equal (f[0], "notmade"))
        {
          /* "notmade VM deferred|failed|refused": the step of its last
           * decision was not made, as twedd reports it after the pass. */
          static const char *const why[] = { "deferred", "failed", "refused" };
          TwedAutoStepOutcome outcome = 0;
          Decided *d;

          g_assert_cmpuint (nf, ==, 3);
          d = g_hash_table_lookup (decided, f[1]);
          g_assert_nonnull (d);
          g_assert_true (d->decided);
          for (guint k = 0; k < G_N_ELEMENTS (why); k++)
            if (g_str_equal (f[2], why[k]))
              outcome = TWED_AUTO_STEP_DEFERRED + k;
          g_assert_cmpint (outcome, !=, 0);
          if (host)
            {
              finish_read (ctl, host, decided, &bounds, &params);
              g_clear_pointer (&host, twed_host_free);
            }
          twed_auto_step_not_made (ctl, d->host, d->uuid, &d->verdict.target, outcome);
        }
      else if (g_str_equal (f[0], "setoff"))
        {
          /* "setoff VM": its last decision asks for off explicitly
           * (no <twed>, the host's default delay in force). */
          Decided *d;

          g_assert_cmpuint (nf, ==, 2);
          d = g_hash_table_lookup (decided, f[1]);
          g_assert_nonnull (d);
          g_assert_true (d->decided);
          if (!d->verdict.set_off)
            g_error ("%s line %u (t=%" G_GINT64_FORMAT "): want off set explicitly, got %s: %s", path, i + 1, t,
                     twed_auto_decision_to_string (d->verdict.decision), d->verdict.reason);
        }
      else if (g_str_equal (f[0], "protective"))
        {
          /* "protective VM": its last decision undoes a cost, so the
           * planner grants it before ordinary changes. */
          Decided *d;

          g_assert_cmpuint (nf, ==, 2);
          d = g_hash_table_lookup (decided, f[1]);
          g_assert_nonnull (d);
          g_assert_true (d->decided);
          if (!d->verdict.protective)
            g_error ("%s line %u (t=%" G_GINT64_FORMAT "): want a protective decision, got %s: %s", path, i + 1, t,
                     twed_auto_decision_to_string (d->verdict.decision), d->verdict.reason);
        }
      else if (g_str_equal (f[0], "expect"))
        {
          g_auto(GStrv) e = g_strsplit (lines[i], " ", 5);
          Decided *d;
          g_autofree char *target = NULL;

          g_assert_cmpuint (g_strv_length (e), >=, 4);
          d = g_hash_table_lookup (decided, e[1]);
          g_assert_nonnull (d);
          if (host)
            {
              finish_read (ctl, host, decided, &bounds, &params);
              g_clear_pointer (&host, twed_host_free);
            }
          g_assert_true (d->decided);
          target = twed_setting_to_string (&d->verdict.target);
          g_test_message ("t=%" G_GINT64_FORMAT " %s: %s -> %s: %s", t, d->name,
                          twed_auto_decision_to_string (d->verdict.decision), target, d->verdict.reason);
          if (g_strcmp0 (twed_auto_decision_to_string (d->verdict.decision), e[2]) != 0 ||
              g_strcmp0 (target, e[3]) != 0 || (e[4] && !strstr (d->verdict.reason, e[4])))
            g_error ("%s line %u (t=%" G_GINT64_FORMAT "): want %s %s \"%s\", got %s %s: %s", path, i + 1, t,
                     e[2], e[3], e[4] ? e[4] : "", twed_auto_decision_to_string (d->verdict.decision), target,
                     d->verdict.reason);
          nexpect++;
        }
      else
        g_error ("%s line %u: unknown line", path, i + 1);
    }
  g_assert_cmpuint (nexpect, >, 0);
}

/* A reachable host with TWED, of @ncpus pCPUs, for the planner's side. */
static TwedHost *
plan_host_new (guint ncpus)
{
  TwedHost *h = twed_host_new ("h", "test:///x");

  h->reachable = TRUE;
  h->support = TWED_SUPPORT_YES;
  h->ncpus = ncpus;
  return h;
}

/* Read @r of a VM of 2 vCPUs that run steadily: every 10 s, each vCPU
 * 5 s of CPU time, 1 s of run-queue wait and 5000 WFE exits (1000
 * exits/s of vCPU time), twed_delay @twed_delay. */
static void
steady_signals (TwedDomain *d, int r, guint twed_delay)
{
  g_clear_pointer (&d->signals, twed_domain_signals_free);
  d->signals = twed_domain_signals_new ((gint64) r * 10 * G_USEC_PER_SEC, 1);
  for (guint v = 0; v < 2; v++)
    {
      TwedVcpuSignals *s = twed_domain_signals_vcpu (d->signals, v);

      s->wfe_exits = (guint64) r * 5000;
      s->wait_ns = (guint64) r * 1000000000;
      s->time_ns = (guint64) r * 5000000000;
      s->twed_delay = twed_delay;
      s->have = TWED_SIGNALS_ALL;
    }
}

/* A VM of 2 vCPUs on @h at read @r of steady_signals(). */
static TwedDomain *
add_steady_vm (TwedHost *h, const char *name, const char *uuid, int r, guint twed_delay)
{
  TwedDomain *d = add_dom (h, name, 2, NULL);

  d->uuid = g_strdup (uuid);
  steady_signals (d, r, twed_delay);
  return d;
}

/* Read @r of one VM "a" of 2 vCPUs (steady_signals()) on a host of
 * @ncpus pCPUs, planned with @ctl under @set. */
static TwedPlan *
plan_one_vm (TwedPolicySet *set, TwedAuto *ctl, guint ncpus, int r, guint twed_delay)
{
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, ctl };
  TwedHost *h = plan_host_new (ncpus);

  add_steady_vm (h, "a", "00000000-0000-0000-0000-000000000041", r, twed_delay);
  twed_host_compute (h);
  g_ptr_array_add (hosts, h);
  return twed_plan_build (hosts, set, &o);
}

/* What twedd reports of a step up after each pass
 * (twed_plan_report_auto ()): deferred by the rate limits, skipped with
 * its pass (a reload came first), failed for another reason than its
 * values: not the host's ceiling, so it bars nothing, and dropped after
 * a dwell the VM steps up again.  Refused by the host (EINVAL), or not
 * reported at all (made, and not shown): its level is barred. */
static void
test_plan_report (void)
{
  static const char doc[] =
    "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},"
    "\"auto\":{\"dwell_seconds\":10}}";
  static const struct {
    const char *what;
    TwedAction action;
    TwedResult result;
    gboolean refused, skipped, reported, barred;
  } cases[] = {
    { "deferred", TWED_ACTION_DEFER, TWED_RESULT_NONE, FALSE, FALSE, TRUE, FALSE },
    { "skipped", TWED_ACTION_CHANGE, TWED_RESULT_NONE, FALSE, TRUE, TRUE, FALSE },
    { "failed", TWED_ACTION_CHANGE, TWED_RESULT_FAILED, FALSE, FALSE, TRUE, FALSE },
    { "refused", TWED_ACTION_CHANGE, TWED_RESULT_FAILED, TRUE, FALSE, TRUE, TRUE },
    { "not reported", TWED_ACTION_DEFER, TWED_RESULT_NONE, FALSE, FALSE, FALSE, TRUE },
  };
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (guint c = 0; c < G_N_ELEMENTS (cases); c++)
    {
      g_autoptr(TwedAuto) ctl = twed_auto_new ();
      g_autoptr(TwedPlan) plan = NULL;
      TwedPlanEntry *e = NULL;

      for (int r = 0; r < 5; r++)
        {
          g_clear_pointer (&plan, twed_plan_free);
          plan = plan_one_vm (set, ctl, 1, r, 0);
          e = g_ptr_array_index (plan->entries, 0);
          g_test_message ("%s, read %d: %s: %s", cases[c].what, r, twed_action_to_string (e->action), e->reason);
          /* Whatever it asks for is not made, the way the case says. */
          if (e->action != TWED_ACTION_CHANGE)
            continue;
          e->action = cases[c].action;
          e->result = cases[c].result;
          e->refused = cases[c].refused;
          if (cases[c].reported)
            twed_plan_report_auto (plan, ctl, cases[c].skipped);
        }
      /* Decided at read 2; at read 3 a dwell old, dropped or barred;
       * judged afresh at 4. */
      if (cases[c].barred)
        g_assert_nonnull (strstr (e->reason, "1 refused or not in force when asked"));
      else
        {
          g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_UP);
          g_assert_null (strstr (e->reason, "refused"));
        }
    }
}

/* A step decided, not made, and the VM's ratio then in a neighbouring
 * band for a while: back in the auto band, the step is not counted as
 * refused (it was never asked for meanwhile), and the window at its
 * setting starts again. */
static void
test_plan_band_left (void)
{
  static const char doc[] =
    "{\"version\":1,\"name\":\"loop\",\"hysteresis\":0,\"bands\":[{\"up_to\":1,\"mode\":\"off\"}],"
    "\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},\"auto\":{\"dwell_seconds\":10}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(TwedPlan) plan = NULL;
  TwedPlanEntry *e = NULL;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (int r = 0; r < 10; r++)
    {
      g_clear_pointer (&plan, twed_plan_free);
      /* 2 vCPUs on 1 pCPU (auto), on 2 pCPUs from read 3 to 8 (off band) */
      plan = plan_one_vm (set, ctl, r >= 3 && r <= 8 ? 2 : 1, r, 0);
      e = g_ptr_array_index (plan->entries, 0);
      g_test_message ("read %d: %s: %s", r, twed_action_to_string (e->action), e->reason);
      if (r == 2)
        g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_UP);
    }
  g_assert_true (e->is_auto);
  g_assert_null (strstr (e->reason, "not taken"));
  g_assert_nonnull (strstr (e->reason, "dwell"));
}

/* A domain without <twed> whose vCPUs run at the host's default delay
 * (twed_delay 4): it counts as off, and auto sets off explicitly, first
 * among the changes. */
static void
test_plan_host_default (void)
{
  static const char doc[] =
    "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},"
    "\"auto\":{\"dwell_seconds\":10}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(TwedPlan) plan = NULL;
  TwedPlanEntry *e;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (int r = 0; r < 2; r++)
    {
      g_clear_pointer (&plan, twed_plan_free);
      plan = plan_one_vm (set, ctl, 1, r, 4);
    }
  e = g_ptr_array_index (plan->entries, 0);
  g_test_message ("%s: %s", twed_action_to_string (e->action), e->reason);
  g_assert_cmpuint (e->action, ==, TWED_ACTION_CHANGE);
  g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
  g_assert_true (e->auto_protective);
  g_assert_nonnull (strstr (e->reason, "the host's default delay applies"));
}

static const TwedAutoBars *
find_bars (const GPtrArray *bars, const char *vm)
{
  for (guint i = 0; i < bars->len; i++)
    if (g_str_equal (((TwedAutoBars *) g_ptr_array_index (bars, i))->vm, vm))
      return g_ptr_array_index (bars, i);
  return NULL;
}

static const TwedAutoBars *
bars_of_vm (const GPtrArray *bars, const char *vm)
{
  const TwedAutoBars *b = find_bars (bars, vm);

  if (!b)
    g_error ("no bars of %s", vm);
  return b;
}

static TwedAutoBars *
bars_new (const char *vm, int id, int barred_from, gint64 barred_until, int refused_from, gint64 refused_until)
{
  TwedAutoBars *b = twed_auto_bars_new ("h", vm);

  b->domain_id = id;
  b->barred_from = barred_from;
  b->barred_until = barred_until;
  b->refused_from = refused_from;
  b->refused_until = refused_until;
  b->refused_bar = refused_from >= 0 ? 240 * G_USEC_PER_SEC : 0;
  return b;
}

/* The bars twedd keeps across a restart (twed_auto_save_bars and
 * twed_auto_restore_bars): what still holds is restored on the reads'
 * clock and saves back to the same Unix times; a refusal holds only for
 * the domain id that refused (another id is another QEMU process, maybe
 * under another kvm-arm.twed_max); the first read is recorded as a
 * change only where it drops something, and a VM forgotten is recorded
 * as holding nothing. */
static void
test_bars_restart (void)
{
  const gint64 s = G_USEC_PER_SEC, real = G_GINT64_CONSTANT (1764500000000000), mono = 100 * s;
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(GPtrArray) in = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(TwedHost) host = plan_host_new (2);
  g_autoptr(TwedHost) later = plan_host_new (2);
  const TwedAutoBars *b;
  TwedAutoBars *same = bars_new ("same", 1, 7, real + 900 * s, 9, real + 30 * s);

  same->remeasured_at = real - 600 * s;
  g_ptr_array_add (in, same);
  g_ptr_array_add (in, bars_new ("other", 5, 6, real + 100 * s, 4, real - 10 * s));
  /* Nothing left to hold: not restored. */
  g_ptr_array_add (in, bars_new ("old", 2, 3, real - s, -1, 0));
  g_assert_cmpuint (twed_auto_restore_bars (ctl, in, mono, real), ==, 2);
  /* What was restored is what is saved: no record until it changes. */
  twed_auto_save_bars (ctl, "h", TRUE, mono, real, changed);
  g_assert_cmpuint (changed->len, ==, 0);

  /* Saved again at once, the clocks 7 us on: the same Unix times. */
  twed_auto_save_bars (ctl, NULL, FALSE, mono + 7, real + 7, out);
  g_assert_cmpuint (out->len, ==, 2);
  b = bars_of_vm (out, "same");
  g_assert_cmpint (b->domain_id, ==, 1);
  g_assert_cmpint (b->barred_from, ==, 7);
  g_assert_cmpint (b->barred_until, ==, real + 900 * s);
  g_assert_cmpint (b->refused_from, ==, 9);
  g_assert_cmpint (b->refused_until, ==, real + 30 * s);
  g_assert_cmpint (b->refused_bar, ==, 240 * s);
  g_assert_cmpint (b->remeasured_at, ==, real - 600 * s);
  g_assert_null (find_bars (out, "old"));

  /* The first read, 10 s on: both domains have id 1. */
  add_steady_vm (host, "same", "same", 11, 7);
  add_steady_vm (host, "other", "other", 11, 6);
  twed_host_compute (host);
  twed_auto_observe (ctl, host, 0);
  twed_auto_save_bars (ctl, "h", TRUE, 110 * s, real + 10 * s, changed);
  g_assert_cmpuint (changed->len, ==, 1);
  b = bars_of_vm (changed, "other");
  g_assert_cmpint (b->refused_from, ==, -1);
  g_assert_cmpint (b->barred_from, ==, 6);
  g_assert_cmpint (b->domain_id, ==, 1);
  g_ptr_array_set_size (changed, 0);

  /* Two hours on, "other" no longer read: forgotten, and recorded as
   * holding nothing; "same"'s back-off bar ran out meanwhile. */
  add_steady_vm (later, "same", "same", 731, 7);
  twed_host_compute (later);
  twed_auto_observe (ctl, later, 3600 * s);
  twed_auto_save_bars (ctl, "h", TRUE, 7310 * s, real + 7210 * s, changed);
  g_assert_cmpuint (changed->len, ==, 2);
  b = bars_of_vm (changed, "other");
  g_assert_false (twed_auto_bars_hold (b, real + 7210 * s));
  g_assert_cmpint (b->barred_from, ==, -1);
  /* Its refusal too (its bar ended more than its length ago); the
   * remeasure stays for the longest cooldown: no decision said the VM's. */
  b = bars_of_vm (changed, "same");
  g_assert_cmpint (b->barred_from, ==, -1);
  g_assert_cmpint (b->refused_from, ==, -1);
  g_assert_cmpint (b->remeasured_at, ==, real - 600 * s);
  g_ptr_array_set_size (changed, 0);
  twed_auto_save_bars (ctl, "h", TRUE, 7310 * s, real + 7210 * s, changed);
  g_assert_cmpuint (changed->len, ==, 0);
}

/* Bars through the state file and back (times kept to the ms), on a
 * reads' clock that started after them (a reboot: negative times), with
 * what no controller writes clamped: a bar beyond the longest cooldown,
 * a remeasure in the future.  A refusal without a domain id (never
 * read before the restart) is not held past the first read. */
static void
test_bars_state_file (void)
{
  const gint64 s = G_USEC_PER_SEC, real = G_GINT64_CONSTANT (1764500000000000);
  const gint64 week = (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * s;
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(TwedAuto) again = twed_auto_new ();
  g_autoptr(TwedState) st = twed_state_new ();
  g_autoptr(TwedState) back = NULL;
  g_autoptr(GPtrArray) out = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(GPtrArray) changed = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  g_autoptr(TwedHost) host = plan_host_new (2);
  g_autofree char *json = NULL;
  g_autoptr(GError) error = NULL;
  TwedAutoBars *b = bars_new ("far", 1, 5, real + 2 * week, 8, real + 3 * week);
  const TwedAutoBars *r;
  TwedDomain *far;
  TwedSetting bounds = { TWED_MODE_AUTO, 0, 2, 6 };
  TwedAutoParams params;
  TwedAutoVerdict v = { 0 };

  b->remeasured_at = real + 50 * s;
  g_ptr_array_add (st->bars, b);
  b = bars_new ("noid", 0, -1, 0, 9, real + 60 * s);
  b->remeasured_at = real - 600 * s - 333;
  g_ptr_array_add (st->bars, b);
  /* 5 s after boot on the reads' clock. */
  g_assert_cmpuint (twed_auto_restore_bars (ctl, st->bars, 5 * s, real), ==, 2);
  twed_auto_save_bars (ctl, NULL, FALSE, 5 * s, real, out);
  r = bars_of_vm (out, "far");
  g_assert_cmpint (r->barred_until, ==, real + week);
  g_assert_cmpint (r->refused_bar, ==, 240 * s);
  g_assert_cmpint (r->refused_until, ==, real + 240 * s);
  g_assert_cmpint (r->remeasured_at, ==, real);
  r = bars_of_vm (out, "noid");
  g_assert_cmpint (r->remeasured_at, ==, real - 600 * s - 333);

  /* Through JSON and into a new controller on another clock. */
  g_ptr_array_set_size (st->bars, 0);
  g_ptr_array_extend_and_steal (st->bars, g_steal_pointer (&out));
  out = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  json = twed_state_to_json (st);
  back = twed_state_from_json (json, -1, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (twed_auto_restore_bars (again, back->bars, 1000 * s, real + 7), ==, 2);
  twed_auto_save_bars (again, NULL, FALSE, 1000 * s, real + 7, out);
  r = bars_of_vm (out, "noid");
  g_assert_cmpint (r->remeasured_at, ==, real - 600 * s - 1000);
  g_assert_cmpint (r->refused_from, ==, 9);
  g_assert_cmpint (r->domain_id, ==, 0);

  /* The first read of "noid" (id 1): a refusal of no known process goes.
   * "far" is decided on under a cooldown of 100 s: its bars hold no
   * longer than that from now. */
  add_steady_vm (host, "noid", "noid", 101, 0);
  far = add_steady_vm (host, "far", "far", 101, 0);
  twed_host_compute (host);
  twed_auto_observe (again, host, 0);
  twed_auto_params_init (&params);
  params.dwell_seconds = 20;
  params.cooldown_seconds = 100;
  twed_auto_decide (again, host, far, &bounds, &params, &v);
  twed_auto_verdict_clear (&v);
  twed_auto_save_bars (again, "h", TRUE, 1010 * s, real + 10 * s + 7, changed);
  g_assert_cmpuint (changed->len, ==, 2);
  r = bars_of_vm (changed, "noid");
  g_assert_cmpint (r->refused_from, ==, -1);
  g_assert_cmpint (r->remeasured_at, ==, real - 600 * s - 1000);
  r = bars_of_vm (changed, "far");
  g_assert_cmpint (r->barred_until, ==, real + 110 * s + 7);
  g_assert_cmpint (r->refused_until, ==, real + 110 * s + 7);
}

/* An auto band with the controller: a pinned and an opted-out VM are
 * left alone, and max_changes_per_cycle defers steps like any change. */
static void
test_plan_limits (void)
{
  static const char doc[] =
    "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},"
    "\"max_changes_per_cycle\":{\"host\":1},\"auto\":{\"dwell_seconds\":10}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  const char *names[] = { "a", "b", "pinned", "optout" };
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, ctl };
  g_autoptr(TwedPlan) plan = NULL;
  g_autofree char *json = NULL;
  guint changes = 0, deferred = 0;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (int r = 0; r < 3; r++)
    {
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      TwedHost *h = plan_host_new (1);

      for (guint i = 0; i < G_N_ELEMENTS (names); i++)
        {
          TwedDomain *d = add_dom (h, names[i], 2, NULL);

          d->uuid = g_strdup_printf ("00000000-0000-0000-0000-0000000000%02u", i);
          d->manage = i == 2 ? TWED_MANAGE_PINNED : i == 3 ? TWED_MANAGE_OPTOUT : TWED_MANAGE_AUTO;
          steady_signals (d, r, 0);
        }
      twed_host_compute (h);
      g_ptr_array_add (hosts, h);
      g_clear_pointer (&plan, twed_plan_free);
      plan = twed_plan_build (hosts, set, &o);
    }
  /* Third read: two reads over a dwell (10 s) at off, 1000 exits/s of vCPU time:
   * both step up, one per cycle on this host. */
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      g_test_message ("%s: %s: %s", e->domain, twed_action_to_string (e->action), e->reason);
      if (g_str_equal (e->domain, "pinned") || g_str_equal (e->domain, "optout"))
        {
          g_assert_cmpuint (e->action, ==, TWED_ACTION_SKIP);
          continue;
        }
      g_assert_true (e->is_auto);
      g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_UP);
      g_assert_nonnull (strstr (e->reason, "wfe exits/s 1000 at off"));
      changes += e->action == TWED_ACTION_CHANGE;
      deferred += e->action == TWED_ACTION_DEFER;
    }
  g_assert_cmpuint (changes, ==, 1);
  g_assert_cmpuint (deferred, ==, 1);
  json = twed_plan_to_json (plan, FALSE);
  g_assert_nonnull (strstr (json, "\"auto\":{\"min\":1,\"max\":4,\"decision\":\"step-up\",\"wfe_exits_per_s\":1000,"
                                  "\"off_wfe_exits_per_s\":1000,\"runqueue_wait_change\":null}"));
}

/* twedctl has no history: in-bounds fixed and off stay, the rest goes off. */
static void
test_plan_single_run (void)
{
  static const char doc[] = "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4}}";
  static const struct { TwedSetting cur; TwedMode want; } cases[] = {
    { { TWED_MODE_OFF, 0, 0, 0 }, TWED_MODE_OFF },
    { { TWED_MODE_FIXED, 3, 3, 3 }, TWED_MODE_FIXED },
    { { TWED_MODE_FIXED, 5, 5, 5 }, TWED_MODE_OFF },
    { { TWED_MODE_DYNAMIC, 3, 1, 5 }, TWED_MODE_OFF },
  };
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      TwedHost *h = plan_host_new (1);
      TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, NULL };
      g_autoptr(TwedPlan) plan = NULL;
      TwedDomain *d;
      TwedPlanEntry *e;

      d = add_dom (h, "vm", 2, NULL);
      d->twed = cases[i].cur;
      d->has_twed = TRUE;
      twed_host_compute (h);
      g_ptr_array_add (hosts, h);
      plan = twed_plan_build (hosts, set, &o);
      e = g_ptr_array_index (plan->entries, 0);
      g_assert_cmpuint (e->target.mode, ==, cases[i].want);
      g_assert_nonnull (strstr (e->reason, "no signal history"));
    }
}

/* A protective auto step (down, or a fallback to off) is granted before
 * an ordinary change of a more overcommitted VM when the budget holds
 * only one. */
static void
test_plan_protective_first (void)
{
  static const char doc[] = "{\"version\":1,\"name\":\"loop\",\"bands\":[{\"up_to\":3,\"mode\":\"auto\","
    "\"min\":1,\"max\":4}],\"beyond\":{\"mode\":\"fixed\",\"delay\":3},"
    "\"max_changes_per_cycle\":{\"host\":1}}";
  static const char *const pin0[] = { "0", "0", "0", "0", NULL };
  static const char *const pin1[] = { "1", "1", NULL };
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  TwedHost *h = plan_host_new (2);
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, NULL };
  g_autoptr(TwedPlan) plan = NULL;
  TwedDomain *d;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  /* ratio 4: beyond, off -> fixed:3 */
  add_dom (h, "big", 4, pin0);
  /* ratio 2: the auto band, at a dynamic setting it steps down from */
  d = add_dom (h, "loop", 2, pin1);
  d->twed = (TwedSetting) { TWED_MODE_DYNAMIC, 3, 1, 5 };
  d->has_twed = TRUE;
  twed_host_compute (h);
  g_ptr_array_add (hosts, h);
  plan = twed_plan_build (hosts, set, &o);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      g_test_message ("%s: ratio %.2f %s", e->domain, e->ratio, e->reason);
      if (g_str_equal (e->domain, "loop"))
        {
          g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_DOWN);
          g_assert_cmpuint (e->action, ==, TWED_ACTION_CHANGE);
        }
      else
        {
          g_assert_cmpfloat (e->ratio, >, 2.5);
          g_assert_cmpuint (e->action, ==, TWED_ACTION_DEFER);
        }
    }
}

/* Whether the controller still holds state for @dom on @h: without it
 * a decision can only say the VM was not read there. */
static gboolean
controller_knows (TwedAuto *ctl, TwedHost *h, TwedDomain *dom)
{
  const TwedSetting bounds = { TWED_MODE_AUTO, 0, 1, 4 };
  TwedAutoParams params;
  TwedAutoVerdict v = { 0 };
  gboolean known;

  twed_auto_params_init (&params);
  twed_auto_decide (ctl, h, dom, &bounds, &params, &v);
  known = strstr (v.reason, "not read on this host") == NULL;
  twed_auto_verdict_clear (&v);
  return known;
}

/* A host with nothing under auto forgets only the VMs it has not listed
 * for twedd's hour; a host removed from the configuration forgets all. */
static void
test_forget (void)
{
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(TwedHost) h = plan_host_new (2);
  TwedDomain *d = add_steady_vm (h, "a", "00000000-0000-0000-0000-000000000061", 1, 0);
  gint64 hour_reads = TWED_AUTO_FORGET_USEC / (10 * G_USEC_PER_SEC);

  twed_host_compute (h);
  twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_true (controller_knows (ctl, h, d));
  /* Listed an hour later, not observed (nothing under auto): kept. */
  steady_signals (d, 1 + (int) hour_reads, 0);
  twed_auto_forget_unseen (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_true (controller_knows (ctl, h, d));
  /* A read later, more than an hour since it was last seen: gone. */
  steady_signals (d, 2 + (int) hour_reads, 0);
  twed_auto_forget_unseen (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_false (controller_knows (ctl, h, d));

  twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_true (controller_knows (ctl, h, d));
  {
    const char *others[] = { "other", NULL };

    twed_auto_retain_hosts (ctl, others);
  }
  g_assert_false (controller_knows (ctl, h, d));
  /* A pass over the removed host that was still running keeps nothing
   * (it would be kept for ever: nothing reads that host again). */
  twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_false (controller_knows (ctl, h, d));
  /* Configured again: read again. */
  {
    const char *both[] = { "other", h->name, NULL };

    twed_auto_retain_hosts (ctl, both);
  }
  twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
  g_assert_true (controller_knows (ctl, h, d));
}

/* A persistent domain that is not running has no signals to judge: the
 * controller leaves it alone, it keeps a delay the bounds allow, and a
 * delay outside them goes off as an ordinary change that waits behind
 * the running VMs' protective steps (it costs nothing until it runs). */
static void
test_plan_not_running (void)
{
  static const char doc[] = "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},"
    "\"max_changes_per_cycle\":{\"host\":1}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
  TwedHost *h = plan_host_new (1);
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, ctl };
  g_autoptr(TwedPlan) plan = NULL;
  TwedDomain *d;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  /* Running, at a dynamic delay the bounds do not allow, no signals:
   * the controller's protective fallback to off. */
  d = add_dom (h, "running", 2, NULL);
  d->uuid = g_strdup ("00000000-0000-0000-0000-000000000051");
  d->twed = (TwedSetting) { TWED_MODE_DYNAMIC, 3, 1, 5 };
  d->has_twed = TRUE;
  /* Shut off, first by name and by ratio: one outside the bounds, one
   * within them. */
  for (guint i = 0; i < 2; i++)
    {
      d = add_dom (h, i ? "a-down-within" : "a-down-outside", 4, NULL);
      d->uuid = g_strdup_printf ("00000000-0000-0000-0000-00000000005%u", 2 + i);
      d->active = FALSE;
      d->persistent = TRUE;
      d->twed = (TwedSetting) { TWED_MODE_FIXED, i ? 3 : 6, 0, 0 };
      twed_setting_normalize (&d->twed);
      d->has_twed = TRUE;
    }
  twed_host_compute (h);
  g_ptr_array_add (hosts, h);
  plan = twed_plan_build (hosts, set, &o);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      g_test_message ("%s: ratio %.2f %s: %s", e->domain, e->ratio,
                      twed_action_to_string (e->action), e->reason);
      if (g_str_equal (e->domain, "running"))
        {
          g_assert_cmpuint (e->action, ==, TWED_ACTION_CHANGE);
          g_assert_true (e->auto_protective);
          continue;
        }
      g_assert_nonnull (strstr (e->reason, "not running"));
      g_assert_false (e->auto_protective);
      if (g_str_equal (e->domain, "a-down-within"))
        g_assert_cmpuint (e->action, ==, TWED_ACTION_KEEP);
      else
        {
          g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
          g_assert_cmpuint (e->action, ==, TWED_ACTION_DEFER);
        }
    }
}

/* The back-off after a failed change (a step up the host refused) does
 * not defer a step down to off, which the host always takes; a hold
 * from min_change_interval still does. */
static void
test_plan_failure_hold (void)
{
  static const char doc[] = "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (int k = 0; k < 4; k++)
    {
      gboolean after_failure = k & 1, running = !(k & 2);
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      TwedHost *h = plan_host_new (1);
      TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, NULL };
      g_autoptr(TwedPlan) plan = NULL;
      TwedDomain *d;
      TwedPlanEntry *e;

      d = add_dom (h, "vm", 2, NULL);
      /* above the bounds: the step is down to off */
      d->twed = (TwedSetting) { TWED_MODE_FIXED, 5, 5, 5 };
      d->has_twed = TRUE;
      d->hold = g_strdup (after_failure ? "its last change failed (3 in a row, next try in 240 s): EINVAL"
                                        : "changed 10 s ago, min_change_interval 60 s");
      d->hold_after_failure = after_failure;
      /* A definition waits out the back-off: nothing pays for its
       * delay until it runs. */
      d->active = running;
      d->persistent = TRUE;
      twed_host_compute (h);
      g_ptr_array_add (hosts, h);
      plan = twed_plan_build (hosts, set, &o);
      e = g_ptr_array_index (plan->entries, 0);
      g_test_message ("%s: %s", twed_action_to_string (e->action), e->reason);
      g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_DOWN);
      g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
      g_assert_cmpuint (e->action, ==, after_failure && running ? TWED_ACTION_CHANGE : TWED_ACTION_DEFER);
    }
}

/* A step up is a raise: the back-off after a failed raise defers it,
 * while it lets the lowering of another VM through. */
static void
test_plan_failure_hold_raise (void)
{
  static const char doc[] =
    "{\"version\":1,\"name\":\"loop\",\"beyond\":{\"mode\":\"auto\",\"min\":1,\"max\":4},"
    "\"auto\":{\"dwell_seconds\":10}}";
  g_autoptr(TwedPolicySet) set = twed_policy_set_new ();
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  TwedPlanOptions o = { "2026-01-01T00:00:00Z", 0, ctl };
  g_autoptr(TwedPlan) plan = NULL;

  g_assert_true (twed_policy_set_add (set, twed_policy_parse (doc, sizeof doc - 1, "loop.json", NULL), NULL));
  for (int r = 0; r < 3; r++)
    {
      g_autoptr(GPtrArray) hosts = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_host_free);
      TwedHost *h = plan_host_new (1);

      for (guint i = 0; i < 2; i++)
        {
          TwedDomain *d = add_dom (h, i ? "above" : "climbing", 2, NULL);

          d->uuid = g_strdup_printf ("00000000-0000-0000-0000-0000000001%02u", i);
          /* "above" is set above the bounds: its step is down to off */
          if (i)
            {
              d->twed = (TwedSetting) { TWED_MODE_FIXED, 5, 5, 5 };
              d->has_twed = TRUE;
            }
          steady_signals (d, r, i ? 5 : 0);
          if (r == 2)
            {
              d->hold = g_strdup ("its last change failed (1 in a row, next try in 30 s): refused");
              d->hold_after_failure = TRUE;
            }
        }
      twed_host_compute (h);
      g_ptr_array_add (hosts, h);
      g_clear_pointer (&plan, twed_plan_free);
      plan = twed_plan_build (hosts, set, &o);
    }
  for (guint i = 0; i < plan->entries->len; i++)
    {
      TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      g_test_message ("%s: %s: %s", e->domain, twed_action_to_string (e->action), e->reason);
      if (g_str_equal (e->domain, "climbing"))
        {
          g_assert_cmpuint (e->auto_decision, ==, TWED_AUTO_STEP_UP);
          g_assert_cmpuint (e->action, ==, TWED_ACTION_DEFER);
          g_assert_nonnull (strstr (e->reason, "deferred: its last change failed"));
        }
      else
        {
          g_assert_cmpuint (e->target.mode, ==, TWED_MODE_OFF);
          g_assert_cmpuint (e->action, ==, TWED_ACTION_CHANGE);
        }
    }
}

typedef struct {
  TwedAuto *ctl;
  guint index;
  const gint *rounds;     /* atomic: the main loop's rounds so far */
  gint decided;           /* atomic: decisions with a reason */
  gint done;              /* atomic */
} HostPasses;

/* A worker's passes over its own host: 200 reads of up to 8 VMs sharing
 * its pCPUs, a decision for each after each read.  One VM at a time
 * leaves the host for 5 reads, longer than the 30 s it is kept unlisted,
 * so VMs are forgotten (their slots freed while the others have them as
 * co-runners) and come back; every step decided is reported deferred.
 * The last read waits for two rounds of the main loop's calls, so that
 * they overlap the passes however the threads are scheduled. */
static gpointer
host_passes (gpointer data)
{
  HostPasses *hp = data;
  const TwedSetting bounds = { TWED_MODE_AUTO, 0, 1, 4 };
  TwedAutoParams params;

  twed_auto_params_init (&params);
  params.dwell_seconds = 20;
  for (int r = 0; r < 200; r++)
    {
      g_autoptr(TwedHost) h = plan_host_new (2);

      while (r == 199 && g_atomic_int_get (hp->rounds) < 2)
        g_thread_yield ();
      g_free (h->name);
      h->name = g_strdup_printf ("h%u", hp->index);
      for (guint v = 0; v < 8; v++)
        {
          g_autofree char *name = g_strdup_printf ("vm%u", v);
          g_autofree char *uuid = g_strdup_printf ("00000000-0000-0000-%04u-%012u", hp->index, v);

          if (v != (guint) (r / 5) % 8)
            add_steady_vm (h, name, uuid, r, 0);
        }
      twed_host_compute (h);
      twed_auto_observe (hp->ctl, h, 30 * G_USEC_PER_SEC);
      for (guint d = 0; d < h->domains->len; d++)
        {
          const TwedDomain *dom = g_ptr_array_index (h->domains, d);
          TwedAutoVerdict v = { 0 };

          twed_auto_decide (hp->ctl, h, dom, &bounds, &params, &v);
          if (v.reason && *v.reason)
            g_atomic_int_inc (&hp->decided);
          if (!twed_setting_equal (&v.target, &dom->twed))
            twed_auto_step_not_made (hp->ctl, h->name, dom->uuid, &v.target, TWED_AUTO_STEP_DEFERRED);
          twed_auto_verdict_clear (&v);
        }
    }
  g_atomic_int_set (&hp->done, TRUE);
  return NULL;
}

/* Passes over different hosts run on twedd's workers while the main
 * loop saves bars, reloads (dry run; the hosts configured, one of them
 * dropped and configured again) and marks saves lost: every entry point
 * under the hosts' locks and the controller's together, which must not
 * deadlock, nor race under ThreadSanitizer (test auto-tsan). */
static void
test_threads (void)
{
  g_autoptr(TwedAuto) ctl = twed_auto_new ();
  HostPasses hp[4];
  GThread *workers[4];
  const char *all[] = { "h0", "h1", "h2", "h3", NULL };
  const char *three[] = { "h0", "h1", "h2", NULL };
  gint rounds = 0;
  guint running = G_N_ELEMENTS (workers), restored = 0;

  for (guint i = 0; i < G_N_ELEMENTS (workers); i++)
    {
      hp[i] = (HostPasses) { ctl, i, &rounds, 0, FALSE };
      workers[i] = g_thread_new ("host-passes", host_passes, &hp[i]);
    }
  while (running)
    {
      g_autoptr(GPtrArray) saved = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
      g_autoptr(GPtrArray) bars = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
      TwedAutoBars *b = twed_auto_bars_new ("h2", "00000000-0000-0000-0000-0000000000ff");

      twed_auto_save_bars (ctl, NULL, FALSE, 0, 0, saved);
      twed_auto_save_bars (ctl, "h1", TRUE, 0, 0, saved);
      twed_auto_retain_hosts (ctl, rounds % 3 ? all : three);
      twed_auto_set_dry_run (ctl, rounds % 2);
      twed_auto_bars_unsaved (ctl);
      /* A record of a VM that never runs there, restored under way. */
      b->barred_from = 3;
      b->barred_until = G_MAXINT64 / 2;
      g_ptr_array_add (bars, b);
      restored += twed_auto_restore_bars (ctl, bars, 0, 0);
      g_atomic_int_inc (&rounds);
      running = 0;
      for (guint i = 0; i < G_N_ELEMENTS (workers); i++)
        running += !g_atomic_int_get (&hp[i].done);
    }
  for (guint i = 0; i < G_N_ELEMENTS (workers); i++)
    {
      g_thread_join (workers[i]);
      /* 200 reads of 7 VMs, each decision explained. */
      g_assert_cmpint (hp[i].decided, ==, 200 * 7);
    }
  g_test_message ("%d rounds of the main loop's calls beside the passes, %u records restored", rounds, restored);
  g_assert_cmpint (rounds, >, 1);
  /* h3 dropped: nothing of it is kept; configured again, its VMs are
   * read afresh. */
  {
    g_autoptr(TwedHost) h = plan_host_new (2);
    TwedDomain *d;

    g_free (h->name);
    h->name = g_strdup ("h3");
    d = add_steady_vm (h, "vm1", "00000000-0000-0000-0003-000000000001", 300, 0);
    twed_host_compute (h);
    twed_auto_retain_hosts (ctl, three);
    twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
    g_assert_false (controller_knows (ctl, h, d));
    twed_auto_retain_hosts (ctl, all);
    twed_auto_observe (ctl, h, TWED_AUTO_FORGET_USEC);
    g_assert_true (controller_knows (ctl, h, d));
  }
}

static int
cmp_name (gconstpointer a, gconstpointer b)
{
  return strcmp (*(char *const *) a, *(char *const *) b);
}

int
main (int argc, char **argv)
{
  const char *dir;
  g_autoptr(GDir) d = NULL;
  g_autoptr(GPtrArray) files = g_ptr_array_new_with_free_func (g_free);
  const char *name;

  g_test_init (&argc, &argv, NULL);
  if (argc < 2)
    g_error ("usage: test-auto TRACE-DIR");
  dir = argv[1];
  d = g_dir_open (dir, 0, NULL);
  g_assert_nonnull (d);
  while ((name = g_dir_read_name (d)))
    if (g_str_has_suffix (name, ".trace"))
      g_ptr_array_add (files, g_strdup (name));
  g_assert_cmpuint (files->len, >=, 8);
  g_ptr_array_sort (files, cmp_name);
  for (guint i = 0; i < files->len; i++)
    {
      const char *f = g_ptr_array_index (files, i);
      g_autofree char *base = g_strndup (f, strlen (f) - strlen (".trace"));
      g_autofree char *tp = g_strdup_printf ("/auto/trace/%s", base);

      g_test_add_data_func_full (tp, g_build_filename (dir, f, NULL), test_trace, g_free);
    }
  g_test_add_func ("/auto/plan/limits", test_plan_limits);
  g_test_add_func ("/auto/plan/report", test_plan_report);
  g_test_add_func ("/auto/bars/restart", test_bars_restart);
  g_test_add_func ("/auto/bars/state-file", test_bars_state_file);
  g_test_add_func ("/auto/plan/host-default", test_plan_host_default);
  g_test_add_func ("/auto/plan/band-left", test_plan_band_left);
  g_test_add_func ("/auto/plan/single-run", test_plan_single_run);
  g_test_add_func ("/auto/plan/protective-first", test_plan_protective_first);
  g_test_add_func ("/auto/plan/not-running", test_plan_not_running);
  g_test_add_func ("/auto/forget", test_forget);
  g_test_add_func ("/auto/threads", test_threads);
  g_test_add_func ("/auto/plan/failure-hold", test_plan_failure_hold);
  g_test_add_func ("/auto/plan/failure-hold-raise", test_plan_failure_hold_raise);
  return g_test_run ();
}
