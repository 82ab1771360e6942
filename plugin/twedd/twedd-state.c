/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "config.h"
#include "twedd-state.h"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static gboolean
fail_errno (GError **error, int err, const char *what, const char *path)
{
  g_set_error (error, G_FILE_ERROR, g_file_error_from_errno (err), "%s %s: %s", what, path, g_strerror (err));
  return FALSE;
}

/* A rename is durable once the directory that holds it is synced:
 * g_file_set_contents_full syncs the file only. */
static gboolean
sync_dir (const char *dir, GError **error)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err;

  if (fd < 0)
    return fail_errno (error, errno, "opening directory", dir);
  /* Some file systems cannot sync a directory (EINVAL): their renames
   * are as durable as they make them. */
  if (fsync (fd) < 0 && errno != EINVAL)
    {
      err = errno;
      close (fd);
      return fail_errno (error, err, "syncing directory", dir);
    }
  close (fd);
  return TRUE;
}

/* Atomic and durable: a crash leaves the old file or the new one. */
static gboolean
replace_file (const char *dir, const char *name, const char *text, gsize len, GError **error)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);

  return g_file_set_contents_full (path, text, (gssize) len, G_FILE_SET_CONTENTS_CONSISTENT, 0600, error) &&
         sync_dir (dir, error);
}

TwedState *
twedd_state_load (const char *dir, gint64 now, gint64 min_change, TwedStateLoad *info, GError **error)
{
  g_autofree char *state_path = g_build_filename (dir, TWEDD_STATE_FILE, NULL);
  g_autofree char *log_path = g_build_filename (dir, TWEDD_STATE_LOG, NULL);
  g_autofree char *text = NULL, *log = NULL;
  g_autoptr(GError) local = NULL;
  g_autoptr(TwedState) s = NULL;
  gsize len = 0, log_len = 0;
  gboolean have_state, have_log, stale = FALSE;
  gssize torn = -1;

  *info = (TwedStateLoad) { 0 };
  have_state = g_file_get_contents (state_path, &text, &len, &local);
  if (!have_state && !g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  g_clear_error (&local);
  have_log = g_file_get_contents (log_path, &log, &log_len, &local);
  if (!have_log && !g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
  g_clear_error (&local);
  if (!have_state && !have_log)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_NOENT, "no %s yet", state_path);
      return NULL;
    }
  if (have_state && !(s = twed_state_from_json (text, (gssize) len, &local)))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s: %s", state_path, local->message);
      return NULL;
    }
  if (!s)
    s = twed_state_new ();
  info->state_bytes = len;
  if (!have_log)
    info->fresh_log_due = TRUE;
  else if (!twed_state_replay (s, log, log_len, &stale, &torn, &local))
    {
      g_set_error (error, TWED_ERROR, TWED_ERROR_INVALID, "%s: %s", log_path, local->message);
      return NULL;
    }
  if (stale)
    {
      /* Written before the state was: the state holds it. */
      g_debug ("%s is of an earlier state than %s: not replayed", log_path, state_path);
      info->fresh_log_due = TRUE;
      info->log_stale = TRUE;
    }
  else if (torn >= 0)
    {
      g_warning ("state log %s: the last record, at offset %" G_GSSIZE_FORMAT ", is cut short "
                 "(a crash while it was written): not taken", log_path, torn);
      info->log_bytes = (gsize) torn;
      info->fresh_log_due = TRUE;
      info->log_torn = TRUE;
    }
  else if (have_log)
    info->log_bytes = log_len;
  twed_state_prune (s, now, min_change);
  return g_steal_pointer (&s);
}

