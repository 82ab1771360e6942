// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Minimal /init for twed's arm64 test hosts, built static with
 *   aarch64-linux-gnu-gcc -static -O2 -o init tools/hosts/initramfs/init.c
 *
 * Mounts /proc, /sys, /dev (devtmpfs), /tmp, /sys/kernel/debug and
 * /sys/kernel/tracing when available, reports whether /dev/kvm exists,
 * runs the commands it is given, then powers the machine off.
 *
 * Commands come from the kernel command line (read from /proc/cmdline,
 * because the kernel keeps dotted parameters from init):
 *   twed.exec=PROG[,ARG...]  one command, arguments separated by commas;
 *                            may be repeated, run in order
 *   twed.run=FILE            a script: one command per line, arguments
 *                            separated by blanks, '#' starts a comment; a
 *                            line may start with "timeout=SECONDS"
 *   twed.timeout=SECONDS     default per-command timeout (default 600)
 * With neither, /etc/twed-run is used when it exists.
 *
 * Console markers, one line each, for the scripts that parse the log:
 *   TWED-INIT: START
 *   TWED-INIT: KVM present|absent
 *   TWED-INIT: RUN <command>
 *   TWED-INIT: EXIT <status> <command>      status of a normal exit
 *   TWED-INIT: SIGNAL <signo> <command>
 *   TWED-INIT: TIMEOUT <seconds> <command>
 *   TWED-INIT: DONE <failed> of <total> failed
 *   TWED-INIT: POWEROFF
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS	64
#define MAX_CMDS	128

static char cmdline[8192];
static int default_timeout = 600;
static int total, failed;

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("TWED-INIT: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
}

static void try_mount(const char *src, const char *dst, const char *type)
{
	mkdir(dst, 0755);
	if (mount(src, dst, type, 0, NULL) && errno != EBUSY)
		printf("init: mount %s on %s: %s\n", type, dst, strerror(errno));
}

static void read_cmdline(void)
{
	int fd = open("/proc/cmdline", O_RDONLY);
	ssize_t n = 0;

	if (fd >= 0) {
		n = read(fd, cmdline, sizeof(cmdline) - 1);
		close(fd);
	}
	cmdline[n > 0 ? n : 0] = '\0';
	if (n > 0 && cmdline[n - 1] == '\n')
		cmdline[n - 1] = '\0';
}

/* Runs argv with a timeout; returns 0 when it exited with status 0 */
static int run(char **argv, int timeout)
{
	char desc[1024] = "";
	struct timespec t0, t1;
	int status, i;
	pid_t pid;

	for (i = 0; argv[i]; i++) {
		strncat(desc, i ? " " : "", sizeof(desc) - strlen(desc) - 1);
		strncat(desc, argv[i], sizeof(desc) - strlen(desc) - 1);
	}
	total++;
	say("RUN %s", desc);
	clock_gettime(CLOCK_MONOTONIC, &t0);

	pid = fork();
	if (pid < 0) {
		say("EXIT 127 %s", desc);
		failed++;
		return 1;
	}
	if (pid == 0) {
		setsid();
		execv(argv[0], argv);
		printf("init: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (timeout > 0 && t1.tv_sec - t0.tv_sec >= timeout) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			say("TIMEOUT %d %s", timeout, desc);
			failed++;
			return 1;
		}
		usleep(20000);
	}

	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (WIFSIGNALED(status)) {
		say("SIGNAL %d %s", WTERMSIG(status), desc);
		failed++;
		return 1;
	}
	say("EXIT %d %s (%ld.%03lds)", WEXITSTATUS(status), desc,
	    (long)(t1.tv_sec - t0.tv_sec) - (t1.tv_nsec < t0.tv_nsec),
	    ((t1.tv_nsec - t0.tv_nsec + 1000000000L) % 1000000000L) / 1000000);
	if (WEXITSTATUS(status))
		failed++;
	return WEXITSTATUS(status) != 0;
}

/* Split s in place at any character of seps */
static int split(char *s, const char *seps, char **argv, int max)
{
	int n = 0;
	char *tok;

	for (tok = strtok(s, seps); tok && n < max - 1; tok = strtok(NULL, seps))
		argv[n++] = tok;
	argv[n] = NULL;
	return n;
}

static void run_script(const char *path)
{
	char line[2048], *argv[MAX_ARGS], **args;
	FILE *f = fopen(path, "r");
	int timeout;

	if (!f) {
		say("EXIT 127 %s (cannot open: %s)", path, strerror(errno));
		total++;
		failed++;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#');

		if (hash)
			*hash = '\0';
		if (!split(line, " \t\r\n", argv, MAX_ARGS))
			continue;
		args = argv;
		timeout = default_timeout;
		if (!strncmp(args[0], "timeout=", 8)) {
			timeout = atoi(args[0] + 8);
			args++;
			if (!args[0])
				continue;
		}
		run(args, timeout);
	}
	fclose(f);
}

int main(void)
{
	char *params[MAX_CMDS], *argv[MAX_ARGS], *p, copy[sizeof(cmdline)];
	const char *script = NULL;
	int n, i, execs = 0;

	try_mount("proc", "/proc", "proc");
	try_mount("sysfs", "/sys", "sysfs");
	try_mount("devtmpfs", "/dev", "devtmpfs");
	try_mount("tmpfs", "/tmp", "tmpfs");
	try_mount("debugfs", "/sys/kernel/debug", "debugfs");
	try_mount("tracefs", "/sys/kernel/tracing", "tracefs");
	setenv("PATH", "/bin:/sbin:/usr/bin:/usr/sbin", 1);
	setenv("HOME", "/root", 1);
	setenv("TERM", "dumb", 0);
	setvbuf(stdout, NULL, _IOLBF, 0);

	say("START");
	read_cmdline();
	printf("init: cmdline: %s\n", cmdline);
	say("KVM %s", access("/dev/kvm", F_OK) ? "absent" : "present");

	strcpy(copy, cmdline);
	n = split(copy, " ", params, MAX_CMDS);
	for (i = 0; i < n; i++) {
		if (!strncmp(params[i], "twed.timeout=", 13))
			default_timeout = atoi(params[i] + 13);
		else if (!strncmp(params[i], "twed.run=", 9))
			script = params[i] + 9;
	}
	for (i = 0; i < n; i++) {
		if (strncmp(params[i], "twed.exec=", 10))
			continue;
		p = params[i] + 10;
		if (split(p, ",", argv, MAX_ARGS)) {
			run(argv, default_timeout);
			execs++;
		}
	}
	if (script)
		run_script(script);
	else if (!execs && !access("/etc/twed-run", R_OK))
		run_script("/etc/twed-run");

	say("DONE %d of %d failed", failed, total);
	sync();
	say("POWEROFF");
	reboot(RB_POWER_OFF);
	/* Only reached when reboot() failed */
	for (;;)
		pause();
}
