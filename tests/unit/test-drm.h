/* SPDX-License-Identifier: MIT */
#pragma once

/* A DRM node for the tests: a persona of 800x600, counted memory, its news recorded, ioctls run directly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <drm_fourcc.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drm-ioctl.h"
#include "drm-node.h"
#include "util.h"

#define W 800
#define H 600

struct rig {
	struct drm_node *node;
	struct drm_file *a, *b;
	unsigned int allocs, releases, exports;
	/* What the fake PRIME says of every exported dma-buf: a program still holds it. */
	bool dmabuf_held;
	unsigned int n_scanout, n_master, n_readable, n_vblank;
	struct drm_scanout last;
	struct drm_mode_rect damage[16];
	size_t n_damage;
	struct drm_file *master_news;
	struct listener on_scanout, on_master, on_readable, on_vblank;
	struct drm_ioctl_ctx ctx;
	uint64_t now;
};

static struct drm_ioctl_step step;

static inline int counted_alloc(void *userdata, uint64_t size, int *ret_fd) {
	struct rig *r = userdata;
	int k = drm_memfd_ops.alloc(NULL, size, ret_fd);

	r->allocs += k == 0;
	return k;
}

static inline void counted_release(void *userdata, int fd, uint64_t size) {
	struct rig *r = userdata;

	r->releases++;
	drm_memfd_ops.release(NULL, fd, size);
}

static const struct drm_memory_ops counted_ops = { .alloc = counted_alloc, .release = counted_release };

/* PRIME stood in for: a "dma-buf" is a memfd of its own. */
static inline int fake_export(void *userdata, int fd, uint64_t size, int *ret_dmabuf) {
	struct rig *r = userdata;
	int d;

	(void)fd;
	(void)size;
	d = memfd_create("fake-dmabuf", MFD_CLOEXEC);
	if (d < 0)
		return -errno;
	*ret_dmabuf = d;
	r->exports++;
	return 0;
}

static inline bool fake_exported_held(void *userdata, int dmabuf) {
	(void)dmabuf;
	return ((struct rig *)userdata)->dmabuf_held;
}

static const struct drm_memory_ops prime_ops = {
	.alloc = counted_alloc,
	.release = counted_release,
	.export = fake_export,
	.exported_held = fake_exported_held,
};

