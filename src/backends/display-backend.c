/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include "display-backend.h"
#include "util.h"

void display_output_init_buffers(struct display_output *b) {
	for (unsigned int i = 0; i < b->n_buffers; i++) {
		b->buffers[i].stale0 = 0;
		b->buffers[i].stale1 = b->mode.height;
	}
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

int display_output_present(struct display_output *b, const uint8_t *src, uint32_t stride, uint32_t y0,
			    uint32_t y1) {
	struct display_buffer *back;
	unsigned int next;
	int r;

	if (b->flip_pending)
		return -EBUSY;
	y1 = MIN(y1, b->mode.height);
	for (unsigned int i = 0; i < b->n_buffers; i++) {
		struct display_buffer *buf = &b->buffers[i];
		if (y0 >= y1)
			break;
		if (buf->stale0 >= buf->stale1) {
			buf->stale0 = y0;
			buf->stale1 = y1;
		} else {
			buf->stale0 = MIN(buf->stale0, y0);
			buf->stale1 = MAX(buf->stale1, y1);
		}
	}
	next = (b->front + 1) % b->n_buffers;
	back = &b->buffers[next];
	if (back->stale0 < back->stale1)
		copy_rows(back, src, stride, b->mode.width, back->stale0, back->stale1);
	back->stale0 = back->stale1 = 0;

	r = b->ops->flip(b, next);
	if (r < 0)
		return r;
	b->n_flips++;
	b->front = next;
	if (r == 0)
		b->flip_pending = true;
	return 0;
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

struct display_output *display_output_free(struct display_output *b) {
	if (b)
		b->ops->destroy(b);
	return NULL;
}
