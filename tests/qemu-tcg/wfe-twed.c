/*
 * Bare-metal test of WFE trapping and FEAT_TWED under QEMU TCG.
 *
 * EL2 (this file's main) runs small EL1 functions with different
 * HCR_EL2 settings and checks what their WFE did: trapped to EL2 or
 * not, with which syndrome, after how long. CPU 1 stays at EL2 and
 * serves requests to SEV, or to store to a variable, after a delay.
 *
 * Run with -M virt,virtualization=on -cpu max,cntfrq=1000000 -smp 2
 * -semihosting: at 1 MHz a counter tick is 1 us. The exit status is 0
 * if every check passed; twed=off is detected from ID_AA64MMFR1_EL1.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <stdbool.h>

#define HCR_IMO         (1ULL << 4)
#define HCR_VI          (1ULL << 7)
#define HCR_TWI         (1ULL << 13)
#define HCR_TWE         (1ULL << 14)
#define HCR_RW          (1ULL << 31)
#define HCR_TWEDEN      (1ULL << 59)
#define HCR_TWEDEL(x)   ((uint64_t)(x) << 60)

#define EC_WFX          0x01

/* SPSR_EL2 for run_el1(): AArch64 EL1h, or AArch32 SVC (T: Thumb) */
#define SPSR_EL1H       0x3c5
#define SPSR_A32_SVC    0x1d3
#define SPSR_T          (1 << 5)

uint64_t run_el1(uint64_t (*fn)(uint64_t), uint64_t arg, uint64_t spsr);
uint64_t semi_call(uint64_t op, const void *param);
uint64_t smc_call(uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3);
void cpu1_entry(void);

/* Written by the EL2 WFx trap handlers in wfe-twed-start.S */
volatile uint64_t trap_count, trap_esr, trap_time, trap_spsr, trap_elr;

/* AArch32 EL1 code in wfe-twed-start.S, and the WFx in each */
uint64_t el1_run_el0_wfe(uint64_t arg);
extern const char t32_wfe_it[], t32_wfe_it_insn[];
extern const char t32_wfi_it[], t32_wfi_it_insn[];
extern const char a32_wfe_cond[], a32_wfe_cond_insn[];
extern const char a32_wfi_cond[], a32_wfi_cond_insn[];

/* Requests to CPU 1: action after delay ticks */
enum { REQ_NONE, REQ_SEV, REQ_STORE };
static volatile uint64_t req_action, req_delay;
static volatile uint64_t cpu1_ready;
/* The variable that EL1 monitors with LDXR, and CPU 1 stores to */
static volatile uint64_t monitored;

static int failures;

