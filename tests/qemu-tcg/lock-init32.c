/*
 * A static /init for the AArch32 side of the SEV cost benchmark
 * (sev-bench): an SMP Linux guest, where every spin_unlock() issues SEV.
 *
 *   TWED_BENCH=boot   power off at once: the run's wall-clock time is the
 *                     boot time
 *   TWED_BENCH=lock   run a kernel-lock-heavy load on every CPU and print
 *                     its guest time, then power off:
 *                     - pipes: PAIRS pairs of threads pass a byte back and
 *                       forth through two pipes (pipe mutex, wait queues
 *                       and run queues: the kernel's spinlocks, contended
 *                       across CPUs);
 *                     - futex: THREADS threads increment a counter under
 *                       one pthread mutex (futex hash bucket locks).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/reboot.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 4
#define ROUNDS 2000
#define THREADS 4
#define INCREMENTS 1000000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static unsigned long counter;

struct pair {
    int ping[2], pong[2];
};

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    reboot(RB_POWER_OFF);
    exit(1);
}

static void *ponger(void *arg)
{
    struct pair *p = arg;
    char c;

    for (int i = 0; i < ROUNDS; i++) {
        if (read(p->ping[0], &c, 1) != 1 || write(p->pong[1], &c, 1) != 1) {
            die("ponger");
        }
    }
    return NULL;
}

static void *pinger(void *arg)
{
    struct pair *p = arg;
    char c = 'x';

    for (int i = 0; i < ROUNDS; i++) {
        if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1) {
            die("pinger");
        }
    }
    return NULL;
}

static void *incrementer(void *arg)
{
    for (int i = 0; i < INCREMENTS; i++) {
        pthread_mutex_lock(&mutex);
        counter++;
        pthread_mutex_unlock(&mutex);
    }
    return arg;
}

static double pipes(void)
{
    static struct pair pairs[PAIRS];
    pthread_t t[2 * PAIRS];
    double t0 = now();

    for (int i = 0; i < PAIRS; i++) {
        if (pipe(pairs[i].ping) || pipe(pairs[i].pong)) {
            die("pipe");
        }
        if (pthread_create(&t[2 * i], NULL, ponger, &pairs[i]) ||
            pthread_create(&t[2 * i + 1], NULL, pinger, &pairs[i])) {
            die("pthread_create");
        }
    }
    for (int i = 0; i < 2 * PAIRS; i++) {
        pthread_join(t[i], NULL);
    }
    return now() - t0;
}

static double futex(void)
{
    pthread_t t[THREADS];
    double t0 = now();

    for (int i = 0; i < THREADS; i++) {
        if (pthread_create(&t[i], NULL, incrementer, NULL)) {
            die("pthread_create");
        }
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    if (counter != (unsigned long)THREADS * INCREMENTS) {
        fprintf(stderr, "lock-init32: counter %lu\n", counter);
        reboot(RB_POWER_OFF);
    }
    return now() - t0;
}

int main(void)
{
    const char *bench = getenv("TWED_BENCH");

    printf("lock-init32: init reached, %ld CPUs\n", sysconf(_SC_NPROCESSORS_ONLN));
    if (bench && !strcmp(bench, "lock")) {
        double p = pipes();
        double f = futex();

        printf("lock-init32: pipes %.4f s futex %.4f s\n", p, f);
    }
    fflush(stdout);
    reboot(RB_POWER_OFF);
    return 1;
}
