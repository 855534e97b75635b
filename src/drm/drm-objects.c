/* SPDX-License-Identifier: MIT */
/* Dumb buffers, GEM handles, framebuffers and property blobs, with their limits. */
#include <fcntl.h>
#include <sys/random.h>

#include "drm-internal.h"
#include "util.h"

#define PAGE 4096u

const uint32_t drm_plane_formats[] = { DRM_FORMAT_XRGB8888, DRM_FORMAT_ARGB8888 };
const size_t drm_n_plane_formats = ELEMENTSOF(drm_plane_formats);

bool drm_format_supported(uint32_t format) {
	for (size_t i = 0; i < drm_n_plane_formats; i++)
		if (drm_plane_formats[i] == format)
			return true;
	return false;
}

int drm_blob_new(struct drm_node *n, struct drm_file *owner, const void *data, size_t len, struct drm_blob **ret) {
	struct drm_blob *b;

	if (len == 0 || len > DRM_BLOB_MAX_LEN)
		return -EINVAL;
	if ((owner && owner->n_blobs >= DRM_FILE_MAX_BLOBS) || n->n_blobs >= DRM_NODE_MAX_BLOBS)
		return -ENOSPC;
	if (len > DRM_NODE_MAX_BLOB_BYTES - n->blob_bytes)
		return -ENOMEM;
	b = malloc(sizeof(*b) + len);
	if (!b)
		return -ENOMEM;
	b->id = drm_node_new_id(n);
	b->refs = 1;
	b->owner = owner;
	b->len = len;
	if (data)
		memcpy(b->data, data, len);
	LIST_INSERT_HEAD(&n->blobs, b, link);
	n->n_blobs++;
	n->blob_bytes += len;
	if (owner)
		owner->n_blobs++;
	*ret = b;
	return 0;
}

struct drm_blob *drm_blob_find(const struct drm_node *n, uint32_t id) {
	struct drm_blob *b;

	LIST_FOREACH(b, &n->blobs, link)
		if (b->id == id)
			return b;
	return NULL;
}

void drm_blob_ref(struct drm_blob *b) {
	b->refs++;
}

void drm_blob_unref(struct drm_node *n, struct drm_blob *b) {
	if (--b->refs > 0)
		return;
	LIST_REMOVE(b, link);
	n->n_blobs--;
	n->blob_bytes -= b->len;
	free(b);
}

static int map_offset_new(const struct drm_node *n, uint64_t *ret) {
	uint64_t r, off;
	const struct drm_buffer *b;
	bool used;

	do {
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			return errno > 0 ? -errno : -EIO;
		/* Page aligned, above 0 and below 2^62: a valid mmap() offset nobody guesses. */
		off = ((r & ((UINT64_C(1) << 50) - 1)) + 1) << 12;
		used = false;
		LIST_FOREACH(b, &n->buffers, link)
			used |= b->map_offset == off;
		LIST_FOREACH(b, &n->held, link)
			used |= b->map_offset == off;
	} while (used);
	*ret = off;
	return 0;
}

static uint64_t next_serial(void) {
	static uint64_t serial;

	return ++serial;
}

static void buffer_free(struct drm_node *n, struct drm_buffer *b) {
	LIST_REMOVE(b, link);
	n->n_buffers--;
	n->n_held -= b->held;
	n->mem_used -= b->size;
	if (b->dmabuf >= 0)
		close(b->dmabuf);
	n->memory->release(n->memory_userdata, b->fd, b->size);
	free(b);
}

/*
 * Looks at whether someone holds b's dma-buf take the kernel time in
 * proportion to the locks its holder put on it: after a look that found
 * one held, the next waits this long (a buffer let go meanwhile is taken
 * as held until then).
 */
#define DRM_HELD_LOOK_USEC 250000u

static bool may_look(const struct drm_node *n) {
	return !n->held_seen || n->clock >= n->held_seen_usec + DRM_HELD_LOOK_USEC;
}

