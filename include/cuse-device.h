/* SPDX-License-Identifier: MIT */
#pragma once

#define FUSE_USE_VERSION 35
#include <cuse_lowlevel.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/*
 * One CUSE character device served from the sd-event loop: its /dev/cuse
 * session fd is an event source, requests are processed as they arrive,
 * and freeing it removes the node.
 */
struct cuse_device;

/*
 * Creates /dev/DEVNAME (e.g. "devns/work/event3") with the given operations;
 * fuse_req_userdata() returns userdata. major 0 asks the kernel for one.
 * The node exists once ops->init_done has been called.
 */
int cuse_device_new(struct cuse_device **ret, sd_event *event, const char *devname, unsigned int major,
		    unsigned int minor, const struct cuse_lowlevel_ops *ops, void *userdata);
struct cuse_device *cuse_device_free(struct cuse_device *d);

/* Tries to give the node in /dev its owner this long after the first attempt found no node. */
#define CUSE_OWNER_RETRY_USEC (10 * 1000000ULL)

/*
 * Gives the node in /dev owner uid:gid and mode (permission bits). The
 * kernel makes the node (devtmpfs) once the device is set up; until it is
 * there, this is retried from the event loop for up to
 * CUSE_OWNER_RETRY_USEC. The node is reached below /dev through no
 * symlink, and is changed only when it is a character device with the
 * device's number. Returns 0 once applied, -ENOENT while waiting for the
 * node, or another negative errno (nothing is retried then).
 */
int cuse_device_set_owner(struct cuse_device *d, uid_t uid, gid_t gid, mode_t mode);
static inline void cuse_device_freep(struct cuse_device **d) {
	cuse_device_free(*d);
}
