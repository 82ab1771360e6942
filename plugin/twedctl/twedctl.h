/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "twed-backend.h"
#include "twed-config.h"
#include "twed-log.h"
#include "twed-planner.h"
#include "twed-policydir.h"

G_BEGIN_DECLS

/* Exit codes, documented in twedctl(1). */
enum {
  TWEDCTL_EXIT_OK = 0,
  TWEDCTL_EXIT_FAILED = 1,      /* an operation failed */
  TWEDCTL_EXIT_USAGE = 2,       /* bad arguments, configuration or policy */
  TWEDCTL_EXIT_PARTIAL = 3,     /* some hosts unreachable or some changes failed */
  TWEDCTL_EXIT_UNSUPPORTED = 4, /* needs the twed libvirt API */
};

typedef struct {
  /* common options */
  char *config_path;
  char **connect;
  char *hosts_file;
  char *policy_dir;
  char **policy_files;
  int threads;
  gboolean verbose;
  gboolean json;

  /* filled by twedctl_setup() */
  TwedConfig *config;
  TwedPolicySet *policies;
  TwedBackend *backend;
} Twedctl;

typedef int (*TwedctlVerb) (Twedctl *ctl, int argc, char **argv);

int twedctl_hosts (Twedctl *ctl, int argc, char **argv);
int twedctl_status (Twedctl *ctl, int argc, char **argv);
int twedctl_plan (Twedctl *ctl, int argc, char **argv);
int twedctl_apply (Twedctl *ctl, int argc, char **argv);
int twedctl_set (Twedctl *ctl, int argc, char **argv);
int twedctl_policy (Twedctl *ctl, int argc, char **argv);

/* Parses @entries plus the common options; prints errors itself.
 * Returns FALSE with *exit_code set when the verb must stop. */
gboolean twedctl_parse (Twedctl *ctl, const char *verb, const char *params, const char *summary,
                        const GOptionEntry *entries, int *argc, char ***argv, int *exit_code);
/* Loads config, hosts and policies; opens nothing yet. */
/* @need_policies: the command plans from the policies, so a missing
 * policy directory is an error. */
gboolean twedctl_setup (Twedctl *ctl, gboolean need_hosts, gboolean need_policies, gboolean reads_only,
                        int *exit_code);
/* Reads the hosts and plans. */
TwedPlan *twedctl_make_plan (Twedctl *ctl);
char     *twedctl_now_iso (void);
/* Status table (or JSON) from a fresh read; apply --status reuses the
 * apply's connections since a test:///file.xml host keeps its state
 * only while its connection is open. */
int       twedctl_print_status (Twedctl *ctl);
int       twedctl_fail (int code, const char *fmt, ...) G_GNUC_PRINTF (2, 3);
void      twedctl_print (const char *text);
void      twedctl_print_json (const TwedPlan *plan);

G_END_DECLS
