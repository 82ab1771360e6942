/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-planner.h"

#include <math.h>
#include <stdio.h>

#define TWED_PLAN_FORMAT_VERSION 1

/* The plan is written member by member into a buffer that goes out
 * whenever it fills (or stays whole for twed_plan_to_json): a plan of a
 * region has half a million entries, and a document tree of them would
 * take gigabytes. */
typedef struct {
  GString *buf;
  FILE *out;            /* NULL: keep everything in buf */
  gboolean pretty;
  guint depth;
  gboolean first;       /* no member yet at this depth */
  gboolean failed;
} JsonWriter;

#define FLUSH_AT 65536

static void
jw_flush (JsonWriter *w)
{
  if (!w->out || !w->buf->len)
    return;
  if (fwrite (w->buf->str, 1, w->buf->len, w->out) != w->buf->len)
    w->failed = TRUE;
  g_string_truncate (w->buf, 0);
}

static void
jw_newline (JsonWriter *w)
{
  if (!w->pretty)
    return;
  g_string_append_c (w->buf, '\n');
  for (guint i = 0; i < w->depth; i++)
    g_string_append (w->buf, "  ");
}

static void
jw_string (JsonWriter *w, const char *str)
{
  g_string_append_c (w->buf, '"');
  for (const unsigned char *p = (const unsigned char *) str; *p; p++)
    {
      switch (*p)
        {
        case '"':
          g_string_append (w->buf, "\\\"");
          break;
        case '\\':
          g_string_append (w->buf, "\\\\");
          break;
        case '\n':
          g_string_append (w->buf, "\\n");
          break;
        case '\t':
          g_string_append (w->buf, "\\t");
          break;
        case '\r':
          g_string_append (w->buf, "\\r");
          break;
        default:
          if (*p < 0x20)
            g_string_append_printf (w->buf, "\\u%04x", *p);
          else
            g_string_append_c (w->buf, (char) *p);
        }
    }
  g_string_append_c (w->buf, '"');
}

/* Starts a member (@name) or an array element (@name NULL). */
static void
jw_key (JsonWriter *w, const char *name)
{
  if (!w->first)
    g_string_append_c (w->buf, ',');
  w->first = FALSE;
  jw_newline (w);
  if (name)
    {
      jw_string (w, name);
      g_string_append (w->buf, w->pretty ? " : " : ":");
    }
}

static void
jw_open (JsonWriter *w, const char *name, char bracket)
{
  if (w->depth)
    jw_key (w, name);
  g_string_append_c (w->buf, bracket);
  w->depth++;
  w->first = TRUE;
}

static void
jw_close (JsonWriter *w, char bracket)
{
  gboolean empty = w->first;

  w->depth--;
  if (!empty)
    jw_newline (w);
  g_string_append_c (w->buf, bracket);
  w->first = FALSE;
  if (w->buf->len >= FLUSH_AT)
    jw_flush (w);
}

static void
add_str (JsonWriter *w, const char *member, const char *value)
{
  jw_key (w, member);
  if (value)
    jw_string (w, value);
  else
    g_string_append (w->buf, "null");
}

static void
add_int (JsonWriter *w, const char *member, gint64 value)
{
  jw_key (w, member);
  g_string_append_printf (w->buf, "%" G_GINT64_FORMAT, value);
}

/* Rounded so that output is stable across runs and libcs. */
static void
add_ratio (JsonWriter *w, const char *member, double value)
{
  char num[G_ASCII_DTOSTR_BUF_SIZE];

  jw_key (w, member);
  g_string_append (w->buf, g_ascii_dtostr (num, sizeof num, (double) (gint64) (value * 1000.0 + 0.5) / 1000.0));
}

/* A measured figure, null when not known; three decimals. */
static void
add_number (JsonWriter *w, const char *member, double value)
{
  if (isnan (value) || isinf (value))
    {
      add_str (w, member, NULL);
      return;
    }
  jw_key (w, member);
  {
    char num[G_ASCII_DTOSTR_BUF_SIZE];

    g_string_append (w->buf, g_ascii_dtostr (num, sizeof num, round (value * 1000.0) / 1000.0));
  }
}

