/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "evdev-node.h"
#include "loop.h"

/* An evdev node served as a CUSE character device. */
struct cuse_evdev;

/* Bounds on what one open handle can have outstanding. */
#define CUSE_EVDEV_MAX_PENDING_READS 16

struct cuse_evdev_hooks {
	/* The node exists in /dev. */
	void (*ready)(void *userdata);
	/* Optional: may this process open the node? 0, or a negative errno to refuse. */
	int (*may_open)(void *userdata, pid_t pid);
	/*
	 * For a routed node (created with node NULL): the evdev node this
	 * process gets, decided at open, and whose share of the node the
	 * handle takes (see cuse_device_set_shares(); from 1); or a negative
	 * errno to refuse.
	 */
	int (*route)(void *userdata, pid_t pid, struct evdev_node **ret, uint32_t *ret_owner);
};

/*
 * Creates /dev/DEVNAME with the given numbers (0, 0: any), polled by loop:
 * reads and polls are answered straight from it. node NULL makes a
 * routed node. Each open is a client of the evdev node opened as the
 * request's uid, so EVDEV_NODE_MAX_CLIENTS_PER_UID holds per user.
 */
int cuse_evdev_new(struct cuse_evdev **ret, struct loop *loop, const char *devname, unsigned int major,
		   unsigned int minor, struct evdev_node *node, const struct cuse_evdev_hooks *hooks, void *userdata);
/*
 * Answers every blocked reader with ENODEV and removes the node. The evdev
 * node stays. For a routed node, its handles must have been closed through
 * cuse_evdev_close_node() first.
 */
struct cuse_evdev *cuse_evdev_free(struct cuse_evdev *ce);
/*
 * Frees it as its device goes (unplugged, its persona removed): the node
 * leaves /dev at once, and the handles still open get ENODEV until they are
 * closed (cuse_device_retire(); group: the persona's name).
 */
struct cuse_evdev *cuse_evdev_retire(struct cuse_evdev *ce, const char *group);
static inline void cuse_evdev_freep(struct cuse_evdev **ce) {
	cuse_evdev_free(*ce);
}

/*
 * Ends every handle this CUSE node holds on evdev node n (which is going
 * away, or whose persona left its container): blocked reads get ENODEV,
 * poll waiters are woken and see POLLERR|POLLHUP, and from then on read,
 * write and ioctl get ENODEV. Their evdev clients are closed (a grab goes
 * with them), so they take no place on n any more. The handles stay open
 * until their owners close them.
 */
void cuse_evdev_close_node(struct cuse_evdev *ce, struct evdev_node *n);

/* Splits a routed node's handles and requests among n owners; see cuse_device_set_shares(). */
int cuse_evdev_set_shares(struct cuse_evdev *ce, unsigned int n);
/* The node's owner and mode in /dev; see cuse_device_set_owner(). */
int cuse_evdev_set_owner(struct cuse_evdev *ce, uid_t uid, gid_t gid, mode_t mode);
/* Notes the node's udev properties with its connection, for a restart that finds the device gone. */
void cuse_evdev_set_note(struct cuse_evdev *ce, const char *note);

/* The evdev node's wakeup(): answers blocked reads and poll waiters of that client. */
void cuse_evdev_wakeup(struct cuse_evdev *ce, struct evdev_client *c);