/* The caller is this process: the same file is the same inode (each fake dma-buf is a memfd of its own). */
static inline int fake_same_file(const struct drm_ioctl_ctx *ctx, int fd, int own) {
	struct stat a, b;

	(void)ctx;
	if (fstat(fd, &a) < 0)
		return -EBADF;
	if (own < 0)
		return 0;
	assert_int_equal(fstat(own, &b), 0);
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static inline void on_scanout(struct listener *l, void *data) {
	struct rig *r = container_of(l, struct rig, on_scanout);
	const struct drm_scanout_news *news = data;

	r->n_scanout++;
	r->last = *news->scanout;
	r->n_damage = MIN(news->n_damage, ELEMENTSOF(r->damage));
	if (r->n_damage)
		memcpy(r->damage, news->damage, r->n_damage * sizeof(r->damage[0]));
}

static inline void on_master(struct listener *l, void *data) {
	struct rig *r = container_of(l, struct rig, on_master);

	r->n_master++;
	r->master_news = data;
}

static inline void on_readable(struct listener *l, void *data) {
	(void)data;
	container_of(l, struct rig, on_readable)->n_readable++;
}

static inline void on_vblank(struct listener *l, void *data) {
	(void)data;
	container_of(l, struct rig, on_vblank)->n_vblank++;
}

static inline struct rig *rig_new_with(uint64_t budget, bool prime) {
	struct rig *r = calloc(1, sizeof(*r));
	struct drm_node_config cfg = {
		.mode = { .width = W, .height = H, .refresh_hz = 60 },
		.name = "test",
		.budget = budget,
		.memory = prime ? &prime_ops : &counted_ops,
		.prime_caps = prime ? DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT : 0,
	};
	struct drm_node_events *ev;

	assert_non_null(r);
	cfg.memory_userdata = r;
	assert_int_equal(drm_node_new(&r->node, &cfg), 0);
	ev = drm_node_events(r->node);
	r->on_scanout.notify = on_scanout;
	r->on_master.notify = on_master;
	r->on_readable.notify = on_readable;
	r->on_vblank.notify = on_vblank;
	signal_add(&ev->scanout, &r->on_scanout);
	signal_add(&ev->master, &r->on_master);
	signal_add(&ev->readable, &r->on_readable);
	signal_add(&ev->vblank, &r->on_vblank);
	r->ctx = (struct drm_ioctl_ctx){ .now_usec = 1000000, .pid = 100, .privileged = false };
	if (prime)
		r->ctx.same_file = fake_same_file;
	r->now = 1000000;
	assert_int_equal(drm_file_open(r->node, 100, &r->a), 0);
	assert_int_equal(drm_file_open(r->node, 200, &r->b), 0);
	return r;
}

static inline struct rig *rig_new_budget(uint64_t budget) {
	return rig_new_with(budget, false);
}

static inline struct rig *rig_new(void) {
	return rig_new_budget(0);
}

static inline void rig_free(struct rig *r) {
	listener_remove(&r->on_scanout);
	listener_remove(&r->on_master);
	listener_remove(&r->on_readable);
	listener_remove(&r->on_vblank);
	drm_node_free(r->node);
	assert_int_equal(r->allocs, r->releases);
	free(r);
}

static inline int io(struct rig *r, struct drm_file *f, unsigned int cmd, void *arg) {
	return drm_ioctl_direct(f, &r->ctx, cmd, arg, &step);
}

/* The next vblank, 16.667 ms after the last. */
static inline void vblank(struct rig *r) {
	r->now += 16667;
	r->ctx.now_usec = r->now;
	drm_node_vblank(r->node, r->now);
}

static inline uint32_t dumb(struct rig *r, struct drm_file *f, uint32_t w, uint32_t h) {
	struct drm_mode_create_dumb c = { .width = w, .height = h, .bpp = 32 };

	assert_int_equal(io(r, f, DRM_IOCTL_MODE_CREATE_DUMB, &c), 0);
	assert_int_equal(c.pitch, w * 4);
	return c.handle;
}

static inline uint32_t fb2(struct rig *r, struct drm_file *f, uint32_t w, uint32_t h) {
	struct drm_mode_fb_cmd2 c = { .width = w, .height = h, .pixel_format = DRM_FORMAT_XRGB8888 };

	c.handles[0] = dumb(r, f, w, h);
	c.pitches[0] = w * 4;
	assert_int_equal(io(r, f, DRM_IOCTL_MODE_ADDFB2, &c), 0);
	assert_true(c.fb_id >= DRM_NODE_FIRST_DYNAMIC_ID);
	return c.fb_id;
}

/* The connector's first (preferred) mode. */
static inline struct drm_mode_modeinfo preferred(struct rig *r, struct drm_file *f) {
	struct drm_mode_modeinfo modes[DRM_NODE_MAX_MODES];
	struct drm_mode_get_connector c = { .connector_id = DRM_NODE_CONNECTOR_ID };

	assert_int_equal(io(r, f, DRM_IOCTL_MODE_GETCONNECTOR, &c), 0);
	assert_true(c.count_modes >= 1 && c.count_modes <= DRM_NODE_MAX_MODES);
	c.modes_ptr = (uintptr_t)modes;
	c.count_props = c.count_encoders = 0;
	assert_int_equal(io(r, f, DRM_IOCTL_MODE_GETCONNECTOR, &c), 0);
	return modes[0];
}

static inline int setcrtc(struct rig *r, struct drm_file *f, uint32_t fb, const struct drm_mode_modeinfo *m) {
	uint32_t conn = DRM_NODE_CONNECTOR_ID;
	struct drm_mode_crtc c = { .crtc_id = DRM_NODE_CRTC_ID, .fb_id = fb, .set_connectors_ptr = (uintptr_t)&conn };

	if (m) {
		c.mode = *m;
		c.mode_valid = 1;
		c.count_connectors = 1;
	}
	return io(r, f, DRM_IOCTL_MODE_SETCRTC, &c);
}