static void
add_bool (JsonWriter *w, const char *member, gboolean value)
{
  jw_key (w, member);
  g_string_append (w->buf, value ? "true" : "false");
}

static void
add_setting (JsonWriter *w, const char *member, const TwedSetting *s)
{
  TwedSetting n = *s;

  twed_setting_normalize (&n);
  jw_open (w, member, '{');
  add_str (w, "mode", twed_mode_to_string (n.mode));
  add_int (w, "delay", n.delay);
  add_int (w, "min", n.min);
  add_int (w, "max", n.max);
  jw_close (w, '}');
}

static void
write_plan (JsonWriter *w, const TwedPlan *plan)
{
  guint counts[4] = { 0 }, applied = 0, failed = 0;

  jw_open (w, NULL, '{');
  add_int (w, "version", TWED_PLAN_FORMAT_VERSION);
  add_str (w, "generated", plan->generated);

  jw_open (w, "hosts", '[');
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      const TwedPlanHost *h = g_ptr_array_index (plan->hosts, i);

      jw_open (w, NULL, '{');
      add_str (w, "name", h->name);
      add_str (w, "uri", h->uri);
      add_bool (w, "reachable", h->reachable);
      if (h->reachable)
        {
          add_int (w, "pcpus", h->pcpus);
          add_int (w, "shared_pcpus", h->shared_pcpus);
          add_int (w, "dedicated_pcpus", h->dedicated_pcpus);
          add_int (w, "vcpus", h->vcpus);
          add_ratio (w, "ratio", h->ratio);
          add_str (w, "twed_supported", twed_support_to_string (h->support));
          add_int (w, "domains", h->ndomains);
        }
      else
        add_str (w, "error", h->error ? h->error : "unreachable");
      jw_close (w, '}');
    }
  jw_close (w, ']');

  jw_open (w, "vms", '[');
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      counts[e->action]++;
      applied += e->result == TWED_RESULT_APPLIED;
      failed += e->result == TWED_RESULT_FAILED;
      jw_open (w, NULL, '{');
      add_str (w, "host", e->host);
      add_str (w, "domain", e->domain);
      if (e->uuid)
        add_str (w, "uuid", e->uuid);
      add_str (w, "state", e->active ? "running" : "shutoff");
      add_bool (w, "persistent", e->persistent);
      add_int (w, "vcpus", e->nvcpus);
      add_ratio (w, "ratio", e->ratio);
      add_str (w, "policy", e->policy);
      add_str (w, "band", e->band);
      add_setting (w, "current", &e->current);
      add_setting (w, "target", &e->target);
      add_str (w, "action", twed_action_to_string (e->action));
      add_str (w, "reason", e->reason);
      if (e->result != TWED_RESULT_NONE)
        add_str (w, "result", twed_result_to_string (e->result));
      if (e->error)
        add_str (w, "error", e->error);
      if (e->is_auto)
        {
          jw_open (w, "auto", '{');
          add_int (w, "min", e->auto_bounds.min);
          add_int (w, "max", e->auto_bounds.max);
          add_str (w, "decision", twed_auto_decision_to_string (e->auto_decision));
          add_number (w, "wfe_exits_per_s", e->auto_exits_per_s);
          add_number (w, "off_wfe_exits_per_s", e->auto_off_exits_per_s);
          add_number (w, "runqueue_wait_change", e->auto_wait_change);
          jw_close (w, '}');
        }
      jw_close (w, '}');
    }
  jw_close (w, ']');

  jw_open (w, "summary", '{');
  add_int (w, "hosts", plan->hosts->len);
  add_int (w, "unreachable", twed_plan_unreachable (plan));
  add_int (w, "vms", plan->entries->len);
  add_int (w, "changes", counts[TWED_ACTION_CHANGE]);
  add_int (w, "deferred", counts[TWED_ACTION_DEFER]);
  add_int (w, "skipped", counts[TWED_ACTION_SKIP]);
  add_int (w, "applied", applied);
  add_int (w, "failed", failed);
  jw_close (w, '}');
  jw_close (w, '}');
}