gboolean
twedd_state_mend_log (const char *dir, const TwedStateLoad *info, GError **error)
{
  g_autofree char *path = g_build_filename (dir, TWEDD_STATE_LOG, NULL);
  int fd, err;

  /* Of an older state, or not even a whole header: removed, the next
   * append starts a log of the generation in force. */
  if (info->log_stale || (info->log_torn && !info->log_bytes))
    {
      if (g_unlink (path) < 0 && errno != ENOENT)
        return fail_errno (error, errno, "removing", path);
      return sync_dir (dir, error);
    }
  if (!info->log_torn)
    return TRUE;
  fd = open (path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return fail_errno (error, errno, "opening", path);
  if (ftruncate (fd, (off_t) info->log_bytes) < 0 || fsync (fd) < 0)
    {
      err = errno;
      close (fd);
      return fail_errno (error, err, "cutting the record cut short off", path);
    }
  close (fd);
  return TRUE;
}

/* Whether the log open at @fd (of @size bytes) is one of @generation
 * that a record can follow: its header names @generation and it ends
 * in a newline. */
static gboolean
log_goes_on (int fd, off_t size, guint64 generation, const char *path, GError **error)
{
  g_autofree char *header = twed_state_log_header (generation);
  size_t len = strlen (header);
  char buf[64], last;

  g_assert (len <= sizeof buf);
  if (size < (off_t) len || pread (fd, buf, len, 0) != (ssize_t) len || memcmp (buf, header, len) != 0)
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                   "%s is not the log of the state in force (generation %" G_GUINT64_FORMAT "): not appended to",
                   path, generation);
      return FALSE;
    }
  if (pread (fd, &last, 1, size - 1) != 1 || last != '\n')
    {
      g_set_error (error, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                   "%s ends in a record cut short: not appended to", path);
      return FALSE;
    }
  return TRUE;
}

gboolean
twedd_state_write (const char *dir, const TwedState *s, guint64 *generation, gsize *bytes, GError **error)
{
  g_autofree char *text = twed_state_to_json (s);
  g_autofree char *header = twed_state_log_header (s->log);

  *bytes = strlen (text);
  /* The state first, then its empty log: a crash in between leaves the
   * new state with the old log, which it names as older and holds. */
  if (!replace_file (dir, TWEDD_STATE_FILE, text, *bytes, error))
    return FALSE;
  *generation = s->log;
  if (!replace_file (dir, TWEDD_STATE_LOG, header, strlen (header), error))
    {
      g_autofree char *log = g_build_filename (dir, TWEDD_STATE_LOG, NULL);

      /* Records appended to the old log would be read as older than the
       * state, and dropped: without it, the next append starts one. */
      if (g_unlink (log) < 0 && errno != ENOENT)
        g_warning ("state log %s of an older state not removed: %s", log, g_strerror (errno));
      return FALSE;
    }
  return TRUE;
}

gboolean
twedd_state_append (const char *dir, guint64 generation, const char *data, gsize len, GError **error)
{
  g_autofree char *path = g_build_filename (dir, TWEDD_STATE_LOG, NULL);
  struct stat st;
  gsize done = 0;
  int fd, err;

  fd = open (path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT)
    {
      g_autofree char *header = twed_state_log_header (generation);

      if (!replace_file (dir, TWEDD_STATE_LOG, header, strlen (header), error))
        return FALSE;
      fd = open (path, O_RDWR | O_APPEND | O_CLOEXEC);
    }
  if (fd < 0)
    return fail_errno (error, errno, "opening", path);
  if (fstat (fd, &st) < 0)
    goto failed;
  if (!log_goes_on (fd, st.st_size, generation, path, error))
    {
      close (fd);
      return FALSE;
    }
  while (done < len)
    {
      ssize_t n = write (fd, data + done, len - done);

      if (n < 0 && errno == EINTR)
        continue;
      if (n < 0)
        goto failed;
      done += (gsize) n;
    }
  if (fdatasync (fd) < 0)
    goto failed;
  close (fd);
  return TRUE;

failed:
  err = errno;
  /* Nothing of it stays: a record cut short in the middle of the log
   * would make the records after it unreadable. */
  if (done && ftruncate (fd, st.st_size) < 0)
    g_warning ("state log %s: cutting a failed record: %s", path, g_strerror (errno));
  close (fd);
  return fail_errno (error, err, "appending to", path);
}

gboolean
twedd_state_compact (const char *dir, gint64 now, gint64 min_change, guint64 *generation, gsize *bytes,
                     GError **error)
{
  g_autoptr(TwedState) s = NULL;
  g_autoptr(GError) local = NULL;
  TwedStateLoad info;

  if (!(s = twedd_state_load (dir, now, min_change, &info, &local)) &&
      !g_error_matches (local, G_FILE_ERROR, G_FILE_ERROR_NOENT))
    {
      g_propagate_error (error, g_steal_pointer (&local));
      return FALSE;
    }
  if (!s)
    s = twed_state_new ();
  s->log = MAX (s->log, *generation) + 1;
  return twedd_state_write (dir, s, generation, bytes, error);
}
