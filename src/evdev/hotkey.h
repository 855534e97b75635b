/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/input.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define HOTKEY_MAX_CHORDS 17
#define HOTKEY_CHORD_KEYS 4
/* Events held back while a chord may be forming. */
#define HOTKEY_BUFFER 64
/* Room hotkey_feed() needs in out. */
#define HOTKEY_OUT_MAX (HOTKEY_BUFFER * 2 + 2)

struct hotkey_chord {
	uint16_t keys[HOTKEY_CHORD_KEYS];
	size_t n_keys;
};

/*
 * Finds switch chords (e.g. KEY_LEFTMETA+KEY_F1) in a device's event
 * stream and consumes them: while chord keys go down in the chord's order
 * (KEY_LEFTMETA first) they are held back;
 * when a whole chord is down nobody ever sees those presses, nor their
 * repeats and releases. Anything else held back is passed on, in order, as
 * soon as it turns out not to be a chord.
 */
struct hotkey {
	struct hotkey_chord chords[HOTKEY_MAX_CHORDS];
	size_t n_chords;
	unsigned long chord_keys[BITS_TO_LONGS(KEY_CNT)];
	unsigned long held[BITS_TO_LONGS(KEY_CNT)];
	unsigned long consumed[BITS_TO_LONGS(KEY_CNT)];
	struct input_event buf[HOTKEY_BUFFER];
	size_t n_buf;
	struct input_event pkt[HOTKEY_BUFFER];
	size_t n_pkt;
};

void hotkey_init(struct hotkey *h);
/* Adds a chord; returns its index, or -E2BIG / -EINVAL. */
int hotkey_add(struct hotkey *h, const uint16_t *keys, size_t n_keys);

/*
 * Feeds one event. What may be passed on now is written to out (room for
 * HOTKEY_OUT_MAX events) and counted in the return value. *ret_chord is the
 * index of a chord completed by this event, or -1.
 */
size_t hotkey_feed(struct hotkey *h, const struct input_event *ev, struct input_event *out, int *ret_chord);
