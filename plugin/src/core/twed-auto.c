/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-auto.h"

#include <math.h>
#include <string.h>

/* A window is judged on at least this many reads: one delta alone may
 * be a single scheduling burst. */
#define MIN_READS 2
/* Fewer WFE exits than this per second of vCPU time leave nothing for
 * a delay to save. */
#define EXITS_FLOOR 1.0
/* vCPU time below this fraction of the window: not judged. */
#define IDLE_FRACTION 0.01
/* A party not seen at off is a new co-runner once it was runnable for
 * this fraction of two windows in a row: a real share of a pCPU, not a
 * few timer ticks that wait longer behind a spinner than at off. */
#define NEWCOMER_FRACTION 0.05
/* A step up is two levels when the setting left at most this share of
 * the exits at off and more than twice min_gain of them.  Below half,
 * the cut is larger than the spread of a window of a few reads at one
 * setting (half or more in a lock-heavy guest), so the exits follow the
 * window, not the noise, and skipping a level saves a dwell on a climb
 * that will go on; above it, single steps, so a cut that is noise does
 * not buy two levels at once.  The level skipped is not measured: a
 * step down from the level reached lands on it. */
#define BIG_STEP_LEFT 0.5
/* A modular difference above this is a counter that went back (a new
 * process), not one that wrapped. */
#define DELTA_LIMIT (G_GUINT64_CONSTANT (1) << 63)

#define LEVEL_OFF (-1)
#define LEVEL_OTHER (-2) /* dynamic, or fixed outside the bounds */
#define LEVEL_NONE (-3)

/* A level's pool holds its last this many judged windows: enough that
 * one window of a few reads does not decide alone, few enough that a
 * phase change shows within a few dwells instead of being outweighed by
 * hours of earlier windows. */
#define POOL_WINDOWS 6

/* What was measured at one level: the exits and vCPU time of its last
 * POOL_WINDOWS windows judged since the reference at off was taken,
 * pooled, so that one window of a few reads (which varies by half or
 * more in a lock-heavy guest) does not decide alone. */
typedef struct {
  float exits[POOL_WINDOWS], time_ns[POOL_WINDOWS];
  guint8 n;                 /* windows held, up to POOL_WINDOWS */
  guint8 next;              /* slot of the next window */
  gboolean valid;
  gint64 at;                /* end of the last window pooled */
} LevelStats;

/* A level never measured since the reference: what a VM's stats of a
 * level are until it is (they are allocated then, so that a VM costs
 * the levels it visits, not the ladder). */
static const LevelStats NO_STATS = { { 0 }, { 0 }, 0, 0, FALSE, 0 };

static void
pool_add (LevelStats *s, double exits, double time_ns, gint64 at)
{
  s->exits[s->next] = (float) exits;
  s->time_ns[s->next] = (float) time_ns;
  s->next = (guint8) ((s->next + 1) % POOL_WINDOWS);
  s->n = (guint8) MIN (s->n + 1, POOL_WINDOWS);
  s->at = at;
  s->valid = TRUE;
}

static double
pooled_rate (const LevelStats *s)
{
  double exits = 0, time_ns = 0;

  for (guint i = 0; i < s->n; i++)
    {
      exits += s->exits[i];
      time_ns += s->time_ns[i];
    }
  return time_ns > 0 ? exits / (time_ns / 1e9) : 0;
}

/* The run-queue wait and runnable time (wait + CPU time) of one VM's
 * vCPUs that may run on the pCPUs of the VM judged: the VM itself or a
 * co-located one.  wait / runnable is the share of the time it wanted a
 * pCPU that it waited for one.  Unlike the wait per second, the share
 * does not grow with the number of vCPUs or with how busy the VM is,
 * and it is bounded, so one noisy read cannot swamp a window. */
/* A party is named by its slot on the host (HostVms.slots): the VMs of
 * a host each hold an array of the parties of their window and one of
 * those met at off, sorted by slot, so that a VM's figures cost a few
 * bytes per co-runner rather than a copy of its name and uuid.  Single
 * precision: the figures are ns summed over windows of minutes to
 * hours, compared as shares to a point. */
typedef struct {
  guint32 slot;
  guint32 nvcpus;           /* its vCPUs that may run on the VM's pCPUs, at most (a window's
                             * parties; the newcomer's text) */
  float wait_ns, run_ns;
  float elapsed_ns;         /* the time its deltas covered (a co-runner's reads may span
                             * more or less than the window's) */
} Party;

/* A party of a judged window, with its share: wait_ns / run_ns. */
typedef struct {
  const Party *p;
  double share;
  gboolean busy;            /* runnable for NEWCOMER_FRACTION of the window judged */
} Judged;

/* pCPUs as a bitmap; NULL = every pCPU. */
typedef struct {
  guint nwords;
  guint64 w[];
} CpuMask;

typedef struct {
  double wait_ns, time_ns;
} VcpuDelta;

/* A VM's bars (TwedAutoBars) on the reads' clock: what is compared
 * with what was saved, to record only what changed. */
typedef struct {
  int id;
  int barred_from;          /* -1 = none */
  gint64 barred_until;
  int refused_from;         /* -1 = none */
  gint64 refused_until, refused_bar;
  gint64 remeasured_at;
} Bars;

static const Bars NO_BARS = { 0, -1, 0, -1, 0, 0, 0 };

static gboolean
bars_equal (const Bars *a, const Bars *b)
{
  return a->id == b->id && a->barred_from == b->barred_from && a->barred_until == b->barred_until &&
         a->refused_from == b->refused_from && a->refused_until == b->refused_until &&
         a->refused_bar == b->refused_bar && a->remeasured_at == b->remeasured_at;
}

typedef struct {
  char *host;
  char *name;
  int id;
  gint64 prev_at;
  GArray *prev;             /* TwedVcpuSignals of the previous read, NULL = none */
  guint session;            /* the host's connection of that read (TwedHost.session) */
  gint64 seen_at;
  gboolean where_known;     /* the controller's where says this host */
  gint64 advanced_at;       /* last read in which the vCPUs ran at all */
  gint64 delta_at;          /* last read that gave a delta (or restarted the measurement) */
  char *missing;            /* why the last read gave no usable signals */
  gint64 gap_since;         /* first read of a run without them after a complete
                             * read, 0 = none: a read taken while a change of the
                             * domain is in flight lacks its KVM stats */
  gboolean d_gap;           /* this read's delta spans such a gap */
  int base_level;           /* the setting at the read the next delta starts from */
  char *reset;              /* why the last read restarted the deltas */
  guint twed_delay;         /* highest vcpu.N.twed_delay.cur of the last read */
  gint64 mismatch_since;    /* first read whose twed_delay did not match the setting, 0 = none */
  gint64 zero_since;        /* first read of a fixed delay whose twed_delay read 0 while WFEs
                             * trapped, 0 = none */
  double zero_exits, zero_time_ns; /* the exits and vCPU time of those reads */

  /* This read's deltas. */
  gboolean have_delta;
  double d_exits, d_time_ns, d_elapsed_ns;
  /* The run-queue wait and time a co-located VM costs: from libvirt's
   * vcpu.N.delay and vcpu.N.time alone, which need no domain job, so a
   * neighbour whose KVM stats are not read (a job held by a backup or a
   * migration, NOWAIT) still counts. */
  gboolean have_cost;
  double d_cost_elapsed_ns; /* the time d_vcpus covers */
  GArray *d_vcpus;          /* VcpuDelta by vCPU */
  GArray *cost_prev;        /* TwedVcpuSignals of the last read with them, NULL = none */
  char *cost_host;
  guint cost_session;
  int cost_id;
  gint64 cost_at;
  guint slot;               /* its party slot on the host */
  CpuMask *pcpus;           /* pCPUs it may run on, NULL = all */
  GPtrArray *vcpu_pcpus;    /* per vCPU CpuMask, NULL entry = all */

  /* The window at the current level. */
  int level;
  double w_exits, w_time_ns, w_elapsed_ns;
  guint w_reads;
  GArray *w_parties;        /* Party by slot: the VM and its co-runners */
  LevelStats *stats[TWED_DELAY_LIMIT + 2]; /* by level + 1, NULL = not measured */
  GArray *off_shares;       /* Party by slot: every party seen at off, whatever it ran,
                             * its wait and runnable time pooled over the windows at
                             * off since the reference was taken */
  GArray *newcomers;        /* guint32 slots: parties of the last judged window at a
                             * level that were never seen at off */
  gint64 remeasured_at;     /* when off was last measured again for a newcomer, 0 = never */
  int return_to;            /* the level left to measure off again, LEVEL_NONE = none */
  CpuMask *off_pcpus;       /* the VM's pCPUs then, NULL = all */
  int ceiling;              /* highest level allowed until ceiling_until */
  gint64 ceiling_until;
  int refused;              /* lowest level asked for and not in force after a dwell (the
                             * host ceiling kvm-arm.twed_max), LEVEL_NONE = none */
  gint64 refused_until;     /* it and the levels above are not asked for before */
  gint64 refused_bar;       /* how long they were barred last time (usec) */
  guint uncut;              /* judged windows in a row at this level that did not cut the
                             * exits by min_gain of off's */
  guint cut_run;            /* judged windows at this level whose pool cut the exits
                             * against the level below, since one that did not cut
                             * them against off or a second one whose exits stopped
                             * falling */
  guint flat;               /* judged windows at this level whose exits stopped falling,
                             * since the last one that cut them */
  int pending;              /* level last decided, LEVEL_NONE = none */
  int pending_from;         /* the level it was decided at */
  gboolean pending_protective; /* it undoes a cost: sent again, it keeps its priority */
  gint64 pending_at;
  TwedAutoStepOutcome pending_outcome; /* the worst report that it was not made, 0 = none */

  int restored_id;          /* bars restored at twedd's start for this domain id, until
                             * its first complete read; 0 = none */
  Bars saved;               /* its bars as last saved (twed_auto_save_bars) */
  gint64 cooldown;          /* usec: the cooldown of its last decision, -1 = none yet */
} VmState;

/* The VMs read on one host.  Each host has its own lock: passes over
 * different hosts run on workers at once, and the main loop's save of
 * one host's bars waits for that host's pass only.  Reference counted:
 * a reload may drop the host while a pass still works on it. */
typedef struct {
  GMutex lock;
  GHashTable *vms;          /* uuid -> VmState */
  GPtrArray *slots;         /* slot -> VmState, NULL = free */
  gboolean dropped;         /* under lock: no longer the controller's (a reload removed the
                             * host, or its last VM was forgotten) */
} HostVms;

/* State is kept per (host, uuid): a pass reads and forgets only within
 * its host, and the two sides of a live migration keep their own.  The
 * controller's lock guards its tables of hosts, where each VM was read
 * and the forgotten VMs' records; it is taken after a host's lock, never
 * before it. */
struct _TwedAuto {
  gint refs;
  GMutex lock;
  GHashTable *hosts;        /* host name -> HostVms */
  GHashTable *allowed;      /* host names a table may be made for, NULL = any */
  GHashTable *where;        /* uuid -> host name it was last read on */
  gint dry_run;             /* atomic: decisions are not applied, none is awaited */
  GPtrArray *forgotten;     /* TwedAutoBars holding nothing: VMs forgotten whose bars
                             * were saved, for the next save of their host */
};

void
twed_auto_params_init (TwedAutoParams *p)
{
  /* A margin of 5 points of wait share: above the spread of a few
   * cycles' shares of always-runnable vCPUs, below the rise of a
   * neighbour whose pCPU a spinner holds (a third of the pCPU to a
   * half).  A dwell of two default intervals, so a setting is judged
   * on a full one. */
  p->wait_margin = 0.05;
  p->min_gain = 0.10;
  p->dwell_seconds = 120;
  p->stale_seconds = 300;
  p->cooldown_seconds = 1800;
  /* Three cooldowns: a workload changes phase over hours.  A window at
   * off every 90 min, and the climb back from the lowest level with
   * fresh pools (about 4 dwells), forgo the savings about a tenth of
   * the time at the default dwell. */
  p->baseline_seconds = 5400;
}

