/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "display-backend.h"
#include "util.h"

static void mark_all_stale(struct display_output *b) {
	for (unsigned int i = 0; i < b->n_buffers; i++) {
		b->buffers[i].stale0 = 0;
		b->buffers[i].stale1 = b->mode.height;
	}
}

unsigned int display_spares_allowed(const struct display_spares *want, uint64_t frame_bytes) {
	uint64_t fit = frame_bytes ? want->bytes / frame_bytes : 0;

	return (unsigned int)MIN(MIN((uint64_t)want->count, fit), (uint64_t)DISPLAY_MAX_SPARES);
}

void display_output_init_buffers(struct display_output *b) {
	unsigned int n = b->n_buffers;

	b->back = n > 1 ? (b->front + 1) % n : b->front;
	b->n_spares = 0;
	for (unsigned int k = 2; k < n && b->n_spares < DISPLAY_MAX_SPARES; k++)
		b->spares[b->n_spares++] = (b->front + k) % n;
	mark_all_stale(b);
}

/* Where buffer i is among the spares, or n_spares. */
static unsigned int spare_rank(const struct display_output *b, unsigned int i) {
	unsigned int k;

	for (k = 0; k < b->n_spares; k++)
		if (b->spares[k] == i)
			break;
	return k;
}

bool display_output_is_spare(const struct display_output *b, unsigned int i) {
	return spare_rank(b, i) < b->n_spares;
}

static void copy_rows(struct display_buffer *dst, const uint8_t *src, uint32_t stride, uint32_t width, uint32_t y0,
		      uint32_t y1) {
	size_t line = (size_t)width * 4;

	for (uint32_t y = y0; y < y1; y++) {
		uint8_t *to = dst->map + (size_t)y * dst->stride;
		if (src)
			memcpy(to, src + (size_t)y * stride, line);
		else
			memset(to, 0, line);
	}
}

/* Rows [y0, y1) of buf no longer match the latest frame. */
static void mark_stale(struct display_buffer *buf, uint32_t y0, uint32_t y1) {
	if (y0 >= y1)
		return;
	if (buf->stale0 >= buf->stale1) {
		buf->stale0 = y0;
		buf->stale1 = y1;
	} else {
		buf->stale0 = MIN(buf->stale0, y0);
		buf->stale1 = MAX(buf->stale1, y1);
	}
}

int display_output_begin(struct display_output *b, uint32_t y0, uint32_t y1) {
	struct display_buffer *back;

	if (b->flip_pending || b->copying)
		return -EBUSY;
	y1 = MIN(y1, b->mode.height);
	for (unsigned int i = 0; i < b->n_buffers; i++)
		mark_stale(&b->buffers[i], y0, y1);
	back = display_output_back(b);
	b->copy_y = b->copy_y0 = back->stale0;
	b->copy_y1 = back->stale1;
	back->stale0 = back->stale1 = 0;
	b->copying = true;
	return 0;
}

int display_output_begin_reuse(struct display_output *b, unsigned int i) {
	struct display_buffer *back;

	if (b->flip_pending || b->copying)
		return -EBUSY;
	if (i != b->back) {
		unsigned int k = spare_rank(b, i);

		if (k >= b->n_spares)
			return -EINVAL;
		/* The back buffer holds the least wanted frame: it goes last. */
		memmove(&b->spares[k], &b->spares[k + 1], (b->n_spares - k - 1) * sizeof(b->spares[0]));
		b->spares[b->n_spares - 1] = b->back;
		b->back = i;
	}
	mark_all_stale(b);
	back = display_output_back(b);
	back->stale0 = back->stale1 = 0;
	b->copy_y = b->copy_y0 = b->copy_y1 = 0;
	b->copying = true;
	return 0;
}

struct display_buffer *display_output_back(struct display_output *b) {
	return &b->buffers[b->back];
}

