/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/input.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * One reader's bounded event queue, with the kernel evdev's semantics:
 * readers see whole packets only (up to the last SYN_REPORT), an empty
 * SYN_REPORT is never queued, and on overflow everything unread is dropped
 * for SYN_DROPPED followed by the newest event.
 */
struct evdev_queue {
	struct input_event *buf;
	unsigned int size; /* a power of two */
	unsigned int head, tail, packet_head;
};

#define EVDEV_QUEUE_MIN 64
#define EVDEV_QUEUE_MAX 4096

/* Allocates room for at least n events (rounded to a power of two, clamped to MIN..MAX). */
int evdev_queue_init(struct evdev_queue *q, unsigned int n);
void evdev_queue_fini(struct evdev_queue *q);

/* Queues one event. Returns true when it completed a packet. */
bool evdev_queue_push(struct evdev_queue *q, const struct input_event *ev);

/* True when a whole packet is ready to read. */
static inline bool evdev_queue_readable(const struct evdev_queue *q) {
	return q->packet_head != q->tail;
}

/* Takes up to max events from the ready packets. Returns how many. */
size_t evdev_queue_pop(struct evdev_queue *q, struct input_event *out, size_t max);

/* Removes queued events of one type, and the SYN_REPORTs left empty by that. */
void evdev_queue_flush_type(struct evdev_queue *q, unsigned int type);

/* Drops everything queued. */
void evdev_queue_clear(struct evdev_queue *q);