const char *
twed_auto_decision_to_string (TwedAutoDecision d)
{
  switch (d)
    {
    case TWED_AUTO_STEP_UP:
      return "step-up";
    case TWED_AUTO_STEP_DOWN:
      return "step-down";
    case TWED_AUTO_FALLBACK:
      return "fallback";
    case TWED_AUTO_BASELINE:
      return "baseline";
    case TWED_AUTO_HOLD:
    default:
      return "hold";
    }
}

gboolean
twed_auto_decision_from_string (const char *str, TwedAutoDecision *decision)
{
  static const TwedAutoDecision all[] = {
    TWED_AUTO_HOLD, TWED_AUTO_STEP_UP, TWED_AUTO_STEP_DOWN, TWED_AUTO_FALLBACK, TWED_AUTO_BASELINE,
  };

  for (guint i = 0; i < G_N_ELEMENTS (all); i++)
    if (g_strcmp0 (str, twed_auto_decision_to_string (all[i])) == 0)
      {
        *decision = all[i];
        return TRUE;
      }
  return FALSE;
}

void
twed_auto_verdict_clear (TwedAutoVerdict *v)
{
  g_clear_pointer (&v->reason, g_free);
}

static void
stats_clear (VmState *st, guint from)
{
  for (guint i = from; i < G_N_ELEMENTS (st->stats); i++)
    g_clear_pointer (&st->stats[i], g_free);
}

/* The figures of @level: NO_STATS until it is measured. */
static const LevelStats *
level_stats (const VmState *st, int level)
{
  const LevelStats *s = st->stats[level + 1];

  return s ? s : &NO_STATS;
}

static LevelStats *
level_stats_mut (VmState *st, int level)
{
  if (!st->stats[level + 1])
    st->stats[level + 1] = g_new0 (LevelStats, 1);
  return st->stats[level + 1];
}

static void
cpumask_free (CpuMask *m)
{
  g_free (m);
}

static void
vm_state_free (VmState *st)
{
  g_free (st->host);
  g_free (st->name);
  g_array_unref (st->d_vcpus);
  if (st->vcpu_pcpus)
    g_ptr_array_unref (st->vcpu_pcpus);
  g_array_unref (st->w_parties);
  g_array_unref (st->off_shares);
  g_array_unref (st->newcomers);
  stats_clear (st, 0);
  cpumask_free (st->off_pcpus);
  if (st->prev)
    g_array_unref (st->prev);
  if (st->cost_prev)
    g_array_unref (st->cost_prev);
  g_free (st->cost_host);
  cpumask_free (st->pcpus);
  g_free (st->missing);
  g_free (st->reset);
  g_free (st);
}

static VmState *
vm_state_new (void)
{
  VmState *st = g_new0 (VmState, 1);

  st->level = LEVEL_NONE;
  st->pending = LEVEL_NONE;
  st->ceiling = TWED_DELAY_LIMIT;
  st->refused = LEVEL_NONE;
  st->d_vcpus = g_array_new (FALSE, TRUE, sizeof (VcpuDelta));
  st->w_parties = g_array_new (FALSE, FALSE, sizeof (Party));
  st->off_shares = g_array_new (FALSE, FALSE, sizeof (Party));
  st->newcomers = g_array_new (FALSE, FALSE, sizeof (guint32));
  st->return_to = LEVEL_NONE;
  st->base_level = LEVEL_NONE;
  st->saved = NO_BARS;
  st->cooldown = -1;
  return st;
}

static void
host_vms_clear (HostVms *hv)
{
  g_hash_table_unref (hv->vms);
  g_ptr_array_unref (hv->slots);
  g_mutex_clear (&hv->lock);
}

static void
host_vms_unref (HostVms *hv)
{
  g_atomic_rc_box_release_full (hv, (GDestroyNotify) host_vms_clear);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HostVms, host_vms_unref)

/* Under the controller's lock: @name's table, made when @create and
 * the host is one the controller may hold (not one a reload removed
 * while a pass over it ran); a reference, or NULL. */
static HostVms *
host_vms_locked (TwedAuto *ctl, const char *name, gboolean create)
{
  HostVms *hv = g_hash_table_lookup (ctl->hosts, name);

  if (!hv && create && (!ctl->allowed || g_hash_table_contains (ctl->allowed, name)))
    {
      hv = g_atomic_rc_box_new0 (HostVms);
      g_mutex_init (&hv->lock);
      hv->vms = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) vm_state_free);
      hv->slots = g_ptr_array_new ();
      g_hash_table_insert (ctl->hosts, g_strdup (name), hv);
    }
  return hv ? g_atomic_rc_box_acquire (hv) : NULL;
}

/* @name's table, locked, or NULL (see host_vms_locked ()). */
static HostVms *
host_vms_lock (TwedAuto *ctl, const char *name, gboolean create)
{
  HostVms *hv;

  for (;;)
    {
      g_mutex_lock (&ctl->lock);
      hv = host_vms_locked (ctl, name, create);
      g_mutex_unlock (&ctl->lock);
      if (!hv)
        return NULL;
      g_mutex_lock (&hv->lock);
      if (!hv->dropped)
        return hv;
      /* Dropped between the two locks: nothing may be kept in it.  Made
       * anew when asked to and the host is still the controller's (its
       * last VM was forgotten); not when a reload removed it. */
      g_mutex_unlock (&hv->lock);
      host_vms_unref (hv);
      if (!create)
        return NULL;
    }
}

static void
host_vms_unlock (HostVms *hv)
{
  if (!hv)
    return;
  g_mutex_unlock (&hv->lock);
  host_vms_unref (hv);
}

/* Calls @fn on every VM of every host, each host under its own lock
 * (taken without the controller's). */
static void
for_each_vm (TwedAuto *ctl, void (*fn) (VmState *st, gpointer data), gpointer data)
{
  g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) host_vms_unref);
  GHashTableIter it;
  HostVms *hv;
  VmState *st;

  g_mutex_lock (&ctl->lock);
  g_hash_table_iter_init (&it, ctl->hosts);
  while (g_hash_table_iter_next (&it, NULL, (gpointer *) &hv))
    g_ptr_array_add (all, g_atomic_rc_box_acquire (hv));
  g_mutex_unlock (&ctl->lock);
  for (guint h = 0; h < all->len; h++)
    {
      hv = g_ptr_array_index (all, h);
      g_mutex_lock (&hv->lock);
      g_hash_table_iter_init (&it, hv->vms);
      while (g_hash_table_iter_next (&it, NULL, (gpointer *) &st))
        fn (st, data);
      g_mutex_unlock (&hv->lock);
    }
}

/* A new VM of @hv, in the first free slot. */
static VmState *
host_vms_add (HostVms *hv, const char *uuid)
{
  VmState *st = vm_state_new ();
  guint slot;

  for (slot = 0; slot < hv->slots->len && g_ptr_array_index (hv->slots, slot); slot++)
    ;
  if (slot == hv->slots->len)
    g_ptr_array_add (hv->slots, st);
  else
    g_ptr_array_index (hv->slots, slot) = st;
  st->slot = slot;
  g_hash_table_insert (hv->vms, g_strdup (uuid), st);
  return st;
}

/* The VM in @slot of @hv (a party of a window), NULL once forgotten. */
static const VmState *
slot_vm (const HostVms *hv, guint32 slot)
{
  return slot < hv->slots->len ? g_ptr_array_index (hv->slots, slot) : NULL;
}

TwedAuto *
twed_auto_new (void)
{
  TwedAuto *ctl = g_new0 (TwedAuto, 1);

  ctl->refs = 1;
  g_mutex_init (&ctl->lock);
  ctl->hosts = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, (GDestroyNotify) host_vms_unref);
  ctl->where = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  ctl->forgotten = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);
  return ctl;
}

TwedAuto *
twed_auto_ref (TwedAuto *ctl)
{
  g_atomic_int_inc (&ctl->refs);
  return ctl;
}

void
twed_auto_unref (TwedAuto *ctl)
{
  if (!ctl || !g_atomic_int_dec_and_test (&ctl->refs))
    return;
  g_hash_table_unref (ctl->hosts);
  if (ctl->allowed)
    g_hash_table_unref (ctl->allowed);
  g_hash_table_unref (ctl->where);
  g_ptr_array_unref (ctl->forgotten);
  g_mutex_clear (&ctl->lock);
  g_free (ctl);
}

/* The ladder position of a setting: off, a fixed delay, or neither. */
static int
setting_level (const TwedSetting *s)
{
  if (s->mode == TWED_MODE_OFF)
    return LEVEL_OFF;
  if (s->mode == TWED_MODE_FIXED)
    return (int) s->delay;
  return LEVEL_OTHER;
}

/* A domain's: without <twed>, off. */
static int
level_of (const TwedDomain *dom)
{
  return dom->has_twed ? setting_level (&dom->twed) : LEVEL_OFF;
}

static char *
level_name (int level)
{
  return level == LEVEL_OFF ? g_strdup ("off") : g_strdup_printf ("%d", level);
}

static void
window_reset (VmState *st)
{
  st->w_exits = st->w_time_ns = st->w_elapsed_ns = 0;
  st->w_reads = 0;
  g_array_set_size (st->w_parties, 0);
}

/* Forget what was measured: the pooled figures of every level, the
 * reference at off (shares, pCPUs) and the count of uncut windows.
 * Taken when the counters belong to another process or host, and when
 * off is measured again. */
static void
stats_reset (VmState *st)
{
  stats_clear (st, 0);
  g_array_set_size (st->off_shares, 0);
  g_clear_pointer (&st->off_pcpus, cpumask_free);
  g_array_set_size (st->newcomers, 0);
  st->return_to = LEVEL_NONE;
  st->uncut = 0;
  st->cut_run = 0;
  st->flat = 0;
}

static void
set_str (char **slot, char *value)
{
  g_free (*slot);
  *slot = value;
}

/* *@slot becomes a copy of @value; nothing is allocated when it is one
 * already (every read names the same host and domain). */
static void
set_str_copy (char **slot, const char *value)
{
  if (g_strcmp0 (*slot, value) != 0)
    set_str (slot, g_strdup (value));
}

/* @dst, made when NULL, becomes a copy of the vCPU signals @src. */
static GArray *
signals_copy_into (GArray *dst, GArray *src)
{
  if (!dst)
    dst = g_array_sized_new (FALSE, FALSE, sizeof (TwedVcpuSignals), src->len);
  g_array_set_size (dst, 0);
  g_array_append_vals (dst, src->data, src->len);
  return dst;
}

static GArray *
vcpu_affinity (const TwedDomain *dom, guint v)
{
  GArray *a = v < dom->affinity->len ? g_ptr_array_index (dom->affinity, v) : NULL;

  return a ? a : dom->default_affinity;
}

/* @cpus (libvirt's cpuset, NULL = all) as a bitmap. */
static CpuMask *
cpumask_new (GArray *cpus)
{
  CpuMask *m;
  guint top = 0;

  if (!cpus)
    return NULL;
  for (guint i = 0; i < cpus->len; i++)
    top = MAX (top, g_array_index (cpus, guint, i));
  m = g_malloc0 (sizeof (CpuMask) + (top / 64 + 1) * sizeof (guint64));
  m->nwords = top / 64 + 1;
  for (guint i = 0; i < cpus->len; i++)
    {
      guint c = g_array_index (cpus, guint, i);

      m->w[c / 64] |= G_GUINT64_CONSTANT (1) << (c % 64);
    }
  return m;
}

static CpuMask *
cpumask_copy (const CpuMask *m)
{
  return m ? g_memdup2 (m, sizeof (CpuMask) + m->nwords * sizeof (guint64)) : NULL;
}

static guint64
cpumask_word (const CpuMask *m, guint i)
{
  return i < m->nwords ? m->w[i] : 0;
}

static gboolean
cpumask_equal (const CpuMask *a, const CpuMask *b)
{
  if (!a || !b)
    return !a && !b;
  for (guint i = 0; i < MAX (a->nwords, b->nwords); i++)
    if (cpumask_word (a, i) != cpumask_word (b, i))
      return FALSE;
  return TRUE;
}

