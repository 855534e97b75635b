/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "core/manager.h"

/* Where the persona views are mounted, unless $DEVNS_VIEW_DIR says otherwise. */
#define DEVNS_VIEW_DIR "/run/devns"
/* Lights per section ([Leds], [Backlight]); a glob matching more is cut. */
#define LEDS_MAX_LIGHTS 64

/* One persona's state of one light, as devnsctl status shows it. */
struct light_desc {
	const char *kind;   /* "leds" or "backlight" */
	const char *name;   /* the directory's name */
	const char *source; /* the hardware's directory */
	const char *policy; /* "exclusive" or "shared" */
	uint32_t brightness, max_brightness;
	const char *trigger; /* LEDs; "" for backlights */
	uint32_t bl_power;   /* backlights */
	bool shown;          /* the hardware shows this persona's state */
};

typedef void (*light_desc_fn)(void *userdata, const struct light_desc *ld);

struct leds_class;
struct input_class;

/*
 * leds/class.c: the LED and backlight class; leds/serve.c serves every
 * persona's sysfs views over FUSE. LEDs of input's devices (input may be NULL) are
 * driven through their evdev nodes: register the class after input's, so
 * that it is switched and freed first. *ret is NULL when no lights are
 * configured. Register it with manager_add_class(leds_class_base(lc)).
 * Logs what fails.
 */
int leds_class_new(struct manager *m, const struct conf *conf, struct input_class *input, struct leds_class **ret);
struct device_class *leds_class_base(struct leds_class *lc);
/*
 * leds/hotplug.c: watches the classes the configuration names for lights
 * that come and go, from the class's creation on; a class without the
 * watch keeps the lights found at its creation. Logs what fails.
 */
void leds_watch_lights(struct leds_class *lc);

struct light;
struct light_source;

/*
 * leds/evdev.c: LED code of the input class's device whose kernel
 * device is device (.../inputN) as the light source of l, which then only
 * keeps each persona's trigger (l stays the caller's).
 */
int leds_evdev_source_new(struct light *l, struct input_class *ic, const char *device, unsigned int code,
			  struct light_source **ret);
/* Frees a source made by leds_evdev_source_new(); others are left alone. Returns NULL. */
struct light_source *leds_evdev_source_free(struct light_source *s);

/* Calls fn for each light of persona p (nothing when lc is NULL: no lights configured). */
void leds_foreach_light(struct leds_class *lc, struct persona *p, light_desc_fn fn, void *userdata);
