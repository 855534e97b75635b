/* SPDX-License-Identifier: MIT */
/*
 * The input class as devnsd runs it: the evdev devices [Input] Devices=
 * names, and persona nodes served over CUSE. State and switching are in
 * input/class.c.
 */
#include <glob.h>
#include <limits.h>
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuse-evdev.h"
#include "input/hotplug.h"
#include "input/input.h"
#include "evdev-node.h"
#include "input-backend.h"
#include "log.h"

static struct manager *manager_of(struct input_device *d) {
	return d->class->base.manager;
}

/* The host's node belongs to the persona's container: its root, and its input group. */
static void node_set_owner(struct input_node *in) {
	const struct persona_owner *o = &in->persona->owner;
	int r = cuse_evdev_set_owner(in->cuse, o->uid, o->input_gid, 0660);

	if (r < 0 && r != -ENOENT)
		log_warning_errno(r, "%s: cannot give the node to %u:%u: %m", in->path, (unsigned int)o->uid,
				  (unsigned int)o->input_gid);
}

static void node_ready(void *userdata) {
	struct input_node *in = userdata;

	if (in->ready)
		return;
	in->ready = true;
	log_debug("%s: ready", in->path);
	node_set_owner(in);
	manager_node_ready(manager_of(in->device), in->persona);
	if (in->device->hotplugged)
		input_hotplug_node_ready(in);
}

static int node_may_open(void *userdata, pid_t pid) {
	struct input_node *in = userdata;

	return manager_check_access(manager_of(in->device), in->persona, pid);
}

static const struct cuse_evdev_hooks node_hooks = {
	.ready = node_ready,
	.may_open = node_may_open,
};

static int cuse_node_added(struct input_node *in) {
	struct manager *m = manager_of(in->device);
	unsigned int major, minor;
	int r;

	manager_node_numbers(m, in->path + strlen("/dev/"), &major, &minor);
	r = cuse_evdev_new(&in->cuse, m->loop, in->path + strlen("/dev/"), major, minor, in->evdev, &node_hooks, in);
	if (r < 0)
		return r;
	/* A restart that finds the device gone tells the container with these. */
	cuse_evdev_set_note(in->cuse, in->device->udev);
	manager_node_added(m, in->persona);
	return 0;
}

static void cuse_node_removed(struct input_node *in) {
	if (in->device->routed)
		cuse_evdev_close_node(in->device->routed, in->evdev);
	/* A node of a device that went before its node came is not waited for. */
	if (!in->ready && in->device->gone)
		manager_node_ready(manager_of(in->device), in->persona);
	/* Its handles get ENODEV until they are closed, as from the kernel's evdev. */
	in->cuse = cuse_evdev_retire(in->cuse, in->persona->name);
}

static void cuse_wakeup(struct input_node *in, struct evdev_client *c) {
	if (in->cuse)
		cuse_evdev_wakeup(in->cuse, c);
}

static void cuse_rebind(struct input_node *in, bool revoke) {
	if (in->ready)
		node_set_owner(in);
	if (!revoke)
		return;
	/* Every handle on the node, also those opened through the routed node. */
	cuse_evdev_close_node(in->cuse, in->evdev);
	if (in->device->routed)
		cuse_evdev_close_node(in->device->routed, in->evdev);
}

static void routed_ready(void *userdata) {
	struct input_device *d = userdata;

	if (d->routed_ready)
		return;
	d->routed_ready = true;
	manager_node_ready(manager_of(d), NULL);
}

/* The persona of the opener's container; host processes get the active persona's node. */
static int routed_route(void *userdata, pid_t pid, struct evdev_node **ret, uint32_t *ret_owner) {
	struct input_device *d = userdata;
	struct input_node *in;
	struct persona *p;
	int r;

	r = manager_route(manager_of(d), d->routed_path, pid, &p, ret_owner);
	if (r < 0)
		return r;
	in = input_node_of(d, p);
	if (!in)
		return -ENODEV;
	*ret = in->evdev;
	return 0;
}

static const struct cuse_evdev_hooks routed_hooks = {
	.ready = routed_ready,
	.route = routed_route,
};

static int cuse_device_added(struct input_device *d) {
	_cleanup_(freep) char *sys = NULL;
	struct manager *m = manager_of(d);
	unsigned int major, minor;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/sys/class/input/%s", d->backend->name);
	sys = realpath(path, NULL);
	snprintf(d->syspath, sizeof(d->syspath), "%s", sys ? sys : "");

	if (!m->conf->routed)
		return 0;
	snprintf(d->routed_path, sizeof(d->routed_path), "/dev/%s/%s", DEVNS_DEV_DIR, d->backend->name);
	manager_node_numbers(m, d->routed_path + strlen("/dev/"), &major, &minor);
	/* Not logged here: the device is not added, and whoever added it says so. */
	r = cuse_evdev_new(&d->routed, m->loop, d->routed_path + strlen("/dev/"), major, minor, NULL,
			   &routed_hooks, d);
	if (r < 0)
		return r;
	/* One persona's handles and requests never take another's place. */
	r = cuse_evdev_set_shares(d->routed, ROUTED_SHARES);
	if (r < 0)
		return r;
	manager_node_added(m, NULL);
	return 0;
}

