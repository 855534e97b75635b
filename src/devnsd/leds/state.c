/* SPDX-License-Identifier: MIT */
/* The LED class's part of a restart: each persona's state of each light, and where the views are mounted. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "restart/state.h"
#include "leds/leds-internal.h"

static void leds_state_save(void *userdata, struct persona *p, struct state_record *rec) {
	struct leds_class *lc = userdata;
	struct leds_persona *lp = leds_persona_of(lc, p);

	for (size_t i = 0; lp && i < lc->n_lights; i++) {
		const struct leds_view *v = &lp->views[i];
		const struct light_state *s;
		struct led_backend *b;
		char key[STATE_KEY_MAX + 1], value[STATE_VALUE_MAX + 1];

		if (!light_at(lc, i) || !(s = state_of(v)))
			continue;
		b = backend_of(v);
		snprintf(key, sizeof(key), "%s:%s", leds_kind_dir[b->kind], b->name);
		snprintf(value, sizeof(value), "%u %u %s", s->brightness, s->bl_power, b->triggers.names[s->trigger]);
		/* A light whose name the record cannot hold is not kept. */
		(void)state_record_add_item(rec, p->name, "leds", key, value);
	}
}

static int leds_state_load(void *userdata, struct persona *p, const char *key, const char *value) {
	struct leds_class *lc = userdata;
	struct leds_light *ll = NULL;
	char trigger[LED_TRIGGER_NAME_MAX + 1];
	uint32_t brightness, power;
	int index, r;

	_Static_assert(LED_TRIGGER_NAME_MAX == 47, "the trigger's width in sscanf()");
	for (size_t i = 0; i < lc->n_lights && !ll; i++) {
		struct led_backend *b;
		char name[STATE_KEY_MAX + 1];

		if (!light_at(lc, i))
			continue;
		b = lc->lights[i].light->backend;
		snprintf(name, sizeof(name), "%s:%s", leds_kind_dir[b->kind], b->name);
		if (streq(name, key))
			ll = &lc->lights[i];
	}
	if (!ll || !leds_persona_of(lc, p))
		return -ENOENT;
	if (sscanf(value, "%" SCNu32 " %" SCNu32 " %47s", &brightness, &power,
		   trigger) != 3)
		return -EINVAL;
	/* An LED of an input device has its brightness in the persona's evdev node, which the input class keeps. */
	r = ll->source != &ll->light->source ? 0 : light_set_brightness(ll->light, p, brightness);
	if (r >= 0 && ll->light->backend->kind == LED_KIND_BACKLIGHT)
		r = light_set_power(ll->light, p, power);
	if (r == -EINVAL)
		return -ESTALE;
	index = led_triggers_find(&ll->light->backend->triggers, trigger, strlen(trigger));
	if (r >= 0 && index > 0)
		r = light_set_trigger(ll->light, p, (size_t)index);
	return r;
}

int leds_state_register(struct leds_class *lc) {
	struct statx stx;

	/* Cached attributes only: devnsd serves this mount and cannot answer itself now. */
	if (statx(AT_FDCWD, lc->mountpoint, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) >= 0) {
		lc->view_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		state_set_view(lc->base.manager, lc->mountpoint, lc->view_dev);
	}
	return state_register_part(lc->base.manager, &(struct state_part){ .name = "leds",
									   .save = leds_state_save,
									   .load = leds_state_load,
									   .userdata = lc });
}
