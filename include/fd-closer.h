/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/*
 * Closing descriptors that a client sent. close() runs the file's flush,
 * which for a FUSE file waits for the FUSE server's answer: a container
 * serving its own FUSE file system could hold devnsd there for as long as
 * it likes. Such descriptors are closed on a thread of their own, at most
 * FD_CLOSER_MAX waiting or being closed at once.
 */
#define FD_CLOSER_MAX 16

/* Whether fd_closer_close() can take one more descriptor now. */
bool fd_closer_has_room(void);

/*
 * Closes fd on the closer thread (started on first use). Takes fd in any
 * case: when that is not possible it stays open, counted against
 * FD_CLOSER_MAX, rather than being closed here.
 */
void fd_closer_close(int fd);
