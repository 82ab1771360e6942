// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fault: touch fresh anonymous memory at a fixed stride and time it, like
 * the do_fault_read/write/read_write tests of the 2017 KVM/arm64 icache
 * series: every touch is a first access, so each one is a page fault (and,
 * in a guest, a stage-2 fault the first time the host backs the page).
 *
 *   fault [--mode read|write|read_write] [--size MIB] [--stride BYTES]
 *
 * Defaults: write, 1024 MiB, 4096 bytes.  Prints one line:
 *   fault mode= size_mib= stride= touches= seconds= ns_per_touch=
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "workload.h"

const char *workload_name = "fault";

int main(int argc, char **argv)
{
	const char *mode = "write";
	unsigned long size_mib = 1024, stride = 4096, touches;
	volatile unsigned char *mem;
	unsigned long sum = 0;
	size_t len;
	double t0, t;
	int i;

	for (i = 1; i < argc; i++) {
		const char *opt = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "fault: %s needs a value\n", opt);
			return 2;
		}
		if (!strcmp(opt, "--mode")) {
			mode = argv[++i];
			if (strcmp(mode, "read") && strcmp(mode, "write") && strcmp(mode, "read_write")) {
				fprintf(stderr, "fault: --mode: '%s' is not read, write or read_write\n", mode);
				return 2;
			}
		} else if (!strcmp(opt, "--size")) {
			size_mib = workload_parse_num(opt, argv[++i], 1UL << 20);
		} else if (!strcmp(opt, "--stride")) {
			stride = workload_parse_num(opt, argv[++i], 1UL << 30);
		} else {
			fprintf(stderr, "fault: unknown option '%s'\n", opt);
			return 2;
		}
	}

	len = size_mib << 20;
	mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "fault: mmap %lu MiB: %s\n", size_mib, strerror(errno));
		return 1;
	}
	/* Whole pages per touch, no transparent huge pages: one fault each. */
	madvise((void *)mem, len, MADV_NOHUGEPAGE);

	touches = (len + stride - 1) / stride;
	t0 = workload_now();
	for (size_t off = 0; off < len; off += stride) {
		if (mode[0] == 'r')
			sum += mem[off];
		if (strcmp(mode, "read"))
			mem[off] = (unsigned char)off;
	}
	t = workload_now() - t0;
	printf("fault mode=%s size_mib=%lu stride=%lu touches=%lu seconds=%.6f ns_per_touch=%.1f\n",
	       mode, size_mib, stride, touches, t, t * 1e9 / touches);
	munmap((void *)mem, len);
	return sum == 1; /* keeps the reads; never true for fresh memory */
}
