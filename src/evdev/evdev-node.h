/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/input.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "evdev-queue.h"
#include "evdev-state.h"

struct libevdev;

/*
 * An evdev node is one persona's view of one hardware input device: what a
 * client of /dev/devns/PERSONA/eventN talks to. It is transport-free: the
 * CUSE frontend maps requests onto it, and unit tests drive it directly.
 */

/* Open handles one node accepts, and how many of them one user may hold. */
#define EVDEV_NODE_MAX_CLIENTS 128
#define EVDEV_NODE_MAX_CLIENTS_PER_UID 16
/* The owner of handles opened without one: they count only towards EVDEV_NODE_MAX_CLIENTS. */
#define EVDEV_UID_NONE ((uid_t)-1)

/* A device's capabilities as bitmaps, the layout EVIOCGBIT returns. */
struct evdev_caps {
	unsigned long ev[BITS_TO_LONGS(EV_CNT)];
	unsigned long key[BITS_TO_LONGS(KEY_CNT)];
	unsigned long rel[BITS_TO_LONGS(REL_CNT)];
	unsigned long abs[BITS_TO_LONGS(ABS_CNT)];
	unsigned long msc[BITS_TO_LONGS(MSC_CNT)];
	unsigned long led[BITS_TO_LONGS(LED_CNT)];
	unsigned long snd[BITS_TO_LONGS(SND_CNT)];
	unsigned long ff[BITS_TO_LONGS(FF_CNT)];
	unsigned long sw[BITS_TO_LONGS(SW_CNT)];
	unsigned long prop[BITS_TO_LONGS(INPUT_PROP_CNT)];
};

/* Fills caps from a libevdev description. */
void evdev_caps_from_libevdev(struct evdev_caps *caps, const struct libevdev *desc);

/* The capability bitmap of one event type (0 for the type bitmap) and its highest code; NULL if none. */
const unsigned long *evdev_caps_bits(const struct evdev_caps *caps, unsigned int type, unsigned int *ret_max);

/* How many codes an EVIOCSMASK bitmap of this type has (EV_CNT for type 0); 0 for unknown types. */
unsigned int evdev_mask_count(unsigned int type);

/* True if the device can report or accept this type and code. */
bool evdev_caps_has(const struct evdev_caps *caps, unsigned int type, unsigned int code);

struct evdev_node;
struct evdev_client;

/* Force-feedback effects one node holds at most: the kernel's own ceiling. */
#define EVDEV_FF_MAX_EFFECTS FF_MAX_EFFECTS

/* One of a node's effect ids, owned by the open file that uploaded it. */
struct evdev_ff_slot {
	struct evdev_client *owner; /* NULL: the id is free */
	struct ff_effect effect;    /* as uploaded, with the node's id */
	int hw_id;                  /* the hardware's id while uploaded there, else -1 */
};

/*
 * The persona's force-feedback effects. The persona has as many ids as the
 * hardware has slots; its effects are on the hardware only while the node
 * is active, so the active persona has every slot.
 */
struct evdev_ff {
	unsigned int max;
	struct evdev_ff_slot *slots;
	int gain;       /* FF_GAIN, 0xffff until set */
	int autocenter; /* FF_AUTOCENTER, -1 until set */
};

struct evdev_client {
	struct evdev_node *node;
	struct evdev_queue queue;
	unsigned long *masks[EV_CNT]; /* NULL: nothing of that type filtered */
	clockid_t clock;
	uid_t uid; /* who opened it: EVDEV_NODE_MAX_CLIENTS_PER_UID counts by it */
	bool revoked;
	bool wake;  /* new data or a state change since the last wakeup() */
	void *data; /* the transport's, per open */
	LIST_ENTRY(evdev_client) link;
};

