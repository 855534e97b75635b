/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "evdev-queue.h"

int evdev_queue_init(struct evdev_queue *q, unsigned int n) {
	unsigned int size = EVDEV_QUEUE_MIN;

	while (size < n && size < EVDEV_QUEUE_MAX)
		size <<= 1;
	*q = (struct evdev_queue){ .size = size };
	q->buf = calloc(size, sizeof(*q->buf));
	return q->buf ? 0 : -ENOMEM;
}

void evdev_queue_fini(struct evdev_queue *q) {
	free(q->buf);
	*q = (struct evdev_queue){ 0 };
}

static bool is_report(const struct input_event *ev) {
	return ev->type == EV_SYN && ev->code == SYN_REPORT;
}

bool evdev_queue_push(struct evdev_queue *q, const struct input_event *ev) {
	unsigned int mask = q->size - 1;

	if (is_report(ev) && q->packet_head == q->head)
		return false;

	q->buf[q->head] = *ev;
	q->head = (q->head + 1) & mask;

	if (q->head == q->tail) {
		/* Full: keep SYN_DROPPED and the newest event only. */
		q->tail = (q->head - 2) & mask;
		q->buf[q->tail] = (struct input_event){
			.time = ev->time,
			.type = EV_SYN,
			.code = SYN_DROPPED,
		};
		q->packet_head = q->tail;
	}

	if (is_report(ev)) {
		q->packet_head = q->head;
		return true;
	}
	return false;
}

size_t evdev_queue_pop(struct evdev_queue *q, struct input_event *out, size_t max) {
	size_t n = 0;

	while (n < max && q->tail != q->packet_head) {
		out[n++] = q->buf[q->tail];
		q->tail = (q->tail + 1) & (q->size - 1);
	}
	return n;
}

void evdev_queue_flush_type(struct evdev_queue *q, unsigned int type) {
	unsigned int mask = q->size - 1;
	unsigned int out = q->tail;
	/* Events kept since the last kept SYN_REPORT; 1 keeps a leading report. */
	unsigned int kept = 1;

	q->packet_head = q->tail;
	for (unsigned int i = q->tail; i != q->head; i = (i + 1) & mask) {
		struct input_event ev = q->buf[i];
		bool report = is_report(&ev);

		if (ev.type == type || (report && kept == 0))
			continue;
		q->buf[out] = ev;
		out = (out + 1) & mask;
		kept++;
		if (report) {
			kept = 0;
			q->packet_head = out;
		}
	}
	q->head = out;
}

void evdev_queue_clear(struct evdev_queue *q) {
	q->head = q->tail = q->packet_head = 0;
}
