/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/manager.h"
#include "populate/udev.h"

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
	/* Input devices and cards whose sysfs entries now give the persona's node (see populate/udev.h). */
	unsigned int presented;
	/* Why the container's /sys was left as it is, when it was (empty if not). */
	char sysfs_left[96];
	/* The container shares devnsd's /dev (it sees /dev/devns/ already): nothing was made. */
	bool shares_dev;
	/* InputGroup=/VideoGroup= names the container has no group for (its root group was taken). */
	bool input_group_missing, video_group_missing;
	/*
	 * The container shares the host's ids: a group of its /etc/group
	 * counts only at the gid the host gives that name (its root could
	 * name any host group there).
	 */
	bool host_groups;
	/* Groups the container named at another gid than the host's (the configured gid or its root group was taken). */
	bool input_group_foreign, video_group_foreign;
	/*
	 * A mount of the container's that the helper did not look into (a
	 * file system it mounted itself that may not answer: FUSE, say): its
	 * type and place, "" for one mounted after its mount table was read.
	 */
	bool untrusted_mount;
	uint64_t untrusted_id;
	char untrusted_type[16];
	char untrusted_at[112];
	/* The step that failed, when the result is an error. */
	char failed[96];
	/* A node change (populate_node()) of an input device or card: the device its udev event names. */
	bool announce;
	struct udev_node announced;
};

/*
 * The process that forks every populate helper (populate/zygote.c). devnsd
 * starts it first, before it holds any descriptor a client sent: a helper
 * forked from devnsd would inherit those, and closing one can wait for good
 * (a file on a FUSE mount whose server never answers). It keeps nothing of
 * devnsd's but its socket, and ends when devnsd does.
 */
struct zygote;

/* Forks the zygote. */
int zygote_start(struct zygote **ret);
/* Closes devnsd's end (the zygote ends) and reaps it if it has ended. NULL is fine; returns NULL. */
struct zygote *zygote_free(struct zygote *z);
static inline void zygote_freep(struct zygote **z) {
	*z = zygote_free(*z);
}
/*
 * Watches the zygote from event: if it ends before devnsd, this logs it and
 * the loop exits with -ECHILD (a clean one can no longer be forked).
 */
int zygote_watch(struct zygote *z, sd_event *event);

typedef void (*populate_done_fn)(struct persona *p, int r, const struct populate_result *res, void *userdata);

/*
 * Makes persona p's nodes inside the container of the process behind
 * pidfd (reached through the pidfd only: its /proc directory, checked to be
 * that process's), without
 * blocking: a child process does the work and done() is called once it
 * ends (never from inside this call), with r 0 or a negative errno
 * (-ETIMEDOUT after POPULATE_TIMEOUT_USEC, -ECANCELED from
 * populate_cancel()).
 *
 * The nodes are bind mounts of devnsd's own /dev/devns/PERSONA/NAME, at the
 * names a normal system uses (/dev/input/eventN for kind "input",
 * /dev/dri/cardN for "drm", /dev/NAME for the rest: /dev/fb0), or where the
 * persona's DeviceMap= puts them, and at /dev/devns/PERSONA/NAME too (the
 * name their sysfs entry gives udev clients); input nodes and the card get
 * udev data (/run/udev/data/cMAJ:MIN, /run/udev/tags/, /run/udev/control)
 * and, where the container
 * sees the host's sysfs, read-only tmpfs overlays on the hardware's sysfs
 * directory and on /sys/dev/char that present the persona's node there
 * (populate/udev.h). Directories nodes name as
 * shares (the framebuffer's socket) are bound at the same path, and the
 * persona's endpoint directory (p->endpoint_dir) at DEVNS_ENDPOINT_DIR. Sysfs views
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
int populate_start(struct manager *m, struct persona *p, int pidfd, populate_done_fn done, void *userdata);

/*
 * A node of p's came (hotplug) or is going away: its attached container
 * follows, as populate_start() would have made it. With remove, the bind
 * mounts of the node in the container (a character device with the node's
 * number, nothing else) are unmounted, the empty files under them and the
 * node's udev record removed. The node must still be in devnsd's /dev.
 * For an input node whose nd->source names the kernel device, or a card
 * (kind "drm") whose source is the display device, the
 * container's sysfs is made to lead to the node (see populate/udev.h) and,
 * once the container has followed, a udev "add" or "remove" event is sent
 * into its network namespace (populate/uevent.h), so that libinput's udev
 * backend there adds or removes the device.
 *
 * The work is done by a child process as for populate_start(), one change
 * of a persona at a time, in the order asked; done() is called once each
 * ends (from inside this call when it cannot start). Returns 1 when queued,
 * 0 when p is attached to no container, -EBUSY past POPULATE_JOBS_MAX
 * changes in flight, or past p's own share of them (its helpers stopped
 * and not yet ended count there too, against no other persona).
 */
int populate_node(struct manager *m, struct persona *p, const struct node_desc *nd, bool remove,
		  populate_done_fn done, void *userdata);

/*
 * Node changes waiting or running (over every persona), and helpers
 * stopped for their time or cancelled that have not ended yet.
 */
void populate_count(struct manager *m, unsigned int *ret_in_flight, unsigned int *ret_stopped);

/*
 * p left its container, or is removed: its populate and node changes stop;
 * each done() gets -ECANCELED. Also called on the manager's events.leaving,
 * which populate listens to from its first start.
 */
void populate_cancel(struct persona *p);
/* Stops every populate (devnsd exits, events.freeing); each done() that is still owed gets -ECANCELED. */
void populate_stop_all(struct manager *m);

/*
 * Attach: binds p to the pid namespace of the process behind pidfd
 * (manager_attach()), then populates its container, working from that
 * pidfd alone (its /proc directory, its namespaces, its root): no second
 * lookup by number. Once that ends, p->owner takes the container's ids and
 * every class rebinds p's nodes to them, and done() is called. The caller
 * keeps pidfd; populate holds a copy for the container's later changes.
 */
int manager_attach_container(struct manager *m, struct persona *p, int pidfd, populate_done_fn done, void *userdata);

/*
 * Once the bus is up: the containers the last run had personas attached to
 * are attached again (state_restore_attachments()), what fails noted for
 * devnsctl status.
 */
void populate_restore_attachments(struct manager *m);
