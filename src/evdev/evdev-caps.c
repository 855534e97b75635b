/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <string.h>

#include "evdev-node.h"

const unsigned long *evdev_caps_bits(const struct evdev_caps *caps, unsigned int type, unsigned int *ret_max) {
	switch (type) {
	case 0:
		*ret_max = EV_MAX;
		return caps->ev;
	case EV_KEY:
		*ret_max = KEY_MAX;
		return caps->key;
	case EV_REL:
		*ret_max = REL_MAX;
		return caps->rel;
	case EV_ABS:
		*ret_max = ABS_MAX;
		return caps->abs;
	case EV_MSC:
		*ret_max = MSC_MAX;
		return caps->msc;
	case EV_LED:
		*ret_max = LED_MAX;
		return caps->led;
	case EV_SND:
		*ret_max = SND_MAX;
		return caps->snd;
	case EV_FF:
		*ret_max = FF_MAX;
		return caps->ff;
	case EV_SW:
		*ret_max = SW_MAX;
		return caps->sw;
	default:
		return NULL;
	}
}

bool evdev_caps_has(const struct evdev_caps *caps, unsigned int type, unsigned int code) {
	unsigned int max;
	const unsigned long *bits;

	if (type > EV_MAX || !bit_test(caps->ev, type))
		return false;
	bits = evdev_caps_bits(caps, type, &max);
	if (!bits)
		return type == EV_SYN || type == EV_REP; /* no per-code bitmap */
	return code <= max && bit_test(bits, code);
}

void evdev_caps_from_libevdev(struct evdev_caps *caps, const struct libevdev *desc) {
	memset(caps, 0, sizeof(*caps));
	for (unsigned int type = 0; type <= EV_MAX; type++) {
		unsigned int max;
		unsigned long *bits;

		if (!libevdev_has_event_type(desc, type))
			continue;
		bit_assign(caps->ev, type, true);
		bits = (unsigned long *)evdev_caps_bits(caps, type, &max);
		if (!bits || type == 0)
			continue;
		for (unsigned int code = 0; code <= max; code++)
			if (libevdev_has_event_code(desc, type, code))
				bit_assign(bits, code, true);
	}
	for (unsigned int p = 0; p <= INPUT_PROP_MAX; p++)
		if (libevdev_has_property(desc, p))
			bit_assign(caps->prop, p, true);
}

unsigned int evdev_mask_count(unsigned int type) {
	switch (type) {
	case EV_SYN:
		return EV_CNT;
	case EV_KEY:
		return KEY_CNT;
	case EV_REL:
		return REL_CNT;
	case EV_ABS:
		return ABS_CNT;
	case EV_MSC:
		return MSC_CNT;
	case EV_SW:
		return SW_CNT;
	case EV_LED:
		return LED_CNT;
	case EV_SND:
		return SND_CNT;
	case EV_FF:
		return FF_CNT;
	default:
		return 0;
	}
}
