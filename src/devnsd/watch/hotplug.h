/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

/*
 * Watches kernel subsystems for devices that appear and go away. With
 * udevd running, its events drive the watch (a node then has its final
 * permissions); without udevd, the kernel's own uevents do (devtmpfs has
 * made a node by the time the kernel announces its device).
 */
struct hotplug;

/* A device as an event names it. */
struct hotplug_device {
	const char *subsystem;
	const char *sysname;
	const char *syspath;
	/* Its node in /dev, or NULL. */
	const char *devnode;
};

struct hotplug_ops {
	void (*added)(void *userdata, const struct hotplug_device *dev);
	void (*removed)(void *userdata, const struct hotplug_device *dev);
	/* Optional: the device changed ("change": a DRM device's connector plugged in or out). */
	void (*changed)(void *userdata, const struct hotplug_device *dev);
};

/*
 * Starts watching the subsystems (a NULL-terminated list) on the event
 * loop. Nothing is reported for devices present before.
 */
int hotplug_new(struct hotplug **ret, sd_event *event, const char *const *subsystems, const char *description,
		const struct hotplug_ops *ops, void *userdata);
struct hotplug *hotplug_free(struct hotplug *h);
static inline void hotplug_freep(struct hotplug **h) {
	hotplug_free(*h);
}

/* Which netlink group drives the watch: "udev" or "kernel". */
const char *hotplug_source(const struct hotplug *h);
