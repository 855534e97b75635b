/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/*
 * Closing descriptors that a client sent. close() runs the file's flush,
 * which for a FUSE file waits for the FUSE server's answer, uninterruptibly,
 * and a userfaultfd's release waits for the memory-map lock of the process
 * that made it: a container could hold devnsd there for as long as it
 * likes. Such descriptors are closed on a thread of their owner's (a
 * persona's fb0, card0 or endpoint). Callers take no new descriptor for an
 * owner past a quota's max, nor past FD_CLOSER_MAX in all
 * (fd_closer_has_room()); what is queued past them regardless is bounded
 * by the callers (the sockets of a node's connections). A close that
 * waits holds up its owner's other descriptors only; they wait in
 * devnsd's file table meanwhile.
 */
#define FD_CLOSER_MAX 512
/* What one persona may have waiting: FD_CLOSER_MAX is room for this many of each of 64 personas. */
#define FD_CLOSER_PER_OWNER 8

/* One owner's share of the closer, with its thread; it lives on while that thread has descriptors to close. */
struct fd_closer_quota;

/* A share of at most max descriptors waiting at once; NULL without memory. */
struct fd_closer_quota *fd_closer_quota_new(unsigned int max);
/* The owner's end (NULL is fine): what it queued is still closed. Always returns NULL. */
struct fd_closer_quota *fd_closer_quota_unref(struct fd_closer_quota *q);

/* Whether fd_closer_close_for(q, ...) can take n more descriptors now (q NULL: only the closer's own limit). */
bool fd_closer_has_room(struct fd_closer_quota *q, unsigned int n);

/*
 * Closes fd on q's thread (started on first use), counted against q until
 * it is closed; with q NULL, on a thread for devnsd's own descriptors.
 * Takes fd in any case: when that is not possible it stays open, counted,
 * rather than being closed here.
 */
void fd_closer_close_for(struct fd_closer_quota *q, int fd);

/* fd_closer_close_for() with no owner's quota: for devnsd's own descriptors (a userfaultfd it checked). */
void fd_closer_close(int fd);
