/* SPDX-License-Identifier: MIT */
/*
 * An LED of an evdev device devnsd owns, as a light source: each persona's
 * brightness is its evdev node's LED state, which the input class brings
 * to the hardware while the persona is active. The light keeps the
 * triggers personas pick; nothing writes its sysfs files. While the input
 * device is not there (gone, or not added yet) the LED reads 0 and writes
 * get ENODEV.
 */
#include <stdlib.h>
#include <string.h>

#include "input/input.h"
#include "leds/leds.h"
#include "light.h"

struct evdev_light {
	struct light_source source;
	struct input_class *input;
	/*
	 * The kernel's input device (.../inputN), looked up at each use: a
	 * device that goes, or has not come yet, is simply not found.
	 */
	char *device;
	unsigned int code;
};

static struct evdev_light *to_evdev(struct light_source *s) {
	return container_of(s, struct evdev_light, source);
}

static struct input_device *device_of(struct evdev_light *el) {
	return input_find_by_sysfs(el->input, el->device);
}

static uint32_t evdev_brightness(struct light_source *s, const void *owner) {
	struct evdev_light *el = to_evdev(s);
	struct input_device *d = device_of(el);
	int on = d ? input_led_get(d, (struct persona *)owner, el->code) : 0;

	return on > 0 ? s->light->backend->max_brightness : 0;
}

static int evdev_set_brightness(struct light_source *s, const void *owner, uint32_t value) {
	struct evdev_light *el = to_evdev(s);
	struct input_device *d = device_of(el);

	if (!d)
		return -ENODEV;
	if (value == 0)
		(void)light_set_trigger(s->light, owner, 0);
	return input_led_set(d, (struct persona *)owner, el->code, value > 0);
}

static int evdev_set_trigger(struct light_source *s, const void *owner, size_t index) {
	struct evdev_light *el = to_evdev(s);
	struct input_device *d = device_of(el);
	const struct light_state *st = light_state_of(s->light, owner);
	size_t before = st ? st->trigger : 0;
	int r;

	if (!d)
		return -ENODEV;
	r = light_set_trigger(s->light, owner, index);
	/* Leaving a trigger turns the LED off, here in the persona's evdev view. */
	if (r >= 0 && before != 0 && index != before)
		r = input_led_set(d, (struct persona *)owner, el->code, false);
	return r;
}

static bool evdev_shows(struct light_source *s, const void *owner) {
	const struct persona *p = owner;

	(void)s;
	return p->manager->active == p;
}

static const struct light_source_ops evdev_source_ops = {
	.brightness = evdev_brightness,
	.set_brightness = evdev_set_brightness,
	.set_trigger = evdev_set_trigger,
	.shows = evdev_shows,
};

int leds_evdev_source_new(struct light *l, struct input_class *ic, const char *device, unsigned int code,
			  struct light_source **ret) {
	struct evdev_light *el = calloc(1, sizeof(*el));

	if (!el)
		return -ENOMEM;
	el->device = strdup(device);
	if (!el->device) {
		free(el);
		return -ENOMEM;
	}
	el->source = (struct light_source){ .ops = &evdev_source_ops, .light = l };
	el->input = ic;
	el->code = code;
	/* The input class drives the hardware; the light only keeps the triggers. */
	l->detached = true;
	l->policy = LIGHT_EXCLUSIVE;
	*ret = &el->source;
	return 0;
}

struct light_source *leds_evdev_source_free(struct light_source *s) {
	if (s && s->ops == &evdev_source_ops) {
		free(to_evdev(s)->device);
		free(to_evdev(s));
	}
	return NULL;
}
