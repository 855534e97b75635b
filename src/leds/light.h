/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "led-backend.h"

/*
 * A light shared among personas: each owner (persona) has its own state,
 * and the policy decides whose state the hardware shows. Transport-free:
 * the sysfs views map onto it, and unit tests drive it with the fake backend.
 */

enum light_policy {
	LIGHT_EXCLUSIVE, /* the hardware shows the active owner's state */
	LIGHT_SHARED,    /* the hardware shows the brightest state, the active owner's on a tie */
};

struct light_source;

/*
 * A light as a persona's view reads and writes it, whatever drives the
 * hardware: a sysfs LED or backlight (struct light, below), or an LED of
 * an evdev device devnsd owns, whose state is each persona's evdev node's
 * (leds/evdev.c). The LED class treats every source alike. All ops
 * are mandatory; owner is the persona.
 */
struct light_source_ops {
	/* The owner's brightness, as its view reads it. */
	uint32_t (*brightness)(struct light_source *s, const void *owner);
	/* The owner writes brightness (range checked by the caller); 0 also ends its trigger. */
	int (*set_brightness)(struct light_source *s, const void *owner, uint32_t value);
	/* The owner picks trigger index; leaving a trigger for another turns the light off. */
	int (*set_trigger)(struct light_source *s, const void *owner, size_t index);
	/* Whether the hardware shows the owner's state now. */
	bool (*shows)(struct light_source *s, const void *owner);
};

struct light_source {
	const struct light_source_ops *ops;
	/* Each owner's state (trigger, bl_power, and brightness unless the source keeps it), and the hardware. */
	struct light *light;
};

/* One owner's state, as its view shows it. */
struct light_state {
	const void *owner;
	uint32_t brightness;
	uint32_t bl_power;
	size_t trigger; /* index in backend->triggers; 0 is "none" */
	LIST_ENTRY(light_state) link;
};

struct light {
	/* The light as a sysfs source: its ops drive the backend through the policy. */
	struct light_source source;
	struct led_backend *backend;
	enum light_policy policy;
	/* The hardware is driven elsewhere (an input LED): nothing is written to it here. */
	bool detached;
	/* A backlight whose display is powered down: its hardware is powered down too, whatever the states. */
	bool blanked;
	const void *active;
	/* What was last written to the hardware (or found there). */
	struct light_state hw;
	/* What new owners start from: the hardware as found, powered up (see light_add_owner()). */
	struct light_state start;
	/* The owner whose state the hardware shows. */
	const void *shown;
	LIST_HEAD(, light_state) states;
};

/* A light over backend (taken over, also on failure). */
int light_new(struct light **ret, struct led_backend *backend, enum light_policy policy);
struct light *light_free(struct light *l);
static inline void light_freep(struct light **l) {
	light_free(*l);
}

/*
 * A new owner, starting with the state the hardware had when it was
 * opened, except that a backlight found powered down (bl_power
 * LED_BL_POWER_MAX) starts powered up: what powers a backlight down is its
 * display's blanking (light_set_blanked(), which a daemon killed while the
 * display was down leaves in place), not a persona's choice. -EEXIST if known.
 */
int light_add_owner(struct light *l, const void *owner);
/* Forgets an owner; with the shared policy the hardware may change. */
int light_remove_owner(struct light *l, const void *owner);
/* The owner's state, or NULL. */
const struct light_state *light_state_of(const struct light *l, const void *owner);

/*
 * An owner's writes. Each changes its state and, when the policy has the
 * hardware show that state, the hardware. -EINVAL for a value out of range
 * (nothing changes then); other errors are the hardware's, the state is kept.
 * As in the kernel, brightness 0 turns the trigger off, and leaving a
 * trigger for another turns the light off.
 */
int light_set_brightness(struct light *l, const void *owner, uint32_t value);
int light_set_trigger(struct light *l, const void *owner, size_t index);
int light_set_power(struct light *l, const void *owner, uint32_t power);

/* Makes owner the active one; the hardware then shows what the policy picks. */
int light_set_active(struct light *l, const void *owner);

/*
 * The display powered down (blanked) or up: a backlight's hardware then
 * has bl_power LED_BL_POWER_MAX, or what the policy picks again. The
 * owners' states are kept as they are.
 */
int light_set_blanked(struct light *l, bool blanked);

/* The state the policy has the hardware show (NULL without owners). */
const struct light_state *light_pick(const struct light *l);
