/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/*
 * File descriptors that outlive devnsd: the framebuffers' memfds, the
 * state record, and the CUSE connections of the nodes with their records. Under systemd they go to the service's fd store (FDSTORE=1,
 * FDNAME=) and come back through $LISTEN_FDS/$LISTEN_FDNAMES; devnsd uses
 * it when $FDSTORE says the service has one. Otherwise a small holder
 * process, forked from devnsd and reached through a root-only socket in
 * the state directory, keeps them until devnsd comes back or stops cleanly;
 * while no devnsd is connected to it, it closes the CUSE connections
 * after FDSTORE_HOLD_CUSE_SEC, so that the nodes' clients stop waiting.
 */
struct fdstore;

/* Names are 1 to FDSTORE_NAME_MAX of [A-Za-z0-9_.-]; at most FDSTORE_MAX are kept. */
#define FDSTORE_NAME_MAX 64
#define FDSTORE_MAX 1024
/* The holder's grace for CUSE connections, kept under names starting with FDSTORE_CUSE_PREFIX. */
#define FDSTORE_HOLD_CUSE_SEC 30
#define FDSTORE_CUSE_PREFIX "cuse."
/* The holder's socket, in the state directory. */
#define FDSTORE_SOCKET "fdstore"

/*
 * Collects what the last run kept (from $LISTEN_FDS, or from the holder in
 * dir), and starts a holder when there is none and no systemd fd store.
 * Call before any device is opened: the holder must not inherit one.
 */
int fdstore_new(struct fdstore **ret, const char *dir);
/* Closes what was not taken; the store itself keeps everything. */
struct fdstore *fdstore_free(struct fdstore *s);
static inline void fdstore_freep(struct fdstore **s) {
	fdstore_free(*s);
}

/* systemd's fd store ("systemd") or the holder ("holder"). */
const char *fdstore_kind(const struct fdstore *s);

/* Hands over the fd the last run kept under name (-ENOENT if none); the store keeps its own. */
int fdstore_take(struct fdstore *s, const char *name, int *ret_fd);

/*
 * Keeps fd (duplicated) under name, replacing what was kept under it, and
 * what the last run kept under it. -ENOSPC when the store is full.
 */
int fdstore_put(struct fdstore *s, const char *name, int fd);
/* How many more names the store can keep. */
size_t fdstore_room(const struct fdstore *s);
/* Forgets name. */
int fdstore_remove(struct fdstore *s, const char *name);
/* Returns once what was forgotten is closed (at most about 2 s). */
void fdstore_sync(struct fdstore *s);
/* Forgets and closes what the last run kept under names starting with prefix and this run did not take. */
void fdstore_drop_left_over(struct fdstore *s, const char *prefix);
/* Forgets everything (devnsd stops cleanly); the holder exits. */
void fdstore_clear(struct fdstore *s);

/* The names received from the last run and not taken (logging what is left over); NULL after the last. */
const char *fdstore_left_over(const struct fdstore *s, size_t i);
