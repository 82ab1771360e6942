// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fscopy: the File Copy test of unixbench (fstime): a file of BLOCKS
 * blocks of BUFFER bytes is copied to a second file, block by block with
 * read(2)/write(2), over and over for a fixed time; the figure is KB copied
 * per second.
 *
 *   fscopy [--preset fstime|fsbuffer|fsdisk] [--buffer BYTES]
 *          [--blocks N] [--seconds S] [--dir DIR]
 *
 * Presets (unixbench's): fstime 1024 bytes x 2000 blocks (default),
 * fsbuffer 256 x 500, fsdisk 4096 x 8000.  --dir defaults to /tmp.
 * Prints one line:
 *   fscopy preset= buffer= blocks= seconds= kb_copied= kb_per_s=
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

const char *workload_name = "fscopy";

static void die_errno(const char *what, const char *path)
{
	fprintf(stderr, "fscopy: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	const char *preset = "fstime", *dir = "/tmp";
	unsigned long buffer = 0, blocks = 0, seconds = 10, kb = 0, rem = 0;
	char src[4096], dst[4096], *buf;
	double t0, t;
	int in, out, i;

	for (i = 1; i < argc; i++) {
		const char *opt = argv[i];

		if (i + 1 >= argc) {
			fprintf(stderr, "fscopy: %s needs a value\n", opt);
			return 2;
		}
		if (!strcmp(opt, "--preset"))
			preset = argv[++i];
		else if (!strcmp(opt, "--buffer"))
			buffer = workload_parse_num(opt, argv[++i], 1UL << 24);
		else if (!strcmp(opt, "--blocks"))
			blocks = workload_parse_num(opt, argv[++i], 1UL << 24);
		else if (!strcmp(opt, "--seconds"))
			seconds = workload_parse_num(opt, argv[++i], 86400);
		else if (!strcmp(opt, "--dir"))
			dir = argv[++i];
		else {
			fprintf(stderr, "fscopy: unknown option '%s'\n", opt);
			return 2;
		}
	}
	if (!strcmp(preset, "fstime")) {
		buffer = buffer ? buffer : 1024;
		blocks = blocks ? blocks : 2000;
	} else if (!strcmp(preset, "fsbuffer")) {
		buffer = buffer ? buffer : 256;
		blocks = blocks ? blocks : 500;
	} else if (!strcmp(preset, "fsdisk")) {
		buffer = buffer ? buffer : 4096;
		blocks = blocks ? blocks : 8000;
	} else {
		fprintf(stderr, "fscopy: --preset: '%s' is not fstime, fsbuffer or fsdisk\n", preset);
		return 2;
	}

	buf = malloc(buffer);
	if (!buf)
		return 1;
	memset(buf, 'x', buffer);
	snprintf(src, sizeof(src), "%s/fscopy.%d.src", dir, (int)getpid());
	snprintf(dst, sizeof(dst), "%s/fscopy.%d.dst", dir, (int)getpid());
	in = open(src, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (in < 0)
		die_errno("create", src);
	out = open(dst, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (out < 0)
		die_errno("create", dst);
	for (unsigned long b = 0; b < blocks; b++)
		if (write(in, buf, buffer) != (ssize_t)buffer)
			die_errno("write", src);

	t0 = workload_now();
	do {
		/* One pass: the whole file, then both offsets back to 0. */
		lseek(in, 0, SEEK_SET);
		lseek(out, 0, SEEK_SET);
		for (unsigned long b = 0; b < blocks; b++) {
			if (read(in, buf, buffer) != (ssize_t)buffer)
				die_errno("read", src);
			if (write(out, buf, buffer) != (ssize_t)buffer)
				die_errno("write", dst);
			rem += buffer;
			kb += rem / 1024;
			rem %= 1024;
		}
		t = workload_now() - t0;
	} while (t < seconds);

	printf("fscopy preset=%s buffer=%lu blocks=%lu seconds=%.3f kb_copied=%lu kb_per_s=%.0f\n",
	       preset, buffer, blocks, t, kb, kb / t);
	close(in);
	close(out);
	unlink(src);
	unlink(dst);
	free(buf);
	return 0;
}