static void cuse_device_removed(struct input_device *d) {
	if (d->routed && !d->routed_ready && d->gone)
		manager_node_ready(manager_of(d), NULL);
	d->routed = cuse_evdev_retire(d->routed, NULL);
}

static const struct input_transport_ops cuse_transport = {
	.device_added = cuse_device_added,
	.node_added = cuse_node_added,
	.node_removed = cuse_node_removed,
	.wakeup = cuse_wakeup,
	.rebind = cuse_rebind,
	.device_removed = cuse_device_removed,
};

static bool device_known(struct input_class *ic, const char *path) {
	_cleanup_(freep) char *real = realpath(path, NULL);
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link) {
		_cleanup_(freep) char *other = realpath(d->backend->path, NULL);
		if (real && other && streq(real, other))
			return true;
	}
	return false;
}

static int open_input(struct input_class *ic, const char *path) {
	struct input_backend *b;
	int r;

	if (device_known(ic, path))
		return 0;
	r = input_evdev_open(path, &b);
	if (r == -ENOTTY)
		return log_error_errno(r, "%s: not an evdev input device", path);
	if (r == -EBUSY)
		return log_error_errno(r, "%s: another program has grabbed the device", path);
	if (r < 0)
		return log_error_errno(r, "%s: cannot open: %m", path);
	log_info("%s: %s", path, libevdev_get_name(b->desc));
	r = input_class_add_device(ic, b, NULL);
	if (r < 0)
		return log_error_errno(r, "%s: cannot watch the device: %m", path);
	return 0;
}

int input_class_new(struct manager *m, const struct conf *conf, struct input_class **ret) {
	struct input_class *ic;
	int r;

	r = input_class_new_core(m, &cuse_transport, &ic);
	if (r < 0)
		return log_error_errno(r, "Cannot set up the input class: %m");
	r = input_state_register(ic);
	if (r < 0) {
		ic->base.ops->free(&ic->base);
		return log_error_errno(r, "Cannot keep the input class's state for a restart: %m");
	}
	for (size_t i = 0; i < conf->input.n_patterns && r >= 0; i++) {
		const char *pattern = conf->input.patterns[i];
		glob_t g = { 0 };

		if (glob(pattern, GLOB_NOCHECK, NULL, &g) != 0) {
			r = log_error_errno(ENOMEM, "%s: cannot expand the pattern", pattern);
			globfree(&g);
			break;
		}
		for (size_t j = 0; j < g.gl_pathc && r >= 0; j++) {
			const char *path = g.gl_pathv[j];
			/*
			 * A pattern that matches nothing, or a path with nothing there (a
			 * device unplugged, maybe while devnsd was down), is shared when a
			 * device appears there (hotplug).
			 */
			if (streq(path, pattern) && access(path, F_OK) < 0) {
				log_warning("%s: %s; shared when it appears", pattern,
					    strpbrk(pattern, "*?[") ? "matches no device" : "no device there");
				continue;
			}
			r = open_input(ic, path);
		}
		globfree(&g);
	}
	if (r < 0) {
		ic->base.ops->free(&ic->base);
		return r;
	}
	*ret = ic;
	return 0;
}

struct input_device *input_find_by_sysfs(struct input_class *ic, const char *kdev) {
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link)
		if (!d->gone && d->kdev[0] && streq(d->kdev, kdev))
			return d;
	return NULL;
}

bool input_kdev_evdev(const char *kdev, char *devnode, size_t size) {
	char pattern[PATH_MAX];
	glob_t g = { 0 };
	bool found = false;

	if (snprintf(pattern, sizeof(pattern), "%s/event*", kdev) >= (int)sizeof(pattern))
		return false;
	if (glob(pattern, 0, NULL, &g) == 0)
		found = snprintf(devnode, size, "/dev/input/%s", strrchr(g.gl_pathv[0], '/') + 1) < (int)size;
	globfree(&g);
	return found;
}

bool input_class_owns(struct input_class *ic, const char *kdev) {
	char devnode[64];

	if (input_find_by_sysfs(ic, kdev))
		return true;
	return input_kdev_evdev(kdev, devnode, sizeof(devnode)) && input_conf_wants(ic->base.manager->conf, devnode);
}
