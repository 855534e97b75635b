/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/queue.h>

#include "core/manager.h"
#include "evdev-state.h"

struct input_backend;
struct evdev_client;
struct evdev_node;
struct cuse_evdev;
struct input_node;
struct input_class;
struct hotkey;
struct loop_io;

/* One hardware input device and the nodes every persona has for it. */
struct input_device {
	struct input_class *class;
	struct input_backend *backend;
	/* The device's fd, on the manager's loop: a packet passed on does not wake sd-event. */
	struct loop_io *io;
	/* What the hardware reports, folded up: the state a persona resyncs to. */
	struct evdev_state hw;
	struct input_node *active;
	/* The active persona's node while input is held back after a switch (input_class.input_held). */
	struct input_node *held_for;
	/* A chord was read: what follows it is read once its switch has run. */
	bool after_chord;
	/* /dev/devns/eventN, whose opener's persona decides what it gets (the transport's). */
	struct cuse_evdev *routed;
	/* Switch chords on this device, and the [Daemon] SwitchKeys= (or SecureAttentionKey=) entry of each. */
	struct hotkey *hotkey;
	size_t chord_conf[CONF_MAX_HOTKEYS];
	/* udev properties for the device, for containers' udev data. */
	char udev[256];
	char routed_path[64];
	bool routed_ready;
	/* The device reported itself gone: what was held is released, its nodes answer ENODEV. */
	bool gone;
	/* The kernel's device (/sys/devices/.../eventN); empty when unknown. */
	char syspath[256];
	/* Its input device (/sys/devices/.../inputN), as it resolved when added; empty when unknown. */
	char kdev[256];
	/* Came while devnsd ran (input/hotplug.c): its nodes go into attached containers as they appear. */
	bool hotplugged;
	/*
	 * Once gone, hotplug takes the nodes from the containers (unplugged) and
	 * removes the device when no handle is open on its nodes, or at
	 * gone_deadline.
	 */
	bool unplugged;
	sd_event_source *reap;
	uint64_t gone_deadline;
	LIST_HEAD(, input_node) nodes;
	LIST_ENTRY(input_device) link;
};

/* A persona's /dev/devns/PERSONA/eventN. */
struct input_node {
	struct input_device *device;
	struct persona *persona;
	struct evdev_node *evdev;
	/* Where programs open it (the transport's). */
	struct cuse_evdev *cuse;
	char path[64 + NAME_MAX_LEN];
	bool ready;
	LIST_ENTRY(input_node) by_device;
};

/*
 * How persona nodes reach programs: input/serve.c serves them over CUSE;
 * unit tests run the core without one (NULL). Every op is optional.
 */
struct input_transport_ops {
	/* The device was added: its routed node. */
	int (*device_added)(struct input_device *d);
	/* in's evdev node exists: make it reachable. */
	int (*node_added)(struct input_node *in);
	/* in is going: close what reaches it. Also for nodes whose node_added failed. */
	void (*node_removed)(struct input_node *in);
	/* Readers of client c have something to read. */
	void (*wakeup)(struct input_node *in, struct evdev_client *c);
	/* in's persona has a new owner; with revoke, close every handle opened before. */
	void (*rebind)(struct input_node *in, bool revoke);
	/* The device is going, after its nodes. */
	void (*device_removed)(struct input_device *d);
};

/*
 * input/class.c: the evdev input class without a transport. Devices
 * are added and removed one at a time (at start, and as they come and go);
 * each gets a node in every persona, and only the active persona's node
 * gets its events.
 *
 * Switch chords are read while a device is drained (its fd is readable, or
 * a switch takes what was pressed before it). A chord never switches from
 * there: it names the target and a deferred event source switches once
 * the handler has returned. When several chords come before that runs,
 * the last one read wins.
 */
struct input_class {
	struct device_class base;
	const struct input_transport_ops *transport;
	LIST_HEAD(, input_device) devices;
	/* A chord's switch, run after the input handler; target: a [Daemon] SwitchKeys= entry. */
	sd_event_source *hotkey_defer;
	size_t hotkey_target;
	/*
	 * After a switch the user did not start, input reaches nobody until
	 * every key of every device is up and the switch is complete (the
	 * target's frame shown): then the active persona's nodes get it.
	 */
	bool input_held, switch_shown;
	struct listener switch_done;
	/* A device's handler did more than pass packets on: sd-event has to look at itself (loop.h). */
	bool loop_touched;
};

/* input/state.c: keeps each persona's LEDs across a restart (restart/state.h). */
int input_state_register(struct input_class *ic);

/* An input class with no device yet; transport may be NULL. Register it with manager_add_class(&ic->base). */
int input_class_new_core(struct manager *m, const struct input_transport_ops *transport, struct input_class **ret);

/*
 * Adds a device (backend taken over, also on failure): nodes in every
 * persona once the class is registered, events watched on backend->fd.
 */
int input_class_add_device(struct input_class *ic, struct input_backend *backend, struct input_device **ret);
/* Removes a device and every persona's node for it. */
void input_class_remove_device(struct input_class *ic, struct input_device *d);

/*
 * The device went away (its backend said ENODEV, or hotplug saw it go):
 * what the active persona held on it is released (readers already asleep
 * in read() see keys go up, hats centred and touches lifted, with a
 * SYN_REPORT, as the input core releases keys before it lets go of a
 * device), then every handle on its nodes gets ENODEV, as from the
 * kernel's evdev, whatever it had not read yet. The nodes stay until the
 * device is removed. Does nothing the second time.
 */
void input_device_set_gone(struct input_device *d);

/* Reads what the device has queued, as its fd turning readable does. */
void input_device_dispatch(struct input_device *d);

/* The node persona p has for d, or NULL. */
struct input_node *input_node_of(struct input_device *d, struct persona *p);

/* Whether [Input] Devices= names the evdev node devnode. */
bool input_conf_wants(const struct conf *conf, const char *devnode);

/*
 * input/serve.c: the input class over the evdev devices [Input] Devices=
 * names, served over CUSE. Logs what fails.
 */
int input_class_new(struct manager *m, const struct conf *conf, struct input_class **ret);

/*
 * The owned input device, not gone, whose kernel input device is kdev (a
 * resolved path, as /sys/class/input/eventN/device resolves, e.g.
 * /sys/devices/.../input0), or NULL.
 */
struct input_device *input_find_by_sysfs(struct input_class *ic, const char *kdev);

/*
 * The node (/dev/input/eventN, in devnode) of the evdev device of the
 * kernel input device kdev (resolved); false while it has none.
 */
bool input_kdev_evdev(const char *kdev, char *devnode, size_t size);

/* Whether the kernel input device kdev (resolved) is owned, or will be once the watch adds its evdev device. */
bool input_class_owns(struct input_class *ic, const char *kdev);

/* Persona p's view of an LED of the device: 0 or 1; -ENOENT without a node, -EINVAL without that LED. */
int input_led_get(struct input_device *d, struct persona *p, unsigned int code);

/*
 * Sets an LED in persona p's view, as an EV_LED write on its node would:
 * it reaches the hardware through the evdev device while p is active.
 */
int input_led_set(struct input_device *d, struct persona *p, unsigned int code, bool on);
