/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-planner.h"

#include <json-glib/json-glib.h>

#define TWED_PLAN_FORMAT_VERSION 1

static void
add_setting (JsonBuilder *b, const char *member, const TwedSetting *s)
{
  TwedSetting n = *s;

  twed_setting_normalize (&n);
  json_builder_set_member_name (b, member);
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "mode");
  json_builder_add_string_value (b, twed_mode_to_string (n.mode));
  json_builder_set_member_name (b, "delay");
  json_builder_add_int_value (b, n.delay);
  json_builder_set_member_name (b, "min");
  json_builder_add_int_value (b, n.min);
  json_builder_set_member_name (b, "max");
  json_builder_add_int_value (b, n.max);
  json_builder_end_object (b);
}

static void
add_str (JsonBuilder *b, const char *member, const char *value)
{
  json_builder_set_member_name (b, member);
  if (value)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

static void
add_int (JsonBuilder *b, const char *member, gint64 value)
{
  json_builder_set_member_name (b, member);
  json_builder_add_int_value (b, value);
}

/* Rounded so that output is stable across runs and libcs. */
static void
add_ratio (JsonBuilder *b, const char *member, double value)
{
  json_builder_set_member_name (b, member);
  json_builder_add_double_value (b, (double) (gint64) (value * 1000.0 + 0.5) / 1000.0);
}

static void
add_bool (JsonBuilder *b, const char *member, gboolean value)
{
  json_builder_set_member_name (b, member);
  json_builder_add_boolean_value (b, value);
}

char *
twed_plan_to_json (const TwedPlan *plan, gboolean pretty)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonGenerator) gen = json_generator_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  add_int (b, "version", TWED_PLAN_FORMAT_VERSION);
  add_str (b, "generated", plan->generated);

  json_builder_set_member_name (b, "hosts");
  json_builder_begin_array (b);
  for (guint i = 0; i < plan->hosts->len; i++)
    {
      const TwedPlanHost *h = g_ptr_array_index (plan->hosts, i);

      json_builder_begin_object (b);
      add_str (b, "name", h->name);
      add_str (b, "uri", h->uri);
      add_bool (b, "reachable", h->reachable);
      if (h->reachable)
        {
          add_int (b, "pcpus", h->pcpus);
          add_int (b, "shared_pcpus", h->shared_pcpus);
          add_int (b, "dedicated_pcpus", h->dedicated_pcpus);
          add_int (b, "vcpus", h->vcpus);
          add_ratio (b, "ratio", h->ratio);
          add_str (b, "twed_supported", twed_support_to_string (h->support));
          add_int (b, "domains", h->ndomains);
        }
      else
        add_str (b, "error", h->error ? h->error : "unreachable");
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "vms");
  json_builder_begin_array (b);
  for (guint i = 0; i < plan->entries->len; i++)
    {
      const TwedPlanEntry *e = g_ptr_array_index (plan->entries, i);

      json_builder_begin_object (b);
      add_str (b, "host", e->host);
      add_str (b, "domain", e->domain);
      if (e->uuid)
        add_str (b, "uuid", e->uuid);
      add_str (b, "state", e->active ? "running" : "shutoff");
      add_bool (b, "persistent", e->persistent);
      add_int (b, "vcpus", e->nvcpus);
      add_ratio (b, "ratio", e->ratio);
      add_str (b, "policy", e->policy);
      add_str (b, "band", e->band);
      add_setting (b, "current", &e->current);
      add_setting (b, "target", &e->target);
      add_str (b, "action", twed_action_to_string (e->action));
      add_str (b, "reason", e->reason);
      if (e->result != TWED_RESULT_NONE)
        add_str (b, "result", twed_result_to_string (e->result));
      if (e->error)
        add_str (b, "error", e->error);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);

  json_builder_set_member_name (b, "summary");
  json_builder_begin_object (b);
  add_int (b, "hosts", plan->hosts->len);
  add_int (b, "unreachable", twed_plan_unreachable (plan));
  add_int (b, "vms", plan->entries->len);
  add_int (b, "changes", twed_plan_count (plan, TWED_ACTION_CHANGE));
  add_int (b, "deferred", twed_plan_count (plan, TWED_ACTION_DEFER));
  add_int (b, "skipped", twed_plan_count (plan, TWED_ACTION_SKIP));
  add_int (b, "applied", twed_plan_count_result (plan, TWED_RESULT_APPLIED));
  add_int (b, "failed", twed_plan_count_result (plan, TWED_RESULT_FAILED));
  json_builder_end_object (b);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (gen, root);
  json_generator_set_pretty (gen, pretty);
  return json_generator_to_data (gen, NULL);
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
