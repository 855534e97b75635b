/* SPDX-License-Identifier: MIT */
#pragma once

#include "input/input.h"

/*
 * Input hotplug: evdev devices that match [Input] Devices= and appear
 * while devnsd runs get a node in every persona; devices that go away
 * release what was held, answer ENODEV and are removed. Attached
 * containers follow (populate_node()).
 */
struct input_hotplug;

/* How long the nodes of a device that went away stay for handles still open on them (answering ENODEV). */
#define INPUT_GONE_LINGER_USEC (2 * 1000000ULL)

/*
 * Starts watching for the input class ic. Devices it has already are
 * recognised when announced. Logs what fails.
 */
int input_hotplug_new(struct manager *m, struct input_class *ic, struct input_hotplug **ret);
struct input_hotplug *input_hotplug_free(struct input_hotplug *ih);
static inline void input_hotplug_freep(struct input_hotplug **ih) {
	input_hotplug_free(*ih);
}

/*
 * A node of the last run whose device went while devnsd was down
 * ("devns/PERSONA/eventN", with the udev properties it had): the persona's
 * attached container loses it as if the device went now. The node must
 * still be in /dev. Other nodes (routed, framebuffer) are left alone.
 */
int input_hotplug_gone_while_down(struct manager *m, const char *devname, const char *udev);

/* The transport: node in of a device that came while devnsd ran is in /dev now. */
void input_hotplug_node_ready(struct input_node *in);
