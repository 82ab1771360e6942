/*
 * Start-up, EL2 vectors and the EL1 call gate for the wfe-twed test.
 *
 * QEMU starts an ELF image on -M virt,virtualization=on at EL2 on
 * CPU 0; CPU 1 is powered off until PSCI CPU_ON (SMC conduit).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

	.section .text.start, "ax"
	.global _start
_start:
	ldr	x0, =stack_el2_0
	mov	sp, x0
	ldr	x0, =el2_vectors
	msr	vbar_el2, x0
	isb
	bl	main
	bl	semi_exit
1:	b	1b

	.global cpu1_entry
cpu1_entry:
	ldr	x0, =stack_el2_1
	mov	sp, x0
	ldr	x0, =el2_vectors
	msr	vbar_el2, x0
	isb
	bl	cpu1_main
1:	b	1b

	.text
/* x0 = semihosting operation, x1 = parameter */
	.global semi_call
semi_call:
	hlt	#0xf000
	ret

/* x0..x3 = SMC arguments, returns x0 */
	.global smc_call
smc_call:
	smc	#0
	ret

/*
 * uint64_t run_el1(uint64_t (*fn)(uint64_t), uint64_t arg):
 * run fn(arg) at EL1h with interrupts masked; fn returns with an HVC
 * (through el1_exit), which comes back here with its result.
 */
	.global run_el1
run_el1:
	stp	x29, x30, [sp, #-96]!
	stp	x19, x20, [sp, #16]
	stp	x21, x22, [sp, #32]
	stp	x23, x24, [sp, #48]
	stp	x25, x26, [sp, #64]
	stp	x27, x28, [sp, #80]
	ldr	x2, =saved_el2_sp
	mov	x3, sp
	str	x3, [x2]
	msr	elr_el2, x0
	mov	x0, x1
	mov	x2, #0x3c5		/* EL1h, DAIF masked */
	msr	spsr_el2, x2
	ldr	x2, =stack_el1
	msr	sp_el1, x2
	ldr	x30, =el1_exit
	isb
	eret

el1_exit:
	hvc	#0
1:	b	1b

el2_return:
	ldr	x1, =saved_el2_sp
	ldr	x1, [x1]
	mov	sp, x1
	ldp	x19, x20, [sp, #16]
	ldp	x21, x22, [sp, #32]
	ldp	x23, x24, [sp, #48]
	ldp	x25, x26, [sp, #64]
	ldp	x27, x28, [sp, #80]
	ldp	x29, x30, [sp], #96
	ret

/*
 * A synchronous exception from EL1. A trapped WFx is recorded (ESR,
 * counter, count) and skipped; it clobbers x9 and x10 of EL1.
 */
lower_sync:
	mrs	x9, esr_el2
	lsr	x10, x9, #26
	cmp	x10, #0x16		/* HVC: EL1 function done */
	b.eq	el2_return
	cmp	x10, #0x01		/* WFx trap */
	b.ne	unexpected
	ldr	x10, =trap_esr
	str	x9, [x10]
	mrs	x9, cntvct_el0
	ldr	x10, =trap_time
	str	x9, [x10]
	ldr	x10, =trap_count
	ldr	x9, [x10]
	add	x9, x9, #1
	str	x9, [x10]
	mrs	x9, elr_el2
	add	x9, x9, #4
	msr	elr_el2, x9
	eret

unexpected:
	mrs	x0, esr_el2
	mrs	x1, elr_el2
	bl	unexpected_exception
1:	b	1b

	.balign	2048
el2_vectors:
	.set	i, 0
	.rept	16
	.balign	128
	.if	i == 8
	b	lower_sync
	.else
	b	unexpected
	.endif
	.set	i, i + 1
	.endr

	.data
	.balign	8
saved_el2_sp:
	.quad	0
