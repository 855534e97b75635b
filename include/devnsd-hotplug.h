/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

/*
 * Watches the kernel's input subsystem for evdev devices (eventN) that
 * appear and go away. With udevd running, its events drive the watch (the
 * node then has its final permissions); without udevd, the kernel's own
 * uevents do (devtmpfs has made the node by the time the kernel announces
 * it).
 */
struct hotplug;

struct hotplug_ops {
	/* An evdev device appeared: its sysfs path and its node (/dev/input/eventN). */
	void (*added)(void *userdata, const char *syspath, const char *devnode);
	/* It went away. */
	void (*removed)(void *userdata, const char *syspath, const char *devnode);
};

/* Starts watching on the event loop. Nothing is reported for devices present before. */
int hotplug_new(struct hotplug **ret, sd_event *event, const struct hotplug_ops *ops, void *userdata);
struct hotplug *hotplug_free(struct hotplug *h);
static inline void hotplug_freep(struct hotplug **h) {
	hotplug_free(*h);
}

/* Which netlink group drives the watch: "udev" or "kernel". */
const char *hotplug_source(const struct hotplug *h);
