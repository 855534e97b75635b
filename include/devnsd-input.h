/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/queue.h>

#include "devnsd-manager.h"
#include "evdev-state.h"

struct input_backend;
struct evdev_node;
struct cuse_evdev;
struct input_node;
struct hotkey;

/* One hardware input device and the nodes every persona has for it. */
struct input_device {
	struct input_class *class;
	struct input_backend *backend;
	sd_event_source *source;
	/* What the hardware reports, folded up: the state a persona resyncs to. */
	struct evdev_state hw;
	struct input_node *active;
	/* /dev/devns/eventN, whose opener's persona decides what it gets. */
	struct cuse_evdev *routed;
	/* Switch chords on this device, and the [Daemon] SwitchKeys= entry of each. */
	struct hotkey *hotkey;
	size_t chord_conf[CONF_MAX_SWITCH_KEYS];
	/* udev properties for the device, for containers' udev data. */
	char udev[256];
	char routed_path[64];
	bool routed_ready;
	LIST_HEAD(, input_node) nodes;
	LIST_ENTRY(input_device) link;
};

/* A persona's /dev/devns/PERSONA/eventN. */
struct input_node {
	struct input_device *device;
	struct persona *persona;
	struct evdev_node *evdev;
	struct cuse_evdev *cuse;
	char path[64 + NAME_MAX_LEN];
	bool ready;
	LIST_ENTRY(input_node) by_device;
};

struct input_class {
	struct device_class base;
	LIST_HEAD(, input_device) devices;
};

/*
 * devnsd-input.c: the evdev input class, over the devices [Input]
 * Devices= names. Register it with manager_add_class(&ic->base).
 */
int input_class_new(struct manager *m, const struct conf *conf, struct input_class **ret);

/*
 * The owned input device whose kernel device is sysfs_dir (as
 * /sys/class/input/eventN/device names it, e.g. .../input0), or NULL.
 */
struct input_device *input_find_by_sysfs(struct input_class *ic, const char *sysfs_dir);

/* Persona p's view of an LED of the device: 0 or 1; -ENOENT without a node, -EINVAL without that LED. */
int input_led_get(struct input_device *d, struct persona *p, unsigned int code);

/*
 * Sets an LED in persona p's view, as an EV_LED write on its node would:
 * it reaches the hardware through the evdev device while p is active.
 */
int input_led_set(struct input_device *d, struct persona *p, unsigned int code, bool on);