struct evdev_node_ops {
	/* Writes one event to the hardware. Called only while the node is active. */
	int (*forward)(void *userdata, const struct input_event *ev);
	/* Sets the hardware's key repeat. Called only while active. Optional. */
	int (*set_repeat)(void *userdata, int delay, int period);
	/* Looks a scancode up in the hardware's keymap. Optional (EINVAL without). */
	int (*get_keycode)(void *userdata, struct input_keymap_entry *ke);
	/* A client has a new packet, or was revoked, or the device is gone. */
	void (*wakeup)(void *userdata, struct evdev_client *c);
	/* The view's LEDs or sounds changed. Optional. */
	void (*feedback_changed)(void *userdata);
	/*
	 * Uploads a force-feedback effect to the hardware (effect->id: the
	 * hardware's id, or -1 for a new one, set on success), or erases one.
	 * Called only while active. Optional (ENOSYS without).
	 */
	int (*ff_upload)(void *userdata, struct ff_effect *effect);
	int (*ff_erase)(void *userdata, int hw_id);
	/*
	 * Optional: the time (µs) in clock (CLOCK_MONOTONIC, CLOCK_REALTIME or
	 * CLOCK_BOOTTIME) at which the current batch of events was taken, the
	 * same instant for every clock. Without it the clocks are read.
	 */
	int (*batch_time)(void *userdata, clockid_t clock, uint64_t *ret_usec);
};

struct evdev_node {
	const struct libevdev *desc;
	struct evdev_caps caps;
	struct input_absinfo absinfo[ABS_CNT];
	struct evdev_state view;
	int rep[REP_CNT];
	bool active;
	bool gone;
	unsigned int queue_size;
	struct evdev_client *grab;
	LIST_HEAD(, evdev_client) clients;
	unsigned int n_clients;
	const struct evdev_node_ops *ops;
	void *userdata;
	struct evdev_ff ff;
};

/*
 * Creates a node describing desc (borrowed: it must outlive the node), with
 * the persona's view starting at state. The node starts in the background.
 */
int evdev_node_new(struct evdev_node **ret, const struct libevdev *desc, const struct evdev_state *state,
		   const struct evdev_node_ops *ops, void *userdata);
struct evdev_node *evdev_node_free(struct evdev_node *n);
static inline void evdev_node_freep(struct evdev_node **n) {
	evdev_node_free(*n);
}

/*
 * A new open handle for user uid. -EMFILE past EVDEV_NODE_MAX_CLIENTS, or
 * when uid holds EVDEV_NODE_MAX_CLIENTS_PER_UID of them already; -ENODEV
 * when the device is gone.
 */
int evdev_node_open_as(struct evdev_node *n, uid_t uid, struct evdev_client **ret);
/* A new open handle of no particular user (EVDEV_UID_NONE). */
int evdev_node_open(struct evdev_node *n, struct evdev_client **ret);
void evdev_node_close(struct evdev_node *n, struct evdev_client *c);

/*
 * Revokes one handle, as EVIOCREVOKE does: from now on it gets ENODEV and
 * no events, and its grab is let go. Its wakeup comes with the next flush.
 */
void evdev_client_revoke(struct evdev_node *n, struct evdev_client *c);

/*
 * Revokes every handle on the node (the persona left its container), and
 * forgets what they pressed or touched: the view's keys, buttons, switches,
 * axes and slots become the hardware's (hw) while the node is active; in
 * the background its keys and buttons are released and its touches lifted.
 * No events are sent for that: the
 * next opener learns the state through EVIOCGKEY and EVIOCGMTSLOTS. The
 * persona's LEDs, sounds and repeat rate stay.
 */
void evdev_node_revoke(struct evdev_node *n, const struct evdev_state *hw);

/* Events from the hardware: folded into the view and passed to the clients. */
void evdev_node_deliver(struct evdev_node *n, const struct input_event *evs, size_t count);

/*
 * Events a client writes. LEDs, sounds and repeat settings go to the
 * hardware only while the node is active; all are kept in the view. Force
 * feedback is evdev_ff_event()'s.
 * Other event types are passed to this node's own clients only.
 * Returns the number of events consumed, or -errno.
 */
