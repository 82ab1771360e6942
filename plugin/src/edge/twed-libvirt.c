/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-libvirt.h"
#include "twed-types.h"

#include <signal.h>

static void
quiet_error_func (void *opaque G_GNUC_UNUSED, virErrorPtr err G_GNUC_UNUSED)
{
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
