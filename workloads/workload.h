/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the guest workloads share: strict number arguments and a monotonic
 * clock.  Each workload is one file built static on its own (see
 * tools/hosts/mkhostimage), so these are static functions in a header.
 */
#ifndef TWED_WORKLOAD_H
#define TWED_WORKLOAD_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The program name in error messages; each workload defines it. */
extern const char *workload_name;

/* A whole number in 1..max, else a message naming the option; exit 2. */
static inline unsigned long workload_parse_num(const char *opt, const char *s,
					       unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > max || s[0] == '-') {
		fprintf(stderr, "%s: %s: '%s' is not a whole number in 1..%lu\n",
			workload_name, opt, s, max);
		exit(2);
	}
	return v;
}

static inline uint64_t workload_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static inline double workload_now(void)
{
	return workload_now_ns() / 1e9;
}

#endif
