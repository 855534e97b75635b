/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <systemd/sd-event.h>

/*
 * devnsd's main loop: sd-event runs everything, and beside it the input
 * path's descriptors (evdev devices, the input nodes' CUSE sessions) are
 * polled from one epoll set together with sd-event's own, and dispatched
 * straight from it.
 *
 * A packet on the input path touches nothing but the input class's
 * queues and the kernel's CUSE connection. Such a dispatch returns
 * LOOP_QUIET, and sd-event is not woken for it: no prepare, no clock
 * reads, no wait of its own. Any other return makes sd-event look at
 * itself again (prepare, then whatever became pending) before the loop
 * sleeps, so a handler that returns 0 may use sd-event and sd-bus as
 * freely as any source of sd-event's. What it must not use is
 * sd_event_now(): sd-event's time is that of its own last wakeup, which
 * may be long past; loop_now() gives the time of this one.
 *
 * A handler that returns LOOP_QUIET promises that it enabled, added or
 * changed no sd-event source and sent nothing on a bus: sd-event would
 * not see that until something of its own woke it.
 */
struct loop;
struct loop_io;

#define LOOP_QUIET 1

/*
 * revents as epoll_wait() gives them. Returns LOOP_QUIET, or 0 otherwise;
 * a negative errno turns the io off, as sd-event does with a source
 * whose handler fails (the handler logs why).
 */
typedef int (*loop_io_handler_t)(struct loop_io *io, uint32_t revents, void *userdata);

int loop_new(struct loop **ret, sd_event *event);
struct loop *loop_free(struct loop *l);
sd_event *loop_event(struct loop *l);

/* Runs until sd_event_exit(); returns the exit code it was given, or a negative errno. */
int loop_run(struct loop *l);
/*
 * One iteration, waiting at most timeout_ms (-1: for ever) for something
 * to do: 1 when something was dispatched, 0 when nothing was ready (sd-event
 * is then as sd_event_run() leaves it, for a caller that also runs that
 * directly), or a negative errno.
 */
int loop_iterate(struct loop *l, int timeout_ms);

/*
 * Watches fd (level-triggered, for events) and calls fn from the loop;
 * on from the start. The fd stays the caller's: close it only after
 * loop_io_free().
 */
int loop_add_io(struct loop *l, struct loop_io **ret, int fd, uint32_t events, loop_io_handler_t fn,
		void *userdata);
/* Cannot fail for an io that was added. */
int loop_io_set_enabled(struct loop_io *io, bool enabled);
bool loop_io_get_enabled(const struct loop_io *io);
/* From anywhere, a handler included (even its own io's): fn is not called again. Always returns NULL. */
struct loop_io *loop_io_free(struct loop_io *io);

/*
 * The time of this wakeup of the loop on clock (CLOCK_MONOTONIC,
 * CLOCK_REALTIME or CLOCK_BOOTTIME), read at the first call after each
 * wakeup and each sd-event dispatch.
 */
int loop_now(struct loop *l, clockid_t clock, uint64_t *ret_usec);

static inline void loop_freep(struct loop **l) {
	loop_free(*l);
}
