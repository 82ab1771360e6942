/*
 * A static /init for the TCG boot benchmark: power the machine off as
 * soon as the kernel has booted, so that QEMU exits (PSCI SYSTEM_OFF).
 * No libc: raw aarch64 Linux system calls.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define __NR_write   64
#define __NR_reboot  142

static long syscall4(long n, long a, long b, long c, long d)
{
    register long x8 asm("x8") = n;
    register long x0 asm("x0") = a;
    register long x1 asm("x1") = b;
    register long x2 asm("x2") = c;
    register long x3 asm("x3") = d;

    asm volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                 : "memory");
    return x0;
}

void _start(void)
{
    static const char msg[] = "twed-boot-bench: init reached\n";

    syscall4(__NR_write, 1, (long)msg, sizeof(msg) - 1, 0);
    /* LINUX_REBOOT_MAGIC1, MAGIC2, LINUX_REBOOT_CMD_POWER_OFF */
    syscall4(__NR_reboot, 0xfee1dead, 672274793, 0x4321fedc, 0);
    for (;;) {
    }
}