static bool dmabuf_held(struct drm_node *n, const struct drm_buffer *b) {
	bool held = b->dmabuf >= 0 && n->memory->exported_held &&
		    n->memory->exported_held(n->memory_userdata, b->dmabuf);

	if (held) {
		n->held_seen = true;
		n->held_seen_usec = n->clock;
	}
	return held;
}

void drm_buffer_unref(struct drm_node *n, struct drm_buffer *b) {
	if (--b->refs > 0)
		return;
	/* The kernel's dma-buf keeps its GEM object: this one keeps its memory counted while a program has it. */
	if (b->dmabuf >= 0 && (!may_look(n) || dmabuf_held(n, b))) {
		LIST_REMOVE(b, link);
		LIST_INSERT_HEAD(&n->held, b, link);
		b->held = true;
		n->n_held++;
		return;
	}
	buffer_free(n, b);
}

void drm_buffer_sweep_held(struct drm_node *n) {
	struct drm_buffer *b, *next;

	if (!may_look(n))
		return;
	n->held_seen = false;
	for (b = LIST_FIRST(&n->held); b; b = next) {
		next = LIST_NEXT(b, link);
		if (!dmabuf_held(n, b))
			buffer_free(n, b);
	}
}

void drm_buffer_free_held(struct drm_node *n) {
	struct drm_buffer *b;

	while ((b = LIST_FIRST(&n->held)))
		buffer_free(n, b);
}

static int free_handle(const struct drm_file *f) {
	for (size_t i = 0; i < DRM_FILE_MAX_HANDLES; i++)
		if (!f->handles[i])
			return (int)i;
	return -ENOSPC;
}

static struct drm_buffer *handle_find(const struct drm_file *f, uint32_t handle) {
	return handle >= 1 && handle <= DRM_FILE_MAX_HANDLES ? f->handles[handle - 1] : NULL;
}

static int create_dumb(struct drm_call *c) {
	struct drm_mode_create_dumb *a = c->arg;
	struct drm_node *n = c->n;
	_cleanup_(freep) struct drm_buffer *b = NULL;
	uint64_t pitch, size;
	int slot, r;

	/* The kernel's checks, then the mode config's and the persona's limits: nothing changes on failure. */
	if (!a->width || !a->height || !a->bpp)
		return -EINVAL;
	if (a->bpp != 32 && a->bpp != 16)
		return -EINVAL;
	if (a->width > DRM_NODE_MAX_SIDE || a->height > DRM_NODE_MAX_SIDE)
		return -EINVAL;
	pitch = (uint64_t)a->width * (a->bpp / 8);
	size = (pitch * a->height + PAGE - 1) / PAGE * PAGE;
	slot = free_handle(c->f);
	if (n->n_held > 0 && (n->n_buffers >= DRM_NODE_MAX_BUFFERS || size > n->budget - MIN(n->mem_used, n->budget)))
		drm_buffer_sweep_held(n);
	if (slot < 0 || n->n_buffers >= DRM_NODE_MAX_BUFFERS)
		return -ENOSPC;
	if (size > n->budget - MIN(n->mem_used, n->budget))
		return -ENOMEM;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	r = map_offset_new(n, &b->map_offset);
	if (r < 0)
		return r;
	r = n->memory->alloc(n->memory_userdata, size, &b->fd);
	if (r < 0)
		return r;
	b->refs = 1;
	b->dmabuf = -1;
	b->size = size;
	b->width = a->width;
	b->height = a->height;
	b->bpp = a->bpp;
	b->pitch = (uint32_t)pitch;
	b->serial = next_serial();
	LIST_INSERT_HEAD(&n->buffers, b, link);
	n->n_buffers++;
	n->mem_used += size;
	c->f->handles[slot] = b;
	a->handle = (uint32_t)slot + 1;
	a->pitch = (uint32_t)pitch;
	a->size = size;
	TAKE_PTR(b);
	return 0;
}

