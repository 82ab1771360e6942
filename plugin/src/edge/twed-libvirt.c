/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-libvirt.h"
#include "twed-types.h"

#include <signal.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

static void
quiet_error_func (void *opaque G_GNUC_UNUSED, virErrorPtr err G_GNUC_UNUSED)
{
}

/* libxml2 prints parser warnings to stderr by default, e.g. for a test
 * driver file that libvirt cannot load: they would break a log that is
 * all structured lines.  What it says reaches the debug log instead; the
 * error itself comes back through the libvirt call that failed. */
static void
xml_error_func (void *opaque G_GNUC_UNUSED, const char *fmt, ...)
{
  g_autofree char *msg = NULL;
  va_list ap;

  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_strchomp (msg);
  if (*msg)
    g_debug ("libxml2: %s", msg);
}

void
twed_libvirt_init (gboolean events)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      /* libvirt's remote driver writes to its sockets with write(2): a
       * libvirtd that went away (restarted, host gone, keepalive given
       * up) must make the next call fail, not SIGPIPE end the daemon
       * or the command mid-cycle.  virsh does the same. */
      signal (SIGPIPE, SIG_IGN);
      virSetErrorFunc (NULL, quiet_error_func);
      /* libxml2 2.9 keeps its handler per thread: set it here and as the
       * default of the threads that passes and libvirt start later. */
      xmlInitParser ();
      xmlSetGenericErrorFunc (NULL, xml_error_func);
      xmlThrDefSetGenericErrorFunc (NULL, xml_error_func);
      virInitialize ();
      /* Lifecycle events and keepalive need libvirt's event loop, before
       * the first connection is opened.  libvirt's default implementation
       * attaches its sources (sockets, keepalive timers) to GLib's global
       * default main context: the caller's main loop runs them, and a
       * second thread iterating the same context would only wait for
       * that loop.  So nothing that can block for seconds may run on
       * that loop, or every connection's keepalive stalls with it. */
      if (events)
        virEventRegisterDefaultImpl ();
      g_once_init_leave (&done, 1);
    }
}

static gpointer
event_thread (gpointer data G_GNUC_UNUSED)
{
  for (;;)
    if (virEventRunDefaultImpl () < 0)
      virResetLastError ();
  return NULL;
}

void
twed_libvirt_run_events (void)
{
  static gsize done = 0;

  if (g_once_init_enter (&done))
    {
      g_thread_unref (g_thread_new ("twed-events", event_thread, NULL));
      g_once_init_leave (&done, 1);
    }
}

G_DEFINE_QUARK (twed-libvirt-error-quark, twed_libvirt_error)

void
twed_set_libvirt_error (GError **error, const char *what)
{
  const char *msg = virGetLastErrorMessage ();
  int code = virGetLastErrorCode ();

  g_set_error (error, TWED_LIBVIRT_ERROR, code, "%s: %s (libvirt error %d)", what,
               msg && *msg ? msg : "unknown libvirt error", code);
  virResetLastError ();
}
