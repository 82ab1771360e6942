/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <glib.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

G_BEGIN_DECLS

G_DEFINE_AUTOPTR_CLEANUP_FUNC (virDomain, virDomainFree)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (virConnect, virConnectClose)

/* Silences libvirt's default stderr error printer: errors reach the
 * user once, through GError. Call before any other libvirt call.
 * @events: register libvirt's event loop, whose sources live on GLib's
 * global default main context; the caller runs that context (a
 * GMainLoop) and keeps every blocking libvirt call off it. */
void twed_libvirt_init (gboolean events);

/* For programs without a main loop: a thread that runs libvirt's event
 * loop (GLib's default main context) for the rest of the process. */
void twed_libvirt_run_events (void);

/* Errors from libvirt: the code is libvirt's virErrorNumber, kept so
 * that reports and per-VM backoff can name it. */
#define TWED_LIBVIRT_ERROR (twed_libvirt_error_quark ())
GQuark twed_libvirt_error_quark (void);

/* Sets @error from libvirt's thread-local last error (domain
 * TWED_LIBVIRT_ERROR, its code; the message ends "(libvirt error N)"). */
void twed_set_libvirt_error (GError **error, const char *what);

G_END_DECLS
