/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * The text of LED and backlight attributes, as sysfs shows and takes it:
 * numbers with a newline, and trigger lists with the current one in brackets.
 */

/* Triggers kept per LED; a longer list is cut (the current one is kept). */
#define LED_TRIGGERS_MAX 128
/* Longest trigger name kept, without the terminating NUL. */
#define LED_TRIGGER_NAME_MAX 47
/* Most bytes an attribute shows, and most bytes of one write() it takes. */
#define LED_TEXT_MAX 4096

struct led_triggers {
	char names[LED_TRIGGERS_MAX][LED_TRIGGER_NAME_MAX + 1];
	size_t n;
};

/*
 * Reads a trigger list as sysfs shows it ("none [timer] heartbeat\n").
 * "none" always comes first in *ret; *ret_current is the index of the
 * bracketed name (0, "none", when no name is bracketed).
 */
void led_triggers_parse(const char *text, struct led_triggers *ret, size_t *ret_current);

/*
 * Writes the list, the current trigger in brackets, ending in a newline.
 * Returns the length, or -ENOBUFS when it does not fit into size bytes.
 */
int led_triggers_format(const struct led_triggers *t, size_t current, char *buf, size_t size);

/* The index of a written trigger name (one trailing newline allowed), or -EINVAL. */
int led_triggers_find(const struct led_triggers *t, const char *buf, size_t len);

/*
 * Parses a written number as the kernel's kstrtoul() does: an optional '+',
 * digits in base (10, or 0 for C prefixes: 0x hex, 0 octal), one optional
 * trailing newline. -EINVAL for anything else, or a value above max.
 */
int led_parse_value(const char *buf, size_t len, unsigned int base, uint32_t max, uint32_t *ret);