int display_output_stage(struct display_output *b, unsigned int i, const uint8_t *src, uint32_t stride, uint32_t y0,
			 uint32_t y1) {
	if (!display_output_is_spare(b, i))
		return -EINVAL;
	if (b->flip_pending && i == b->leaving)
		return -EBUSY;
	copy_rows(&b->buffers[i], src, stride, b->mode.width, y0, MIN(y1, b->mode.height));
	return 0;
}

uint64_t display_output_frame_bytes(const struct display_output *b) {
	return (uint64_t)b->buffers[0].stride * (b->screen_height ?: b->mode.height);
}

uint64_t display_output_memory(const struct display_output *b) {
	return display_output_frame_bytes(b) * b->n_buffers;
}

int display_output_copy(struct display_output *b, const uint8_t *src, uint32_t stride, uint32_t max_rows) {
	struct display_buffer *back = display_output_back(b);
	uint32_t y1;

	if (!b->copying)
		return -EINVAL;
	y1 = b->copy_y1 - b->copy_y > max_rows ? b->copy_y + max_rows : b->copy_y1;
	copy_rows(back, src, stride, b->mode.width, b->copy_y, y1);
	b->copy_y = y1;
	return b->copy_y >= b->copy_y1;
}

/* Rows [y0, y1) of the back buffer are stale; no copy is under way any more. */
static void abort_rows(struct display_output *b, uint32_t y0, uint32_t y1) {
	b->copying = false;
	mark_stale(display_output_back(b), y0, y1);
}

int display_output_finish(struct display_output *b, bool switching) {
	unsigned int next = b->back, old = b->front;
	int r;

	if (!b->copying || b->copy_y < b->copy_y1)
		return -EINVAL;
	b->copying = false;
	r = b->ops->flip(b, next);
	if (r < 0) {
		/* The buffer holds the frame but is not shown: it is stale for the next try. */
		abort_rows(b, b->copy_y0, b->copy_y1);
		return r;
	}
	b->n_flips++;
	b->front = next;
	if (switching && b->n_spares > 0) {
		/* The frame shown until now is kept; the least recent spare takes the next frames. */
		b->back = b->spares[b->n_spares - 1];
		memmove(&b->spares[1], &b->spares[0], (b->n_spares - 1) * sizeof(b->spares[0]));
		b->spares[0] = old;
		b->buffers[b->back].stale0 = 0;
		b->buffers[b->back].stale1 = b->mode.height;
	} else
		b->back = old;
	if (r == 0) {
		b->flip_pending = true;
		b->leaving = old;
	}
	return 0;
}

void display_output_abort(struct display_output *b) {
	if (b->copying)
		abort_rows(b, b->copy_y0, b->copy_y1);
}

int display_output_present(struct display_output *b, const uint8_t *src, uint32_t stride, uint32_t y0,
			    uint32_t y1) {
	int r;

	r = display_output_begin(b, y0, y1);
	if (r < 0)
		return r;
	display_output_copy(b, src, stride, UINT32_MAX);
	return display_output_finish(b, false);
}

const struct display_buffer *display_output_front(const struct display_output *b) {
	return &b->buffers[b->front];
}

void display_output_flip_done(struct display_output *b) {
	b->flip_pending = false;
	if (b->flip_done)
		b->flip_done(b->userdata);
}

int display_output_dispatch(struct display_output *b) {
	return b->ops->dispatch ? b->ops->dispatch(b) : 0;
}

bool display_output_gone(struct display_output *b) {
	return b->ops->gone && b->ops->gone(b);
}

int display_output_set_power(struct display_output *b, bool on) {
	int r;

	if (b->powered_down == !on)
		return 0;
	if (!b->ops->set_power)
		return -EOPNOTSUPP;
	if (b->flip_pending || b->copying)
		return -EBUSY;
	r = b->ops->set_power(b, on);
	/* Up, or taken to be: a display that cannot come up shows it in what fails next. */
	if (r >= 0 || on)
		b->powered_down = !on;
	return r < 0 ? r : 0;
}

struct display_output *display_output_free(struct display_output *b) {
	if (b)
		b->ops->destroy(b);
	return NULL;
}