static int close_handle(struct drm_call *c, uint32_t handle) {
	struct drm_buffer *b = handle_find(c->f, handle);

	/* drm_gem_handle_delete(): an unknown handle is -EINVAL. */
	if (!b)
		return -EINVAL;
	c->f->handles[handle - 1] = NULL;
	drm_buffer_unref(c->n, b);
	return 0;
}

struct drm_fb *drm_fb_find(const struct drm_node *n, uint32_t id) {
	struct drm_fb *fb;

	LIST_FOREACH(fb, &n->fbs, link)
		if (fb->id == id)
			return fb;
	return NULL;
}

void drm_fb_remove(struct drm_node *n, struct drm_fb *fb) {
	if (n->state.fb == fb)
		drm_kms_disable(n);
	LIST_REMOVE(fb, link);
	n->n_fbs--;
	fb->owner->n_fbs--;
	drm_buffer_unref(n, fb->buf);
	free(fb);
}

/* drm_mode_addfb2() and framebuffer_check(), for the single-plane formats the plane takes. */
static int fb_create(struct drm_call *c, const struct drm_mode_fb_cmd2 *r, uint32_t *ret_id) {
	struct drm_node *n = c->n;
	struct drm_buffer *b;
	struct drm_fb *fb;
	uint64_t min_size;

	if (r->flags & ~(uint32_t)(DRM_MODE_FB_INTERLACED | DRM_MODE_FB_MODIFIERS))
		return -EINVAL;
	if (r->width > DRM_NODE_MAX_SIDE || r->height > DRM_NODE_MAX_SIDE)
		return -EINVAL;
	/* No modifiers (DRM_CAP_ADDFB2_MODIFIERS is 0). */
	if (r->flags & DRM_MODE_FB_MODIFIERS)
		return -EINVAL;
	if (!drm_format_supported(r->pixel_format))
		return -EINVAL;
	if (r->width == 0 || r->height == 0 || r->handles[0] == 0)
		return -EINVAL;
	if ((uint64_t)r->height * r->pitches[0] + r->offsets[0] > UINT32_MAX)
		return -ERANGE;
	if (r->pitches[0] < r->width * 4 || r->modifier[0])
		return -EINVAL;
	for (size_t i = 1; i < 4; i++)
		if (r->modifier[i])
			return -EINVAL;
	b = handle_find(c->f, r->handles[0]);
	if (!b)
		return -ENOENT;
	min_size = (uint64_t)(r->height - 1) * r->pitches[0] + (uint64_t)r->width * 4 + r->offsets[0];
	if (b->size < min_size)
		return -EINVAL;
	if (c->f->n_fbs >= DRM_FILE_MAX_FBS || n->n_fbs >= DRM_NODE_MAX_FBS)
		return -ENOSPC;
	fb = calloc(1, sizeof(*fb));
	if (!fb)
		return -ENOMEM;
	*fb = (struct drm_fb){ .id = drm_node_new_id(n), .owner = c->f, .buf = b, .width = r->width,
			       .height = r->height, .format = r->pixel_format, .pitch = r->pitches[0],
			       .offset = r->offsets[0] };
	b->refs++;
	LIST_INSERT_HEAD(&n->fbs, fb, link);
	n->n_fbs++;
	c->f->n_fbs++;
	*ret_id = fb->id;
	return 0;
}

/* drm_driver_legacy_fb_format(): bpp and depth to a format (0 for none). */
static uint32_t legacy_format(uint32_t bpp, uint32_t depth) {
	if (bpp == 32 && depth == 24)
		return DRM_FORMAT_XRGB8888;
	if (bpp == 32 && depth == 32)
		return DRM_FORMAT_ARGB8888;
	if (bpp == 32 && depth == 30)
		return DRM_FORMAT_XRGB2101010;
	if (bpp == 24 && depth == 24)
		return DRM_FORMAT_RGB888;
	if (bpp == 16 && depth == 16)
		return DRM_FORMAT_RGB565;
	if (bpp == 16 && depth == 15)
		return DRM_FORMAT_XRGB1555;
	if (bpp == 8 && depth == 8)
		return DRM_FORMAT_C8;
	return 0;
}

