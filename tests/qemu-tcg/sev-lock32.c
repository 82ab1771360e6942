/*
 * Bare-metal AArch32 lock workload for the SEV cost benchmark
 * (sev-bench): NCPUS CPUs take and release a ticket spinlock like
 * AArch32 Linux's arch_spin_lock()/arch_spin_unlock() (LDREX/STREX,
 * WFE while waiting, DSB and SEV on release), ITERS times each, then
 * CPU 0 checks the count and exits through semihosting.
 *
 * -M virt -cpu cortex-a15 -smp NCPUS: starts in SVC mode on CPU 0; the
 * others are started with PSCI CPU_ON over HVC.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>

#ifndef NCPUS
#define NCPUS 4
#endif
#ifndef ITERS
#define ITERS 200000
#endif

static volatile uint32_t lock;          /* owner in [15:0], next in [31:16] */
static volatile uint32_t counter, done, ready;
uint8_t stacks[NCPUS][1024] __attribute__((aligned(8)));

static uint32_t semi(uint32_t op, uint32_t arg)
{
    register uint32_t r0 asm("r0") = op;
    register uint32_t r1 asm("r1") = arg;

    asm volatile("svc 0x123456" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static void spin_lock(void)
{
    uint32_t tmp, newval, old;

    asm volatile(
        "1: ldrex   %0, [%3]\n"
        "   add     %1, %0, #0x10000\n"
        "   strex   %2, %1, [%3]\n"
        "   teq     %2, #0\n"
        "   bne     1b"
        : "=&r"(old), "=&r"(newval), "=&r"(tmp)
        : "r"(&lock) : "cc", "memory");
    while ((old >> 16) != (uint16_t)old) {
        asm volatile("wfe" ::: "memory");
        old = (old & 0xffff0000) | *(volatile uint16_t *)&lock;
    }
    asm volatile("dmb ish" ::: "memory");
}

static void spin_unlock(void)
{
    asm volatile("dmb ish" ::: "memory");
    *(volatile uint16_t *)&lock = (uint16_t)lock + 1;
    asm volatile("dsb ishst\n\tsev" ::: "memory");
}

static void work(void)
{
    /* Start together, so that the lock is contended */
    __atomic_fetch_add(&ready, 1, __ATOMIC_SEQ_CST);
    while (ready != NCPUS) {
    }
    for (int i = 0; i < ITERS; i++) {
        spin_lock();
        counter = counter + 1;
        spin_unlock();
    }
    __atomic_fetch_add(&done, 1, __ATOMIC_SEQ_CST);
}

void secondary_main(void)
{
    work();
    for (;;) {
        asm volatile("wfi");
    }
}

void secondary_entry(void);
asm(".global secondary_entry\n"
    "secondary_entry:\n"
    "   mov sp, r0\n"
    "   b   secondary_main\n");

void main(void)
{
    for (uint32_t cpu = 1; cpu < NCPUS; cpu++) {
        register uint32_t r0 asm("r0") = 0x84000003;    /* CPU_ON, SMC32 */
        register uint32_t r1 asm("r1") = cpu;
        register uint32_t r2 asm("r2") = (uint32_t)secondary_entry;
        register uint32_t r3 asm("r3") = (uint32_t)&stacks[cpu + 1][0];

        asm volatile(".arch_extension virt\n\thvc #0"
                     : "+r"(r0) : "r"(r1), "r"(r2), "r"(r3) : "memory");
    }
    work();
    while (done != NCPUS) {
    }
    semi(0x04, (uint32_t)(counter == NCPUS * ITERS ?
                          "sev-lock32: ok\n" : "sev-lock32: FAIL\n"));
    semi(0x18, 0x20026);                /* SYS_EXIT, ApplicationExit */
}

asm(".section .text.start, \"ax\"\n"
    ".global _start\n"
    "_start:\n"
    "   ldr sp, =stacks + 1024\n"
    "   bl  main\n"
    "1: b   1b\n");
