/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "evdev-state.h"

void evdev_state_init(struct evdev_state *s, unsigned int n_slots) {
	memset(s, 0, sizeof(*s));
	s->n_slots = MIN(n_slots, EVDEV_MAX_SLOTS);
	s->slots_beyond = n_slots > EVDEV_MAX_SLOTS;
	for (unsigned int i = 0; i < EVDEV_MAX_SLOTS; i++)
		s->mt[i][ABS_MT_TRACKING_ID - EVDEV_MT_FIRST] = -1;
}

static unsigned long *state_bits(struct evdev_state *s, unsigned int type, unsigned int *ret_max) {
	switch (type) {
	case EV_KEY:
		*ret_max = KEY_MAX;
		return s->key;
	case EV_LED:
		*ret_max = LED_MAX;
		return s->led;
	case EV_SND:
		*ret_max = SND_MAX;
		return s->snd;
	case EV_SW:
		*ret_max = SW_MAX;
		return s->sw;
	default:
		return NULL;
	}
}

void evdev_state_apply(struct evdev_state *s, const struct input_event *ev) {
	unsigned int max;
	unsigned long *bits;

	if (ev->type == EV_ABS) {
		if (ev->code > ABS_MAX)
			return;
		if (ev->code == ABS_MT_SLOT) {
			if (ev->value >= 0 && (unsigned int)ev->value < s->n_slots)
				s->slot = ev->value;
			else if (ev->value >= 0 && s->slots_beyond)
				/* A slot the device has but devnsd does not track: its values go nowhere. */
				s->slot = -1;
			s->abs[ABS_MT_SLOT] = ev->value;
		} else if (evdev_is_mt_code(ev->code)) {
			if (s->slot >= 0 && (unsigned int)s->slot < s->n_slots)
				s->mt[s->slot][ev->code - EVDEV_MT_FIRST] = ev->value;
		} else {
			s->abs[ev->code] = ev->value;
		}
		return;
	}

	bits = state_bits(s, ev->type, &max);
	if (bits && ev->code <= max)
		bit_assign(bits, ev->code, ev->value != 0);
}

int32_t evdev_state_value(const struct evdev_state *s, unsigned int type, unsigned int code) {
	unsigned int max;
	const unsigned long *bits;

	if (type == EV_ABS)
		return code <= ABS_MAX ? s->abs[code] : 0;
	bits = state_bits((struct evdev_state *)s, type, &max);
	return bits && code <= max ? bit_test(bits, code) : 0;
}

static void put(struct input_event *out, size_t *n, uint16_t type, uint16_t code, int32_t value) {
	out[*n] = (struct input_event){ .type = type, .code = code, .value = value };
	(*n)++;
}

size_t evdev_state_release(const struct evdev_state *s, struct input_event *out) {
	size_t n = 0;
	int32_t slot = s->slot;

	for (unsigned int i = 0; i < s->n_slots; i++) {
		if (s->mt[i][ABS_MT_TRACKING_ID - EVDEV_MT_FIRST] < 0)
			continue;
		if ((int32_t)i != slot) {
			put(out, &n, EV_ABS, ABS_MT_SLOT, (int32_t)i);
			slot = (int32_t)i;
		}
		put(out, &n, EV_ABS, ABS_MT_TRACKING_ID, -1);
	}
	for (unsigned int code = ABS_HAT0X; code <= ABS_HAT3Y; code++)
		if (s->abs[code] != 0)
			put(out, &n, EV_ABS, (uint16_t)code, 0);
	for (unsigned int code = 0; code <= KEY_MAX; code++)
		if (bit_test(s->key, code))
			put(out, &n, EV_KEY, (uint16_t)code, 0);
	if (n > 0)
		put(out, &n, EV_SYN, SYN_REPORT, 0);
	return n;
}

bool evdev_state_input_equal(const struct evdev_state *a, const struct evdev_state *b) {
	return memcmp(a->key, b->key, sizeof(a->key)) == 0 &&
	       memcmp(a->sw, b->sw, sizeof(a->sw)) == 0 &&
	       memcmp(a->abs, b->abs, sizeof(a->abs)) == 0 &&
	       a->n_slots == b->n_slots && a->slot == b->slot &&
	       memcmp(a->mt, b->mt, sizeof(a->mt[0]) * a->n_slots) == 0;
}

void evdev_state_release_all(struct evdev_state *s) {
	struct input_event evs[EVDEV_RELEASE_MAX];
	size_t n = evdev_state_release(s, evs);

	for (size_t i = 0; i < n; i++)
		evdev_state_apply(s, &evs[i]);
}

void evdev_state_copy_input(struct evdev_state *dst, const struct evdev_state *src) {
	memcpy(dst->key, src->key, sizeof(dst->key));
	memcpy(dst->sw, src->sw, sizeof(dst->sw));
	memcpy(dst->abs, src->abs, sizeof(dst->abs));
	dst->n_slots = src->n_slots;
	dst->slots_beyond = src->slots_beyond;
	dst->slot = src->slot;
	memcpy(dst->mt, src->mt, sizeof(dst->mt));
}
