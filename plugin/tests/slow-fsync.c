/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A slow disk, for tests (LD_PRELOAD): fsync and fdatasync of a file
 * under $TWED_SLOW_FSYNC_DIR take $TWED_SLOW_FSYNC_MS longer.  What a
 * daemon does while its state write waits for the disk shows then.
 * With $TWED_FSYNC_LOG, each of them is logged there ("fsync PATH" or
 * "fdatasync PATH", the directory itself included): what was made
 * durable shows too.  With $TWED_FSYNC_FAIL, each of them fails with EIO
 * (a failing disk: a test running as root cannot make a directory
 * unwritable); with $TWED_FSYNC_FAIL_MATCH, only those of a path that
 * holds that string fail (a disk too full for a whole state.json, which
 * still takes a small record at the end of a file).  With
 * $TWED_SLOW_FSYNC_GATE, each of them also waits while that file exists:
 * a test holds the daemon in the call for as long as it needs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* Whether the call is to fail. */
static int
maybe_wait (int fd, const char *call)
{
  const char *dir = getenv ("TWED_SLOW_FSYNC_DIR");
  const char *ms = getenv ("TWED_SLOW_FSYNC_MS");
  const char *log = getenv ("TWED_FSYNC_LOG");
  const char *match = getenv ("TWED_FSYNC_FAIL_MATCH");
  const char *gate;
  char link[64], path[PATH_MAX];
  ssize_t n;
  long wait_ms;
  struct timespec ts;

  if (!dir || !*dir)
    return 0;
  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, path, sizeof path - 1);
  if (n <= 0)
    return 0;
  path[n] = '\0';
  if (strncmp (path, dir, strlen (dir)) != 0)
    return 0;
  if (log && *log)
    {
      FILE *f = fopen (log, "a");

      if (f)
        {
          fprintf (f, "%s %s\n", call, path);
          fclose (f);
        }
    }
  gate = getenv ("TWED_SLOW_FSYNC_GATE");
  if (gate && *gate)
    {
      struct timespec tick = { 0, 10 * 1000000L };

      while (access (gate, F_OK) == 0)
        nanosleep (&tick, NULL);
    }
  if (getenv ("TWED_FSYNC_FAIL"))
    return 1;
  if (match && *match && strstr (path, match))
    return 1;
  if (!ms)
    return 0;
  wait_ms = strtol (ms, NULL, 10);
  ts.tv_sec = wait_ms / 1000;
  ts.tv_nsec = (wait_ms % 1000) * 1000000L;
  while (nanosleep (&ts, &ts) != 0)
    ;
  return 0;
}

int
fsync (int fd)
{
  int (*real) (int) = (int (*) (int)) dlsym (RTLD_NEXT, "fsync");

  if (maybe_wait (fd, "fsync"))
    {
      errno = EIO;
      return -1;
    }
  return real (fd);
}

int
fdatasync (int fd)
{
  int (*real) (int) = (int (*) (int)) dlsym (RTLD_NEXT, "fdatasync");

  if (maybe_wait (fd, "fdatasync"))
    {
      errno = EIO;
      return -1;
    }
  return real (fd);
}
