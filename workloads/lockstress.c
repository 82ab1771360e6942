// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * lockstress: threads contending on one spinlock that waits the way arm64
 * Linux does (exclusive load, then WFE until the holder's store clears the
 * exclusive monitor; SEVL arms the first WFE).  Under vCPU overcommit this
 * WFE is what KVM traps, and what FEAT_TWED delays.
 *
 *   lockstress [--threads N] [--seconds S] [--hold N] [--think N]
 *
 * --threads  contending threads (default: online CPUs)
 * --seconds  run time (default 5)
 * --hold     busy-loop iterations inside the lock (default 200)
 * --think    busy-loop iterations between acquisitions (default 400)
 *
 * Prints one line of key=value pairs:
 *   lockstress threads= seconds= acquisitions= acq_per_s=
 *              wait_p50_ns= wait_p90_ns= wait_p99_ns= wait_max_ns=
 * Wait times come from a histogram with 16 buckets per power of two, so a
 * percentile is exact to within 1/16 of its value.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

const char *workload_name = "lockstress";

#define SUB_BITS	4
#define SUBS		(1 << SUB_BITS)
#define BUCKETS		(64 * SUBS)

struct worker {
	pthread_t thread;
	uint64_t acquisitions;
	uint64_t wait_max;
	uint64_t hist[BUCKETS];
} __attribute__((aligned(128)));

static struct {
	unsigned int value;
} __attribute__((aligned(128))) lock;

static atomic_int stop;
static atomic_int go;
static unsigned long hold_iters = 200, think_iters = 400;

#if defined(__aarch64__)
static void spin_lock(unsigned int *l)
{
	unsigned int tmp;

	/* arch_spin_lock of arm64 before qspinlock, reduced to one word. */
	asm volatile(
	"	sevl\n"
	"1:	wfe\n"
	"2:	ldaxr	%w0, %1\n"
	"	cbnz	%w0, 1b\n"
	"	stxr	%w0, %w2, %1\n"
	"	cbnz	%w0, 2b\n"
	: "=&r" (tmp), "+Q" (*l)
	: "r" (1)
	: "memory");
}

static void spin_unlock(unsigned int *l)
{
	/* The store clears the waiters' exclusive monitors: their WFE ends. */
	asm volatile("stlr wzr, %0" : "=Q" (*l) : : "memory");
}
#else
static void spin_lock(unsigned int *l)
{
	for (;;) {
		if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
			return;
		while (__atomic_load_n(l, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
	}
}

static void spin_unlock(unsigned int *l)
{
	__atomic_store_n(l, 0, __ATOMIC_RELEASE);
}
#endif

static unsigned int bucket_of(uint64_t v)
{
	unsigned int msb;

	if (v < SUBS)
		return v;
	msb = 63 - __builtin_clzll(v);
	return (msb - SUB_BITS + 1) * SUBS + ((v >> (msb - SUB_BITS)) & (SUBS - 1));
}

/* The largest value that falls into bucket b. */
static uint64_t bucket_top(unsigned int b)
{
	unsigned int shift;

	if (b < SUBS)
		return b;
	shift = b / SUBS - 1;
	return (((uint64_t)SUBS + b % SUBS + 1) << shift) - 1;
}

static void busy(unsigned long n)
{
	for (volatile unsigned long i = 0; i < n; i++)
		;
}

static void *work(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&go))
		;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		uint64_t t0 = workload_now_ns(), waited;

		spin_lock(&lock.value);
		waited = workload_now_ns() - t0;
		busy(hold_iters);
		spin_unlock(&lock.value);
		w->acquisitions++;
		w->hist[bucket_of(waited)]++;
		if (waited > w->wait_max)
			w->wait_max = waited;
		busy(think_iters);
	}
	return NULL;
}

static uint64_t percentile(const uint64_t *hist, uint64_t total, double p)
{
	uint64_t want = (uint64_t)(p * total), seen = 0;

	for (unsigned int b = 0; b < BUCKETS; b++) {
		seen += hist[b];
		if (seen > want)
			return bucket_top(b);
	}
	return 0;
}

int main(int argc, char **argv)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long threads = cpus > 0 ? cpus : 1, seconds = 5;
	static uint64_t hist[BUCKETS];
	uint64_t total = 0, wait_max = 0, t0, elapsed;
	struct worker *workers;
	int i;

	for (i = 1; i < argc; i++) {
		const char *opt = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "lockstress: %s needs a value (see the usage at the top of lockstress.c)\n", opt);
			return 2;
		}
		if (!strcmp(opt, "--threads"))
			threads = workload_parse_num(opt, argv[++i], 1024);
		else if (!strcmp(opt, "--seconds"))
			seconds = workload_parse_num(opt, argv[++i], 86400);
		else if (!strcmp(opt, "--hold"))
			hold_iters = workload_parse_num(opt, argv[++i], 100000000);
		else if (!strcmp(opt, "--think"))
			think_iters = workload_parse_num(opt, argv[++i], 100000000);
		else {
			fprintf(stderr, "lockstress: unknown option '%s'\n", opt);
			return 2;
		}
	}

	workers = aligned_alloc(128, threads * sizeof(*workers));
	if (!workers) {
		perror("lockstress: aligned_alloc");
		return 1;
	}
	memset(workers, 0, threads * sizeof(*workers));
	for (unsigned long t = 0; t < threads; t++) {
		int err = pthread_create(&workers[t].thread, NULL, work, &workers[t]);

		if (err) {
			fprintf(stderr, "lockstress: pthread_create: %s\n", strerror(err));
			return 1;
		}
	}
	t0 = workload_now_ns();
	atomic_store(&go, 1);
	sleep(seconds);
	atomic_store(&stop, 1);
	for (unsigned long t = 0; t < threads; t++) {
		pthread_join(workers[t].thread, NULL);
		total += workers[t].acquisitions;
		if (workers[t].wait_max > wait_max)
			wait_max = workers[t].wait_max;
		for (unsigned int b = 0; b < BUCKETS; b++)
			hist[b] += workers[t].hist[b];
	}
	elapsed = workload_now_ns() - t0;
	printf("lockstress threads=%lu seconds=%.2f acquisitions=%" PRIu64
	       " acq_per_s=%.0f wait_p50_ns=%" PRIu64 " wait_p90_ns=%" PRIu64
	       " wait_p99_ns=%" PRIu64 " wait_max_ns=%" PRIu64 "\n",
	       threads, elapsed / 1e9, total, total / (elapsed / 1e9),
	       percentile(hist, total, 0.50), percentile(hist, total, 0.90),
	       percentile(hist, total, 0.99), wait_max);
	free(workers);
	return 0;
}
