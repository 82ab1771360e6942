/*
 * Halts in a WFE that nothing wakes; after migration the incoming side
 * must wake it (wfe-migrate-test).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
	.section .text.start, "ax"
	.global _start
_start:
	mov	x0, #4
	adr	x1, before
	hlt	#0xf000
	sevl
	wfe
	wfe			/* nothing wakes this one on the source */
	mov	x0, #4
	adr	x1, woke
	hlt	#0xf000
	mov	x0, #0x18
	adr	x1, block
	hlt	#0xf000
1:	b	1b
	.balign 8
block:	.quad	0x20026, 0
before:	.asciz	"before WFE\n"
woke:	.asciz	"woke after migration\n"
