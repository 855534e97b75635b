/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/*
 * A pid namespace, held open: while the fd is open the namespace exists,
 * so its identity (device and inode of its nsfs file) cannot be reused.
 */
struct pidns {
	int fd;
	dev_t dev;
	ino_t ino;
};

#define PIDNS_NULL ((struct pidns){ .fd = -1 })
/* How deep nested namespaces are followed. */
#define PIDNS_MAX_DEPTH 32

/* The pid namespace of process (or thread) pid, as this process numbers it. */
int pidns_of_pid(pid_t pid, struct pidns *ret);
/* The pid namespace of the process behind pidfd: no lookup by number that another process could answer. */
int pidns_of_pidfd(int pidfd, struct pidns *ret);
void pidns_close(struct pidns *ns);

static inline bool pidns_equal(const struct pidns *a, const struct pidns *b) {
	return a->fd >= 0 && b->fd >= 0 && a->dev == b->dev && a->ino == b->ino;
}

/*
 * Walks from ns up its ancestors (ns itself first, then NS_GET_PARENT) as
 * far as this process can see, calling match() on each. Returns the depth
 * (0 for ns itself) of the first one matched, or -ENOENT.
 */
int pidns_find_ancestor(const struct pidns *ns, bool (*match)(void *userdata, const struct pidns *ns),
			void *userdata);
