/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Included first in every source of twedd-tsan (the daemon built with
 * ThreadSanitizer), never elsewhere.
 *
 * GLib is not built with ThreadSanitizer: its GMutex and GCond are
 * futexes and its atomics are not instrumented, so TSan sees none of the
 * ordering they give, and would report every access that a GMutex, a
 * GThreadPool hand-off or a source attached to another thread's context
 * orders.  These wrappers tell TSan what GLib guarantees, at the calls
 * the daemon makes:
 * - g_mutex_unlock releases what g_mutex_lock (or a successful
 *   g_mutex_trylock) then acquires; g_cond_wait_until releases and
 *   acquires its mutex around the wait;
 * - g_thread_pool_push releases what the pool's function, running the
 *   item, acquires;
 * - g_source_set_callback releases what the callback and its destroy
 *   notify, wherever the source is dispatched, acquire;
 * - g_once_init_leave releases what g_once_init_enter acquires;
 * - g_atomic_rc_box_release_full releases what the clear function of the
 *   last release acquires.
 * Nothing else is assumed: what GLib does inside (its own locking, its
 * memory) is left to TSAN_OPTIONS=ignore_noninstrumented_modules=1. */
#pragma once

#include <glib.h>
#include <sanitizer/tsan_interface.h>

static inline void
twed_tsan_mutex_lock (GMutex *m)
{
  (g_mutex_lock) (m);
  __tsan_acquire (m);
}

static inline gboolean
twed_tsan_mutex_trylock (GMutex *m)
{
  gboolean locked = (g_mutex_trylock) (m);

  if (locked)
    __tsan_acquire (m);
  return locked;
}

static inline void
twed_tsan_mutex_unlock (GMutex *m)
{
  __tsan_release (m);
  (g_mutex_unlock) (m);
}

static inline gboolean
twed_tsan_cond_wait_until (GCond *c, GMutex *m, gint64 end)
{
  gboolean signalled;

  __tsan_release (m);
  signalled = (g_cond_wait_until) (c, m, end);
  __tsan_acquire (m);
  return signalled;
}

/* The pool's function and data, behind the one the pool runs.  Kept for
 * the pool's lifetime (the process's, in twedd). */
typedef struct {
  GFunc func;
  gpointer data;
} TwedTsanPoolFunc;

static inline void
twed_tsan_pool_run (gpointer item, gpointer data)
{
  TwedTsanPoolFunc *f = data;

  __tsan_acquire (item);
  f->func (item, f->data);
}

static inline GThreadPool *
twed_tsan_thread_pool_new (GFunc func, gpointer data, gint max_threads, gboolean exclusive, GError **error)
{
  TwedTsanPoolFunc *f = g_new (TwedTsanPoolFunc, 1);

  f->func = func;
  f->data = data;
  return (g_thread_pool_new) (twed_tsan_pool_run, f, max_threads, exclusive, error);
}

static inline gboolean
twed_tsan_thread_pool_push (GThreadPool *pool, gpointer item, GError **error)
{
  __tsan_release (item);
  return (g_thread_pool_push) (pool, item, error);
}

typedef struct {
  GSourceFunc func;
  gpointer data;
  GDestroyNotify notify;
} TwedTsanCallback;

static inline gboolean
twed_tsan_callback_run (gpointer p)
{
  TwedTsanCallback *c = p;

  __tsan_acquire (c);
  return c->func (c->data);
}

static inline void
twed_tsan_callback_free (gpointer p)
{
  TwedTsanCallback *c = p;

  __tsan_acquire (c);
  if (c->notify)
    c->notify (c->data);
  g_free (c);
}

static inline void
twed_tsan_source_set_callback (GSource *src, GSourceFunc func, gpointer data, GDestroyNotify notify)
{
  TwedTsanCallback *c = g_new (TwedTsanCallback, 1);

  c->func = func;
  c->data = data;
  c->notify = notify;
  __tsan_release (c);
  (g_source_set_callback) (src, twed_tsan_callback_run, c, twed_tsan_callback_free);
}

/* The clear function of the release in progress on this thread: GLib
 * calls it from inside the release, on the releasing thread. */
static __thread GDestroyNotify twed_tsan_clear_func;

static inline void
twed_tsan_clear (gpointer box)
{
  GDestroyNotify clear = twed_tsan_clear_func;

  __tsan_acquire (box);
  if (clear)
    clear (box);
}

static inline void
twed_tsan_rc_box_release_full (gpointer box, GDestroyNotify clear)
{
  __tsan_release (box);
  twed_tsan_clear_func = clear;
  (g_atomic_rc_box_release_full) (box, twed_tsan_clear);
}

#define g_mutex_lock(m) twed_tsan_mutex_lock (m)
#define g_mutex_trylock(m) twed_tsan_mutex_trylock (m)
#define g_mutex_unlock(m) twed_tsan_mutex_unlock (m)
#define g_cond_wait_until(c, m, end) twed_tsan_cond_wait_until ((c), (m), (end))
#define g_thread_pool_new(func, data, max, exclusive, error) \
  twed_tsan_thread_pool_new ((GFunc) (func), (data), (max), (exclusive), (error))
#define g_thread_pool_push(pool, item, error) twed_tsan_thread_pool_push ((pool), (item), (error))
#define g_source_set_callback(src, func, data, notify) \
  twed_tsan_source_set_callback ((src), (GSourceFunc) (func), (data), (notify))

#define g_atomic_rc_box_release_full(box, clear) \
  twed_tsan_rc_box_release_full ((box), (GDestroyNotify) (clear))

#undef g_once_init_enter
#define g_once_init_enter(location)                                            \
  (G_GNUC_EXTENSION ({                                                          \
    gboolean twed_tsan_enter_ = !g_atomic_pointer_get (location) &&             \
                                (g_once_init_enter) (location);                 \
    __tsan_acquire ((void *) (location));                                       \
    twed_tsan_enter_;                                                           \
  }))
#undef g_once_init_leave
#define g_once_init_leave(location, result)                                    \
  (G_GNUC_EXTENSION ({                                                          \
    __tsan_release ((void *) (location));                                       \
    (g_once_init_leave) ((location), (gsize) (result));                         \
  }))
