/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "devnsd-manager.h"

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

/*
 * devnsd-leds.c: the LED and backlight class. Serves every persona's
 * sysfs views over FUSE. Create it after the input class: LEDs of owned
 * input devices are driven through their evdev nodes.
 */
int leds_class_new(struct manager *m, const struct conf *conf, struct device_class **ret);

/* Where the views are mounted; NULL without lights. */
const char *leds_view_dir(struct manager *m);

/* Calls fn for each light of persona p (nothing when no lights are configured). */
void leds_foreach_light(struct manager *m, struct persona *p, light_desc_fn fn, void *userdata);