int evdev_node_write(struct evdev_node *n, struct evdev_client *c, const struct input_event *evs, size_t count);

/* Takes up to max whole-packet events for a client. -ENODEV if revoked or gone. */
int evdev_client_read(struct evdev_client *c, struct input_event *out, size_t max);

/* True when the client would get something from read or poll: data, or an error. */
bool evdev_client_ready(const struct evdev_client *c);

/*
 * Brings the node forward. When the persona's view of keys, switches, axes
 * or slots differs from the hardware's, the view takes the hardware's and
 * every client gets SYN_DROPPED, so it resyncs through EVIOCGKEY/EVIOCGABS/
 * EVIOCGMTSLOTS. The persona's LEDs, sounds and repeat rate go to the hardware.
 */
void evdev_node_activate(struct evdev_node *n, const struct evdev_state *hw);

/* Sends the node back: its clients see every key released and every touch lifted. */
void evdev_node_deactivate(struct evdev_node *n);

/* The hardware is gone: every client gets ENODEV from now on. */
void evdev_node_set_gone(struct evdev_node *n);

/* Calls ops->wakeup() for every client marked since the last flush. */
void evdev_node_flush_wakeups(struct evdev_node *n);

/*
 * An LED or sound change from outside the evdev interface (the persona's
 * sysfs view), as if one of the node's clients had written it: kept in the
 * view, sent to the hardware while the node is active, seen by its clients.
 * -EINVAL when the device has no such LED or sound.
 */
int evdev_node_set_feedback(struct evdev_node *n, uint16_t type, uint16_t code, bool on);

/*
 * Gives the node max force-feedback effect ids (the hardware's
 * EVIOCGEFFECTS), at most EVDEV_FF_MAX_EFFECTS. Without EV_FF it stays 0.
 */
int evdev_node_set_ff_max(struct evdev_node *n, unsigned int max);

/*
 * EVIOCSFF, as the kernel's input_ff_upload(): id -1 takes the lowest free
 * id (ENOSPC when none is), another id updates an effect of this client's
 * (EINVAL if unused or of another type, EACCES if another file's). While
 * active the effect goes to the hardware, whose error is returned.
 */
int evdev_ff_upload(struct evdev_node *n, struct evdev_client *c, struct ff_effect *effect);
/* EVIOCRMFF: stops and erases one of this client's effects. */
int evdev_ff_erase(struct evdev_node *n, struct evdev_client *c, int id);
/* Erases every effect of the client: it closed, or was revoked. */
void evdev_ff_flush(struct evdev_node *n, struct evdev_client *c);
/* An EV_FF write: play (value: repeat count), stop (0), FF_GAIN, FF_AUTOCENTER. */
int evdev_ff_event(struct evdev_node *n, uint16_t code, int32_t value);
/* The node comes forward: its effects, gain and autocenter go to the hardware. */
void evdev_ff_activate(struct evdev_node *n);
/* The node goes back: its effects are stopped and erased from the hardware. */
void evdev_ff_deactivate(struct evdev_node *n);

/* Largest output an ioctl can produce (the _IOC_SIZE limit). */
#define EVDEV_IOCTL_BUF_MAX (1u << 14)

/*
 * One step of an ioctl as CUSE delivers it in unrestricted mode: either done
 * (result and output bytes), or a request to retry with the given user
 * memory. in/in_size and out_size are what this step was given.
 */
struct evdev_ioctl_step {
	bool retry;
	int result;
	size_t out_size;
	struct iovec in_iov[2];
	size_t n_in;
	struct iovec out_iov[2];
	size_t n_out;
	uint8_t out[EVDEV_IOCTL_BUF_MAX];
};

void evdev_node_ioctl(struct evdev_node *n, struct evdev_client *c, unsigned int cmd, void *arg,
		      const void *in, size_t in_size, size_t out_size, struct evdev_ioctl_step *ret);
