/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "twed-libvirt.h"
#include "twed-types.h"

#include <signal.h>

static GThread *event_thread;
static gint event_quit;
static int event_timer = -1;

static void
wake_timer (int timer G_GNUC_UNUSED, void *opaque G_GNUC_UNUSED)
{
}

static gpointer
event_loop_thread (gpointer data G_GNUC_UNUSED)
{
  while (!g_atomic_int_get (&event_quit))
    if (virEventRunDefaultImpl () < 0)
      virResetLastError ();
  return NULL;
}

static void
quiet_error_func (void *opaque G_GNUC_UNUSED, virErrorPtr err G_GNUC_UNUSED)
{
}

void
twed_libvirt_init (gboolean event_loop)
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
      /* Lifecycle events and keepalive need libvirt's event loop; it
       * must exist before the first connection is opened. */
      if (event_loop)
        {
          virEventRegisterDefaultImpl ();
          /* Wakes the loop now and then so that shutdown is noticed. */
          event_timer = virEventAddTimeout (250, wake_timer, NULL, NULL);
          event_thread = g_thread_new ("libvirt-events", event_loop_thread, NULL);
        }
      g_once_init_leave (&done, 1);
    }
}

void
twed_set_libvirt_error (GError **error, const char *what)
{
  const char *msg = virGetLastErrorMessage ();

  g_set_error (error, TWED_ERROR, TWED_ERROR_FAILED, "%s: %s", what,
               msg && *msg ? msg : "unknown libvirt error");
  virResetLastError ();
}

void
twed_libvirt_shutdown (void)
{
  if (!event_thread)
    return;
  g_atomic_int_set (&event_quit, 1);
  g_thread_join (g_steal_pointer (&event_thread));
  if (event_timer >= 0)
    virEventRemoveTimeout (event_timer);
  event_timer = -1;
}