static gboolean
cpumask_meet (const CpuMask *a, const CpuMask *b)
{
  if (!a || !b)
    return TRUE;
  for (guint i = 0; i < MIN (a->nwords, b->nwords); i++)
    if (a->w[i] & b->w[i])
      return TRUE;
  return FALSE;
}

/* Whether @m holds exactly @cpus (sorted, without repeats; NULL = all). */
static gboolean
cpumask_matches (const CpuMask *m, GArray *cpus)
{
  guint bits = 0;

  if (!m || !cpus)
    return !m && !cpus;
  for (guint i = 0; i < m->nwords; i++)
    bits += (guint) __builtin_popcountll (m->w[i]);
  if (bits != cpus->len)
    return FALSE;
  for (guint i = 0; i < cpus->len; i++)
    {
      guint c = g_array_index (cpus, guint, i);

      if (c / 64 >= m->nwords || !(m->w[c / 64] & (G_GUINT64_CONSTANT (1) << (c % 64))))
        return FALSE;
    }
  return TRUE;
}

/* Whether @vcpu_pcpus (from domain_vcpu_pcpus ()) is still @dom's: the
 * masks are made again only when its pinning changed. */
static gboolean
vcpu_pcpus_match (GPtrArray *vcpu_pcpus, const TwedDomain *dom)
{
  if (!vcpu_pcpus || vcpu_pcpus->len != dom->nvcpus)
    return FALSE;
  for (guint v = 0; v < dom->nvcpus; v++)
    if (!cpumask_matches (g_ptr_array_index (vcpu_pcpus, v), vcpu_affinity (dom, v)))
      return FALSE;
  return TRUE;
}

/* Each vCPU's pCPUs, kept past the read (the domain is the inventory's). */
static GPtrArray *
domain_vcpu_pcpus (const TwedDomain *dom)
{
  GPtrArray *out = g_ptr_array_new_full (dom->nvcpus, (GDestroyNotify) cpumask_free);

  for (guint v = 0; v < dom->nvcpus; v++)
    g_ptr_array_add (out, cpumask_new (vcpu_affinity (dom, v)));
  return out;
}

/* The pCPUs any vCPU may run on, from domain_vcpu_pcpus (); NULL = all. */
static CpuMask *
domain_pcpus (GPtrArray *vcpu_pcpus)
{
  CpuMask *out = NULL;

  for (guint v = 0; v < vcpu_pcpus->len; v++)
    {
      const CpuMask *a = g_ptr_array_index (vcpu_pcpus, v);
      CpuMask *u;

      if (!a)
        {
          cpumask_free (out);
          return NULL;
        }
      u = g_malloc0 (sizeof (CpuMask) + MAX (a->nwords, out ? out->nwords : 0) * sizeof (guint64));
      u->nwords = MAX (a->nwords, out ? out->nwords : 0);
      for (guint i = 0; i < u->nwords; i++)
        u->w[i] = cpumask_word (a, i) | (out ? cpumask_word (out, i) : 0);
      cpumask_free (out);
      out = u;
    }
  return out;
}

static const char *
missing_signal (guint have)
{
  if (!(have & TWED_SIGNAL_WFE_EXITS))
    return "wfe_exit_stat";
  if (!(have & TWED_SIGNAL_TWED_DELAY))
    return "twed_delay";
  if (!(have & TWED_SIGNAL_WAIT))
    return "delay (run-queue wait)";
  return "time";
}

/* A judged window whose pool cut the exits against the level below:
 * one more judgement of the pair, and the end of a run of windows whose
 * exits stopped falling.  Returns the judgements so far. */
static guint
cut_counted (VmState *st)
{
  st->flat = 0;
  return ++st->cut_run;
}

/* The reads of a fixed delay that read 0 (twed_auto_decide ()) end. */
static void
zero_run_clear (VmState *st)
{
  st->zero_since = 0;
  st->zero_exits = st->zero_time_ns = 0;
}

/* A new window at the setting, judged afresh: the runs of windows
 * that did or did not cut the exits start again too. */
static void
window_restart (VmState *st)
{
  st->uncut = 0;
  st->cut_run = 0;
  st->flat = 0;
  /* A new setting, or the VM back under the controller: a twed_delay
   * that does not match is waited for afresh. */
  st->mismatch_since = 0;
  zero_run_clear (st);
  window_reset (st);
}

/* Whether the decisions are applied.  In a dry run a decided step is
 * not awaited: it would count as refused after a dwell, barring the
 * levels from it and blaming the host ceiling, and those bars would
 * outlive the dry run.  Steps awaited when it starts are dropped. */
static void
drop_pending (VmState *st, gpointer data)
{
  st->pending = LEVEL_NONE;
}

void
twed_auto_set_dry_run (TwedAuto *ctl, gboolean dry_run)
{
  if (dry_run && !g_atomic_int_exchange (&ctl->dry_run, TRUE))
    for_each_vm (ctl, drop_pending, NULL);
  else if (!dry_run)
    g_atomic_int_set (&ctl->dry_run, FALSE);
}

/* A pass that plans @dom without the controller (pinned, opted out, its
 * definition not read): a decided step is no longer awaited, and the
 * window at its setting starts again when the controller has it back,
 * rather than being judged on all the time it was left alone. */
void
twed_auto_skip (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom)
{
  HostVms *hv = dom->uuid ? host_vms_lock (ctl, host->name, FALSE) : NULL;
  VmState *st = hv ? g_hash_table_lookup (hv->vms, dom->uuid) : NULL;

  if (st)
    {
      st->pending = LEVEL_NONE;
      window_restart (st);
    }
  host_vms_unlock (hv);
}

void
twed_auto_step_not_made (TwedAuto *ctl, const char *host, const char *uuid, const TwedSetting *target,
                         TwedAutoStepOutcome outcome)
{
  int level = setting_level (target);
  HostVms *hv = uuid ? host_vms_lock (ctl, host, FALSE) : NULL;
  VmState *st = hv ? g_hash_table_lookup (hv->vms, uuid) : NULL;

  if (st && st->pending != LEVEL_NONE && st->pending == level)
    st->pending_outcome = MAX (st->pending_outcome, outcome);
  host_vms_unlock (hv);
}

/* A read without usable signals: after a complete read of the same
 * domain on this host it is a gap, the previous read staying the base of
 * the next delta, which spans the gap (the counters are cumulative); a
 * read taken while a change of the domain is in flight lacks its KVM
 * stats.  Otherwise there is nothing to measure from. */
static void
signals_missing (VmState *st, const TwedHost *host, const TwedDomainSignals *sig, char *why)
{
  set_str (&st->missing, why);
  if (sig && st->prev && g_strcmp0 (st->host, host->name) == 0 && sig->id == st->id)
    {
      if (!st->gap_since)
        st->gap_since = sig->at;
      st->seen_at = sig->at;
    }
  else
    {
      st->gap_since = 0;
      g_clear_pointer (&st->prev, g_array_unref);
    }
}

/* The wait and time deltas of each vCPU since the last read that had
 * them on this host, for the VMs whose pCPUs it shares. */
static void
observe_cost (VmState *st, const TwedHost *host, const TwedDomainSignals *sig)
{
  gboolean base;

  st->have_cost = FALSE;
  g_array_set_size (st->d_vcpus, 0);
  /* A read without them keeps the base: the next delta spans it (the
   * checks below tell a base of another process or host). */
  if (!sig || sig->vcpus->len == 0)
    return;
  for (guint v = 0; v < sig->vcpus->len; v++)
    {
      const TwedVcpuSignals *s = &g_array_index (sig->vcpus, TwedVcpuSignals, v);

      if ((s->have & (TWED_SIGNAL_WAIT | TWED_SIGNAL_TIME)) != (TWED_SIGNAL_WAIT | TWED_SIGNAL_TIME))
        return;
    }
  base = st->cost_prev && st->cost_prev->len == sig->vcpus->len && sig->id == st->cost_id &&
         sig->at > st->cost_at && g_strcmp0 (st->cost_host, host->name) == 0 && st->cost_session == host->session;
  for (guint v = 0; base && v < sig->vcpus->len; v++)
    {
      const TwedVcpuSignals *a = &g_array_index (st->cost_prev, TwedVcpuSignals, v);
      const TwedVcpuSignals *b = &g_array_index (sig->vcpus, TwedVcpuSignals, v);
      guint64 dw = b->wait_ns - a->wait_ns, dt = b->time_ns - a->time_ns;
      VcpuDelta d = { (double) dw, (double) dt };

      if (dw >= DELTA_LIMIT || dt >= DELTA_LIMIT)
        base = FALSE;
      g_array_append_val (st->d_vcpus, d);
    }
  if (!base)
    g_array_set_size (st->d_vcpus, 0);
  else
    st->d_cost_elapsed_ns = (double) (sig->at - st->cost_at) * 1000.0;
  st->have_cost = base;
  st->cost_prev = signals_copy_into (st->cost_prev, sig->vcpus);
  set_str_copy (&st->cost_host, host->name);
  st->cost_session = host->session;
  st->cost_id = sig->id;
  st->cost_at = sig->at;
}

/* Deltas of one domain's counters since its previous read. */
static void
observe_domain (VmState *st, const TwedHost *host, const TwedDomain *dom, const char *was_on)
{
  const TwedDomainSignals *sig = dom->signals;
  double exits = 0, time_ns = 0;
  guint twed_delay = 0;
  char *reset = NULL;
  gboolean rebased;

  st->have_delta = FALSE;
  st->d_gap = FALSE;
  set_str (&st->reset, NULL);
  set_str_copy (&st->name, dom->name);
  if (!vcpu_pcpus_match (st->vcpu_pcpus, dom))
    {
      if (st->vcpu_pcpus)
        g_ptr_array_unref (st->vcpu_pcpus);
      st->vcpu_pcpus = domain_vcpu_pcpus (dom);
      cpumask_free (st->pcpus);
      st->pcpus = domain_pcpus (st->vcpu_pcpus);
    }
  observe_cost (st, host, sig);

  if (!sig || sig->vcpus->len == 0)
    {
      signals_missing (st, host, sig, g_strdup ("no vCPU stats in the bulk stats"));
      return;
    }
  for (guint v = 0; v < sig->vcpus->len; v++)
    {
      const TwedVcpuSignals *s = &g_array_index (sig->vcpus, TwedVcpuSignals, v);

      if ((s->have & TWED_SIGNALS_ALL) != TWED_SIGNALS_ALL)
        {
          signals_missing (st, host, sig,
                           g_strdup_printf ("vcpu.%u.%s not reported", v, missing_signal (s->have)));
          return;
        }
      twed_delay = MAX (twed_delay, s->twed_delay);
    }
  set_str (&st->missing, NULL);
  st->d_gap = st->gap_since != 0;
  st->gap_since = 0;
  st->twed_delay = twed_delay;
  st->seen_at = sig->at;

  /* Read on another host since (migrated, maybe back again): what was
   * measured here before belongs to another process. */
  if (was_on && g_strcmp0 (was_on, host->name) != 0)
    reset = g_strdup_printf ("now on %s, was on %s (migrated)", host->name, was_on);
  else if (!st->prev)
    reset = g_strdup (st->restored_id ? "first read since twedd started" : "first read of its signals");
  else if (st->id != sig->id)
    reset = g_strdup_printf ("domain id %d, was %d (restarted or migrated back)", sig->id, st->id);
  else if (st->prev->len != sig->vcpus->len)
    reset = g_strdup_printf ("%u vCPUs, were %u", sig->vcpus->len, st->prev->len);
  else if (sig->at <= st->prev_at)
    reset = g_strdup ("read not newer than the previous one");
  else
    {
      for (guint v = 0; v < sig->vcpus->len && !reset; v++)
        {
          const TwedVcpuSignals *a = &g_array_index (st->prev, TwedVcpuSignals, v);
          const TwedVcpuSignals *b = &g_array_index (sig->vcpus, TwedVcpuSignals, v);
          /* Unsigned differences: a counter that wrapped still gives
           * its true increase; one that restarted gives a huge one. */
          guint64 de = b->wfe_exits - a->wfe_exits;
          guint64 dw = b->wait_ns - a->wait_ns;
          guint64 dt = b->time_ns - a->time_ns;

          if (de >= DELTA_LIMIT || dw >= DELTA_LIMIT || dt >= DELTA_LIMIT)
            reset = g_strdup_printf ("vcpu.%u.%s went back", v,
                                     de >= DELTA_LIMIT ? "wfe_exit_stat" : dw >= DELTA_LIMIT ? "delay" : "time");
          exits += (double) de;
          time_ns += (double) dt;
        }
    }
  /* Read over a new connection to the host (libvirtd restarted, or the
   * host rebooted and gave a new process the same domain id, with
   * counters already above the old ones): the delta may span two
   * processes, so this read is only the base of the next one. */
  rebased = !reset && st->session != host->session;

  if (reset)
    {
      st->reset = reset;
      /* Whatever was measured belonged to another process or host:
       * pooled with the new one's windows it would outweigh them. */
      stats_reset (st);
      window_reset (st);
      /* Maybe another host, or another kernel command line; a refusal
       * restored from before twedd's restart holds for the process
       * that refused. */
      if (!st->restored_id || st->restored_id != sig->id)
        {
          st->refused = LEVEL_NONE;
          st->refused_bar = 0;
        }
      st->advanced_at = sig->at;
      st->delta_at = sig->at;
    }
  else if (rebased)
    {
      /* Still, vCPUs whose time moved ran: reads that all come over new
       * connections must not look stale. */
      if (time_ns > 0)
        st->advanced_at = sig->at;
    }
  else
    {
      st->have_delta = TRUE;
      st->d_exits = exits;
      st->d_time_ns = time_ns;
      st->d_elapsed_ns = (double) (sig->at - st->prev_at) * 1000.0;
      st->delta_at = sig->at;
      if (time_ns > 0)
        st->advanced_at = sig->at;
    }

  set_str_copy (&st->host, host->name);
  st->session = host->session;
  st->id = sig->id;
  st->restored_id = 0;
  st->prev = signals_copy_into (st->prev, sig->vcpus);
  st->prev_at = sig->at;
}

