/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <libevdev/libevdev.h>
#include <stdio.h>

#include "evdev-udev.h"

static bool has_key(const struct libevdev *d, unsigned int code) {
	return libevdev_has_event_code(d, EV_KEY, code);
}

static bool any_key_below(const struct libevdev *d, unsigned int limit) {
	for (unsigned int code = 1; code < limit; code++)
		if (has_key(d, code))
			return true;
	return false;
}

int evdev_udev_properties(const struct libevdev *d, char *buf, size_t size) {
	bool abs_xy = (libevdev_has_event_code(d, EV_ABS, ABS_X) && libevdev_has_event_code(d, EV_ABS, ABS_Y)) ||
		      (libevdev_has_event_code(d, EV_ABS, ABS_MT_POSITION_X) &&
		       libevdev_has_event_code(d, EV_ABS, ABS_MT_POSITION_Y));
	bool direct = libevdev_has_property(d, INPUT_PROP_DIRECT);
	struct {
		const char *name;
		bool on;
	} props[] = {
		{ "ID_INPUT", true },
		{ "ID_INPUT_KEY", any_key_below(d, BTN_MISC) },
		{ "ID_INPUT_KEYBOARD", has_key(d, KEY_A) && has_key(d, KEY_ENTER) },
		{ "ID_INPUT_MOUSE", libevdev_has_event_code(d, EV_REL, REL_X) &&
					    libevdev_has_event_code(d, EV_REL, REL_Y) && has_key(d, BTN_LEFT) },
		{ "ID_INPUT_TOUCHSCREEN", abs_xy && direct && has_key(d, BTN_TOUCH) },
		{ "ID_INPUT_TOUCHPAD", abs_xy && !direct && has_key(d, BTN_TOOL_FINGER) && !has_key(d, BTN_TOOL_PEN) },
		{ "ID_INPUT_TABLET", abs_xy && has_key(d, BTN_TOOL_PEN) },
		{ "ID_INPUT_JOYSTICK", has_key(d, BTN_JOYSTICK) || has_key(d, BTN_GAMEPAD) },
		{ "ID_INPUT_SWITCH", libevdev_has_event_type(d, EV_SW) },
	};
	size_t len = 0;

	for (size_t i = 0; i < sizeof(props) / sizeof(props[0]); i++) {
		int n;
		if (!props[i].on)
			continue;
		n = snprintf(buf + len, size - len, "%s=1\n", props[i].name);
		if (n < 0 || (size_t)n >= size - len)
			return -ENOBUFS;
		len += (size_t)n;
	}
	return (int)len;
}