#define sysreg_read(r) ({ uint64_t v_; \
    asm volatile("mrs %0, " #r : "=r"(v_)); v_; })
#define sysreg_write(r, v) asm volatile("msr " #r ", %0\n\tisb" :: "r"((uint64_t)(v)))

/* A WFE at EL1 may trap to EL2, whose handler clobbers x9 and x10 */
#define WFE() asm volatile("wfe" ::: "x9", "x10", "memory")
#define SEVL() asm volatile("sevl" ::: "memory")

static inline uint64_t now(void)
{
    uint64_t v;

    asm volatile("isb\n\tmrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}

/* Semihosting output */
static void puts_(const char *s)
{
    semi_call(0x04, s);         /* SYS_WRITE0 */
}

static void putnum(uint64_t v)
{
    char buf[24];
    int i = sizeof(buf) - 1;

    buf[i] = 0;
    do {
        buf[--i] = '0' + v % 10;
        v /= 10;
    } while (v);
    puts_(&buf[i]);
}

static void puthex(uint64_t v)
{
    char buf[19];
    int i;

    buf[0] = '0';
    buf[1] = 'x';
    for (i = 0; i < 16; i++) {
        buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
    }
    buf[18] = 0;
    puts_(buf);
}

void semi_exit(uint64_t code)
{
    uint64_t block[2] = { 0x20026, code };  /* ADP_Stopped_ApplicationExit */

    semi_call(0x18, block);     /* SYS_EXIT */
    for (;;) {
    }
}

void unexpected_exception(uint64_t esr, uint64_t elr)
{
    puts_("FAIL unexpected exception ESR ");
    puthex(esr);
    puts_(" ELR ");
    puthex(elr);
    puts_("\n");
    semi_exit(2);
}

static void check(bool ok, const char *what)
{
    puts_(ok ? "ok " : "FAIL ");
    puts_(what);
    puts_("\n");
    if (!ok) {
        failures++;
    }
}

static void report(const char *what, uint64_t v)
{
    puts_("   ");
    puts_(what);
    puts_(" ");
    putnum(v);
    puts_("\n");
}

/* CPU 1: serve requests, at EL2, without WFE */
void cpu1_main(void)
{
    cpu1_ready = 1;
    for (;;) {
        uint64_t action = req_action, start;

        if (action == REQ_NONE) {
            continue;
        }
        start = now();
        while (now() - start < req_delay) {
        }
        if (action == REQ_STORE) {
            monitored = monitored + 1;
        }
        asm volatile("dsb sy" ::: "memory");
        req_action = REQ_NONE;
        asm volatile("dsb sy\n\tsev" ::: "memory");
    }
}

static void request(uint64_t action, uint64_t delay)
{
    req_delay = delay;
    asm volatile("dsb sy" ::: "memory");
    req_action = action;
}

static void wait_request_done(void)
{
    while (req_action != REQ_NONE) {
    }
}

/* ---- EL1 functions: each returns to EL2 through run_el1() ---- */

/* SEVL; WFE twice: must neither sleep nor trap */
static uint64_t el1_sevl_wfe(uint64_t arg)
{
    SEVL();
    WFE();
    SEVL();
    WFE();
    return 0;
}

/*
 * Consume the event that the exception return into EL1 set, then
 * execute one WFE; return how long it took, in counter ticks.
 */
static uint64_t el1_wfe(uint64_t request_action)
{
    uint64_t t0;

    SEVL();
    WFE();
    if (request_action) {
        request(request_action, req_delay);
    }
    t0 = now();
    WFE();
    return now() - t0;
}

/* As el1_wfe, with @n WFEs in a row: the event stream must wake each */
static uint64_t el1_wfe_n(uint64_t n)
{
    uint64_t t0;

    SEVL();
    WFE();
    t0 = now();
    while (n--) {
        WFE();
    }
    return now() - t0;
}

/* WFET with a timeout of @ticks from now */
static uint64_t el1_wfet(uint64_t ticks)
{
    uint64_t t0;

    SEVL();
    WFE();
    t0 = now();
    {
        /* In x3, so that the trap's syndrome can be checked (RN) */
        register uint64_t timeout asm("x3") = t0 + ticks;

        asm volatile("wfet x3" :: "r"(timeout) : "x9", "x10", "memory");
    }
    return now() - t0;
}

/*
 * Arm the exclusive monitor on 'monitored', like a lock waiter does
 * (Linux's __cmpwait), and WFE; CPU 1 stores to it if asked to.
 */
static uint64_t el1_ldxr_wfe(uint64_t request_action)
{
    uint64_t t0, v;

    SEVL();
    WFE();
    if (request_action) {
        request(request_action, req_delay);
    }
    t0 = now();
    asm volatile("ldxr %0, [%1]" : "=r"(v) : "r"(&monitored) : "memory");
    WFE();
    return now() - t0;
}

/* ---- EL2 test driver ---- */

static uint64_t run(uint64_t hcr, uint64_t (*fn)(uint64_t), uint64_t arg)
{
    sysreg_write(hcr_el2, HCR_RW | hcr);
    trap_count = 0;
    trap_esr = 0;
    return run_el1(fn, arg, SPSR_EL1H);
}

/*
 * Run one of the AArch32 blocks of wfe-twed-start.S at EL1 (HCR_EL2.RW
 * clear) in Thumb or A32 state; it returns 1 if the instructions after
 * its WFx ran under the right conditions.
 */
static uint64_t run32(uint64_t hcr, const char *code, bool thumb)
{
    sysreg_write(hcr_el2, hcr);
    trap_count = 0;
    trap_esr = 0;
    trap_spsr = 0;
    trap_elr = 0;
    return (uint32_t)run_el1((uint64_t (*)(uint64_t))code, 0,
                             SPSR_A32_SVC | (thumb ? SPSR_T : 0));
}

/* The IT[7:0] field of an AArch32 SPSR */
static unsigned spsr_it(uint64_t spsr)
{
    return ((spsr >> 25) & 3) | ((spsr >> 8) & 0xfc);
}

/*
 * One trap of the AArch32 WFx at @insn (TI @ti, IL 0 for a 16-bit T32
 * instruction), with the PE state of that instruction in SPSR_EL2: the
 * IT state @it (0x06: first of ITTE EQ) and no other.
 */
static bool trapped_a32(const char *insn, unsigned ti, bool t16, unsigned it)
{
    return trap_count == 1 && (trap_esr >> 26) == EC_WFX &&
        !!(trap_esr & (1 << 25)) == !t16 && (trap_esr & 3) == ti &&
        trap_elr == (uint64_t)insn && spsr_it(trap_spsr) == it &&
        !!(trap_spsr & SPSR_T) == t16;
}

/*
 * WFE and WFI in AArch32 EL1, as the first instruction of an IT block
 * (T32) or conditional (A32): trapped to EL2 and executed again, or
 * sleeping and woken up. Either way they must resume with their own IT
 * state, so that the rest of the block runs under its conditions.
 */
static void test_aarch32(void)
{
    uint64_t r, t0, t;

    r = run32(HCR_TWE, t32_wfe_it, true);
    check(trapped_a32(t32_wfe_it_insn, 1, true, 0x06),
          "T32: WFE in an IT block traps with its own IT state in SPSR_EL2");
    check(r == 1, "T32: the IT block runs on under its conditions after the WFE trap");
    report("IT state in SPSR_EL2 (want 6):", spsr_it(trap_spsr));
    report("block result (want 1):", r);
    r = run32(HCR_TWI, t32_wfi_it, true);
    check(trapped_a32(t32_wfi_it_insn, 0, true, 0x06),
          "T32: WFI in an IT block traps with its own IT state in SPSR_EL2");
    check(r == 1, "T32: the IT block runs on under its conditions after the WFI trap");

    r = run32(HCR_TWE, a32_wfe_cond, false);
    check(trapped_a32(a32_wfe_cond_insn, 1, false, 0) && r == 1,
          "A32: conditional WFE traps, is executed again, and execution goes on");
    r = run32(HCR_TWI, a32_wfi_cond, false);
    check(trapped_a32(a32_wfi_cond_insn, 0, false, 0) && r == 1,
          "A32: conditional WFI traps, is executed again, and execution goes on");

    /* Not trapped: the WFE sleeps until CPU 1's SEV and executes again */
    t0 = now();
    request(REQ_SEV, 5000);
    r = run32(0, t32_wfe_it, true);
    t = now() - t0;
    wait_request_done();
    check(trap_count == 0 && t >= 4000 && r == 1,
          "T32: WFE in an IT block sleeps, wakes on SEV, the block runs on");
    report("ticks waited:", t);
    report("block result (want 1):", r);
}

static bool trapped_wfx(unsigned ti)
{
    return trap_count == 1 && (trap_esr >> 26) == EC_WFX &&
        (trap_esr & (1 << 25)) && (trap_esr & 3) == ti;
}

int main(void)
{
    uint64_t mmfr1 = sysreg_read(id_aa64mmfr1_el1);
    bool twed = ((mmfr1 >> 32) & 0xf) == 1;
    uint64_t t, hcr, t0, r;

    puts_("wfe-twed: ID_AA64MMFR1_EL1.TWED=");
    putnum((mmfr1 >> 32) & 0xf);
    puts_(", CNTFRQ_EL0=");
    putnum(sysreg_read(cntfrq_el0));
    puts_("\n");

    /* EL1: MMU off, EL0 WFx not trapped; counters accessible */
    sysreg_write(sctlr_el1, 0x30d00800 | (1 << 16) | (1 << 18));
    sysreg_write(cnthctl_el2, 3);
    sysreg_write(cntvoff_el2, 0);
    sysreg_write(cntkctl_el1, 0);

    /* Start CPU 1 (PSCI CPU_ON) */
    if (smc_call(0xc4000003, 1, (uint64_t)cpu1_entry, 0) != 0) {
        puts_("FAIL PSCI CPU_ON\n");
        semi_exit(2);
    }
    while (!cpu1_ready) {
    }

    run(HCR_TWE, el1_sevl_wfe, 0);
    check(trap_count == 0, "SEVL+WFE does not trap with HCR_EL2.TWE");
    run(0, el1_sevl_wfe, 0);
    check(trap_count == 0, "SEVL+WFE does not sleep without HCR_EL2.TWE");

    t = run(HCR_TWE, el1_wfe, REQ_NONE);
    check(trapped_wfx(1), "WFE traps with HCR_EL2.TWE, EC 0x01, IL 1, TI 0b01");

    /*
     * A pending interrupt that is masked (EL1 runs with DAIF set) is no
     * wake-up event for WFE: it must not hide the trap
     */
    t = run(HCR_TWE | HCR_IMO | HCR_VI, el1_wfe, REQ_NONE);
    check(trapped_wfx(1), "WFE traps with HCR_EL2.TWE while a masked vIRQ is pending");

    test_aarch32();

    /*
     * SCTLR_EL1.nTWE clear: an EL0 WFE traps to EL1, before HCR_EL2.TWE
     * would trap it to EL2; set: only HCR_EL2.TWE traps it
     */
    sysreg_write(sctlr_el1, 0x30d00800 | (1 << 16));
    r = run(HCR_TWE, el1_run_el0_wfe, 0);
    check(trap_count == 0 && (r >> 26) == EC_WFX && (r & 3) == 1,
          "EL0 WFE traps to EL1 with SCTLR_EL1.nTWE clear, before HCR_EL2.TWE");
    sysreg_write(sctlr_el1, 0x30d00800 | (1 << 16) | (1 << 18));
    r = run(HCR_TWE, el1_run_el0_wfe, 0);
    check(trapped_wfx(1) && r == 0,
          "EL0 WFE traps to EL2, not EL1, with SCTLR_EL1.nTWE set");

    req_delay = 5000;
    t = run(0, el1_wfe, REQ_SEV);
    wait_request_done();
    check(trap_count == 0, "WFE without HCR_EL2.TWE does not trap, SEV from CPU 1 wakes it");
    report("ticks waited:", t);

    /* Event stream: bit 10 of CNTVCT_EL0, 0->1, every 2048 ticks */
    sysreg_write(cntkctl_el1, (1 << 2) | (10 << 4));
    t = run(0, el1_wfe_n, 4);
    sysreg_write(cntkctl_el1, 0);
    check(trap_count == 0 && t >= 2 * 2048,
          "CNTKCTL_EL1 event stream wakes WFE (4 WFEs wait >= 2 periods)");
    report("ticks for 4 WFEs:", t);

    /* The EL2 event stream, from CNTHCTL_EL2 */
    sysreg_write(cnthctl_el2, 3 | (1 << 2) | (1 << 3) | (10 << 4));
    t = run(0, el1_wfe_n, 4);
    sysreg_write(cnthctl_el2, 3);
    check(trap_count == 0 && t >= 2 * 2048,
          "CNTHCTL_EL2 event stream (EVNTDIR=1) wakes WFE");
    report("ticks for 4 WFEs:", t);

    t = run(0, el1_wfet, 3000);
    check(trap_count == 0 && t >= 3000, "WFET waits for its timeout");
    report("ticks waited:", t);
    t = run(HCR_TWE, el1_wfet, 1000000);
    check(trapped_wfx(3), "WFET traps with HCR_EL2.TWE, TI 0b11");
    check(((trap_esr >> 5) & 0x1f) == 3 && (trap_esr & (1 << 2)),
          "WFET trap syndrome: RV 1, RN 3");

    t = run(HCR_TWE, el1_ldxr_wfe, REQ_NONE);
    check(trapped_wfx(1), "WFE with the monitor armed traps at once without TWED");

    hcr = HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(9);
    sysreg_write(hcr_el2, hcr);
    if (!twed) {
        check((sysreg_read(hcr_el2) & (HCR_TWEDEN | HCR_TWEDEL(15))) == 0,
              "without FEAT_TWED, HCR_EL2.TWEDEn/TWEDEL are RES0");
        t0 = now();
        t = run(hcr, el1_wfe, REQ_NONE);
        check(trapped_wfx(1), "without FEAT_TWED, TWEDEn does not delay the trap");
        report("ticks to trap:", trap_time - t0);
        goto out;
    }
    check((sysreg_read(hcr_el2) & (HCR_TWEDEN | HCR_TWEDEL(15))) ==
          (HCR_TWEDEN | HCR_TWEDEL(9)), "HCR_EL2.TWEDEn/TWEDEL are writable");

    /* Window 2^(15+8) ticks = 8.4 s: SEV after 20 ms must win */
    req_delay = 20000;
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(15), el1_wfe, REQ_SEV);
    wait_request_done();
    check(trap_count == 0 && t < (1 << 23),
          "TWED: SEV from CPU 1 inside the window, no trap");
    report("ticks waited:", t);

    /* Window 2^(4+8) = 4096 ticks, nothing wakes: trap after it */
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(4), el1_wfe, REQ_NONE);
    check(trapped_wfx(1) && t >= 4096,
          "TWED: nothing inside the window, trap after 2^(TWEDEL+8) ticks");
    report("ticks to trap:", t);

    /* SEV after 50 ms, window 4096 ticks: the trap comes first */
    req_delay = 50000;
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(4), el1_wfe, REQ_SEV);
    wait_request_done();
    check(trapped_wfx(1) && t >= 4096 && t < 50000,
          "TWED: SEV outside the window, trap");
    report("ticks to trap:", t);

    /* The global monitor cleared by a store from CPU 1 is an event */
    req_delay = 20000;
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(15), el1_ldxr_wfe, REQ_STORE);
    wait_request_done();
    check(trap_count == 0 && t < (1 << 23),
          "TWED: store to the monitored location inside the window, no trap");
    report("ticks waited:", t);
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(4), el1_ldxr_wfe, REQ_NONE);
    check(trapped_wfx(1) && t >= 4096,
          "TWED: monitor armed, no store, trap after the window");
    report("ticks to trap:", t);

    /* The event stream inside the window */
    sysreg_write(cntkctl_el1, (1 << 2) | (10 << 4));
    t = run(HCR_TWE | HCR_TWEDEN | HCR_TWEDEL(15), el1_wfe_n, 3);
    sysreg_write(cntkctl_el1, 0);
    check(trap_count == 0, "TWED: event stream inside the window, no trap");

    /* TWEDEn clear: the trap is not delayed */
    t = run(HCR_TWE | HCR_TWEDEL(15), el1_wfe, REQ_NONE);
    check(trapped_wfx(1) && t < 4096, "TWEDEn clear: TWEDEL is ignored");

out:
    puts_(failures ? "wfe-twed: FAILED\n" : "wfe-twed: all passed\n");
    return failures ? 1 : 0;
}
