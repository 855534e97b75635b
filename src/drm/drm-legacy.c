/* SPDX-License-Identifier: MIT */
/* The legacy modeset ioctls: SETCRTC, SETPLANE, PAGE_FLIP, DIRTYFB, WAIT_VBLANK, gamma and cursor. */
#include "drm-internal.h"
#include "util.h"

/* drm_crtc_check_viewport(): the mode's size at x, y inside the framebuffer. */
static int check_viewport(const struct drm_mode_modeinfo *m, uint32_t x, uint32_t y, const struct drm_fb *fb) {
	if (m->hdisplay > fb->width || m->vdisplay > fb->height || x > fb->width - m->hdisplay ||
	    y > fb->height - m->vdisplay)
		return -ENOSPC;
	return 0;
}

/* The whole mode from framebuffer pixel x, y on the plane. */
static void plane_full(struct drm_kms_state *s, struct drm_fb *fb, uint32_t x, uint32_t y) {
	s->fb = fb;
	s->plane_on_crtc = true;
	s->crtc_x = s->crtc_y = 0;
	s->crtc_w = s->mode.hdisplay;
	s->crtc_h = s->mode.vdisplay;
	s->src_x = x << 16;
	s->src_y = y << 16;
	s->src_w = (uint32_t)s->mode.hdisplay << 16;
	s->src_h = (uint32_t)s->mode.vdisplay << 16;
}

static int set_crtc(struct drm_call *c) {
	const struct drm_mode_crtc *r = c->arg;
	struct drm_node *n = c->n;
	struct drm_kms_state s = n->state;
	struct drm_blob *blob = NULL;
	struct drm_fb *fb = NULL;
	const uint8_t *ids;
	bool modeset;
	int k;

	if ((r->x & 0xffff0000) || (r->y & 0xffff0000))
		return -ERANGE;
	if (r->crtc_id != DRM_NODE_CRTC_ID)
		return -ENOENT;
	if (r->mode_valid) {
		fb = r->fb_id == UINT32_MAX ? n->state.fb : drm_fb_find(n, r->fb_id);
		if (!fb)
			return r->fb_id == UINT32_MAX ? -EINVAL : -ENOENT;
		if (!c->f->aspect_ratio && (r->mode.flags & DRM_MODE_FLAG_PIC_AR_MASK))
			return -EINVAL;
		k = drm_node_check_mode(n, &r->mode);
		if (k < 0)
			return k;
		k = check_viewport(&r->mode, r->x, r->y, fb);
		if (k < 0)
			return k;
	}
	if ((r->count_connectors == 0) != !r->mode_valid)
		return -EINVAL;
	/* Bounded by the connectors there are before the list is read. */
	if (r->count_connectors > 1)
		return -EINVAL;
	ids = drm_io_in(c->io, r->set_connectors_ptr, (size_t)r->count_connectors * 4);
	if (!drm_io_ready(c->io))
		return 0;
	for (uint32_t i = 0; i < r->count_connectors; i++) {
		uint32_t id;

		memcpy(&id, ids + i * 4, 4);
		if (id != DRM_NODE_CONNECTOR_ID)
			return -ENOENT;
	}
	if (!r->mode_valid) {
		drm_kms_disable(n);
		return 0;
	}
	/* The mode becomes a blob, MODE_ID's value, as the kernel makes one. */
	k = drm_blob_new(n, NULL, &r->mode, sizeof(r->mode), &blob);
	if (k < 0)
		return k;
	s.mode_blob = blob;
	s.mode = r->mode;
	s.active = true;
	s.conn_on_crtc = true;
	plane_full(&s, fb, r->x, r->y);
	k = drm_kms_check(n, &s, NULL, &modeset);
	if (k == 0)
		drm_kms_commit(n, &s, NULL, 0);
	drm_blob_unref(n, blob);
	return k;
}

/*
 * GETGAMMA and SETGAMMA: the table of DRM_NODE_GAMMA_SIZE entries a
 * channel, all three arrays at once, as the kernel copies them. SETGAMMA
 * keeps it for GETGAMMA; the screen shows the frame as drawn.
 */
static int gamma(struct drm_call *c, bool set) {
	const struct drm_mode_crtc_lut *r = c->arg;
	const size_t len = sizeof(c->n->gamma[0]);
	const uint64_t ptrs[3] = { r->red, r->green, r->blue };
	const uint8_t *in[3] = { NULL, NULL, NULL };
	uint8_t *out[3] = { NULL, NULL, NULL };

	if (r->crtc_id != DRM_NODE_CRTC_ID)
		return -ENOENT;
	if (r->gamma_size != DRM_NODE_GAMMA_SIZE)
		return -EINVAL;
	for (size_t i = 0; i < 3; i++) {
		if (set)
			in[i] = drm_io_in(c->io, ptrs[i], len);
		else
			out[i] = drm_io_out(c->io, ptrs[i], len);
	}
	if (!drm_io_ready(c->io))
		return 0;
	for (size_t i = 0; i < 3; i++) {
		if (set)
			memcpy(c->n->gamma[i], in[i], len);
		else
			memcpy(out[i], c->n->gamma[i], len);
	}
	return 0;
}

