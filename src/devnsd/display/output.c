/* SPDX-License-Identifier: MIT */
/*
 * The display's outputs (display-backend.h): the configured device, driven
 * by the configured backend, and what presents in memory while it is gone.
 */
#include <stdlib.h>

#include "display/display-internal.h"
#include "display-backend.h"
#include "util.h"

const char *display_device_of(const struct conf *conf) {
	switch (conf->display) {
	case DISPLAY_DRM:
		return conf->display_device ?: "/dev/dri/card0";
	case DISPLAY_FBDEV:
		return conf->display_device ?: "/dev/fb0";
	default:
		return NULL;
	}
}

int display_open_output(const struct conf *conf, const char *device, uint32_t width, uint32_t height,
			struct display_output **ret) {
	const struct display_spares spares = { conf->display_spares, conf->display_spare_bytes };
	_cleanup_(freep) char *node = NULL;
	struct display_output *b = NULL;
	int r;

	device = device ?: display_device_of(conf);
	if (device) {
		/* The backends open the node itself: a udev link (/dev/dri/by-path/...) leads there first. */
		node = realpath(device, NULL);
		if (!node)
			return -errno;
		device = node;
	}
	switch (conf->display) {
	case DISPLAY_DRM:
		return display_drm_open(device, width ?: conf->display_width, width ? height : conf->display_height,
					&spares, ret);
	case DISPLAY_FBDEV:
		r = display_fbdev_open(device, &b);
		if (r >= 0 && width && (b->mode.width != width || b->mode.height != height)) {
			display_output_free(b);
			return -EMEDIUMTYPE;
		}
		if (r >= 0)
			*ret = b;
		return r;
	default:
		return display_headless_new(conf->display_width, conf->display_height, &spares, ret);
	}
}

int display_stand_in_new(uint32_t width, uint32_t height, struct display_output **ret) {
	return display_headless_new(width, height, &(struct display_spares){ 0, 0 }, ret);
}
