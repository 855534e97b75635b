/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/input.h>
#include <stddef.h>
#include <stdint.h>

struct libevdev;
struct input_backend;

/*
 * One kind of input hardware. All operations are mandatory unless marked
 * optional; input_backend_*() wrappers supply defaults for optional ones.
 */
struct input_backend_ops {
	void (*destroy)(struct input_backend *b);
	/*
	 * Takes the next event from the device: 1 with *ret_ev set, 0 when
	 * none is waiting, -ENODEV when the device is gone. Times are
	 * CLOCK_MONOTONIC. After the device dropped events, the backend
	 * returns the changes that bring a reader up to date instead.
	 */
	int (*next_event)(struct input_backend *b, struct input_event *ret_ev);
	/* Writes one event (LED, sound, force feedback, SYN_REPORT) to the device. */
	int (*write_event)(struct input_backend *b, const struct input_event *ev);
	/* Optional: sets the key repeat delay and period (ms). Default: -EOPNOTSUPP. */
	int (*set_repeat)(struct input_backend *b, int delay, int period);
	/* Optional: looks a scancode up in the keymap. Default: -EINVAL. */
	int (*get_keycode)(struct input_backend *b, struct input_keymap_entry *ke);
	/*
	 * Optional: uploads a force-feedback effect, as EVIOCSFF does: id -1
	 * takes a free slot and sets effect->id; another id updates that
	 * effect. Default: -ENOSYS. Plays, stops and FF_GAIN / FF_AUTOCENTER
	 * go through write_event().
	 */
	int (*ff_upload)(struct input_backend *b, struct ff_effect *effect);
	/* Optional: erases an uploaded effect, as EVIOCRMFF does. Default: -ENOSYS. */
	int (*ff_erase)(struct input_backend *b, int id);
};

struct input_backend {
	const struct input_backend_ops *ops;
	/* The device as personas see it: name, ids, capabilities, axes, initial state. */
	struct libevdev *desc;
	/* The node name personas get, "eventN". */
	char *name;
	/* Where the device came from, for messages. */
	char *path;
	/* Readable when next_event() has something; -1 if never. */
	int fd;
	/* Force-feedback effects the device holds at once (EVIOCGEFFECTS); 0 without EV_FF. */
	unsigned int ff_effects_max;
};

struct input_backend *input_backend_free(struct input_backend *b);
static inline void input_backend_freep(struct input_backend **b) {
	input_backend_free(*b);
}
int input_backend_next_event(struct input_backend *b, struct input_event *ret_ev);
int input_backend_write_event(struct input_backend *b, const struct input_event *ev);
int input_backend_set_repeat(struct input_backend *b, int delay, int period);
int input_backend_get_keycode(struct input_backend *b, struct input_keymap_entry *ke);
int input_backend_ff_upload(struct input_backend *b, struct ff_effect *effect);
int input_backend_ff_erase(struct input_backend *b, int id);

/*
 * evdev: a kernel input device (/dev/input/eventN, or a link to one),
 * opened non-blocking and grabbed so that nothing else on the host sees
 * its events.
 */
int input_evdev_open(const char *path, struct input_backend **ret);

/*
 * fake: a device that exists in memory only. desc is taken over. Events
 * come from input_fake_push(); writes are recorded for input_fake_written().
 */
int input_fake_new(const char *name, struct libevdev *desc, struct input_backend **ret);
int input_fake_push(struct input_backend *b, uint16_t type, uint16_t code, int32_t value);
/* The events written to the fake device so far (at most the last 1024). */
size_t input_fake_written(struct input_backend *b, const struct input_event **ret);
void input_fake_clear_written(struct input_backend *b);
/* Makes next_event() report the device as gone. */
void input_fake_unplug(struct input_backend *b);
/* How often the repeat rate was set, and the last delay and period set. */
unsigned int input_fake_repeat(struct input_backend *b, int *ret_delay, int *ret_period);
/*
 * Gives the fake device room for max force-feedback effects (its
 * EVIOCGEFFECTS). Uploads take the lowest free slot, or fail with ENOSPC
 * as a driver does; erases free it.
 */
void input_fake_set_ff_max(struct input_backend *b, unsigned int max);
/* The effect uploaded in slot id, or NULL when the slot is free. */
const struct ff_effect *input_fake_ff_effect(struct input_backend *b, int id);
/* How many uploads and erases the fake device was asked for so far. */
void input_fake_ff_counts(struct input_backend *b, unsigned int *ret_uploads, unsigned int *ret_erases);
