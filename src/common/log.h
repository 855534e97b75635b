/* SPDX-License-Identifier: MIT */
#pragma once

#include <syslog.h>

#include "util.h"

/*
 * Who logs.
 *
 * The libraries below the daemon (src/common, src/evdev, src/fb, src/leds,
 * src/cuse, src/fuse, src/backends: the headers in include/) never log. They
 * return 0 or a negative errno and the daemon decides what it means.
 *
 * Every layer of the daemon (src/devnsd/) may log, because every layer runs
 * code from the event loop: a CUSE open, a FUSE write, a device that comes,
 * a timer, a bus call. A failure is logged once, with its reason, by the
 * code that knows the reason and deals with the failure:
 *  - event callbacks (sd-event sources, sd-bus methods and replies, CUSE and
 *    FUSE requests, listeners, completions) have no caller to return an
 *    error to: they log what failed and why, and a client gets the error as
 *    well when it asked for something;
 *  - the functions that build the daemon or one of its parts (main's
 *    start-up calls, each class's add_persona op and the helpers they share
 *    with hotplug) log what failed and return the error, since only they
 *    know which step it was; their headers say "Logs what fails", and their
 *    callers pass the error on or act on it without logging it again;
 *  - any other function that returns a negative errno does not log it: its
 *    caller does, or passes it on.
 * Not failures, and logged where they happen: what devnsd did (info: a
 * switch, a persona created, a device added), what it refused a client
 * (notice, rate-limited or once per client: the client gets the error, the
 * administrator the reason), and debug messages.
 *
 * Checks anyone can run: the first prints nothing; the second lists the
 * functions that log a failure and return it, each of them one of the
 * builders above.
 *   git grep -nE '\blog_[a-z_]+\(' -- src include ':!src/devnsd' ':!src/common/log.c' ':!src/common/log.h'
 *   git grep -p 'return log_' -- src/devnsd | grep -E '^[^:]+='
 */

void log_setup(const char *ident);
void log_set_max_level(int level);

/* Logs at a syslog level; with error != 0, "%m" means strerror(error). Returns -|error|. */
int log_full_errno(int level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, (e), __VA_ARGS__)
