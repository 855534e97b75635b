/* SPDX-License-Identifier: MIT */
/*
 * An LED of an evdev device devnsd owns, as a light source: each persona's
 * brightness is its evdev node's LED state, which the input class brings
 * to the hardware while the persona is active. The light keeps the
 * triggers personas pick; nothing writes its sysfs files.
 */
#include <stdlib.h>

#include "devnsd-input.h"
#include "devnsd-leds.h"
#include "light.h"

struct evdev_light {
	struct light_source source;
	struct input_device *device;
	unsigned int code;
};

static struct evdev_light *to_evdev(struct light_source *s) {
	return container_of(s, struct evdev_light, source);
}

static uint32_t evdev_brightness(struct light_source *s, const void *owner) {
	struct evdev_light *el = to_evdev(s);
	int on = input_led_get(el->device, (struct persona *)owner, el->code);

	return on > 0 ? s->light->backend->max_brightness : 0;
}

static int evdev_set_brightness(struct light_source *s, const void *owner, uint32_t value) {
	struct evdev_light *el = to_evdev(s);

	if (value == 0)
		(void)light_set_trigger(s->light, owner, 0);
	return input_led_set(el->device, (struct persona *)owner, el->code, value > 0);
}

static int evdev_set_trigger(struct light_source *s, const void *owner, size_t index) {
	struct evdev_light *el = to_evdev(s);
	const struct light_state *st = light_state_of(s->light, owner);
	size_t before = st ? st->trigger : 0;
	int r = light_set_trigger(s->light, owner, index);

	/* Leaving a trigger turns the LED off, here in the persona's evdev view. */
	if (r >= 0 && before != 0 && index != before)
		r = input_led_set(el->device, (struct persona *)owner, el->code, false);
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

int leds_evdev_source_new(struct light *l, struct input_device *d, unsigned int code, struct light_source **ret) {
	struct evdev_light *el = calloc(1, sizeof(*el));

	if (!el)
		return -ENOMEM;
	el->source = (struct light_source){ .ops = &evdev_source_ops, .light = l };
	el->device = d;
	el->code = code;
	/* The input class drives the hardware; the light only keeps the triggers. */
	l->detached = true;
	l->policy = LIGHT_EXCLUSIVE;
	*ret = &el->source;
	return 0;
}

struct light_source *leds_evdev_source_free(struct light_source *s) {
	if (s && s->ops == &evdev_source_ops)
		free(to_evdev(s));
	return NULL;
}
