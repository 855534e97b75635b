/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "hotkey.h"

void hotkey_init(struct hotkey *h) {
	memset(h, 0, sizeof(*h));
}

int hotkey_add(struct hotkey *h, const uint16_t *keys, size_t n_keys) {
	struct hotkey_chord *c;

	if (h->n_chords == HOTKEY_MAX_CHORDS)
		return -E2BIG;
	if (n_keys == 0 || n_keys > HOTKEY_CHORD_KEYS)
		return -EINVAL;
	c = &h->chords[h->n_chords];
	for (size_t i = 0; i < n_keys; i++) {
		if (keys[i] > KEY_MAX)
			return -EINVAL;
		c->keys[i] = keys[i];
		bit_assign(h->chord_keys, keys[i], true);
	}
	c->n_keys = n_keys;
	return (int)h->n_chords++;
}

static bool is_key(const struct input_event *ev) {
	return ev->type == EV_KEY && ev->code <= KEY_MAX;
}

/* The chord whose keys are all held, the longest if several; -1 if none. */
static int complete_chord(const struct hotkey *h) {
	int best = -1;

	for (size_t i = 0; i < h->n_chords; i++) {
		const struct hotkey_chord *c = &h->chords[i];
		bool all = true;
		for (size_t k = 0; k < c->n_keys && all; k++)
			all = bit_test(h->held, c->keys[k]);
		if (all && (best < 0 || c->n_keys > h->chords[best].n_keys))
			best = (int)i;
	}
	return best;
}

/*
 * True when the keys in set are the first keys of some chord, in the order
 * the chord names them: what a chord being typed looks like so far.
 */
static bool starts_chord(const struct hotkey *h, const unsigned long *set) {
	size_t n_set = 0;

	for (size_t i = 0; i < BITS_TO_LONGS(KEY_CNT); i++)
		n_set += (size_t)__builtin_popcountl(set[i]);
	for (size_t i = 0; i < h->n_chords; i++) {
		const struct hotkey_chord *c = &h->chords[i];
		bool prefix = n_set <= c->n_keys;
		for (size_t k = 0; k < n_set && prefix; k++)
			prefix = bit_test(set, c->keys[k]);
		if (prefix)
			return true;
	}
	return false;
}

static size_t emit(struct input_event *out, size_t n, const struct input_event *evs, size_t count) {
	memcpy(out + n, evs, count * sizeof(*evs));
	return n + count;
}

/* Passes on what was held back: it was not a chord. */
static size_t flush(struct hotkey *h, struct input_event *out, size_t n) {
	n = emit(out, n, h->buf, h->n_buf);
	h->n_buf = 0;
	memset(h->held, 0, sizeof(h->held));
	return n;
}

static void hold(struct hotkey *h) {
	for (size_t i = 0; i < h->n_pkt; i++) {
		const struct input_event *ev = &h->pkt[i];
		if (is_key(ev) && ev->value == 2)
			continue; /* a held key repeating: nobody would see it */
		if (is_key(ev) && ev->value == 1)
			bit_assign(h->held, ev->code, true);
		h->buf[h->n_buf++] = *ev;
	}
	h->n_pkt = 0;
}

/* Takes a whole packet: pass it on, hold it back, or complete a chord. */
static size_t packet(struct hotkey *h, struct input_event *out, int *ret_chord) {
	bool chord_presses_only = true, keys = false, dropped = false, held_repeats_only = true;
	unsigned long pressed[BITS_TO_LONGS(KEY_CNT)];
	size_t n = 0, kept = 0;
	int chord;

	memcpy(pressed, h->held, sizeof(pressed));
	/* Releases and repeats of consumed keys vanish; a release ends the consumption. */
	for (size_t i = 0; i < h->n_pkt; i++) {
		struct input_event *ev = &h->pkt[i];
		if (is_key(ev) && bit_test(h->consumed, ev->code)) {
			if (ev->value == 0)
				bit_assign(h->consumed, ev->code, false);
			dropped = true;
			continue;
		}
		h->pkt[kept++] = *ev;
	}
	h->n_pkt = kept;

	for (size_t i = 0; i < h->n_pkt; i++) {
		const struct input_event *ev = &h->pkt[i];
		if (ev->type == EV_SYN || ev->type == EV_MSC)
			continue;
		keys = true;
		if (is_key(ev) && ev->value == 2 && bit_test(h->held, ev->code))
			continue;
		held_repeats_only = false;
		if (!is_key(ev) || ev->value != 1 || !bit_test(h->chord_keys, ev->code))
			chord_presses_only = false;
		else
			bit_assign(pressed, ev->code, true);
	}
	/* Keys are held back only while they could still be a chord typed in its order. */
	if (chord_presses_only && keys && !held_repeats_only && !starts_chord(h, pressed))
		chord_presses_only = false;

	if ((!keys && dropped) || (keys && held_repeats_only)) {
		/* What is left belonged to consumed keys, or only repeats keys held back. */
		h->n_pkt = 0;
		return 0;
	}
	if ((chord_presses_only || !keys) && h->n_buf + h->n_pkt <= HOTKEY_BUFFER && (keys || h->n_buf > 0)) {
		hold(h);
		chord = complete_chord(h);
		if (chord >= 0) {
			for (size_t i = 0; i < BITS_TO_LONGS(KEY_CNT); i++)
				h->consumed[i] |= h->held[i];
			memset(h->held, 0, sizeof(h->held));
			h->n_buf = 0;
			*ret_chord = chord;
		}
		return 0;
	}
	n = flush(h, out, n);
	n = emit(out, n, h->pkt, h->n_pkt);
	h->n_pkt = 0;
	return n;
}

size_t hotkey_feed(struct hotkey *h, const struct input_event *ev, struct input_event *out, int *ret_chord) {
	*ret_chord = -1;
	if (h->n_chords == 0) {
		out[0] = *ev;
		return 1;
	}
	h->pkt[h->n_pkt++] = *ev;
	if ((ev->type == EV_SYN && ev->code == SYN_REPORT) || h->n_pkt == HOTKEY_BUFFER)
		return packet(h, out, ret_chord);
	return 0;
}
