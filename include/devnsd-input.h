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
	/* The kernel's device (/sys/devices/.../eventN); empty when unknown. */
	char syspath[256];
	/* Came while devnsd ran: its nodes go into attached containers as they appear. */
	bool hotplugged;
	/*
	 * The hardware is gone: held keys were released, readers get ENODEV.
	 * reap then takes the nodes from the containers (unplugged) and ends
	 * the CUSE devices once their handles are closed, or at gone_deadline.
	 */
	bool gone, unplugged;
	sd_event_source *reap;
	uint64_t gone_deadline;
	/* The LED class holds it: once gone it stays, without nodes, until devnsd ends. */
	bool pinned;
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

/* How long the nodes of a device that went away stay for handles still open on them (answering ENODEV). */
#define INPUT_GONE_LINGER_USEC (2 * 1000000ULL)

/*
 * Hotplug: an evdev device that matches [Input] Devices= appeared (its
 * node devnode, sysfs path syspath). Every persona gets a node for it, and
 * attached containers get those nodes as they come. 1 when added, 0 when
 * devnsd has it already, or a negative errno (-ENOENT while its node is not
 * in /dev yet).
 */
int input_device_appeared(struct manager *m, const char *syspath, const char *devnode);

/*
 * The device went away: what its active persona held is released (readers
 * see the keys go up and a SYN_REPORT), then every reader gets ENODEV and
 * poll POLLERR|POLLHUP, as from the kernel's evdev. The nodes leave the
 * attached containers, and their CUSE devices end once no handle is open
 * on them, at the latest after INPUT_GONE_LINGER_USEC.
 */
void input_device_vanished(struct manager *m, const char *syspath, const char *devnode);

/*
 * The owned input device whose kernel device is sysfs_dir (as
 * /sys/class/input/eventN/device names it, e.g. .../input0), or NULL.
 */
struct input_device *input_find_by_sysfs(struct manager *m, const char *sysfs_dir);

/* Persona p's view of an LED of the device: 0 or 1; -ENOENT without a node, -EINVAL without that LED. */
int input_led_get(struct input_device *d, struct persona *p, unsigned int code);

/*
 * Sets an LED in persona p's view, as an EV_LED write on its node would:
 * it reaches the hardware through the evdev device while p is active.
 */
int input_led_set(struct input_device *d, struct persona *p, unsigned int code, bool on);