static int set_plane(struct drm_call *c) {
	const struct drm_mode_set_plane *r = c->arg;
	struct drm_node *n = c->n;
	struct drm_kms_state s = n->state;
	struct drm_fb *fb = NULL;
	bool modeset;
	int k;

	if (r->plane_id != DRM_NODE_PLANE_ID)
		return -ENOENT;
	if (r->fb_id) {
		fb = drm_fb_find(n, r->fb_id);
		if (!fb)
			return -ENOENT;
		if (r->crtc_id != DRM_NODE_CRTC_ID)
			return -ENOENT;
	}
	s.fb = fb;
	s.plane_on_crtc = fb != NULL;
	if (fb) {
		s.crtc_x = r->crtc_x;
		s.crtc_y = r->crtc_y;
		s.crtc_w = r->crtc_w;
		s.crtc_h = r->crtc_h;
		s.src_x = r->src_x;
		s.src_y = r->src_y;
		s.src_w = r->src_w;
		s.src_h = r->src_h;
	}
	k = drm_kms_check(n, &s, NULL, &modeset);
	if (k < 0)
		return k;
	drm_kms_commit(n, &s, NULL, 0);
	return 0;
}

static int page_flip(struct drm_call *c) {
	const struct drm_mode_crtc_page_flip *r = c->arg;
	struct drm_node *n = c->n;
	struct drm_kms_state s = n->state;
	struct drm_fb *fb;
	bool modeset, event = r->flags & DRM_MODE_PAGE_FLIP_EVENT;
	int k;

	if ((r->flags & ~(uint32_t)DRM_MODE_PAGE_FLIP_FLAGS) || r->reserved)
		return -EINVAL;
	/* No async flips and no target vblank (both capabilities are 0). */
	if (r->flags & (DRM_MODE_PAGE_FLIP_ASYNC | DRM_MODE_PAGE_FLIP_TARGET))
		return -EINVAL;
	if (r->crtc_id != DRM_NODE_CRTC_ID)
		return -ENOENT;
	if (!n->state.fb)
		return -EBUSY;
	fb = drm_fb_find(n, r->fb_id);
	if (!fb)
		return -ENOENT;
	k = check_viewport(&n->state.mode, n->state.src_x >> 16, n->state.src_y >> 16, fb);
	if (k < 0)
		return k;
	if (fb->format != n->state.fb->format)
		return -EINVAL;
	s.fb = fb;
	k = drm_kms_check(n, &s, NULL, &modeset);
	if (k < 0)
		return k;
	if (!s.active)
		return -EINVAL; /* an event, or a flip, on a CRTC that is off */
	if (n->flip_pending)
		return -EBUSY;
	if (event) {
		k = drm_event_reserve(c->f);
		if (k < 0)
			return k;
		k = drm_pending_add(n, c->f, DRM_EVENT_FLIP_COMPLETE, true, 0, r->user_data);
		if (k < 0) {
			drm_event_unreserve(c->f);
			return k;
		}
	}
	n->flip_pending = true;
	drm_kms_commit(n, &s, NULL, 0);
	return 0;
}

static int dirty_fb(struct drm_call *c) {
	const struct drm_mode_fb_dirty_cmd *r = c->arg;
	struct drm_mode_rect rects[DRM_DIRTY_MAX_CLIPS];
	const struct drm_fb *fb = drm_fb_find(c->n, r->fb_id);
	const uint8_t *clips;
	size_t k = 0;

	if (!fb)
		return -ENOENT;
	if (!r->num_clips != !r->clips_ptr)
		return -EINVAL;
	if ((r->flags & DRM_MODE_FB_DIRTY_ANNOTATE_COPY) && (r->num_clips % 2))
		return -EINVAL;
	if (r->num_clips > DRM_DIRTY_MAX_CLIPS)
		return -EINVAL;
	clips = drm_io_in(c->io, r->clips_ptr, (size_t)r->num_clips * sizeof(struct drm_clip_rect));
	if (!drm_io_ready(c->io))
		return 0;
	if (c->n->state.fb != fb)
		return 0;
	/* Clipped to the framebuffer; none at all means all of it. */
	for (uint32_t i = 0; i < r->num_clips; i++) {
		struct drm_clip_rect cr;
		struct drm_mode_rect m;

		memcpy(&cr, clips + i * sizeof(cr), sizeof(cr));
		m = (struct drm_mode_rect){ cr.x1, cr.y1, MIN((uint32_t)cr.x2, fb->width),
					    MIN((uint32_t)cr.y2, fb->height) };
		if (m.x1 < m.x2 && m.y1 < m.y2)
			rects[k++] = m;
	}
	if (r->num_clips > 0 && k == 0)
		return 0;
	drm_node_scanout_changed(c->n, k ? rects : NULL, k, true);
	return 0;
}

