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
 * uint64_t run_el1(uint64_t (*fn)(uint64_t), uint64_t arg, uint64_t spsr):
 * run fn(arg) at EL1 in the state @spsr gives (AArch64 EL1h or an
 * AArch32 mode, interrupts masked); fn returns with an HVC (an AArch64
 * fn through el1_exit), which comes back here with its result in x0.
 */
	.global run_el1
run_el1:
	stp	x29, x30, [sp, #-96]!
	stp	x19, x20, [sp, #16]
	stp	x21, x22, [sp, #32]
	stp	x23, x24, [sp, #48]
	stp	x25, x26, [sp, #64]
	stp	x27, x28, [sp, #80]
	ldr	x4, =saved_el2_sp
	mov	x3, sp
	str	x3, [x4]
	msr	elr_el2, x0
	mov	x0, x1
	msr	spsr_el2, x2
	ldr	x4, =stack_el1
	msr	sp_el1, x4
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

/*
 * A synchronous exception from AArch32 EL1. A trapped WFx is recorded
 * (ESR, SPSR, ELR, count) and executed again, with WFx no longer
 * trapped and a (masked) virtual IRQ pending so that a WFI completes.
 * It clobbers r9 and r10 of EL1.
 */
lower_sync_a32:
	mrs	x9, esr_el2
	lsr	x10, x9, #26
	cmp	x10, #0x12		/* HVC: EL1 function done */
	b.eq	el2_return
	cmp	x10, #0x01		/* WFx trap */
	b.ne	unexpected
	ldr	x10, =trap_esr
	str	x9, [x10]
	mrs	x9, spsr_el2
	ldr	x10, =trap_spsr
	str	x9, [x10]
	mrs	x9, elr_el2
	ldr	x10, =trap_elr
	str	x9, [x10]
	ldr	x10, =trap_count
	ldr	x9, [x10]
	add	x9, x9, #1
	str	x9, [x10]
	mrs	x9, hcr_el2
	bic	x9, x9, #(3 << 13)	/* TWI, TWE */
	orr	x9, x9, #(1 << 7)	/* VI */
	orr	x9, x9, #(1 << 4)	/* IMO */
	msr	hcr_el2, x9
	isb
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
	.elseif	i == 12
	b	lower_sync_a32
	.else
	b	unexpected
	.endif
	.set	i, i + 1
	.endr

/*
 * uint64_t el1_run_el0_wfe(uint64_t arg), an EL1 function for run_el1():
 * run el0_wfe at EL0 with EL1's vectors installed, and return the ESR
 * of the WFx trap that EL1 took from it (0 if none). EL0 ends with an
 * SVC, whose handler returns from this function.
 */
	.global el1_run_el0_wfe
el1_run_el0_wfe:
	ldr	x1, =el1_saved
	mov	x2, sp
	stp	x2, x30, [x1]
	str	xzr, [x1, #16]
	ldr	x1, =el1_vectors
	msr	vbar_el1, x1
	ldr	x1, =el0_wfe
	msr	elr_el1, x1
	mov	x1, #0x3c0		/* EL0t, DAIF masked */
	msr	spsr_el1, x1
	isb
	eret

/* EL0: consume the event, then one WFE, which SCTLR_EL1.nTWE traps */
el0_wfe:
	sevl
	wfe
	wfe
	svc	#0

/*
 * A synchronous exception from EL0 to EL1: a trapped WFx is recorded and
 * skipped, an SVC returns from el1_run_el0_wfe with the recorded ESR.
 */
el1_lower_sync:
	mrs	x9, esr_el1
	lsr	x10, x9, #26
	cmp	x10, #0x15		/* SVC */
	b.eq	1f
	cmp	x10, #0x01		/* WFx trap */
	b.ne	el1_unexpected
	ldr	x10, =el1_saved
	str	x9, [x10, #16]
	mrs	x9, elr_el1
	add	x9, x9, #4
	msr	elr_el1, x9
	eret
1:	ldr	x1, =el1_saved
	ldp	x2, x30, [x1]
	mov	sp, x2
	ldr	x0, [x1, #16]
	ret

el1_unexpected:
	hvc	#1
1:	b	1b

	.balign	2048
el1_vectors:
	.set	i, 0
	.rept	16
	.balign	128
	.if	i == 8
	b	el1_lower_sync
	.else
	b	el1_unexpected
	.endif
	.set	i, i + 1
	.endr

/*
 * AArch32 EL1 code, hand-assembled (the toolchain is AArch64 only).
 * Each block consumes the event that the exception return set, then
 * executes a WFE or WFI as the first instruction of an ITTE EQ block
 * (or conditional A32 instructions) with Z set:
 *	[movs/mov r0, #0; movs/mov r1, #0; sevl; wfe; cmp r0, #0]
 *	itte	eq
 *	wfxeq			@ traps, or sleeps, and is executed again
 *	addeq	r1, r1, #1	@ executed
 *	addne	r1, r1, #2	@ skipped
 *	mov	r0, r1
 *	hvc	#0
 * so they return 1 if the IT state (condition) of each instruction was
 * right also after the WFx was trapped or woken up, and 2 if not.
 */
	.macro	thumb_wfx_block name, wfx
	.balign	4
	.global	\name
\name:
	.hword	0x2000, 0x2100		/* movs r0, #0; movs r1, #0 */
	.hword	0xbf50, 0xbf20		/* sevl; wfe */
	.hword	0x2800			/* cmp r0, #0 */
	.hword	0xbf06			/* itte eq */
	.global	\name\()_insn
\name\()_insn:
	.hword	\wfx			/* wfeeq / wfieq */
	.hword	0x3101			/* addeq r1, #1 */
	.hword	0x3102			/* addne r1, #2 */
	.hword	0x4608			/* mov r0, r1 */
	.hword	0xf7e0, 0x8000		/* hvc #0 */
	.endm

	.macro	a32_wfx_block name, wfx
	.balign	4
	.global	\name
\name:
	.word	0xe3a00000, 0xe3a01000	/* mov r0, #0; mov r1, #0 */
	.word	0xe320f005, 0xe320f002	/* sevl; wfe */
	.word	0xe3500000		/* cmp r0, #0 */
	.global	\name\()_insn
\name\()_insn:
	.word	\wfx			/* wfeeq / wfieq */
	.word	0x02811001		/* addeq r1, r1, #1 */
	.word	0x12811002		/* addne r1, r1, #2 */
	.word	0xe1a00001		/* mov r0, r1 */
	.word	0xe1400070		/* hvc #0 */
	.endm

	thumb_wfx_block	t32_wfe_it, 0xbf20
	thumb_wfx_block	t32_wfi_it, 0xbf30
	a32_wfx_block	a32_wfe_cond, 0x0320f002
	a32_wfx_block	a32_wfi_cond, 0x0320f003

	.data
	.balign	8
saved_el2_sp:
	.quad	0
el1_saved:			/* sp, x30, ESR of the trap */
	.quad	0, 0, 0
