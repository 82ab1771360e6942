/*
 * An idle loop that waits in WFE with nothing to wake it, for the
 * host CPU time check of the TCG boot benchmark.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
	.section .text.start, "ax"
	.global _start
_start:
1:	wfe
	b	1b
