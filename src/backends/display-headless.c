/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "display-backend.h"
#include "util.h"

/* Frames go to memory; flips complete at once. What unit tests and display-less machines run on. */
struct headless {
	struct display_output base;
	/* Flips complete when display_output_flip_done() is called. */
	bool hold_flips;
};

static const struct display_output_ops headless_ops;

static int headless_flip(struct display_output *b, unsigned int i) {
	(void)i;
	return container_of(b, struct headless, base)->hold_flips ? 0 : 1;
}

/* Nothing to power: what a test sees is b->powered_down. */
static int headless_set_power(struct display_output *b, bool on) {
	(void)b;
	(void)on;
	return 0;
}

static void headless_destroy(struct display_output *b) {
	for (unsigned int i = 0; i < b->n_buffers; i++)
		free(b->buffers[i].map);
	free(container_of(b, struct headless, base));
}

static const struct display_output_ops headless_ops = {
	.flip = headless_flip,
	.set_power = headless_set_power,
	.destroy = headless_destroy,
};

int display_headless_new(uint32_t width, uint32_t height, const struct display_spares *spares,
			 struct display_output **ret) {
	struct headless *h;

	if (width == 0 || height == 0 || width > FB_STATE_MAX_SIDE || height > FB_STATE_MAX_SIDE)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->base.ops = &headless_ops;
	h->base.kind = "headless";
	h->base.fd = -1;
	h->base.mode = (struct fb_mode){ .width = width, .height = height, .refresh_hz = 60 };
	h->base.n_buffers = 2 + display_spares_allowed(spares, (uint64_t)width * 4 * height);
	for (unsigned int i = 0; i < h->base.n_buffers; i++) {
		h->base.buffers[i].stride = width * 4;
		h->base.buffers[i].map = calloc(height, (size_t)width * 4);
		if (!h->base.buffers[i].map) {
			headless_destroy(&h->base);
			return -ENOMEM;
		}
	}
	display_output_init_buffers(&h->base);
	*ret = &h->base;
	return 0;
}

void display_headless_hold_flips(struct display_output *b, bool hold) {
	if (b->ops == &headless_ops)
		container_of(b, struct headless, base)->hold_flips = hold;
}
