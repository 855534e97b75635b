/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/input.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Multitouch codes kept per slot: ABS_MT_TOUCH_MAJOR .. ABS_MT_TOOL_Y. */
#define EVDEV_MT_FIRST ABS_MT_TOUCH_MAJOR
#define EVDEV_MT_LAST ABS_MT_TOOL_Y
#define EVDEV_MT_CODES (EVDEV_MT_LAST - EVDEV_MT_FIRST + 1)
/* Slots tracked per device; devices with more are truncated to this. */
#define EVDEV_MAX_SLOTS 64
/* The hats: a gamepad's d-pad, whose rest is 0. */
#define EVDEV_HATS (ABS_HAT3Y - ABS_HAT0X + 1)
/* Upper bound of the events evdev_state_release() produces. */
#define EVDEV_RELEASE_MAX (EVDEV_MAX_SLOTS * 2 + EVDEV_HATS + KEY_CNT + 2)

/*
 * What one observer believes the device's state to be: the hardware's own
 * state for the device, or what a persona has been told.
 */
struct evdev_state {
	unsigned long key[BITS_TO_LONGS(KEY_CNT)];
	unsigned long led[BITS_TO_LONGS(LED_CNT)];
	unsigned long snd[BITS_TO_LONGS(SND_CNT)];
	unsigned long sw[BITS_TO_LONGS(SW_CNT)];
	int32_t abs[ABS_CNT];
	unsigned int n_slots;
	/* The device has more slots than are tracked: values for those are not kept. */
	bool slots_beyond;
	int32_t slot;
	int32_t mt[EVDEV_MAX_SLOTS][EVDEV_MT_CODES];
};

/* Everything released, every slot without a contact (tracking id -1). */
void evdev_state_init(struct evdev_state *s, unsigned int n_slots);

/* True for the ABS_MT_* codes kept per slot (not ABS_MT_SLOT). */
static inline bool evdev_is_mt_code(unsigned int code) {
	return code >= EVDEV_MT_FIRST && code <= EVDEV_MT_LAST;
}

/* Folds one event into the state, the way the input core does. */
void evdev_state_apply(struct evdev_state *s, const struct input_event *ev);

/*
 * Writes the events that lift every active touch, centre every hat pressed
 * to a side and release every pressed key or button, followed by
 * SYN_REPORT; returns how many (0 when nothing is held). out must hold
 * EVDEV_RELEASE_MAX events. Only type/code/value are set. The state itself
 * is not changed.
 */
size_t evdev_state_release(const struct evdev_state *s, struct input_event *out);

/* Releases every key, button and hat and lifts every touch in s itself. */
void evdev_state_release_all(struct evdev_state *s);

/* True when keys, switches, axes and slots agree (LEDs and sounds are not compared). */
bool evdev_state_input_equal(const struct evdev_state *a, const struct evdev_state *b);

/* Copies keys, switches, axes and slots from src; LEDs and sounds stay. */
void evdev_state_copy_input(struct evdev_state *dst, const struct evdev_state *src);

/* The value of a bitmap-kept event (EV_KEY/LED/SND/SW) or of an axis. */
int32_t evdev_state_value(const struct evdev_state *s, unsigned int type, unsigned int code);