/* Under a host's lock: whether @slot is in @a (Party, or guint32
 * slots), sorted by slot; *@index is where it is or goes. */
static gboolean
slot_find (GArray *a, guint32 slot, guint *index)
{
  guint size = g_array_get_element_size (a), lo = 0, hi = a->len;

  while (lo < hi)
    {
      guint mid = lo + (hi - lo) / 2;
      guint32 at = *(const guint32 *) (a->data + (gsize) mid * size);

      if (at == slot)
        {
          *index = mid;
          return TRUE;
        }
      if (at < slot)
        lo = mid + 1;
      else
        hi = mid;
    }
  *index = lo;
  return FALSE;
}

static const Party *
party_lookup (GArray *parties, guint32 slot)
{
  guint i;

  return slot_find (parties, slot, &i) ? &g_array_index (parties, Party, i) : NULL;
}

/* @slot's party in @parties, added with nothing when not there. */
static Party *
party_get (GArray *parties, guint32 slot)
{
  guint i;

  if (!slot_find (parties, slot, &i))
    {
      Party p = { slot, 0, 0, 0, 0 };

      g_array_insert_val (parties, i, p);
    }
  return &g_array_index (parties, Party, i);
}

static void
slot_remove (GArray *a, guint32 slot)
{
  guint i;

  if (slot_find (a, slot, &i))
    g_array_remove_index (a, i);
}

/* Drops where @uuid was read on @host; its saved bars go with it at the
 * next save.  With the host's lock; the caller removes @st from the
 * host's table. */
static void
forget_vm (TwedAuto *ctl, const char *host, const char *uuid, const VmState *st)
{
  g_mutex_lock (&ctl->lock);
  if (g_strcmp0 (g_hash_table_lookup (ctl->where, uuid), host) == 0)
    g_hash_table_remove (ctl->where, uuid);
  if (!bars_equal (&st->saved, &NO_BARS))
    g_ptr_array_add (ctl->forgotten, twed_auto_bars_new (host, uuid));
  g_mutex_unlock (&ctl->lock);
}

/* @st leaves @hv: its slot is freed, and no other VM keeps it as a
 * party, so that the VM given the slot next is not taken for it. */
static void
slot_free (HostVms *hv, const VmState *st)
{
  GHashTableIter it;
  VmState *o;

  g_ptr_array_index (hv->slots, st->slot) = NULL;
  g_hash_table_iter_init (&it, hv->vms);
  while (g_hash_table_iter_next (&it, NULL, (gpointer *) &o))
    {
      slot_remove (o->w_parties, st->slot);
      slot_remove (o->off_shares, st->slot);
      slot_remove (o->newcomers, st->slot);
    }
}

/* The newest read time of @host's domains, G_MININT64 = none. */
static gint64
read_time (const TwedHost *host)
{
  gint64 now = G_MININT64;

  for (guint i = 0; i < host->domains->len; i++)
    {
      const TwedDomain *dom = g_ptr_array_index (host->domains, i);

      if (dom->signals)
        now = MAX (now, dom->signals->at);
    }
  return now;
}

/* With the host's lock: forgets the domains of @hv not listed on @host
 * for @forget_after usec at read time @now (G_MININT64: no read,
 * nothing). */
static void
forget_unseen (TwedAuto *ctl, const char *host, HostVms *hv, gint64 now, gint64 forget_after)
{
  g_autoptr(GPtrArray) gone = NULL;
  GHashTableIter it;
  const char *uuid;
  VmState *st;

  if (now == G_MININT64 || forget_after <= 0)
    return;
  g_hash_table_iter_init (&it, hv->vms);
  while (g_hash_table_iter_next (&it, (gpointer *) &uuid, (gpointer *) &st))
    if (now - st->seen_at > forget_after)
      {
        if (!gone)
          gone = g_ptr_array_new_with_free_func (g_free);
        g_ptr_array_add (gone, g_strdup (uuid));
      }
  for (guint i = 0; gone && i < gone->len; i++)
    {
      uuid = g_ptr_array_index (gone, i);
      st = g_hash_table_lookup (hv->vms, uuid);
      forget_vm (ctl, host, uuid, st);
      g_hash_table_steal (hv->vms, uuid);
      slot_free (hv, st);
      vm_state_free (st);
    }
}

/* Where @uuid was read last when it is not @host (a copy), else NULL. */
static char *
read_elsewhere (TwedAuto *ctl, const char *uuid, const char *host)
{
  const char *was;
  char *out = NULL;

  g_mutex_lock (&ctl->lock);
  was = g_hash_table_lookup (ctl->where, uuid);
  if (was && strcmp (was, host) != 0)
    out = g_strdup (was);
  g_mutex_unlock (&ctl->lock);
  return out;
}

void
twed_auto_observe (TwedAuto *ctl, const TwedHost *host, gint64 forget_after)
{
  g_autoptr(GPtrArray) states = g_ptr_array_new ();
  g_autoptr(GPtrArray) doms = g_ptr_array_new ();
  gint64 now = read_time (host);
  HostVms *hv = host_vms_lock (ctl, host->name, TRUE);

  /* A host a reload removed while this pass ran: nothing to keep. */
  if (!hv)
    return;
  for (guint i = 0; i < host->domains->len; i++)
    {
      const TwedDomain *dom = g_ptr_array_index (host->domains, i);
      g_autofree char *was_on = NULL;
      VmState *st;

      if (!dom->active || !dom->uuid)
        continue;
      st = g_hash_table_lookup (hv->vms, dom->uuid);
      if (!st)
        st = host_vms_add (hv, dom->uuid);
      was_on = read_elsewhere (ctl, dom->uuid, host->name);
      observe_domain (st, host, dom, was_on);
      /* Only a complete read says where the VM runs: the incoming copy
       * of a live migration is listed, without its KVM stats, on the
       * destination while the source still runs it. */
      if (!st->missing && (was_on || !st->where_known))
        {
          g_mutex_lock (&ctl->lock);
          g_hash_table_replace (ctl->where, g_strdup (dom->uuid), g_strdup (host->name));
          g_mutex_unlock (&ctl->lock);
          st->where_known = TRUE;
        }
      g_ptr_array_add (states, st);
      g_ptr_array_add (doms, (gpointer) dom);
    }

  /* A VM listed is seen, with its signals or without (an incoming
   * migration, a kernel without the TWED stats, a first read): only one
   * no longer listed for a while is forgotten below. */
  for (guint i = 0; now != G_MININT64 && i < states->len; i++)
    {
      VmState *st = g_ptr_array_index (states, i);

      st->seen_at = MAX (st->seen_at, now);
    }

  /* Each VM's window takes its own deltas and, per VM, the wait and
   * runnable time of its own vCPUs and of the co-located vCPUs that may
   * run on its pCPUs. */
  for (guint i = 0; i < states->len; i++)
    {
      VmState *st = g_ptr_array_index (states, i);
      const TwedDomain *dom = g_ptr_array_index (doms, i);
      int level = level_of (dom);
      /* A delta across a gap in which the setting changed is not the
       * new setting's alone. */
      gboolean spans_change = st->d_gap && st->base_level != level;

      if (!st->missing)
        st->base_level = level;
      if (level != st->level)
        {
          /* A new setting: its window starts now, or, when it is the
           * step decided last, with this read's delta (the change was
           * made right after the previous read, unless reads without
           * signals came between). */
          gboolean decided = level == st->pending && !st->d_gap;

          st->level = level;
          window_restart (st);
          if (!decided)
            continue;
        }
      if (!st->have_delta || spans_change)
        continue;
      for (guint j = 0; j < states->len; j++)
        {
          const VmState *o = g_ptr_array_index (states, j);
          double wait = 0, run = 0;
          guint met = 0;
          Party *party;

          if (!o->have_cost)
            continue;
          for (guint v = 0; v < o->d_vcpus->len; v++)
            {
              const CpuMask *a = v < o->vcpu_pcpus->len ? g_ptr_array_index (o->vcpu_pcpus, v) : NULL;
              const VcpuDelta *d = &g_array_index (o->d_vcpus, VcpuDelta, v);

              if (o != st && !cpumask_meet (st->pcpus, a))
                continue;
              met++;
              wait += d->wait_ns;
              run += d->wait_ns + d->time_ns;
            }
          if (!met)
            continue;
          party = party_get (st->w_parties, o->slot);
          party->wait_ns += (float) wait;
          party->run_ns += (float) run;
          party->elapsed_ns += (float) o->d_cost_elapsed_ns;
          party->nvcpus = MAX (party->nvcpus, met);
        }
      st->w_exits += st->d_exits;
      st->w_time_ns += st->d_time_ns;
      st->w_elapsed_ns += st->d_elapsed_ns;
      st->w_reads++;
    }

  forget_unseen (ctl, host->name, hv, now, forget_after);
  host_vms_unlock (hv);
}

void
twed_auto_forget_unseen (TwedAuto *ctl, const TwedHost *host, gint64 forget_after)
{
  HostVms *hv = host_vms_lock (ctl, host->name, FALSE);

  if (!hv)
    return;
  forget_unseen (ctl, host->name, hv, read_time (host), forget_after);
  if (g_hash_table_size (hv->vms) == 0)
    {
      hv->dropped = TRUE;
      g_mutex_lock (&ctl->lock);
      if (g_hash_table_lookup (ctl->hosts, host->name) == hv)
        g_hash_table_remove (ctl->hosts, host->name);
      g_mutex_unlock (&ctl->lock);
    }
  host_vms_unlock (hv);
}

