/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What the LED class's files share: the class (class.c: lights, personas,
 * switching), the persona views it serves (serve.c), lights that come and
 * go (hotplug.c) and each persona's state for a restart (state.c).
 *
 * They call one way: hotplug.c calls class.c, which calls serve.c and
 * state.c, and evdev.c for an input LED's source.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "leds/leds.h"
#include "led-backend.h"
#include "light.h"
#include "sysfs-view.h"

/* Input devices with LEDs that may come at once (a hub of keyboards), waiting for their evdev devices. */
#define LEDS_PENDING_MAX 16

/* One configured LED or backlight; a free slot has no light. */
struct leds_light {
	struct leds_class *class;
	struct light *light;
	/* What views read and write: the light itself, or an LED of an owned input device. */
	struct light_source *source;
	/* The directory, as it resolved when the light was opened. */
	char *real;
};

/* One persona's view of one light: what its attribute files stand for. */
struct leds_view {
	struct leds_light *ll;
	struct persona *persona;
	struct sysfs_node *dir;
};

struct leds_persona {
	struct persona *persona;
	struct sysfs_node *root;
	struct sysfs_node *class_dir[2];
	struct leds_view *views;
	LIST_ENTRY(leds_persona) link;
};

struct leds_class {
	struct device_class base;
	/* The input class, whose devices' LEDs go through their evdev nodes; NULL without one. */
	struct input_class *input;
	struct sysfs_view *view;
	char *mountpoint;
	/* The views' file system, and whether a copy of its mount is in PID 1's mount namespace. */
	dev_t view_dev;
	bool published;
	/* Slots up to n_lights; lights that went leave free slots, which new ones take. */
	struct leds_light lights[LEDS_MAX_LIGHTS * 2];
	size_t n_lights;
	size_t n_kind[2];
	/* Whether [Leds] and [Backlight] name lights: their class directories are in every view. */
	bool configured[2];
	/* Lights come and go in the sysfs classes that [Leds] and [Backlight] name. */
	struct hotplug *hotplug;
	/* LEDs of input devices whose evdev device has not come yet (its handler may attach after the LED's). */
	struct pending_led {
		char sysname[NAME_MAX + 1];
		char syspath[256];
	} pending[LEDS_PENDING_MAX];
	size_t n_pending;
	/*
	 * The display is powered down: so are the backlights, as the kernel's
	 * fbdev blanking powers down the backlights it notifies.
	 */
	struct listener display_power;
	bool display_down;
	LIST_HEAD(, leds_persona) personas;
};

/* The kernel's class directory of each kind of light: "leds", "backlight". */
extern const char *const leds_kind_dir[LED_KIND_BACKLIGHT + 1];

/* The light in slot i, or NULL for a free slot. */
static inline struct leds_light *light_at(struct leds_class *lc, size_t i) {
	return lc->lights[i].light ? &lc->lights[i] : NULL;
}

static inline struct led_backend *backend_of(const struct leds_view *v) {
	return v->ll->light->backend;
}

static inline const struct light_state *state_of(const struct leds_view *v) {
	return light_state_of(v->ll->light, v->persona);
}

static inline uint32_t brightness_of(const struct leds_view *v) {
	struct light_source *src = v->ll->source;

	return src->ops->brightness(src, v->persona);
}

/* Persona p's views, or NULL. */
static inline struct leds_persona *leds_persona_of(struct leds_class *lc, struct persona *p) {
	struct leds_persona *lp;

	LIST_FOREACH(lp, &lc->personas, link)
		if (lp->persona == p)
			return lp;
	return NULL;
}

/* class.c: whether a light of that kind is configured already, by its resolved directory or its name. */
bool leds_light_known(struct leds_class *lc, const char *real, const char *name, enum led_kind kind);
/* class.c: whether an LED of an input device that has no evdev device yet waits for it. */
bool leds_light_waits(struct leds_class *lc, enum led_kind kind, const char *sysname, const char *syspath);
/* class.c: opens the light at path (0 also when known or ignored, warned). Logs what fails. */
int leds_open_light(struct leds_class *lc, enum led_kind kind, const char *path, const struct conf_devices *d);
/* class.c: closes a light and removes its views. */
void leds_close_light(struct leds_class *lc, struct leds_light *ll);

/* serve.c: gives persona lp a view of the light in slot i. */
int leds_add_light_view(struct leds_class *lc, struct leds_persona *lp, size_t i);
/* serve.c: mounts the persona views at lc->mountpoint (logged on failure). */
int leds_serve_views(struct leds_class *lc);
/* serve.c: mounts the views in PID 1's mount namespace too, where devnsd runs sandboxed. */
void leds_publish_views(struct leds_class *lc);
/* serve.c: where the views are mounted: $DEVNS_VIEW_DIR when set to an absolute path, else DEVNS_VIEW_DIR. */
char *leds_view_dir(void);

/* state.c: registers the class's part of the state record. */
int leds_state_register(struct leds_class *lc);
