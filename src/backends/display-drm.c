/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

#include "display-backend.h"
#include "drm-dumb.h"
#include "util.h"

/* KMS: dumb buffers, legacy page flips with completion events from the DRM fd, power by the connector's DPMS. */
struct drm {
	struct display_output base;
	uint32_t connector_id, crtc_id;
	uint32_t dpms_prop; /* 0: the connector has none */
	drmModeModeInfo mode;
	drmModeCrtc *saved; /* what the CRTC showed before, restored on exit */
	struct drm_dumb dumb[DISPLAY_MAX_BUFFERS];
	bool master;
};

static struct drm *to_drm(struct display_output *b) {
	return container_of(b, struct drm, base);
}

static int drm_flip(struct display_output *b, unsigned int i) {
	struct drm *d = to_drm(b);

	if (drmModePageFlip(b->fd, d->crtc_id, d->dumb[i].fb_id, DRM_MODE_PAGE_FLIP_EVENT, d) < 0)
		return -errno;
	return 0;
}

static void on_page_flip(int fd, unsigned int seq, unsigned int sec, unsigned int usec, void *data) {
	struct drm *d = data;

	(void)fd;
	(void)seq;
	(void)sec;
	(void)usec;
	display_output_flip_done(&d->base);
}

static int drm_dispatch(struct display_output *b) {
	drmEventContext ctx = { .version = 2, .page_flip_handler = on_page_flip };

	if (drmHandleEvent(b->fd, &ctx) < 0)
		return errno == EAGAIN ? 0 : -errno;
	return 0;
}

static int drm_set_power(struct display_output *b, bool on) {
	struct drm *d = to_drm(b);

	if (!d->dpms_prop)
		return -EOPNOTSUPP;
	if (drmModeConnectorSetProperty(b->fd, d->connector_id, d->dpms_prop,
					on ? DRM_MODE_DPMS_ON : DRM_MODE_DPMS_OFF) < 0)
		return -errno;
	return 0;
}

/* The id of the connector's DPMS property, 0 if it has none. */
static uint32_t find_dpms(int fd, uint32_t connector_id) {
	drmModeObjectProperties *props = drmModeObjectGetProperties(fd, connector_id, DRM_MODE_OBJECT_CONNECTOR);
	uint32_t id = 0;

	if (!props)
		return 0;
	for (uint32_t i = 0; i < props->count_props && !id; i++) {
		drmModePropertyRes *p = drmModeGetProperty(fd, props->props[i]);
		if (p && streq(p->name, "DPMS"))
			id = p->prop_id;
		drmModeFreeProperty(p);
	}
	drmModeFreeObjectProperties(props);
	return id;
}

/* An unplugged DRM device (drm_dev_unplug()) answers every ioctl on a file still open with ENODEV. */
static bool drm_gone(struct display_output *b) {
	struct drm_version v = { 0 };

	return drmIoctl(b->fd, DRM_IOCTL_VERSION, &v) < 0 && errno == ENODEV;
}

static void drm_destroy(struct display_output *b) {
	struct drm *d = to_drm(b);

	if (b->fd >= 0) {
		/* What showed before comes back lit. */
		if (b->powered_down)
			(void)drm_set_power(b, true);
		if (d->saved && d->saved->mode_valid)
			drmModeSetCrtc(b->fd, d->saved->crtc_id, d->saved->buffer_id, d->saved->x, d->saved->y,
				       &d->connector_id, 1, &d->saved->mode);
		for (unsigned int i = 0; i < DISPLAY_MAX_BUFFERS; i++)
			drm_dumb_destroy(b->fd, &d->dumb[i]);
		if (d->master)
			drmDropMaster(b->fd);
		close(b->fd);
	}
	if (d->saved)
		drmModeFreeCrtc(d->saved);
	free(d);
}

static const struct display_output_ops drm_ops = {
	.flip = drm_flip,
	.dispatch = drm_dispatch,
	.set_power = drm_set_power,
	.gone = drm_gone,
	.destroy = drm_destroy,
};

static bool holds(const drmModeModeInfo *m, uint32_t width, uint32_t height) {
	return m->hdisplay >= width && m->vdisplay >= height;
}

/*
 * Without width: the preferred mode (the first without one). With width:
 * the mode of exactly that size, or unless exact, the preferred one if it
 * holds such a frame, else the first that does (the frame is then shown
 * in its middle).
 */
static bool pick_mode(const drmModeConnector *c, uint32_t width, uint32_t height, bool exact, drmModeModeInfo *ret) {
	const drmModeModeInfo *preferred = NULL, *larger = NULL;

	for (int i = 0; i < c->count_modes; i++) {
		const drmModeModeInfo *m = &c->modes[i];

		if (width && m->hdisplay == width && m->vdisplay == height) {
			*ret = *m;
			return true;
		}
		if ((m->type & DRM_MODE_TYPE_PREFERRED) && !preferred)
			preferred = m;
		if (holds(m, width, height) && !larger)
			larger = m;
	}
	if (width && exact)
		return false;
	if (!preferred && c->count_modes > 0)
		preferred = &c->modes[0];
	if (preferred && holds(preferred, width, height))
		*ret = *preferred;
	else if (larger)
		*ret = *larger;
	else
		return false;
	return true;
}

