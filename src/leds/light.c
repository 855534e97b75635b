/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "light.h"
#include "util.h"

static struct light_state *find(const struct light *l, const void *owner) {
	struct light_state *s;

	LIST_FOREACH(s, &l->states, link)
		if (s->owner == owner)
			return s;
	return NULL;
}

const struct light_state *light_state_of(const struct light *l, const void *owner) {
	return find(l, owner);
}

const struct light_state *light_pick(const struct light *l) {
	const struct light_state *best = find(l, l->active), *s;

	if (l->policy == LIGHT_EXCLUSIVE)
		return best;
	LIST_FOREACH(s, &l->states, link)
		if (!best || s->brightness > best->brightness)
			best = s;
	return best;
}

/* Brings the hardware to the picked state, writing only what differs. */
static int apply(struct light *l) {
	const struct light_state *s = light_pick(l);
	struct led_backend *b = l->backend;
	uint32_t power;
	int r;

	l->shown = s ? s->owner : NULL;
	if (!s || l->detached)
		return 0;
	power = l->blanked ? LED_BL_POWER_MAX : s->bl_power;
	if (b->kind == LED_KIND_LED && s->trigger != l->hw.trigger) {
		r = led_backend_set_trigger(b, s->trigger);
		if (r < 0)
			return r;
		l->hw.trigger = s->trigger;
		/* Changing the trigger turned the LED off; writing 0 again would drop the new trigger. */
		l->hw.brightness = 0;
	}
	if (b->kind == LED_KIND_BACKLIGHT && power != l->hw.bl_power) {
		r = led_backend_set_power(b, power);
		if (r < 0)
			return r;
		l->hw.bl_power = power;
	}
	if (s->brightness != l->hw.brightness) {
		r = led_backend_set_brightness(b, s->brightness);
		if (r < 0)
			return r;
		l->hw.brightness = s->brightness;
	}
	return 0;
}

static const struct light_source_ops sysfs_source_ops;

int light_new(struct light **ret, struct led_backend *backend, enum light_policy policy) {
	struct light *l = calloc(1, sizeof(*l));

	if (!l) {
		led_backend_free(backend);
		return -ENOMEM;
	}
	l->source = (struct light_source){ .ops = &sysfs_source_ops, .light = l };
	l->backend = backend;
	l->policy = policy;
	l->hw = (struct light_state){
		.brightness = backend->brightness,
		.bl_power = backend->bl_power,
		.trigger = backend->trigger,
	};
	l->start = l->hw;
	if (backend->kind == LED_KIND_BACKLIGHT && l->start.bl_power == LED_BL_POWER_MAX)
		l->start.bl_power = 0;
	LIST_INIT(&l->states);
	*ret = l;
	return 0;
}

struct light *light_free(struct light *l) {
	struct light_state *s;

	if (!l)
		return NULL;
	while ((s = LIST_FIRST(&l->states))) {
		LIST_REMOVE(s, link);
		free(s);
	}
	led_backend_free(l->backend);
	free(l);
	return NULL;
}

int light_add_owner(struct light *l, const void *owner) {
	struct light_state *s;

	if (find(l, owner))
		return -EEXIST;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*s = l->start;
	s->owner = owner;
	LIST_INSERT_HEAD(&l->states, s, link);
	return apply(l);
}

int light_remove_owner(struct light *l, const void *owner) {
	struct light_state *s = find(l, owner);

	if (!s)
		return 0;
	LIST_REMOVE(s, link);
	free(s);
	return apply(l);
}

/* An owner's state changed: the hardware follows if it shows that owner, or may now. */
static int changed(struct light *l, const struct light_state *s) {
	if (l->policy == LIGHT_EXCLUSIVE && s->owner != l->active)
		return 0;
	return apply(l);
}

int light_set_brightness(struct light *l, const void *owner, uint32_t value) {
	struct light_state *s = find(l, owner);

	if (!s)
		return -ENOENT;
	if (value > l->backend->max_brightness)
		return -EINVAL;
	s->brightness = value;
	if (value == 0)
		s->trigger = 0;
	return changed(l, s);
}

int light_set_trigger(struct light *l, const void *owner, size_t index) {
	struct light_state *s = find(l, owner);

	if (!s)
		return -ENOENT;
	if (index >= l->backend->triggers.n)
		return -EINVAL;
	if (index != s->trigger && s->trigger != 0)
		s->brightness = 0;
	s->trigger = index;
	return changed(l, s);
}

int light_set_power(struct light *l, const void *owner, uint32_t power) {
	struct light_state *s = find(l, owner);

	if (!s)
		return -ENOENT;
	if (power > LED_BL_POWER_MAX)
		return -EINVAL;
	s->bl_power = power;
	return changed(l, s);
}

int light_set_active(struct light *l, const void *owner) {
	l->active = owner;
	return apply(l);
}

int light_set_blanked(struct light *l, bool blanked) {
	l->blanked = blanked;
	return apply(l);
}

static uint32_t sysfs_brightness(struct light_source *s, const void *owner) {
	const struct light_state *st = light_state_of(s->light, owner);

	return st ? st->brightness : 0;
}

static int sysfs_set_brightness(struct light_source *s, const void *owner, uint32_t value) {
	return light_set_brightness(s->light, owner, value);
}

static int sysfs_set_trigger(struct light_source *s, const void *owner, size_t index) {
	return light_set_trigger(s->light, owner, index);
}

static bool sysfs_shows(struct light_source *s, const void *owner) {
	return s->light->shown == owner;
}

static const struct light_source_ops sysfs_source_ops = {
	.brightness = sysfs_brightness,
	.set_brightness = sysfs_set_brightness,
	.set_trigger = sysfs_set_trigger,
	.shows = sysfs_shows,
};