/* The vblank sequence the caller's 32 bits name, nearest to the current one. */
static uint64_t widen(uint64_t cur, uint32_t req) {
	return cur + (uint64_t)(int64_t)(int32_t)(req - (uint32_t)cur);
}

static int wait_vblank(struct drm_call *c) {
	union drm_wait_vblank *v = c->arg;
	struct drm_node *n = c->n;
	uint32_t type = v->request.type, flags = type & _DRM_VBLANK_FLAGS_MASK;
	uint32_t pipe = (type & _DRM_VBLANK_SECONDARY) ? 1 : 0;
	uint32_t high = (type & _DRM_VBLANK_HIGH_CRTC_MASK) >> _DRM_VBLANK_HIGH_CRTC_SHIFT;
	uint64_t seq = n->seq, req;
	int k;

	if (type & ~(uint32_t)(_DRM_VBLANK_TYPES_MASK | _DRM_VBLANK_FLAGS_MASK | _DRM_VBLANK_HIGH_CRTC_MASK))
		return -EINVAL;
	if (high)
		pipe = high;
	if (pipe >= 1 || (flags & _DRM_VBLANK_SIGNAL))
		return -EINVAL;
	/* No vblanks on a CRTC that is off. */
	if (!n->state.mode_blob || !n->state.active)
		return -EINVAL;
	if (type & _DRM_VBLANK_RELATIVE) {
		req = seq + v->request.sequence;
		type &= ~(uint32_t)_DRM_VBLANK_RELATIVE;
	} else {
		req = widen(seq, v->request.sequence);
	}
	if ((flags & _DRM_VBLANK_NEXTONMISS) && req <= seq) {
		req = seq + 1;
		type &= ~(uint32_t)_DRM_VBLANK_NEXTONMISS;
	}
	if (flags & _DRM_VBLANK_EVENT) {
		uint64_t user_data = v->request.signal;

		k = drm_event_reserve(c->f);
		if (k < 0)
			return k;
		v->reply.type = type;
		if (req <= seq) {
			drm_event_send(c->f, DRM_EVENT_VBLANK, user_data, seq, n->vblank_usec);
			v->reply.sequence = (uint32_t)seq;
			return 0;
		}
		k = drm_pending_add(n, c->f, DRM_EVENT_VBLANK, false, req, user_data);
		if (k < 0) {
			drm_event_unreserve(c->f);
			return k;
		}
		v->reply.sequence = (uint32_t)req;
		return 0;
	}
	v->reply.type = type;
	if (req > seq) {
		/* Answered by the transport at vblank req (drm_node_wait_done(), drm_node_wait_end()). */
		c->io->s->wait = true;
		c->io->s->wait_seq = req;
		v->reply.sequence = (uint32_t)req;
		n->blocking_waits++;
		return 0;
	}
	v->reply.sequence = (uint32_t)seq;
	v->reply.tval_sec = (long)(n->vblank_usec / 1000000);
	v->reply.tval_usec = (long)(n->vblank_usec % 1000000);
	return 0;
}

int drm_ioctl_modeset(struct drm_call *c, unsigned int nr) {
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_SETCRTC):
		return set_crtc(c);
	case _IOC_NR(DRM_IOCTL_MODE_DIRTYFB):
		return dirty_fb(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETGAMMA):
	case _IOC_NR(DRM_IOCTL_MODE_SETGAMMA):
		return gamma(c, nr == _IOC_NR(DRM_IOCTL_MODE_SETGAMMA));
	default:
		break;
	}
	if (!drm_io_ready(c->io))
		return 0;
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_SETPLANE):
		return set_plane(c);
	case _IOC_NR(DRM_IOCTL_MODE_PAGE_FLIP):
		return page_flip(c);
	case _IOC_NR(DRM_IOCTL_WAIT_VBLANK):
		return wait_vblank(c);
	case _IOC_NR(DRM_IOCTL_MODE_CURSOR):
	case _IOC_NR(DRM_IOCTL_MODE_CURSOR2): {
		const struct drm_mode_cursor *r = c->arg;

		if (!r->flags || (r->flags & ~(uint32_t)DRM_MODE_CURSOR_FLAGS))
			return -EINVAL;
		if (r->crtc_id != DRM_NODE_CRTC_ID)
			return -ENOENT;
		return -ENXIO; /* no cursor plane: clients draw their own */
	}
	default:
		return -EINVAL;
	}
}
