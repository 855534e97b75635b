/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-device.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "watch/hotplug.h"
#include "util.h"

/* The kernel's uevent multicast group; udevd re-sends processed events on group 2. */
#define UEVENT_GROUP_KERNEL 1
/* Bursts of uevents (a hub with many devices) fit without loss. */
#define HOTPLUG_RCVBUF (4 * 1024 * 1024)

struct hotplug {
	sd_device_monitor *monitor;
	const struct hotplug_ops *ops;
	void *userdata;
	bool kernel;
};

/*
 * udevd's events reach only its own network namespace: devnsd hears them
 * when udevd runs and devnsd shares pid 1's network namespace (not under
 * PrivateNetwork=). The kernel's own events reach every namespace.
 */
static bool udevd_heard(void) {
	struct stat self, init;

	if (access("/run/udev/control", F_OK) < 0)
		return false;
	if (stat("/proc/self/ns/net", &self) < 0 || stat("/proc/1/ns/net", &init) < 0)
		return false;
	return self.st_dev == init.st_dev && self.st_ino == init.st_ino;
}

static int on_device(sd_device_monitor *monitor, sd_device *dev, void *userdata) {
	struct hotplug *h = userdata;
	struct hotplug_device d = { 0 };
	const char *action;

	(void)monitor;
	if (sd_device_get_subsystem(dev, &d.subsystem) < 0 || sd_device_get_sysname(dev, &d.sysname) < 0 ||
	    sd_device_get_syspath(dev, &d.syspath) < 0 || sd_device_get_property_value(dev, "ACTION", &action) < 0)
		return 0;
	if (sd_device_get_devname(dev, &d.devnode) < 0)
		d.devnode = NULL;
	if (streq(action, "add"))
		h->ops->added(h->userdata, &d);
	else if (streq(action, "remove"))
		h->ops->removed(h->userdata, &d);
	else if (streq(action, "change") && h->ops->changed)
		h->ops->changed(h->userdata, &d);
	return 0;
}

int hotplug_new(struct hotplug **ret, sd_event *event, const char *const *subsystems, const char *description,
		const struct hotplug_ops *ops, void *userdata) {
	_cleanup_(hotplug_freep) struct hotplug *h = NULL;
	int r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->ops = ops;
	h->userdata = userdata;
	r = sd_device_monitor_new(&h->monitor);
	if (r < 0)
		return r;
	(void)sd_device_monitor_set_description(h->monitor, description);
	(void)sd_device_monitor_set_receive_buffer_size(h->monitor, HOTPLUG_RCVBUF);
	for (size_t i = 0; subsystems[i]; i++) {
		r = sd_device_monitor_filter_add_match_subsystem_devtype(h->monitor, subsystems[i], NULL);
		if (r < 0)
			return r;
	}
	r = sd_device_monitor_attach_event(h->monitor, event);
	if (r < 0)
		return r;
	r = sd_device_monitor_start(h->monitor, on_device, h);
	if (r < 0)
		return r;
	if (!udevd_heard()) {
		/* No udevd events come here: listen to the kernel's directly, as udevd itself does. */
		int group = UEVENT_GROUP_KERNEL;
		int fd = sd_event_source_get_io_fd(sd_device_monitor_get_event_source(h->monitor));

		if (fd < 0)
			return fd;
		if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0)
			return -errno;
		h->kernel = true;
	}
	*ret = TAKE_PTR(h);
	return 0;
}

struct hotplug *hotplug_free(struct hotplug *h) {
	if (!h)
		return NULL;
	sd_device_monitor_unref(h->monitor);
	free(h);
	return NULL;
}

const char *hotplug_source(const struct hotplug *h) {
	return h->kernel ? "kernel" : "udev";
}
