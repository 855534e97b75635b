/* SPDX-License-Identifier: MIT */
#pragma once

#include "devnsd-manager.h"

/*
 * Input hotplug: evdev devices that match [Input] Devices= and appear
 * while devnsd runs are mirrored into every persona; devices that go
 * away are taken out (input_device_appeared(), input_device_vanished()).
 */
struct input_hotplug;

/* Starts watching. Call before the loop runs; devices opened at start are recognised. */
int input_hotplug_new(struct manager *m, struct input_hotplug **ret);
struct input_hotplug *input_hotplug_free(struct input_hotplug *ih);
static inline void input_hotplug_freep(struct input_hotplug **ih) {
	input_hotplug_free(*ih);
}
