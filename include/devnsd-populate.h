/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "devnsd-manager.h"

/* How long making a container's nodes may take before it is stopped. */
#define POPULATE_TIMEOUT_USEC (10 * 1000000ULL)

struct populate_result {
	/* The container's root user and node groups, in host ids. */
	struct persona_owner owner;
	/* Nodes in place in the container (made now, or already there from before). */
	unsigned int made;
	/* Views of a devnsd that died, replaced by the live ones. */
	unsigned int views;
	/* Places where the container had something else: left alone, no node there. */
	unsigned int refused;
	char first_refused[128];
	/* The container shares devnsd's /dev (it sees /dev/devns/ already): nothing was made. */
	bool shares_dev;
	/* InputGroup=/VideoGroup= names the container has no group for (its root group was taken). */
	bool input_group_missing, video_group_missing;
	/* The step that failed, when the result is an error. */
	char failed[96];
};

typedef void (*populate_done_fn)(struct persona *p, int r, const struct populate_result *res, void *userdata);

/*
 * Makes persona p's nodes inside the container of process pid, without
 * blocking: a child process does the work and done() is called once it
 * ends (never from inside this call), with r 0 or a negative errno
 * (-ETIMEDOUT after POPULATE_TIMEOUT_USEC, -ECANCELED from
 * populate_cancel()).
 *
 * The nodes are bind mounts of devnsd's own /dev/devns/PERSONA/NAME, at the
 * names a normal system uses (/dev/input/eventN, /dev/fb0), or where the
 * persona's DeviceMap= puts them, and at /dev/devns/PERSONA/NAME too (the
 * name their sysfs entry gives udev clients); input nodes get udev data
 * (/run/udev/data/cMAJ:MIN, /run/udev/control). Directories nodes name as
 * shares (the framebuffer's socket) are bound at the same path. Sysfs views
 * of a devnsd that died (state_old_view_dev()) that the container had bound
 * are covered by the live view's same directory. A container
 * that shares devnsd's /dev gets no nodes, one that shares its /run no udev
 * data and no binds.
 *
 * The child never runs the container's code and never follows a path the
 * container controls: it reads the container's /etc/group as data, works
 * from fds below the container's root as the container's root user
 * (without devnsd's file capabilities), replaces nothing that is not a node
 * devnsd made, and writes nothing into devnsd's own /dev or /run.
 */
int populate_start(struct manager *m, struct persona *p, pid_t pid, populate_done_fn done, void *userdata);

/* Stops p's populate if one runs; its done() gets -ECANCELED. */
void populate_cancel(struct persona *p);
/* Stops every populate (devnsd exits); each done() that is still owed gets -ECANCELED. */
void populate_stop_all(struct manager *m);

/*
 * Attach: binds p to process pid's pid namespace (manager_attach()), then
 * populates its container; once that ends, p->owner takes the container's
 * ids and every class rebinds p's nodes to them, and done() is called.
 */
int manager_attach_container(struct manager *m, struct persona *p, pid_t pid, populate_done_fn done, void *userdata);