void
twed_auto_retain_hosts (TwedAuto *ctl, const char *const *hosts)
{
  g_autoptr(GPtrArray) gone = g_ptr_array_new_with_free_func ((GDestroyNotify) host_vms_unref);
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  GHashTableIter it;
  char *name;
  HostVms *hv;

  g_mutex_lock (&ctl->lock);
  g_clear_pointer (&ctl->allowed, g_hash_table_unref);
  if (hosts)
    {
      ctl->allowed = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
      for (guint i = 0; hosts[i]; i++)
        g_hash_table_add (ctl->allowed, g_strdup (hosts[i]));
    }
  g_hash_table_iter_init (&it, ctl->hosts);
  while (g_hash_table_iter_next (&it, (gpointer *) &name, (gpointer *) &hv))
    if (ctl->allowed && !g_hash_table_contains (ctl->allowed, name))
      {
        g_ptr_array_add (gone, g_atomic_rc_box_acquire (hv));
        g_ptr_array_add (names, g_strdup (name));
        g_hash_table_iter_remove (&it);
      }
  g_mutex_unlock (&ctl->lock);
  /* Outside the controller's lock: a host's is taken first. */
  for (guint i = 0; i < gone->len; i++)
    {
      const char *uuid;
      VmState *st;

      hv = g_ptr_array_index (gone, i);
      g_mutex_lock (&hv->lock);
      hv->dropped = TRUE;
      g_hash_table_iter_init (&it, hv->vms);
      while (g_hash_table_iter_next (&it, (gpointer *) &uuid, (gpointer *) &st))
        forget_vm (ctl, g_ptr_array_index (names, i), uuid, st);
      /* Empty: a walk over every host that took it before it was
       * dropped (a save of all bars) finds nothing in it. */
      g_hash_table_remove_all (hv->vms);
      g_ptr_array_set_size (hv->slots, 0);
      g_mutex_unlock (&hv->lock);
    }
}

static TwedSetting
setting_of (int level)
{
  if (level < 0)
    return (TwedSetting) { TWED_MODE_OFF, 0, 0, 0 };
  return (TwedSetting) { TWED_MODE_FIXED, (guint) level, (guint) level, (guint) level };
}

static void
verdict (TwedAutoVerdict *out, TwedAutoDecision d, int level, char *reason)
{
  out->decision = d;
  out->target = setting_of (level);
  out->reason = reason;
}

/* Whether a party of this window was runnable for a real share of it:
 * a co-runner, not a few timer ticks. */
static gboolean
busy (const Party *p)
{
  return p->run_ns >= NEWCOMER_FRACTION * p->elapsed_ns;
}

static double
party_share (const Party *p)
{
  return p->run_ns > 0 ? p->wait_ns / p->run_ns : 0;
}

/* The wait shares of a window's @parties that ran enough to tell: a VM
 * that was hardly runnable (idle, paused) has a share of noise.  The
 * Judged point into @parties. */
static GArray *
window_shares (GArray *parties)
{
  GArray *out = g_array_new (FALSE, FALSE, sizeof (Judged));

  for (guint i = 0; i < parties->len; i++)
    {
      const Party *p = &g_array_index (parties, Party, i);

      if (p->run_ns > 0 && p->run_ns >= IDLE_FRACTION * p->elapsed_ns)
        {
          Judged j = { p, party_share (p), busy (p) };

          g_array_append_val (out, j);
        }
    }
  return out;
}

/* A party's figures pooled at off to judge its share in this window
 * against.  One idle at off (runnable for less than IDLE_FRACTION of the
 * windows there) and busy now has no such figures: its share at off was
 * that of a few wakeups, and overcommit alone now gives it a large one,
 * so it is a co-runner not seen at off, for which off is measured again,
 * not a cost of the delay to step down for.  One still quiet now is
 * judged against them: its wakeups waiting behind a spinner are. */
static const Party *
off_share (VmState *st, guint32 slot, gboolean busy_now)
{
  const Party *o = party_lookup (st->off_shares, slot);

  if (o && busy_now && o->run_ns < IDLE_FRACTION * o->elapsed_ns)
    return NULL;
  return o;
}

/* Rises closer than this are the same (single-precision sums). */
#define RISE_TIE 1e-6

/* The largest rise of a party's wait share over its share at off, in
 * points (a fraction of runnable time); NAN when no party was measured
 * both there and here.  *@who is that party: of equal rises, a
 * co-runner's rather than the VM's own (it is the one paying for a
 * window), else the first by slot. */
static double
wait_rise (GArray *now, VmState *st, const Judged **who_now, const Party **who_off)
{
  double rise = NAN;

  *who_now = NULL;
  *who_off = NULL;
  for (guint i = 0; i < now->len; i++)
    {
      const Judged *j = &g_array_index (now, Judged, i);
      const Party *o = off_share (st, j->p->slot, j->busy);
      double r = o ? j->share - party_share (o) : NAN;

      if (o && (isnan (rise) || r > rise + RISE_TIE ||
                (r >= rise - RISE_TIE && (*who_now)->p->slot == st->slot && j->p->slot != st->slot)))
        {
          rise = r;
          *who_now = j;
          *who_off = o;
        }
    }
  return rise;
}

/* Add a window at off to the reference: every party met, whatever it
 * ran (one idle at off waits about nothing there, and the margin rule
 * judges it at a level), pooled with the earlier windows at off. */
static void
off_pool (VmState *st)
{
  for (guint i = 0; i < st->w_parties->len; i++)
    {
      const Party *p = &g_array_index (st->w_parties, Party, i);
      Party *o = party_get (st->off_shares, p->slot);

      o->wait_ns += p->wait_ns;
      o->run_ns += p->run_ns;
      o->elapsed_ns += p->elapsed_ns;
    }
  g_array_set_size (st->newcomers, 0);
}

/* The name of the VM in @slot of @hv. */
static const char *
party_name (const HostVms *hv, guint32 slot)
{
  const VmState *o = slot_vm (hv, slot);

  return o && o->name ? o->name : "(forgotten)";
}

/* Of this window's parties never seen at off and runnable for a real
 * share of it, one (preferring one that was so in the last judged
 * window too), or NULL; remembers this window's.  *@twice: it was (a
 * new co-runner, not a blip). */
static char *
newcomer (const HostVms *hv, VmState *st, gboolean *twice)
{
  GArray *now = g_array_new (FALSE, FALSE, sizeof (guint32));
  char *found = NULL;

  *twice = FALSE;
  for (guint i = 0; i < st->w_parties->len; i++)
    {
      const Party *p = &g_array_index (st->w_parties, Party, i);
      guint at;

      if (busy (p) && !off_share (st, p->slot, TRUE))
        {
          gboolean again = slot_find (st->newcomers, p->slot, &at);

          g_array_append_val (now, p->slot);
          if (!found || (again && !*twice))
            {
              g_free (found);
              /* Per vCPU: the runnable time is summed over them. */
              found = g_strdup_printf ("%s (runnable %.0f %% of the time read, %u vCPU%s)", party_name (hv, p->slot),
                                       p->run_ns / (p->elapsed_ns * MAX (p->nvcpus, 1)) * 100, p->nvcpus,
                                       p->nvcpus == 1 ? "" : "s");
              *twice = again;
            }
        }
    }
  g_array_unref (st->newcomers);
  st->newcomers = now;
  return found;
}

/* After a step down from @level: it and the levels above are barred for
 * the cooldown.  A lower bar still running stays (a step down from above
 * it, a setting made by hand, does not lift it). */
static void
bar_from (VmState *st, int level, gint64 now, const TwedAutoParams *p)
{
  gint64 until = now + (gint64) p->cooldown_seconds * G_USEC_PER_SEC;

  if (now < st->ceiling_until && st->ceiling < level - 1)
    {
      st->ceiling_until = MAX (st->ceiling_until, until);
      return;
    }
  st->ceiling = level - 1;
  st->ceiling_until = until;
}

/* Why the reference at off no longer describes the VM at all, or NULL:
 * its pCPUs changed (other co-runners), or it is older than
 * baseline_seconds (a phase change hours later).  *@protective: a
 * co-runner may be paying (the pCPUs), not only an old figure. */
static char *
reference_stale (VmState *st, gint64 now, const TwedAutoParams *p, gboolean *protective)
{
  *protective = FALSE;
  if (!cpumask_equal (st->pcpus, st->off_pcpus))
    {
      *protective = TRUE;
      return g_strdup ("its pCPUs changed since off was measured");
    }
  if (p->baseline_seconds && now - level_stats (st, LEVEL_OFF)->at > (gint64) p->baseline_seconds * G_USEC_PER_SEC)
    return g_strdup_printf ("off measured %" G_GINT64_FORMAT " s ago, more than %u s",
                            (now - level_stats (st, LEVEL_OFF)->at) / G_USEC_PER_SEC,
                            p->baseline_seconds);
  return NULL;
}

/* Whether @level (pooled exits/s @e) cut the exits by at least
 * @min_gain of off's (@e_off) against the nearest level below it that
 * was measured in at least two windows since the reference (the one it
 * came from on the way up; off for the first step, which the rule
 * against off covers).  Judged in units of off's rate, so that the
 * noise of a level with few exits left does not dominate.  *@below is
 * that level. */
static gboolean
cut_below (VmState *st, int level, double e, double e_off, double min_gain, int *below)
{
  for (*below = level - 1; *below > LEVEL_OFF; (*below)--)
    if (level_stats (st, *below)->valid && level_stats (st, *below)->n >= 2)
      break;
  if (*below == LEVEL_OFF)
    return TRUE;
  return pooled_rate (level_stats (st, *below)) - e >= min_gain * e_off;
}

/* @level was not taken, or is not in force where it was: it and the
 * levels above are barred for two dwells, twice as long as last time
 * when the same level was barred before, up to the cooldown. */
static void
count_refusal (VmState *st, int level, gint64 now, const TwedAutoParams *p)
{
  gint64 dwell = (gint64) p->dwell_seconds * G_USEC_PER_SEC;
  gint64 cap = MAX (2 * dwell, (gint64) p->cooldown_seconds * G_USEC_PER_SEC);

  if (st->refused != LEVEL_NONE && level >= st->refused)
    st->refused_bar = MIN (2 * st->refused_bar, cap);
  else
    st->refused_bar = MIN (2 * dwell, cap);
  st->refused = st->refused == LEVEL_NONE ? level : MIN (st->refused, level);
  st->refused_until = now + st->refused_bar;
}

static char *
figures (double at_off, double cur, int level, double rise, const char *who, double share_off, double share_now)
{
  g_autofree char *ln = level_name (level);
  g_autofree char *from = isnan (at_off) ? g_strdup ("") : g_strdup_printf ("%.0f at off → ", at_off);
  g_autofree char *left = isnan (at_off) || at_off <= 0 ? g_strdup ("")
                          : g_strdup_printf (" (%.0f %%)", cur / at_off * 100);
  g_autofree char *wait = isnan (rise) ? g_strdup ("")
                          : g_strdup_printf (", run-queue wait share %+.1f pts (%s %.1f %% → %.1f %%)", rise * 100,
                                             who, share_off * 100, share_now * 100);

  return g_strdup_printf ("wfe exits/s %s%.0f at %s%s%s", from, cur, ln, left, wait);
}

