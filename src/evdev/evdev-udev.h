/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

struct libevdev;

/*
 * The udev properties (ID_INPUT, ID_INPUT_KEYBOARD, ID_INPUT_TOUCHSCREEN...)
 * a device of this description gets, as "KEY=VALUE\n" lines: what libinput
 * and other udev clients inside a container look for. Returns the length,
 * or -ENOBUFS.
 */
int evdev_udev_properties(const struct libevdev *desc, char *buf, size_t size);