static int addfb(struct drm_call *c) {
	struct drm_mode_fb_cmd *o = c->arg;
	struct drm_mode_fb_cmd2 r = {
		.width = o->width,
		.height = o->height,
		.pixel_format = legacy_format(o->bpp, o->depth),
		.handles = { o->handle },
		.pitches = { o->pitch },
	};

	if (!r.pixel_format)
		return -EINVAL;
	return fb_create(c, &r, &o->fb_id);
}

static int getfb(struct drm_call *c) {
	struct drm_mode_fb_cmd *r = c->arg;
	const struct drm_fb *fb = drm_fb_find(c->n, r->fb_id);
	int slot;

	if (!fb)
		return -ENOENT;
	r->width = fb->width;
	r->height = fb->height;
	r->pitch = fb->pitch;
	r->bpp = 32;
	r->depth = fb->format == DRM_FORMAT_ARGB8888 ? 32 : 24;
	r->handle = 0;
	/* A handle only for the master, as the kernel's GETFB: others learn the size, not the pixels. */
	if (c->n->master != c->f && !c->ctx->privileged)
		return 0;
	slot = free_handle(c->f);
	if (slot < 0)
		return slot;
	c->f->handles[slot] = fb->buf;
	fb->buf->refs++;
	r->handle = (uint32_t)slot + 1;
	return 0;
}

/* The file's handle to b: the one it has, or a new one (-ENOSPC past the file's limit). */
static int handle_of(struct drm_file *f, struct drm_buffer *b, uint32_t *ret) {
	int slot;

	for (size_t i = 0; i < DRM_FILE_MAX_HANDLES; i++)
		if (f->handles[i] == b) {
			*ret = (uint32_t)i + 1;
			return 0;
		}
	slot = free_handle(f);
	if (slot < 0)
		return slot;
	f->handles[slot] = b;
	b->refs++;
	*ret = (uint32_t)slot + 1;
	return 0;
}

/* Which of list's exported buffers the caller's fd is: 0 with *ret (NULL: none), or -EBADF, -EINVAL. */
static int find_dmabuf(struct drm_call *c, struct drm_buffer *first, int fd, struct drm_buffer **ret) {
	for (struct drm_buffer *b = first; b; b = LIST_NEXT(b, link)) {
		int r;

		if (b->dmabuf < 0)
			continue;
		r = c->ctx->same_file(c->ctx, fd, b->dmabuf);
		if (r < 0)
			/* The kernel's dma_buf_get() knows no other failure. */
			return r == -EBADF ? -EBADF : -EINVAL;
		if (r > 0) {
			*ret = b;
			return 0;
		}
	}
	*ret = NULL;
	return 0;
}

/* drm_gem_prime_fd_to_handle(): only the node's own dma-bufs, as a device without a GPU can take no other. */
static int prime_fd_to_handle(struct drm_call *c) {
	struct drm_prime_handle *a = c->arg;
	struct drm_node *n = c->n;
	struct drm_buffer *b;
	int r;

	if (a->fd < 0)
		return -EBADF;
	if (!(n->prime_caps & DRM_PRIME_CAP_IMPORT) || !c->ctx->same_file)
		return -EOPNOTSUPP;
	/* dma_buf_get()'s fget() first: a caller without that fd gets -EBADF, also from a node that exported nothing. */
	r = c->ctx->same_file(c->ctx, a->fd, -1);
	if (r < 0)
		return r == -EBADF ? -EBADF : -EINVAL;
	r = find_dmabuf(c, LIST_FIRST(&n->buffers), a->fd, &b);
	if (r < 0)
		return r;
	if (b)
		return handle_of(c->f, b, &a->handle);
	r = find_dmabuf(c, LIST_FIRST(&n->held), a->fd, &b);
	if (r < 0)
		return r;
	if (!b)
		return -EINVAL;
	/* Its dma-buf kept it: it is a buffer again, with this handle. */
	r = handle_of(c->f, b, &a->handle);
	if (r < 0)
		return r;
	LIST_REMOVE(b, link);
	LIST_INSERT_HEAD(&n->buffers, b, link);
	b->held = false;
	n->n_held--;
	return 0;
}