void
twed_auto_decide (TwedAuto *ctl, const TwedHost *host, const TwedDomain *dom,
                  const TwedSetting *bounds, const TwedAutoParams *p, TwedAutoVerdict *out)
{
  int lo = (int) bounds->min, hi = (int) bounds->max;
  int level = level_of (dom);
  VmState *st;
  gint64 now, gap, dwell = (gint64) p->dwell_seconds * G_USEC_PER_SEC;
  double e, e_off = NAN, wait_change = NAN;
  g_autoptr(GArray) judged = NULL; /* the parties of the window judged */
  g_autoptr(GArray) shares = NULL;
  g_autofree char *fresh = NULL;
  gboolean fresh_twice = FALSE, in_bounds;
  const LevelStats *off;
  HostVms *hv;
  int top;
  g_autofree char *ln = level_name (level);
  /* What a decision may bar or schedule, as it was: a dry run keeps it */
  struct {
    int ceiling, return_to, refused;
    gint64 ceiling_until, remeasured_at, refused_until, refused_bar;
  } kept = { 0, LEVEL_NONE, LEVEL_NONE, 0, 0, 0, 0 };

  out->exits_per_s = out->off_exits_per_s = out->wait_change = NAN;
  out->waiting = out->protective = out->set_off = FALSE;
  out->reason = NULL;
  hv = host_vms_lock (ctl, host->name, FALSE);
  st = hv && dom->uuid ? g_hash_table_lookup (hv->vms, dom->uuid) : NULL;
  if (st)
    {
      st->cooldown = (gint64) p->cooldown_seconds * G_USEC_PER_SEC;
      kept.ceiling = st->ceiling;
      kept.return_to = st->return_to;
      kept.ceiling_until = st->ceiling_until;
      kept.remeasured_at = st->remeasured_at;
      kept.refused = st->refused;
      kept.refused_until = st->refused_until;
      kept.refused_bar = st->refused_bar;
    }

  /* How long the signals have been missing since a complete read
   * (observe_domain() only opens a gap on this host), -1 = no gap. */
  gap = st && st->gap_since && dom->signals ? dom->signals->at - st->gap_since : -1;
  in_bounds = level == LEVEL_OFF || (level >= lo && level <= hi);
  /* A setting outside the bounds is not held on: it goes to off below,
   * with or without signals. */
  if (in_bounds && gap >= 0 && gap < (gint64) p->stale_seconds * G_USEC_PER_SEC)
    {
      /* Transient: a read taken while a change of the domain was in
       * flight has no KVM stats.  Nothing is judged on it; off only
       * once they have been missing for stale_seconds. */
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s in this read, for %" G_GINT64_FORMAT " s of the %u s allowed: holding at %s",
                                st->missing, gap / G_USEC_PER_SEC, p->stale_seconds, ln));
      out->waiting = TRUE;
      goto done;
    }
  /* A fallback to off for a domain without <twed> whose vCPUs ran at
   * the host's default delay when last read sets off explicitly. */
  out->set_off = st && !dom->has_twed && st->twed_delay != 0;
  if (!st || !dom->signals || st->missing || g_strcmp0 (st->host, host->name) != 0)
    {
      verdict (out, TWED_AUTO_FALLBACK, LEVEL_OFF,
               gap >= 0 ? g_strdup_printf ("signals missing (%s) for %" G_GINT64_FORMAT " s: off", st->missing,
                                           gap / G_USEC_PER_SEC)
                        : g_strdup_printf ("signals missing (%s): off",
                                           st && st->missing ? st->missing : "not read on this host"));
      out->protective = TRUE;
      goto done;
    }
  now = dom->signals->at;
  /* No bar outlasts the policy's cooldown from now: one restored from
   * before a wall clock stepped back, or set under a longer cooldown
   * before a reload. */
  st->ceiling_until = MIN (st->ceiling_until, now + (gint64) p->cooldown_seconds * G_USEC_PER_SEC);
  kept.ceiling_until = st->ceiling_until;
  if (st->refused != LEVEL_NONE)
    st->refused_until = MIN (st->refused_until, now + MAX (2 * dwell, (gint64) p->cooldown_seconds * G_USEC_PER_SEC));
  kept.refused_until = st->refused_until;
  if (now - st->advanced_at >= (gint64) p->stale_seconds * G_USEC_PER_SEC)
    {
      verdict (out, TWED_AUTO_FALLBACK, LEVEL_OFF,
               g_strdup_printf ("signals stale (vCPU time unchanged for %" G_GINT64_FORMAT " s): off",
                                (now - st->advanced_at) / G_USEC_PER_SEC));
      out->protective = TRUE;
      goto done;
    }
  /* Every read over a new connection to the host (libvirtd restarting
   * again and again): nothing is measured, so nothing holds a delay. */
  if (now - st->delta_at >= (gint64) p->stale_seconds * G_USEC_PER_SEC)
    {
      verdict (out, TWED_AUTO_FALLBACK, LEVEL_OFF,
               g_strdup_printf ("no usable delta for %" G_GINT64_FORMAT " s (every read over a new connection "
                                "to the host): off", (now - st->delta_at) / G_USEC_PER_SEC));
      out->protective = TRUE;
      goto done;
    }
  out->set_off = FALSE;
  if (!in_bounds)
    {
      g_autofree char *cur = twed_setting_to_string (&dom->twed);

      verdict (out, TWED_AUTO_STEP_DOWN, LEVEL_OFF,
               g_strdup_printf ("%s is outside the auto bounds %u..%u: off, to measure from there",
                                cur, bounds->min, bounds->max));
      out->protective = TRUE;
      goto done;
    }
  /* The decided step is in force, or the setting moved elsewhere (by
   * hand, a pin lifted later): either way it is no longer to ask for,
   * nor a refusal to count. */
  if (st->pending == level || (st->pending != LEVEL_NONE && level != st->pending_from))
    st->pending = LEVEL_NONE;
  /* A refused level that is in force now was not the host's ceiling:
   * set, and shown by twed_delay (one set that does not show is what
   * the refusal may be about). */
  if (st->refused != LEVEL_NONE && level >= st->refused && st->twed_delay == (guint) level)
    {
      st->refused = LEVEL_NONE;
      st->refused_bar = 0;
    }
  kept.refused = st->refused;
  kept.refused_until = st->refused_until;
  kept.refused_bar = st->refused_bar;
  /* A step decided under other bounds (a policy reload, a band change)
   * or above a back-off ceiling set since is no longer one to ask for. */
  if (st->pending >= 0 &&
      (st->pending < lo || st->pending > MIN (hi, now < st->ceiling_until ? st->ceiling : TWED_DELAY_LIMIT)))
    st->pending = LEVEL_NONE;
  if (st->pending != LEVEL_NONE)
    {
      gboolean refused = st->pending_outcome == TWED_AUTO_STEP_REFUSED;

      /* A decided step the host refused (its ceiling kvm-arm.twed_max),
       * or one made that did not show within a dwell: the levels from
       * it are barred for two dwells, twice as long each time the same
       * level is not taken again, up to the cooldown (a lower one starts
       * again at two dwells), so that a host ceiling is asked about ever
       * less often (each refusal also grows the failure back-off of the
       * VM's changes).  One only deferred (rate limits, a back-off) or
       * failed otherwise is asked again for a dwell, then dropped
       * without a bar: the window measured meanwhile is judged afresh. */
      if (refused || now - st->pending_at >= dwell)
        {
          if (st->pending > level && (refused || !st->pending_outcome))
            count_refusal (st, st->pending, now, p);
          st->pending = LEVEL_NONE;
        }
      else
        {
          g_autofree char *pn = level_name (st->pending);

          verdict (out, TWED_AUTO_HOLD, level,
                   g_strdup_printf ("step to %s decided, not in force yet (at %s)", pn, ln));
          out->waiting = TRUE;
          out->target = setting_of (st->pending);
          /* A step down deferred by the rate limits goes first again. */
          out->protective = st->pending_protective;
          /* Asked again: what counts is what becomes of this attempt. */
          st->pending_outcome = 0;
          goto done;
        }
    }
  if (st->reset)
    {
      st->mismatch_since = 0;
      verdict (out, TWED_AUTO_BASELINE, level, g_strdup_printf ("%s: measuring from here at %s", st->reset, ln));
      goto done;
    }
  /* At off the vCPUs' WFEs trap at once: a delay there is the host's
   * default (kvm-arm.twed=), in force for a domain without <twed>, or
   * an explicit off not in force yet.  Not off, so not measured as
   * off; the planner sets off explicitly (twed_plan's host default). */
  /* A delay that shows, or a setting that has none, ends a run of reads
   * of 0 (below). */
  if (level < 1 || st->twed_delay != 0)
    zero_run_clear (st);
  /* A setting whose delay does not show in twed_delay is waited for,
   * up to stale_seconds: one that never takes effect (QEMU or the host
   * refused it, a delay the kernel clamps) is not judged, so the wait
   * must end in something that is: off, set again explicitly. */
  if ((level == LEVEL_OFF && st->twed_delay != 0 && dom->has_twed) ||
      (level >= 0 && st->twed_delay != 0 && (int) st->twed_delay != level))
    {
      gint64 waited;

      if (!st->mismatch_since)
        st->mismatch_since = now;
      waited = now - st->mismatch_since;
      window_reset (st);
      if (waited >= (gint64) p->stale_seconds * G_USEC_PER_SEC)
        {
          verdict (out, TWED_AUTO_FALLBACK, LEVEL_OFF,
                   g_strdup_printf ("twed_delay reads %u, not the %s set, for %" G_GINT64_FORMAT " s: off",
                                    st->twed_delay, ln, waited / G_USEC_PER_SEC));
          /* At off already: off written again, explicitly, and waited
           * for again: a reading that never moves gets one write per
           * stale_seconds, not one per pass. */
          out->set_off = level == LEVEL_OFF;
          out->protective = TRUE;
          st->mismatch_since = now;
        }
      else
        verdict (out, TWED_AUTO_HOLD, level,
                 g_strdup_printf ("twed_delay reads %u, not the %s set, for %" G_GINT64_FORMAT
                                  " s of the %u s allowed: waiting for it to take effect",
                                  st->twed_delay, ln, waited / G_USEC_PER_SEC, p->stale_seconds));
      goto done;
    }
  st->mismatch_since = 0;
  /* A fixed delay that reads 0 on every vCPU while they trap WFEs as
   * often as at off: KVM does not have it (QEMU or the host refused it,
   * and no host default is in force).  A delay in force reads 0 too when
   * each vCPU has its pCPU to itself at the read (TWEDn clear), but then
   * the exits between the reads are cut: such reads are judged as any.
   * Reads of one not in force are not judged on, nor is the window
   * dropped (a later read may show the delay); reading so for
   * stale_seconds, off, and the level counts as refused. */
  if (level >= 1 && st->twed_delay == 0 && level_stats (st, LEVEL_OFF)->valid)
    {
      double at_off = pooled_rate (level_stats (st, LEVEL_OFF));

      /* Only reads with exits count; one without a delta or idle
       * neither counts nor ends the run. */
      if (st->have_delta && st->d_exits > 0)
        {
          if (!st->zero_since)
            st->zero_since = now;
          st->zero_exits += st->d_exits;
          st->zero_time_ns += st->d_time_ns;
        }
      /* Judged on the run's exits together: one read that dips does not
       * end it. */
      if (st->zero_since && st->zero_time_ns > 0 &&
          st->zero_exits / (st->zero_time_ns / 1e9) >= (1 - p->min_gain) * at_off)
        {
          gint64 waited = now - st->zero_since;

          if (waited >= (gint64) p->stale_seconds * G_USEC_PER_SEC)
            {
              verdict (out, TWED_AUTO_FALLBACK, LEVEL_OFF,
                       g_strdup_printf ("twed_delay reads 0 at %s while its vCPUs trap WFEs as at off (%.0f/s), for %"
                                        G_GINT64_FORMAT " s: not in force, off", ln, at_off, waited / G_USEC_PER_SEC));
              out->protective = TRUE;
              count_refusal (st, level, now, p);
              zero_run_clear (st);
            }
          else
            {
              verdict (out, TWED_AUTO_HOLD, level,
                       g_strdup_printf ("twed_delay reads 0 at %s while its vCPUs trap WFEs as at off, for %"
                                        G_GINT64_FORMAT " s of the %u s allowed: not judged until it shows", ln,
                                        waited / G_USEC_PER_SEC, p->stale_seconds));
              out->waiting = TRUE;
            }
          goto done;
        }
      /* The exits are cut: the delay is in force, the vCPUs were alone
       * at the reads. */
      zero_run_clear (st);
    }
  if (level == LEVEL_OFF && st->twed_delay != 0)
    {
      window_reset (st);
      out->set_off = TRUE;
      out->protective = TRUE;
      verdict (out, TWED_AUTO_HOLD, LEVEL_OFF,
               g_strdup_printf ("twed_delay reads %u at off: the host's default delay applies to a domain "
                                "without <twed>, setting off explicitly", st->twed_delay));
      goto done;
    }

  off = level_stats (st, LEVEL_OFF);
  if (level != LEVEL_OFF && off->valid)
    e_off = pooled_rate (off);
  if (st->w_elapsed_ns < (double) dwell * 1000.0 || st->w_reads < MIN_READS)
    {
      const LevelStats *cur = level_stats (st, level);
      g_autofree char *f = cur->valid ? figures (e_off, pooled_rate (cur), level, NAN, NULL, 0, 0) : NULL;

      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("dwell %.0f s of %u s at %s%s%s", st->w_elapsed_ns / 1e9, p->dwell_seconds, ln,
                                f ? "; pooled before this window " : "", f ? f : ""));
      out->exits_per_s = cur->valid ? pooled_rate (cur) : NAN;
      out->waiting = TRUE;
      out->off_exits_per_s = e_off;
      goto done;
    }

  /* A window in which the vCPUs barely ran (paused, idle) says
   * nothing about the delay. */
  if (st->w_time_ns < IDLE_FRACTION * st->w_elapsed_ns)
    {
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("vCPUs ran %.0f ms in %.0f s at %s: not judged", st->w_time_ns / 1e6,
                                st->w_elapsed_ns / 1e9, ln));
      window_reset (st);
      goto done;
    }

  /* A full window at this level: judge it, then start the next. */
  {
    LevelStats *cur = level_stats_mut (st, level);

    pool_add (cur, st->w_exits, st->w_time_ns, now);
    e = pooled_rate (cur);
    /* At off the figure just measured is the reference itself. */
    if (level == LEVEL_OFF)
      e_off = e;
  }
  /* The window's parties outlive its reset: judged below. */
  judged = g_array_copy (st->w_parties);
  shares = window_shares (judged);
  if (level == LEVEL_OFF)
    off_pool (st);
  else
    fresh = newcomer (hv, st, &fresh_twice);
  window_reset (st);
  out->exits_per_s = e;
  out->off_exits_per_s = e_off;
  if (now >= st->ceiling_until)
    st->ceiling = TWED_DELAY_LIMIT;
  top = MIN (hi, st->ceiling);
  if (st->refused != LEVEL_NONE && now < st->refused_until)
    top = MIN (top, st->refused - 1);

  if (level == LEVEL_OFF)
    {
      const Judged *own = NULL;
      g_autofree char *own_share = NULL;

      for (guint i = 0; i < shares->len && !own; i++)
        if (g_array_index (shares, Judged, i).p->slot == st->slot)
          own = &g_array_index (shares, Judged, i);
      own_share = own ? g_strdup_printf ("%.1f %%", own->share * 100) : g_strdup ("not measured");

      int back = st->return_to;

      /* What every later level is compared with (the shares are
       * pooled above). */
      cpumask_free (st->off_pcpus);
      st->off_pcpus = cpumask_copy (st->pcpus);
      st->return_to = LEVEL_NONE;
      /* A new window at off after a step down: the levels' figures
       * were judged against the reference as it was, and the VM came
       * back because something changed.  Measured again for a new
       * co-runner, they still hold: the exits did not move. */
      if (back == LEVEL_NONE)
        stats_clear (st, 1);
      if (top < lo && MIN (hi, st->ceiling) < lo)
        verdict (out, TWED_AUTO_HOLD, level,
                 g_strdup_printf ("wfe exits/s %.0f at off; %d and above barred for %" G_GINT64_FORMAT
                                  " s after a back-off", e, lo, (st->ceiling_until - now) / G_USEC_PER_SEC));
      else if (top < lo)
        verdict (out, TWED_AUTO_HOLD, level,
                 g_strdup_printf ("wfe exits/s %.0f at off; %d refused or not in force when asked, asked again in %"
                                  G_GINT64_FORMAT " s", e, st->refused,
                                  (st->refused_until - now + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC));
      else if (e < EXITS_FLOOR)
        verdict (out, TWED_AUTO_HOLD, level, g_strdup_printf ("wfe exits/s %.1f at off: nothing to save", e));
      else if (back > lo)
        /* Measured again for a new co-runner: the exits measured at
         * the levels still hold, and the margin rule judges the
         * newcomer's share there. */
        verdict (out, TWED_AUTO_STEP_UP, MIN (back, top),
                 g_strdup_printf ("wfe exits/s %.0f at off, run-queue wait share %s, off measured again, back to "
                                  "the level left, step up to %d", e, own_share, MIN (back, top)));
      else
        verdict (out, TWED_AUTO_STEP_UP, lo,
                 g_strdup_printf ("wfe exits/s %.0f at off, run-queue wait share %s, step up to %d",
                                  e, own_share, lo));
      goto done;
    }
  if (!off->valid)
    {
      verdict (out, TWED_AUTO_STEP_DOWN, LEVEL_OFF,
               g_strdup_printf ("wfe exits/s %.0f at %s, nothing measured at off to compare with: step down to off",
                                e, ln));
      out->protective = TRUE;
      goto done;
    }
  {
    const Judged *who_now;
    const Party *who_off;
    g_autofree char *f = NULL;
    int down = level == lo ? LEVEL_OFF : level - 1;
    double left = e_off > 0 ? e / e_off : 1;
    /* Never two levels to or past a level the host refused: it is
     * asked about again only a level at a time. */
    int step = (left <= BIG_STEP_LEFT && left > 2 * p->min_gain &&
                (st->refused == LEVEL_NONE || level + 2 < st->refused)) ? 2 : 1;
    g_autofree char *dn = NULL;
    int up = MIN (level + step, top);
    int below;

    /* The cost of the window is paid by whoever waits for the pCPU:
     * the VM's own vCPUs (a lock holder behind its spinner) or a
     * co-runner.  Compared in shares of runnable time per VM, so that
     * vCPUs which are always runnable (their share is set by the
     * overcommit, whatever the delay) do not read as a cost, while a
     * neighbour whose pCPU the spinner holds through the window does. */
    g_autofree char *stale = NULL;
    gboolean stale_protective;

    wait_change = wait_rise (shares, st, &who_now, &who_off);
    out->wait_change = wait_change;
    f = figures (e_off, e, level, wait_change, who_now ? party_name (hv, who_now->p->slot) : NULL,
                 who_off ? party_share (who_off) : 0, who_now ? who_now->share : 0);

    /* Everything after rests on the reference at off.  A share above
     * the margin is judged first: it keeps its cooldown even when the
     * reference is also to be measured again. */
    stale = reference_stale (st, now, p, &stale_protective);
    if (wait_change > p->wait_margin)
      {
        /* The window costs more than it saves: back off and keep this
         * level and above barred for the cooldown (no flapping). */
        dn = level_name (down);
        if (stale)
          stats_reset (st);
        bar_from (st, level, now, p);
        verdict (out, TWED_AUTO_STEP_DOWN, down,
                 g_strdup_printf ("%s, above the margin, step down to %s", f, dn));
        out->protective = TRUE;
        goto done;
      }
    /* Other pCPUs have other co-runners, and a phase change hours
     * later another workload: the whole reference goes.  Not a back-off:
     * no cooldown. */
    if (stale)
      {
        stats_reset (st);
        verdict (out, TWED_AUTO_STEP_DOWN, LEVEL_OFF,
                 g_strdup_printf ("wfe exits/s %.0f at %s, %s: step down to off, measuring off again", e, ln, stale));
        out->protective = stale_protective;
        goto done;
      }
    /* A co-runner never seen at off has no share to compare with: off
     * is measured again with it, keeping the figures of the levels and
     * coming back to this one, at most once per cooldown (co-runners
     * that come and go would otherwise keep every VM near them at off). */
    if (fresh && fresh_twice && (!st->remeasured_at || now - st->remeasured_at >= (gint64) p->cooldown_seconds * G_USEC_PER_SEC))
      {
        st->remeasured_at = now;
        st->return_to = level;
        /* The next window at off alone is their reference: pooled with
         * hours idle at off, their time there would still read idle. */
        for (guint i = 0; i < st->newcomers->len; i++)
          slot_remove (st->off_shares, g_array_index (st->newcomers, guint32, i));
        g_array_set_size (st->newcomers, 0);
        verdict (out, TWED_AUTO_STEP_DOWN, LEVEL_OFF,
                 g_strdup_printf ("wfe exits/s %.0f at %s, new co-runner %s since off was measured: step down to off, "
                                  "measuring off again", e, ln, fresh));
        /* It may be paying for the window. */
        out->protective = TRUE;
        goto done;
      }

    /* Exits are judged against off, not against the level below: a
     * window of a few reads of a lock-heavy guest varies by half or
     * more at one setting, more than one level changes it, while the
     * cut from off (a larger, steadier rate) is clear at once. */
    /* Hysteresis on the exits: one window that did not cut them (the
     * first window at a level is a few reads, and a step down costs the
     * cooldown) is judged again, even one with more exits than at
     * off; two in a row are not noise. */
    if (left > 1 - p->min_gain)
      st->uncut++;
    else
      st->uncut = 0;
    /* Two judgements of the cut: a window that did not cut the exits
     * against off breaks the run, one that judged something else (a
     * ceiling, half the margin, exits that stopped falling once) does
     * not. */
    if (st->uncut)
      st->cut_run = 0;
    if (st->uncut == 1)
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: exits not cut by %.0f %% of off's in one window, judging again", f,
                                p->min_gain * 100));
    else if (left > 1 - p->min_gain)
      {
        dn = level_name (down);
        /* The window saves nothing: back off and keep this level and
         * above barred for the cooldown (no flapping). */
        bar_from (st, level, now, p);
        verdict (out, TWED_AUTO_STEP_DOWN, down,
                 e_off > 0 ? g_strdup_printf ("%s, exits not cut by %.0f %% of off's, step down to %s", f,
                                              p->min_gain * 100, dn)
                           : g_strdup_printf ("%s, nothing to save at off: step down to %s", f, dn));
      }
    else if (left <= p->min_gain)
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: no more than %.0f %% of off's exits left", f, p->min_gain * 100));
    else if (wait_change > p->wait_margin / 2)
      /* Hysteresis: a share between half the margin and the margin
       * neither pays for a longer window nor costs enough to give this
       * one up. */
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: more than half the margin", f));
    else if (level < top && !cut_below (st, level, e, e_off, p->min_gain, &below))
      {
        /* The exits are still well above what is left to gain, but
         * this level saved nothing more than the one below it: a longer
         * window only costs.  Hold; stepping back on the same pooled
         * figures would be stepping on noise.  Nor is the cut run
         * broken by one such window: the pool the next window is judged
         * on holds it, so a cut found there again outweighs it (with a
         * cut per level near min_gain, as with 4 vCPUs on 2 pCPUs, two
         * in a row took a coin's chances per level).  A second one is a
         * plateau, not noise: the pair starts again, so that two lucky
         * pools far apart do not climb it. */
        g_autofree char *bn = level_name (below);

        if (++st->flat >= 2)
          st->cut_run = 0;

        verdict (out, TWED_AUTO_HOLD, level,
                 g_strdup_printf ("%s, hold: exits stopped falling: %.0f %% of off's at %s, %.0f %% at %s", f,
                                  e / e_off * 100, ln, pooled_rate (level_stats (st, below)) / e_off * 100, bn));
      }
    else if (level < top && cut_counted (st) < 2 && !fresh)
      {
        /* One window's pool is the noise the pooling is there to
         * remove: a step up needs the cut in two judged windows at this
         * level (so each level left upward has two).  A
         * newcomer's hold below says more, and counts the cut too. */
        g_autofree char *bn = level_name (below);
        double at_below = below == LEVEL_OFF ? e_off : pooled_rate (level_stats (st, below));

        verdict (out, TWED_AUTO_HOLD, level,
                 g_strdup_printf ("%s, hold: cut from %.0f %% of off's at %s in one window, judging again", f,
                                  at_below / e_off * 100, bn));
      }
    else if (level < top && fresh && !fresh_twice)
      /* Not stepping up against a reference without a co-runner that
       * may be paying; one window does not tell a blip from a VM that
       * stays. */
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: new co-runner %s since off was measured, one window", f, fresh));
    else if (level < top && fresh)
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: new co-runner %s since off was measured, off measured again %" G_GINT64_FORMAT
                                " s ago (once per cooldown)", f, fresh, (now - st->remeasured_at) / G_USEC_PER_SEC));
    else if (level < top)
      {
        /* The level below, as judged: the cut is checked against it. */
        g_autofree char *bn = level_name (below);
        double at_below = below == LEVEL_OFF ? e_off : pooled_rate (level_stats (st, below));

        verdict (out, TWED_AUTO_STEP_UP, up,
                 g_strdup_printf ("%s, step up to %d (cut from %.0f %% of off's at %s)", f, up,
                                  at_below / e_off * 100, bn));
      }
    else if (level >= hi)
      verdict (out, TWED_AUTO_HOLD, level, g_strdup_printf ("%s, hold: at the bound", f));
    else if (level == MIN (hi, st->ceiling))
      verdict (out, TWED_AUTO_HOLD, level, g_strdup_printf ("%s, hold: at the back-off ceiling", f));
    else if (level > MIN (hi, st->ceiling))
      /* Set by hand, or a step down not taken: within the margin, it
       * is not worth a change of its own, but nothing above it. */
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: above the back-off ceiling %d (a step down not taken, or set by hand)", f,
                                st->ceiling));
    else
      verdict (out, TWED_AUTO_HOLD, level,
               g_strdup_printf ("%s, hold: %d refused or not in force when asked, asked again in %" G_GINT64_FORMAT
                                " s", f, st->refused, (st->refused_until - now + G_USEC_PER_SEC - 1) / G_USEC_PER_SEC));
  }

