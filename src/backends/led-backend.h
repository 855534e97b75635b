/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "led-text.h"

struct led_backend;

enum led_kind {
	LED_KIND_LED,       /* /sys/class/leds/NAME: brightness, max_brightness, trigger */
	LED_KIND_BACKLIGHT, /* /sys/class/backlight/NAME: also actual_brightness and bl_power */
};

/* Highest bl_power value (FB_BLANK_POWERDOWN); 0 is on. */
#define LED_BL_POWER_MAX 4

/*
 * One light: an LED or a backlight. destroy and set_brightness are
 * mandatory; the led_backend_*() wrappers answer -EOPNOTSUPP for the
 * optional ones a backend leaves NULL.
 */
struct led_backend_ops {
	void (*destroy)(struct led_backend *b);
	/* Writes brightness, 0..max_brightness. */
	int (*set_brightness)(struct led_backend *b, uint32_t value);
	/* Optional: selects triggers.names[index] (LEDs). */
	int (*set_trigger)(struct led_backend *b, size_t index);
	/* Optional: writes bl_power, 0..LED_BL_POWER_MAX (backlights). */
	int (*set_power)(struct led_backend *b, uint32_t power);
	/* Optional: reads the brightness the hardware reports (actual_brightness). */
	int (*get_actual)(struct led_backend *b, uint32_t *ret);
};

struct led_backend {
	const struct led_backend_ops *ops;
	enum led_kind kind;
	/* The directory's name, e.g. "input0::capslock". */
	char *name;
	/* Where the light came from, for messages. */
	char *path;
	uint32_t max_brightness;
	/* The state found when the light was opened. */
	uint32_t brightness;
	uint32_t bl_power;
	size_t trigger;
	/* Every trigger the LED offers, "none" first; only "none" for backlights. */
	struct led_triggers triggers;
};

struct led_backend *led_backend_free(struct led_backend *b);
static inline void led_backend_freep(struct led_backend **b) {
	led_backend_free(*b);
}
int led_backend_set_brightness(struct led_backend *b, uint32_t value);
int led_backend_set_trigger(struct led_backend *b, size_t index);
int led_backend_set_power(struct led_backend *b, uint32_t power);
int led_backend_get_actual(struct led_backend *b, uint32_t *ret);

/*
 * sysfs LED: a directory with brightness, max_brightness and trigger, such
 * as /sys/class/leds/NAME (or a link to one). -ENOENT when an attribute is
 * missing, -EINVAL when one does not read as expected.
 */
int led_sysfs_open(const char *path, struct led_backend **ret);

/* sysfs backlight: brightness, max_brightness, actual_brightness and bl_power. */
int backlight_sysfs_open(const char *path, struct led_backend **ret);

/*
 * fake: a light in memory. LEDs offer the triggers "none", "timer" and
 * "heartbeat". Every write is recorded for led_fake_written().
 */
int led_fake_new(enum led_kind kind, const char *name, uint32_t max_brightness, struct led_backend **ret);

/* One write the fake light received. */
struct led_fake_write {
	enum { LED_FAKE_BRIGHTNESS, LED_FAKE_TRIGGER, LED_FAKE_POWER } attr;
	uint32_t value; /* the trigger's index for LED_FAKE_TRIGGER */
};
/* The writes so far (at most the last 256). */
size_t led_fake_written(struct led_backend *b, const struct led_fake_write **ret);
void led_fake_clear_written(struct led_backend *b);
/* What the fake light shows now. */
uint32_t led_fake_brightness(struct led_backend *b);
