/* SPDX-License-Identifier: MIT */
#pragma once

#define FUSE_USE_VERSION 35
#include <cuse_lowlevel.h>
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
static inline void cuse_device_freep(struct cuse_device **d) {
	cuse_device_free(*d);
}
