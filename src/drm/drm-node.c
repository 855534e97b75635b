/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "drm-internal.h"
#include "util.h"

static int memfd_alloc(void *userdata, uint64_t size, int *ret_fd) {
	_cleanup_(closep) int fd = -1;

	(void)userdata;
	if (size > (uint64_t)INT64_MAX)
		return -ENOMEM;
	fd = memfd_create("devns-drm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	/* Programs that map it must not be able to pull pages from under the daemon. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	return 0;
}

static void memfd_release(void *userdata, int fd, uint64_t size) {
	(void)userdata;
	(void)size;
	close(fd);
}

const struct drm_memory_ops drm_memfd_ops = {
	.alloc = memfd_alloc,
	.release = memfd_release,
};

/* Standard modes (VESA DMT and CEA timings) offered below the persona's own. */
static const struct drm_mode_modeinfo standard_modes[] = {
	{ 148500, 1920, 2008, 2052, 2200, 0, 1080, 1084, 1089, 1125, 0, 60,
	  DRM_MODE_FLAG_PHSYNC | DRM_MODE_FLAG_PVSYNC, DRM_MODE_TYPE_DRIVER, "1920x1080" },
	{ 71000, 1280, 1328, 1360, 1440, 0, 800, 803, 809, 823, 0, 60, DRM_MODE_FLAG_PHSYNC | DRM_MODE_FLAG_NVSYNC,
	  DRM_MODE_TYPE_DRIVER, "1280x800" },
	{ 74250, 1280, 1390, 1430, 1650, 0, 720, 725, 730, 750, 0, 60, DRM_MODE_FLAG_PHSYNC | DRM_MODE_FLAG_PVSYNC,
	  DRM_MODE_TYPE_DRIVER, "1280x720" },
	{ 65000, 1024, 1048, 1184, 1344, 0, 768, 771, 777, 806, 0, 60, DRM_MODE_FLAG_NHSYNC | DRM_MODE_FLAG_NVSYNC,
	  DRM_MODE_TYPE_DRIVER, "1024x768" },
	{ 40000, 800, 840, 968, 1056, 0, 600, 601, 605, 628, 0, 60, DRM_MODE_FLAG_PHSYNC | DRM_MODE_FLAG_PVSYNC,
	  DRM_MODE_TYPE_DRIVER, "800x600" },
	{ 25175, 640, 656, 752, 800, 0, 480, 490, 492, 525, 0, 60, DRM_MODE_FLAG_NHSYNC | DRM_MODE_FLAG_NVSYNC,
	  DRM_MODE_TYPE_DRIVER, "640x480" },
};

static bool timings_sane(const struct drm_mode_modeinfo *m) {
	return m->clock > 0 && m->hdisplay > 0 && m->hsync_start >= m->hdisplay && m->hsync_end >= m->hsync_start &&
	       m->htotal >= m->hsync_end && m->vdisplay > 0 && m->vsync_start >= m->vdisplay &&
	       m->vsync_end >= m->vsync_start && m->vtotal >= m->vsync_end;
}

/* The persona's mode as the connector's preferred mode: its own timings when they hold, made-up ones otherwise. */
static int preferred_mode(const struct fb_mode *fm, struct drm_mode_modeinfo *m) {
	uint32_t refresh = fm->refresh_hz ? fm->refresh_hz : 60;
	uint64_t clock;

	if (fm->width == 0 || fm->height == 0 || fm->width > DRM_NODE_MAX_SIDE || fm->height > DRM_NODE_MAX_SIDE ||
	    refresh > 1000)
		return -EINVAL;
	*m = (struct drm_mode_modeinfo){
		.hdisplay = (uint16_t)fm->width,
		.hsync_start = (uint16_t)(fm->width + 16),
		.hsync_end = (uint16_t)(fm->width + 16 + 96),
		.htotal = (uint16_t)(fm->width + 160),
		.vdisplay = (uint16_t)fm->height,
		.vsync_start = (uint16_t)(fm->height + 3),
		.vsync_end = (uint16_t)(fm->height + 9),
		.vtotal = (uint16_t)(fm->height + 30),
		.flags = DRM_MODE_FLAG_NHSYNC | DRM_MODE_FLAG_PVSYNC,
		.type = DRM_MODE_TYPE_DRIVER | DRM_MODE_TYPE_PREFERRED,
	};
	if (fm->pixclock_khz && fm->htotal <= UINT16_MAX && fm->vtotal <= UINT16_MAX) {
		struct drm_mode_modeinfo own = *m;

		own.clock = fm->pixclock_khz;
		own.hsync_start = (uint16_t)fm->hsync_start;
		own.hsync_end = (uint16_t)fm->hsync_end;
		own.htotal = (uint16_t)fm->htotal;
		own.vsync_start = (uint16_t)fm->vsync_start;
		own.vsync_end = (uint16_t)fm->vsync_end;
		own.vtotal = (uint16_t)fm->vtotal;
		if (timings_sane(&own) && fm->hsync_start <= UINT16_MAX && fm->vsync_start <= UINT16_MAX)
			*m = own;
	}
	if (m->clock == 0) {
		clock = (uint64_t)m->htotal * m->vtotal * refresh / 1000;
		m->clock = (uint32_t)MAX(clock, 1u);
	}
	m->vrefresh = (uint32_t)(((uint64_t)m->clock * 1000 + (uint64_t)m->htotal * m->vtotal / 2) /
				 ((uint64_t)m->htotal * m->vtotal));
	snprintf(m->name, sizeof(m->name), "%ux%u", fm->width, fm->height);
	return 0;
}

int drm_node_check_mode(const struct drm_node *n, const struct drm_mode_modeinfo *m) {
	if (m->clock > INT_MAX || m->vrefresh > INT_MAX)
		return -ERANGE;
	if ((m->type & ~(uint32_t)DRM_MODE_TYPE_ALL) || (m->flags & ~(uint32_t)DRM_MODE_FLAG_ALL) ||
	    (m->flags & DRM_MODE_FLAG_PIC_AR_MASK) > DRM_MODE_FLAG_PIC_AR_256_135 || (m->flags & DRM_MODE_FLAG_3D_MASK) ||
	    !timings_sane(m))
		return -EINVAL;
	for (size_t i = 0; i < n->n_modes; i++)
		if (n->modes[i].hdisplay == m->hdisplay && n->modes[i].vdisplay == m->vdisplay)
			return 0;
	return -EINVAL;
}

/* The CRTC off, its gamma table linear, the connector on: the card as it was made. */
static void reset_output(struct drm_node *n) {
	if (n->state.mode_blob || n->state.fb)
		drm_kms_disable(n);
	n->state.dpms = DRM_MODE_DPMS_ON;
	for (unsigned int i = 0; i < DRM_NODE_GAMMA_SIZE; i++)
		n->gamma[0][i] = n->gamma[1][i] = n->gamma[2][i] = (uint16_t)(i * 0x101u);
}

int drm_node_new(struct drm_node **ret, const struct drm_node_config *cfg) {
	_cleanup_(drm_node_freep) struct drm_node *n = NULL;
	uint64_t frame;
	int r;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	signal_init(&n->events.scanout);
	signal_init(&n->events.master);
	signal_init(&n->events.readable);
	signal_init(&n->events.vblank);
	LIST_INIT(&n->files);
	LIST_INIT(&n->buffers);
	LIST_INIT(&n->held);
	LIST_INIT(&n->fbs);
	LIST_INIT(&n->blobs);
	TAILQ_INIT(&n->pending);
	n->next_id = DRM_NODE_FIRST_DYNAMIC_ID;
	reset_output(n);
	n->shown.memfd = -1;
	snprintf(n->name, sizeof(n->name), "%s", cfg->name ? cfg->name : "devns");
	n->memory = cfg->memory ? cfg->memory : &drm_memfd_ops;
	n->memory_userdata = cfg->memory_userdata;
	n->prime_caps = cfg->prime_caps;
	n->width_mm = cfg->width_mm;
	n->height_mm = cfg->height_mm;

	r = preferred_mode(&cfg->mode, &n->modes[0]);
	if (r < 0)
		return r;
	n->n_modes = 1;
	for (size_t i = 0; !cfg->one_mode && i < ELEMENTSOF(standard_modes) && n->n_modes < DRM_NODE_MAX_MODES; i++) {
		const struct drm_mode_modeinfo *m = &standard_modes[i];

		if (m->hdisplay <= cfg->mode.width && m->vdisplay <= cfg->mode.height &&
		    (m->hdisplay != cfg->mode.width || m->vdisplay != cfg->mode.height))
			n->modes[n->n_modes++] = *m;
	}
	frame = (uint64_t)cfg->mode.width * cfg->mode.height * 4;
	n->budget = cfg->budget ? cfg->budget : MAX(DRM_NODE_DEFAULT_BUDGET, frame * DRM_NODE_DEFAULT_BUDGET_FRAMES);
	if (cfg->edid_len > 0) {
		if (!cfg->edid || cfg->edid_len > DRM_BLOB_MAX_LEN)
			return -EINVAL;
		r = drm_blob_new(n, NULL, cfg->edid, cfg->edid_len, &n->edid);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(n);
	return 0;
}

struct drm_node *drm_node_free(struct drm_node *n) {
	struct drm_file *f;

	if (!n)
		return NULL;
	while ((f = LIST_FIRST(&n->files)))
		drm_file_close(f);
	drm_buffer_free_held(n);
	if (n->state.mode_blob)
		drm_blob_unref(n, n->state.mode_blob);
	if (n->edid)
		drm_blob_unref(n, n->edid);
	free(n);
	return NULL;
}

struct drm_node_events *drm_node_events(struct drm_node *n) {
	return &n->events;
}

uint32_t drm_node_new_id(struct drm_node *n) {
	for (;;) {
		uint32_t id = n->next_id;

		n->next_id = id >= INT32_MAX ? DRM_NODE_FIRST_DYNAMIC_ID : id + 1;
		if (!drm_fb_find(n, id) && !drm_blob_find(n, id))
			return id;
	}
}

static void scanout_of(const struct drm_node *n, struct drm_scanout *s) {
	const struct drm_kms_state *st = &n->state;

	memset(s, 0, sizeof(*s));
	s->memfd = -1;
	s->enabled = st->mode_blob != NULL;
	if (!s->enabled)
		return;
	s->mode = st->mode;
	s->active = st->active;
	if (!s->active || !st->fb || !st->plane_on_crtc)
		return;
	s->fb_id = st->fb->id;
	s->format = st->fb->format;
	s->fb_width = st->fb->width;
	s->fb_height = st->fb->height;
	s->pitch = st->fb->pitch;
	s->offset = st->fb->offset;
	s->memfd = st->fb->buf->fd;
	s->mem_size = st->fb->buf->size;
	s->mem_serial = st->fb->buf->serial;
	s->src_x = st->src_x >> 16;
	s->src_y = st->src_y >> 16;
}

void drm_node_scanout(const struct drm_node *n, struct drm_scanout *ret) {
	scanout_of(n, ret);
}

void drm_node_scanout_changed(struct drm_node *n, const struct drm_mode_rect *damage, size_t n_damage, bool drawn) {
	struct drm_scanout now;
	struct drm_scanout_news news;
	bool changed;

	scanout_of(n, &now);
	changed = memcmp(&now, &n->shown, sizeof(now)) != 0;
	if (!changed && !(drawn && now.fb_id))
		return;
	n->shown = now;
	news = (struct drm_scanout_news){ .scanout = &n->shown, .damage = damage, .n_damage = damage ? n_damage : 0 };
	signal_emit(&n->events.scanout, &news);
}

bool drm_node_wants_vblank(const struct drm_node *n) {
	if (!n->state.mode_blob || !n->state.active)
		return false;
	return n->flip_pending || !TAILQ_EMPTY(&n->pending) || n->blocking_waits > 0;
}

void drm_node_vblank_wanted(struct drm_node *n, bool before) {
	if (!before && drm_node_wants_vblank(n))
		signal_emit(&n->events.vblank, NULL);
}

void drm_node_vblank(struct drm_node *n, uint64_t now_usec) {
	struct drm_pending *p, *next;

	if (!n->state.mode_blob || !n->state.active)
		return;
	n->seq++;
	n->vblank_usec = now_usec;
	n->clock = MAX(n->clock, now_usec);
	n->flip_pending = false;
	for (p = TAILQ_FIRST(&n->pending); p; p = next) {
		next = TAILQ_NEXT(p, link);
		if (!p->flip && p->target > n->seq)
			continue;
		TAILQ_REMOVE(&n->pending, p, link);
		n->n_flips -= p->flip;
		drm_event_send(p->file, p->type, p->user_data, n->seq, now_usec);
		free(p);
	}
}

uint64_t drm_node_sequence(const struct drm_node *n) {
	return n->seq;
}

uint64_t drm_node_memory_used(const struct drm_node *n) {
	return n->mem_used;
}

uint64_t drm_node_budget(const struct drm_node *n) {
	return n->budget;
}

bool drm_node_wait_done(const struct drm_node *n, uint64_t seq) {
	return n->seq >= seq || !n->state.mode_blob || !n->state.active;
}

void drm_node_wait_end(struct drm_node *n, union drm_wait_vblank *reply) {
	if (n->blocking_waits > 0)
		n->blocking_waits--;
	if (!reply)
		return;
	reply->reply.sequence = (uint32_t)n->seq;
	reply->reply.tval_sec = (long)(n->vblank_usec / 1000000);
	reply->reply.tval_usec = (long)(n->vblank_usec % 1000000);
}

bool drm_node_has_buffer(const struct drm_node *n, uint64_t serial) {
	const struct drm_buffer *b;

	LIST_FOREACH(b, &n->buffers, link)
		if (b->serial == serial)
			return true;
	return false;
}

int drm_node_map_find(const struct drm_node *n, const struct drm_file *file, uint64_t offset,
		      struct drm_dumb_map *ret) {
	const struct drm_buffer *b, *found = NULL;

	LIST_FOREACH(b, &n->buffers, link)
		if (b->map_offset == offset && offset != 0)
			found = b;
	if (!found)
		return -ENOENT;
	if (file) {
		bool held = false;

		for (size_t i = 0; i < DRM_FILE_MAX_HANDLES; i++)
			held |= file->handles[i] == found;
		if (!held)
			return -ENOENT;
	}
	*ret = (struct drm_dumb_map){ .fd = found->fd, .size = found->size, .serial = found->serial };
	return 0;
}

int drm_node_map_lookup(const struct drm_node *n, const struct drm_file *file, uint64_t offset, int *ret_fd,
			uint64_t *ret_size) {
	struct drm_dumb_map m;
	int r = drm_node_map_find(n, file, offset, &m);

	if (r < 0)
		return r;
	*ret_fd = m.fd;
	*ret_size = m.size;
	return 0;
}

int drm_file_open(struct drm_node *n, pid_t pid, struct drm_file **ret) {
	struct drm_file *f;

	if (n->n_files >= DRM_NODE_MAX_FILES)
		return -EMFILE;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->node = n;
	f->pid = pid;
	f->event_space = DRM_FILE_EVENT_SPACE;
	LIST_INSERT_HEAD(&n->files, f, link);
	n->n_files++;
	*ret = f;
	if (!n->master) {
		n->master = f;
		f->was_master = true;
		signal_emit(&n->events.master, f);
	}
	return 0;
}

void drm_file_close(struct drm_file *f) {
	struct drm_node *n = f->node;
	struct drm_fb *fb, *fb_next;
	struct drm_blob *b, *b_next;

	drm_pending_drop_file(n, f);
	for (fb = LIST_FIRST(&n->fbs); fb; fb = fb_next) {
		fb_next = LIST_NEXT(fb, link);
		if (fb->owner == f)
			drm_fb_remove(n, fb);
	}
	for (size_t i = 0; i < DRM_FILE_MAX_HANDLES; i++)
		if (f->handles[i])
			drm_buffer_unref(n, TAKE_PTR(f->handles[i]));
	for (b = LIST_FIRST(&n->blobs); b; b = b_next) {
		b_next = LIST_NEXT(b, link);
		if (b->owner == f) {
			b->owner = NULL;
			drm_blob_unref(n, b);
		}
	}
	LIST_REMOVE(f, link);
	n->n_files--;
	/*
	 * The last file gone (closed, or revoked with the persona's
	 * container), its output goes too, as at the kernel's last close: fb0's
	 * frame is shown again, and the next opener finds nothing of this
	 * one's.
	 */
	if (n->n_files == 0)
		reset_output(n);
	if (n->master == f) {
		n->master = NULL;
		n->unique_set = false;
		signal_emit(&n->events.master, NULL);
	}
	free(f);
}

struct drm_node *drm_file_node(const struct drm_file *f) {
	return f->node;
}

bool drm_file_is_master(const struct drm_file *f) {
	return f->node->master == f;
}
