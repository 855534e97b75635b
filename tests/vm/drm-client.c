/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <xf86drm.h>

#include <drm_fourcc.h>

#include "drm-client.h"

#define FLIP_TIMEOUT_MS 5000

/* A CRTC that can drive conn: its encoder's, or the first any of its encoders can use. */
static uint32_t pick_crtc(int fd, const drmModeRes *res, const drmModeConnector *conn) {
	drmModeEncoder *enc;
	uint32_t crtc = 0;

	if (conn->encoder_id && (enc = drmModeGetEncoder(fd, conn->encoder_id))) {
		crtc = enc->crtc_id;
		drmModeFreeEncoder(enc);
	}
	for (int i = 0; i < conn->count_encoders && !crtc; i++) {
		enc = drmModeGetEncoder(fd, conn->encoders[i]);
		if (!enc)
			continue;
		for (int c = 0; c < res->count_crtcs && !crtc; c++)
			if (enc->possible_crtcs & (1u << c))
				crtc = res->crtcs[c];
		drmModeFreeEncoder(enc);
	}
	return crtc;
}

int pick_output(int fd, drmModeConnector **ret_conn, uint32_t *ret_crtc) {
	drmModeRes *res = drmModeGetResources(fd);
	int r = -ENOENT;

	if (!res)
		return -errno;
	for (int i = 0; i < res->count_connectors && r < 0; i++) {
		drmModeConnector *conn = drmModeGetConnector(fd, res->connectors[i]);

		if (!conn)
			continue;
		if (conn->connection == DRM_MODE_CONNECTED && conn->count_modes > 0 &&
		    (*ret_crtc = pick_crtc(fd, res, conn))) {
			*ret_conn = conn;
			r = 0;
		} else
			drmModeFreeConnector(conn);
	}
	drmModeFreeResources(res);
	return r;
}

int set_dpms(int fd, uint32_t connector_id, uint64_t value) {
	drmModeObjectProperties *props = drmModeObjectGetProperties(fd, connector_id, DRM_MODE_OBJECT_CONNECTOR);
	uint32_t dpms = 0;

	if (!props)
		return -errno;
	for (uint32_t i = 0; i < props->count_props && !dpms; i++) {
		drmModePropertyRes *p = drmModeGetProperty(fd, props->props[i]);

		if (p && strcmp(p->name, "DPMS") == 0)
			dpms = p->prop_id;
		drmModeFreeProperty(p);
	}
	drmModeFreeObjectProperties(props);
	if (!dpms)
		return -ENOENT;
	return drmModeConnectorSetProperty(fd, connector_id, dpms, value) < 0 ? -errno : 0;
}

int buffer_new(int fd, uint32_t w, uint32_t h, struct buffer *b, const char **ret_step) {
	struct drm_mode_create_dumb create = { .width = w, .height = h, .bpp = 32 };
	struct drm_mode_map_dumb map = { 0 };
	uint32_t handles[4] = { 0 }, pitches[4] = { 0 }, offsets[4] = { 0 };
	void *mem;

	*ret_step = "CREATE_DUMB";
	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &create) < 0)
		return -errno;
	b->handle = create.handle;
	b->pitch = create.pitch;
	b->size = create.size;
	handles[0] = b->handle;
	pitches[0] = b->pitch;
	*ret_step = "ADDFB2";
	if (drmModeAddFB2(fd, w, h, DRM_FORMAT_XRGB8888, handles, pitches, offsets, &b->fb_id, 0) < 0)
		return -errno;
	*ret_step = "MAP_DUMB";
	map.handle = b->handle;
	if (drmIoctl(fd, DRM_IOCTL_MODE_MAP_DUMB, &map) < 0)
		return -errno;
	*ret_step = "mmap";
	mem = mmap(NULL, (size_t)b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map.offset);
	if (mem == MAP_FAILED)
		return -errno;
	b->mem = mem;
	return 0;
}

bool buffer_fill(const struct buffer *b, uint32_t w, uint32_t h, uint32_t color) {
	bool same = true;

	for (uint32_t y = 0; y < h; y++) {
		uint32_t *row = b->mem + (size_t)y * (b->pitch / 4);

		for (uint32_t x = 0; x < w; x++)
			row[x] = color;
	}
	for (uint32_t y = 0; y < h && same; y++)
		for (uint32_t x = 0; x < w && same; x++)
			same = b->mem[(size_t)y * (b->pitch / 4) + x] == color;
	return same;
}

void buffer_free(int fd, struct buffer *b) {
	struct drm_mode_destroy_dumb destroy = { .handle = b->handle };

	if (b->mem)
		munmap(b->mem, (size_t)b->size);
	if (b->fb_id)
		drmModeRmFB(fd, b->fb_id);
	if (b->handle)
		drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &destroy);
	*b = (struct buffer){ 0 };
}

struct flip {
	bool done;
	unsigned int sequence;
};

static void on_flip(int fd, unsigned int sequence, unsigned int sec, unsigned int usec, void *data) {
	struct flip *f = data;

	f->done = true;
	f->sequence = sequence;
}

long flip_to(int fd, uint32_t crtc, uint32_t fb_id, const char **ret_step) {
	drmEventContext ctx = { .version = 2, .page_flip_handler = on_flip };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct flip f = { 0 };
	int r;

	*ret_step = "PAGE_FLIP";
	if (drmModePageFlip(fd, crtc, fb_id, DRM_MODE_PAGE_FLIP_EVENT, &f) < 0)
		return -errno;
	*ret_step = "flip event";
	while (!f.done) {
		r = poll(&pfd, 1, FLIP_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (drmHandleEvent(fd, &ctx) < 0)
			return -EIO;
	}
	return f.sequence;
}
