/* SPDX-License-Identifier: MIT */
/* Each open file's events: reserved when asked for, queued when due, read whole. */
#include "drm-internal.h"
#include "util.h"

#define EVENT_LEN sizeof(struct drm_event_vblank)

int drm_event_reserve(struct drm_file *f) {
	if (f->event_space < EVENT_LEN)
		return -ENOMEM;
	f->event_space -= EVENT_LEN;
	return 0;
}

void drm_event_unreserve(struct drm_file *f) {
	f->event_space += EVENT_LEN;
}

void drm_event_send(struct drm_file *f, uint32_t type, uint64_t user_data, uint64_t seq, uint64_t usec) {
	struct drm_event_vblank *e;

	/* The space was reserved: the ring has room for every event the space allows. */
	if (f->q_len >= DRM_FILE_EVENTS_MAX)
		return;
	e = &f->queue[(f->q_head + f->q_len) % DRM_FILE_EVENTS_MAX];
	*e = (struct drm_event_vblank){
		.base = { .type = type, .length = EVENT_LEN },
		.user_data = user_data,
		.tv_sec = (uint32_t)(usec / 1000000),
		.tv_usec = (uint32_t)(usec % 1000000),
		.sequence = (uint32_t)seq,
		.crtc_id = DRM_NODE_CRTC_ID,
	};
	f->q_len++;
	signal_emit(&f->node->events.readable, f);
}

int drm_pending_add(struct drm_node *n, struct drm_file *f, uint32_t type, bool flip, uint64_t target,
		    uint64_t user_data) {
	struct drm_pending *p;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (struct drm_pending){ .file = f, .type = type, .flip = flip, .target = target, .user_data = user_data };
	TAILQ_INSERT_TAIL(&n->pending, p, link);
	n->n_flips += flip;
	return 0;
}

void drm_pending_flush(struct drm_node *n, uint64_t usec) {
	struct drm_pending *p;

	/* A CRTC going off sends every event waiting on it, as the kernel's vblank off does. */
	while ((p = TAILQ_FIRST(&n->pending))) {
		TAILQ_REMOVE(&n->pending, p, link);
		drm_event_send(p->file, p->type, p->user_data, n->seq, usec);
		free(p);
	}
	n->n_flips = 0;
	n->flip_pending = false;
}

void drm_pending_drop_file(struct drm_node *n, struct drm_file *f) {
	struct drm_pending *p, *next;

	for (p = TAILQ_FIRST(&n->pending); p; p = next) {
		next = TAILQ_NEXT(p, link);
		if (p->file != f)
			continue;
		TAILQ_REMOVE(&n->pending, p, link);
		n->n_flips -= p->flip;
		drm_event_unreserve(f);
		free(p);
	}
}

ssize_t drm_file_read(struct drm_file *f, void *buf, size_t count) {
	size_t done = 0;

	if (f->q_len == 0)
		return -EAGAIN;
	/* Whole events only; one that does not fit stays first in the queue. */
	while (f->q_len > 0 && count - done >= EVENT_LEN) {
		memcpy((uint8_t *)buf + done, &f->queue[f->q_head], EVENT_LEN);
		f->q_head = (f->q_head + 1) % DRM_FILE_EVENTS_MAX;
		f->q_len--;
		f->event_space += EVENT_LEN;
		done += EVENT_LEN;
	}
	return (ssize_t)done;
}

bool drm_file_readable(const struct drm_file *f) {
	return f->q_len > 0;
}