/* A CRTC the connector's encoders can drive: the current one if any. */
static int pick_crtc(int fd, const drmModeRes *res, const drmModeConnector *c, uint32_t *ret) {
	for (int i = 0; i < c->count_encoders; i++) {
		drmModeEncoder *enc = drmModeGetEncoder(fd, c->encoders[i]);
		if (!enc)
			continue;
		if (enc->encoder_id == c->encoder_id && enc->crtc_id) {
			*ret = enc->crtc_id;
			drmModeFreeEncoder(enc);
			return 0;
		}
		for (int j = 0; j < res->count_crtcs; j++)
			if (enc->possible_crtcs & (1u << j)) {
				*ret = res->crtcs[j];
				drmModeFreeEncoder(enc);
				return 0;
			}
		drmModeFreeEncoder(enc);
	}
	return -ENOENT;
}

/* The first connected connector with a mode of exactly width x height; failing that, the first with one larger. */
static int pick_output(struct drm *d, uint32_t width, uint32_t height) {
	int fd = d->base.fd, r = -ENODEV;
	drmModeRes *res = drmModeGetResources(fd);

	if (!res)
		return -errno;
	for (int exact = 1; exact >= 0 && r < 0; exact--)
		for (int i = 0; i < res->count_connectors && r < 0; i++) {
			drmModeConnector *c = drmModeGetConnector(fd, res->connectors[i]);
			if (!c)
				continue;
			if (c->connection == DRM_MODE_CONNECTED && pick_mode(c, width, height, exact, &d->mode) &&
			    pick_crtc(fd, res, c, &d->crtc_id) == 0) {
				d->connector_id = c->connector_id;
				r = 0;
			}
			drmModeFreeConnector(c);
		}
	drmModeFreeResources(res);
	return r;
}

static void fill_mode(struct fb_mode *m, const drmModeModeInfo *info) {
	*m = (struct fb_mode){
		.width = info->hdisplay,
		.height = info->vdisplay,
		.refresh_hz = info->vrefresh ? info->vrefresh : 60,
		.pixclock_khz = info->clock,
		.hsync_start = info->hsync_start,
		.hsync_end = info->hsync_end,
		.htotal = info->htotal,
		.vsync_start = info->vsync_start,
		.vsync_end = info->vsync_end,
		.vtotal = info->vtotal,
	};
}

int display_drm_open(const char *path, uint32_t width, uint32_t height, const struct display_spares *spares,
		     struct display_output **ret) {
	unsigned int n;
	struct drm *d;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->base.ops = &drm_ops;
	d->base.kind = "drm";
	d->base.fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
	if (d->base.fd < 0) {
		r = -errno;
		goto fail;
	}
	if (drmSetMaster(d->base.fd) < 0 && !drmIsMaster(d->base.fd)) {
		r = -EBUSY;
		goto fail;
	}
	d->master = true;
	r = pick_output(d, width, height);
	if (r < 0)
		goto fail;
	fill_mode(&d->base.mode, &d->mode);
	/* A frame smaller than the mode: shown in its middle, black around it. */
	if (width && (width != d->mode.hdisplay || height != d->mode.vdisplay)) {
		d->base.screen_width = d->mode.hdisplay;
		d->base.screen_height = d->mode.vdisplay;
		d->base.mode.width = width;
		d->base.mode.height = height;
	}
	n = 2;
	for (unsigned int i = 0; i < n; i++) {
		r = drm_dumb_create(d->base.fd, d->mode.hdisplay, d->mode.vdisplay, &d->dumb[i]);
		/* Video memory may have no room for more spares: do with fewer. */
		if (r < 0 && i >= 2)
			break;
		if (r < 0)
			goto fail;
		d->base.buffers[i] = (struct display_buffer){
			.map = d->dumb[i].map + (size_t)(d->mode.vdisplay - d->base.mode.height) / 2 * d->dumb[i].pitch +
			       (size_t)(d->mode.hdisplay - d->base.mode.width) / 2 * 4,
			.stride = d->dumb[i].pitch,
			.id = d->dumb[i].fb_id,
		};
		d->base.n_buffers++;
		/* The budget counts frames as the driver lays them out. */
		if (i == 0)
			n += display_spares_allowed(spares, (uint64_t)d->dumb[0].pitch * d->mode.vdisplay);
	}
	display_output_init_buffers(&d->base);
	d->saved = drmModeGetCrtc(d->base.fd, d->crtc_id);
	if (drmModeSetCrtc(d->base.fd, d->crtc_id, d->dumb[0].fb_id, 0, 0, &d->connector_id, 1, &d->mode) < 0) {
		r = -errno;
		goto fail;
	}
	/* A run that ended with the display down left it so. */
	d->dpms_prop = find_dpms(d->base.fd, d->connector_id);
	if (d->dpms_prop)
		(void)drm_set_power(&d->base, true);
	*ret = &d->base;
	return 0;
fail:
	drm_destroy(&d->base);
	return r;
}