done:
  if (st && g_atomic_int_get (&ctl->dry_run))
    {
      /* Nothing is applied: a back-off's bar or a new measurement of
       * off scheduled now would outlive the dry run (they are saved in
       * the state directory) and hold the VM once its steps are made. */
      st->pending = LEVEL_NONE;
      st->ceiling = kept.ceiling;
      st->ceiling_until = kept.ceiling_until;
      st->remeasured_at = kept.remeasured_at;
      st->return_to = kept.return_to;
      st->refused = kept.refused;
      st->refused_until = kept.refused_until;
      st->refused_bar = kept.refused_bar;
    }
  else if (st && out->decision != TWED_AUTO_HOLD && out->decision != TWED_AUTO_BASELINE)
    {
      int target = setting_level (&out->target);

      if (target != level)
        {
          st->pending = target;
          st->pending_outcome = 0;
          st->pending_from = level;
          st->pending_protective = out->protective;
          st->pending_at = dom->signals ? dom->signals->at : st->seen_at;
        }
    }
  else if (st && out->decision == TWED_AUTO_BASELINE)
    st->pending = LEVEL_NONE;
  host_vms_unlock (hv);
}

TwedAutoBars *
twed_auto_bars_new (const char *host, const char *vm)
{
  TwedAutoBars *b = g_new0 (TwedAutoBars, 1);

  b->host = g_strdup (host);
  b->vm = g_strdup (vm);
  b->barred_from = -1;
  b->refused_from = -1;
  return b;
}