/* drm_prime_handle_to_fd_ioctl()'s checks: the fd itself comes through the program's library. */
static int prime_handle_to_fd(struct drm_call *c) {
	const struct drm_prime_handle *a = c->arg;

	if (a->flags & ~(uint32_t)(DRM_CLOEXEC | DRM_RDWR))
		return -EINVAL;
	if (!handle_find(c->f, a->handle))
		return -ENOENT;
	return -EOPNOTSUPP;
}

int drm_node_export(struct drm_node *n, const struct drm_file *file, uint64_t offset, int *ret_dmabuf) {
	struct drm_buffer *b = NULL;
	int r;

	for (size_t i = 0; i < DRM_FILE_MAX_HANDLES && !b; i++)
		if (file->handles[i] && file->handles[i]->map_offset == offset && offset != 0)
			b = file->handles[i];
	if (!b)
		return -ENOENT;
	if (b->dmabuf < 0) {
		if (!n->memory->export)
			return -EOPNOTSUPP;
		r = n->memory->export(n->memory_userdata, b->fd, b->size, &b->dmabuf);
		if (r < 0) {
			b->dmabuf = -1;
			return r;
		}
	}
	*ret_dmabuf = b->dmabuf;
	return 0;
}

unsigned int drm_node_n_held(const struct drm_node *n) {
	return n->n_held;
}

void drm_node_drop_held(struct drm_node *n) {
	drm_buffer_free_held(n);
}

static int rmfb(struct drm_call *c) {
	uint32_t id;
	struct drm_fb *fb;

	memcpy(&id, c->arg, sizeof(id));
	fb = drm_fb_find(c->n, id);
	if (!fb || fb->owner != c->f)
		return -ENOENT;
	drm_fb_remove(c->n, fb);
	return 0;
}

int drm_ioctl_buffers(struct drm_call *c, unsigned int nr) {
	if (!drm_io_ready(c->io))
		return 0;
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_CREATE_DUMB):
		return create_dumb(c);
	case _IOC_NR(DRM_IOCTL_MODE_MAP_DUMB): {
		struct drm_mode_map_dumb *m = c->arg;
		const struct drm_buffer *b = handle_find(c->f, m->handle);

		if (!b)
			return -ENOENT;
		m->offset = b->map_offset;
		return 0;
	}
	case _IOC_NR(DRM_IOCTL_MODE_DESTROY_DUMB):
		return close_handle(c, ((const struct drm_mode_destroy_dumb *)c->arg)->handle);
	case _IOC_NR(DRM_IOCTL_GEM_CLOSE):
		return close_handle(c, ((const struct drm_gem_close *)c->arg)->handle);
	case _IOC_NR(DRM_IOCTL_MODE_ADDFB):
		return addfb(c);
	case _IOC_NR(DRM_IOCTL_MODE_ADDFB2): {
		struct drm_mode_fb_cmd2 *r = c->arg;

		return fb_create(c, r, &r->fb_id);
	}
	case _IOC_NR(DRM_IOCTL_MODE_RMFB):
		return rmfb(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETFB):
		return getfb(c);
	case _IOC_NR(DRM_IOCTL_PRIME_HANDLE_TO_FD):
		return prime_handle_to_fd(c);
	case _IOC_NR(DRM_IOCTL_PRIME_FD_TO_HANDLE):
		return prime_fd_to_handle(c);
	default:
		return -EINVAL;
	}
}