char *
twed_plan_to_json (const TwedPlan *plan, gboolean pretty)
{
  JsonWriter w = { g_string_new (NULL), NULL, pretty, 0, TRUE, FALSE };

  write_plan (&w, plan);
  return g_string_free (w.buf, FALSE);
}

gboolean
twed_plan_write_json (const TwedPlan *plan, gboolean pretty, FILE *out)
{
  JsonWriter w = { g_string_sized_new (FLUSH_AT * 2), out, pretty, 0, TRUE, FALSE };

  write_plan (&w, plan);
  g_string_append_c (w.buf, '\n');
  jw_flush (&w);
  g_string_free (w.buf, TRUE);
  return !w.failed && fflush (out) == 0;
}

char *
twed_plan_to_table (const TwedPlan *plan, gboolean all)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "%-12s %-20s %5s %6s %-16s %-16s %-16s %-7s %s\n", "HOST", "DOMAIN",
                          "VCPUS", "RATIO", "POLICY", "CURRENT", "TARGET", "ACTION", "REASON");
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);
      g_autofree char *cur = twed_setting_to_string (&e->current);
      g_autofree char *tgt = twed_setting_to_string (&e->target);
      const char *action = twed_action_to_string (e->action);

      if (!all && e->action == TWED_ACTION_KEEP)
        continue;
      if (e->result != TWED_RESULT_NONE)
        action = twed_result_to_string (e->result);
      g_string_append_printf (s, "%-12s %-20s %5u %6.2f %-16s %-16s %-16s %-7s %s%s%s\n",
                              e->host, e->domain, e->nvcpus, e->ratio,
                              e->policy ? e->policy : "-", cur, tgt, action, e->reason,
                              e->error ? ": " : "", e->error ? e->error : "");
    }
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      const TwedPlanHost *h = g_ptr_array_index (plan->hosts, i);

      if (!h->reachable)
        g_string_append_printf (s, "%-12s unreachable: %s\n", h->name, h->error ? h->error : "");
    }
  g_string_append_printf (s, "%u change(s), %u deferred, %u skipped, %u unreachable host(s)\n",
                          twed_plan_count (plan, TWED_ACTION_CHANGE),
                          twed_plan_count (plan, TWED_ACTION_DEFER),
                          twed_plan_count (plan, TWED_ACTION_SKIP),
                          twed_plan_unreachable (plan));
  return g_string_free (s, FALSE);
}

char *
twed_plan_hosts_to_table (const TwedPlan *plan)
{
  GString *s = g_string_new (NULL);

  g_string_append_printf (s, "%-12s %-11s %5s %6s %9s %5s %6s %-7s %s\n", "HOST", "STATE", "PCPUS",
                          "SHARED", "DEDICATED", "VCPUS", "RATIO", "TWED", "URI");
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      const TwedPlanHost *h = g_ptr_array_index (plan->hosts, i);

      if (!h->reachable)
        {
          g_string_append_printf (s, "%-12s %-11s %5s %6s %9s %5s %6s %-7s %s (%s)\n", h->name,
                                  "unreachable", "-", "-", "-", "-", "-", "-", h->uri,
                                  h->error ? h->error : "");
          continue;
        }
      g_string_append_printf (s, "%-12s %-11s %5u %6u %9u %5u %6.2f %-7s %s\n", h->name, "up",
                              h->pcpus, h->shared_pcpus, h->dedicated_pcpus, h->vcpus, h->ratio,
                              twed_support_to_string (h->support), h->uri);
    }
  return g_string_free (s, FALSE);
}