void
twed_auto_bars_free (TwedAutoBars *b)
{
  if (!b)
    return;
  g_free (b->host);
  g_free (b->vm);
  g_free (b);
}

gboolean
twed_auto_bars_hold (const TwedAutoBars *b, gint64 now)
{
  gint64 keep = (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * G_USEC_PER_SEC;

  /* As bars_of() keeps them; a remeasure for the longest cooldown, as
   * the record does not say the VM's (the controller records its end). */
  return (b->barred_from >= 0 && b->barred_until > now) ||
         (b->refused_from >= 0 && b->refused_until + b->refused_bar > now) ||
         (b->remeasured_at && b->remeasured_at + keep > now);
}

/* @st's bars at @now on the reads' clock, each part while a restart
 * would need it: the back-off ceiling while it runs (an ended one is
 * not reset until the next decision); a refusal while its bar runs and
 * for as long again (one asked again within that time doubles it; later,
 * a restart starts it at two dwells again); a remeasure of off for the
 * cooldown of the VM's policy, the week that a policy's longest is
 * before the VM is decided on. */
static Bars
bars_of (const VmState *st, gint64 now)
{
  gint64 cooldown = st->cooldown >= 0 ? st->cooldown : (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * G_USEC_PER_SEC;
  Bars b = NO_BARS;

  b.id = st->restored_id ? st->restored_id : st->id;
  if (st->ceiling_until > now && st->ceiling < TWED_DELAY_LIMIT)
    {
      b.barred_from = st->ceiling + 1;
      b.barred_until = st->ceiling_until;
    }
  if (st->refused != LEVEL_NONE && st->refused_bar > 0 && st->refused_until + st->refused_bar > now)
    {
      b.refused_from = st->refused;
      b.refused_until = st->refused_until;
      b.refused_bar = st->refused_bar;
    }
  if (st->remeasured_at && now - st->remeasured_at < cooldown)
    b.remeasured_at = st->remeasured_at;
  /* Nothing held: the id alone is no record. */
  if (b.barred_from < 0 && b.refused_from < 0 && !b.remeasured_at)
    b.id = 0;
  return b;
}

static TwedAutoBars *
bars_record (const char *host, const char *vm, const Bars *b, gint64 to_real)
{
  TwedAutoBars *r = twed_auto_bars_new (host, vm);

  r->domain_id = b->id;
  r->barred_from = b->barred_from;
  r->barred_until = b->barred_from >= 0 ? b->barred_until + to_real : 0;
  r->refused_from = b->refused_from;
  r->refused_until = b->refused_from >= 0 ? b->refused_until + to_real : 0;
  r->refused_bar = b->refused_from >= 0 ? b->refused_bar : 0;
  r->remeasured_at = b->remeasured_at ? b->remeasured_at + to_real : 0;
  return r;
}

int
twed_auto_bars_compare (gconstpointer pa, gconstpointer pb)
{
  const TwedAutoBars *a = *(TwedAutoBars *const *) pa, *b = *(TwedAutoBars *const *) pb;
  int c = g_strcmp0 (a->host, b->host);

  return c ? c : g_strcmp0 (a->vm, b->vm);
}

static void
save_host_bars (const char *name, GHashTable *vms, gboolean changed_only, gint64 mono_now, gint64 to_real,
                GPtrArray *out)
{
  GHashTableIter it;
  const char *uuid;
  VmState *st;

  g_hash_table_iter_init (&it, vms);
  while (g_hash_table_iter_next (&it, (gpointer *) &uuid, (gpointer *) &st))
    {
      Bars b = bars_of (st, mono_now);
      gboolean same = bars_equal (&b, &st->saved);
      gboolean none = bars_equal (&b, &NO_BARS);

      st->saved = b;
      if (changed_only ? !same : !none)
        g_ptr_array_add (out, bars_record (name, uuid, &b, to_real));
    }
}

void
twed_auto_save_bars (TwedAuto *ctl, const char *host, gboolean changed_only, gint64 mono_now, gint64 real_now,
                     GPtrArray *out)
{
  gint64 to_real = real_now - mono_now;
  g_autoptr(GPtrArray) mine = g_ptr_array_new_with_free_func ((GDestroyNotify) twed_auto_bars_free);

  g_mutex_lock (&ctl->lock);
  /* Forgotten VMs first: a record that their bars are gone, or, in a
   * save of everything, nothing (they are not in it).  A VM forgotten
   * and read again since has its record after it (the sort below keeps
   * the order of equal keys), which the last one wins. */
  for (guint i = 0; i < ctl->forgotten->len;)
    {
      TwedAutoBars *f = g_ptr_array_index (ctl->forgotten, i);

      if (host && g_strcmp0 (f->host, host) != 0)
        {
          i++;
          continue;
        }
      if (changed_only)
        g_ptr_array_add (mine, g_ptr_array_steal_index (ctl->forgotten, i));
      else
        g_ptr_array_remove_index (ctl->forgotten, i);
    }
  if (host)
    {
      HostVms *hv;

      g_mutex_unlock (&ctl->lock);
      if ((hv = host_vms_lock (ctl, host, FALSE)))
        save_host_bars (host, hv->vms, changed_only, mono_now, to_real, mine);
      host_vms_unlock (hv);
    }
  else
    {
      g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
      g_autoptr(GPtrArray) all = g_ptr_array_new_with_free_func ((GDestroyNotify) host_vms_unref);
      GHashTableIter it;
      const char *name;
      HostVms *hv;

      g_hash_table_iter_init (&it, ctl->hosts);
      while (g_hash_table_iter_next (&it, (gpointer *) &name, (gpointer *) &hv))
        {
          g_ptr_array_add (names, g_strdup (name));
          g_ptr_array_add (all, g_atomic_rc_box_acquire (hv));
        }
      g_mutex_unlock (&ctl->lock);
      /* Each host under its own lock, taken without the controller's. */
      for (guint i = 0; i < all->len; i++)
        {
          hv = g_ptr_array_index (all, i);
          g_mutex_lock (&hv->lock);
          save_host_bars (g_ptr_array_index (names, i), hv->vms, changed_only, mono_now, to_real, mine);
          g_mutex_unlock (&hv->lock);
        }
    }
  /* Sorted, stably: the same bars give the same file. */
  g_ptr_array_sort (mine, twed_auto_bars_compare);
  g_ptr_array_extend_and_steal (out, g_steal_pointer (&mine));
}

/* Only VMs whose saved bars held something: a record of bars gone that
 * was lost (and a forgotten VM's) leaves the state with bars that have
 * ended or that the next decision clears, and that the next load or
 * compaction drops by their times: the safe side, at most a bar's length. */
static void
mark_unsaved (VmState *st, gpointer data)
{
  static const Bars unknown = { -1, -1, 0, -1, 0, 0, 0 };

  if (!bars_equal (&st->saved, &NO_BARS))
    st->saved = unknown;
}

void
twed_auto_bars_unsaved (TwedAuto *ctl)
{
  for_each_vm (ctl, mark_unsaved, NULL);
}

/* A Unix time of a saved record on the reads' clock; 0 stays "never"
 * only where the record says so. */
static gint64
to_mono (gint64 real, gint64 to_real)
{
  gint64 mono = real - to_real;

  return mono ? mono : -1;
}

guint
twed_auto_restore_bars (TwedAuto *ctl, const GPtrArray *bars, gint64 mono_now, gint64 real_now)
{
  gint64 to_real = real_now - mono_now;
  gint64 max_bar = (gint64) TWED_AUTO_COOLDOWN_MAX_SECONDS * G_USEC_PER_SEC;
  guint n = 0;

  for (guint i = 0; i < bars->len; i++)
    {
      const TwedAutoBars *r = g_ptr_array_index (bars, i);
      g_autoptr(HostVms) hv = NULL;
      VmState *st;

      if (!twed_auto_bars_hold (r, real_now) || r->barred_from > TWED_DELAY_LIMIT ||
          r->refused_from > TWED_DELAY_LIMIT)
        continue;
      /* Not a host the controller may hold (no longer configured). */
      if (!(hv = host_vms_lock (ctl, r->host, TRUE)))
        continue;
      /* Read already (restored later than at start, which twedd does
       * not): what it measured since is newer. */
      if (g_hash_table_contains (hv->vms, r->vm))
        {
          g_mutex_unlock (&hv->lock);
          continue;
        }
      st = host_vms_add (hv, r->vm);
      /* Times beyond what the controller sets (a wall clock stepped
       * back since, an edited file) hold no longer than it would. */
      if (r->barred_from >= 0 && r->barred_until > real_now)
        {
          st->ceiling = r->barred_from - 1;
          st->ceiling_until = to_mono (MIN (r->barred_until, real_now + max_bar), to_real);
        }
      /* A refusal whose bar ended more than its length ago: a restart
       * starts the next one at two dwells again. */
      if (r->refused_from >= 0 && r->refused_bar > 0 && r->refused_until + r->refused_bar > real_now)
        {
          st->refused = r->refused_from;
          st->refused_bar = MIN (r->refused_bar, max_bar);
          st->refused_until = to_mono (MIN (r->refused_until, real_now + st->refused_bar), to_real);
        }
      if (r->remeasured_at)
        st->remeasured_at = to_mono (MIN (r->remeasured_at, real_now), to_real);
      st->id = r->domain_id;
      st->restored_id = r->domain_id > 0 ? r->domain_id : 0;
      /* Forgotten like any VM not read for a while from now on. */
      st->seen_at = mono_now;
      st->saved = bars_of (st, mono_now);
      g_mutex_unlock (&hv->lock);
      n++;
    }
  return n;
}
