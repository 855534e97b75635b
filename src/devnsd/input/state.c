/* SPDX-License-Identifier: MIT */
/* The input class's part of a restart: each persona's LEDs, by device. */
#include <stdio.h>

#include "input/input.h"
#include "restart/state.h"
#include "evdev-node.h"
#include "input-backend.h"

static void save(void *userdata, struct persona *p, struct state_record *rec) {
	struct input_class *ic = userdata;
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link) {
		struct input_node *in = input_node_of(d, p);
		unsigned long leds = 0;
		char value[32];

		if (!in || !bit_test(in->evdev->caps.ev, EV_LED))
			continue;
		for (unsigned int code = 0; code <= LED_MAX; code++)
			if (evdev_state_value(&in->evdev->view, EV_LED, code))
				leds |= 1ul << code;
		snprintf(value, sizeof(value), "leds %#lx", leds);
		(void)state_record_add_item(rec, p->name, "input", d->backend->name, value);
	}
}

static int load(void *userdata, struct persona *p, const char *key, const char *value) {
	struct input_class *ic = userdata;
	struct input_device *d;
	struct input_node *in = NULL;
	unsigned long leds;
	char tail;
	int r = 0;

	LIST_FOREACH(d, &ic->devices, link)
		if (streq(d->backend->name, key))
			break;
	if (d)
		in = input_node_of(d, p);
	if (!in)
		return -ENOENT;
	if (sscanf(value, "leds %lx%c", &leds, &tail) != 1 || leds >> (LED_MAX + 1))
		return -EINVAL;
	/* As a client's EV_LED writes: the view takes them, and the hardware while the persona is active. */
	for (unsigned int code = 0; code <= LED_MAX && r >= 0; code++)
		if (evdev_caps_has(&in->evdev->caps, EV_LED, code))
			r = evdev_node_set_feedback(in->evdev, EV_LED, (uint16_t)code, (leds >> code) & 1);
	return r;
}

int input_state_register(struct input_class *ic) {
	return state_register_part(ic->base.manager,
				   &(struct state_part){ .name = "input", .save = save, .load = load, .userdata = ic });
}
