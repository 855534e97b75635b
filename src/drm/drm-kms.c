/* SPDX-License-Identifier: MIT */
/* Checking and committing a state of the CRTC, plane and connector, as the kernel's atomic helpers do. */
#include <limits.h>

#include "drm-internal.h"
#include "util.h"

/* drm_mode_equal(): timings, clock and flags. */
static bool mode_equal(const struct drm_mode_modeinfo *a, const struct drm_mode_modeinfo *b) {
	return a->clock == b->clock && a->hdisplay == b->hdisplay && a->hsync_start == b->hsync_start &&
	       a->hsync_end == b->hsync_end && a->htotal == b->htotal && a->hskew == b->hskew &&
	       a->vdisplay == b->vdisplay && a->vsync_start == b->vsync_start && a->vsync_end == b->vsync_end &&
	       a->vtotal == b->vtotal && a->vscan == b->vscan && a->flags == b->flags;
}

static int check_damage(const struct drm_fb *fb, const struct drm_blob *damage) {
	size_t n = damage->len / sizeof(struct drm_mode_rect);

	for (size_t i = 0; i < n; i++) {
		struct drm_mode_rect r;

		memcpy(&r, damage->data + i * sizeof(r), sizeof(r));
		if (r.x1 >= r.x2 || r.y1 >= r.y2 || r.x1 < 0 || r.y1 < 0 || r.x2 > (int64_t)fb->width ||
		    r.y2 > (int64_t)fb->height)
			return -EINVAL;
	}
	return 0;
}

/* drm_atomic_plane_check(), then what drm_atomic_helper_check_plane_state() asks of a primary plane. */
static int check_plane(const struct drm_kms_state *s, const struct drm_blob *damage) {
	const struct drm_fb *fb = s->fb;
	uint64_t fb_w, fb_h;
	int r;

	if (s->plane_on_crtc != (fb != NULL))
		return -EINVAL;
	if (!fb)
		return 0;
	if (s->crtc_w > INT_MAX || s->crtc_x > INT_MAX - (int32_t)s->crtc_w || s->crtc_h > INT_MAX ||
	    s->crtc_y > INT_MAX - (int32_t)s->crtc_h)
		return -ERANGE;
	fb_w = (uint64_t)fb->width << 16;
	fb_h = (uint64_t)fb->height << 16;
	if (s->src_w > fb_w || s->src_x > fb_w - s->src_w || s->src_h > fb_h || s->src_y > fb_h - s->src_h)
		return -ENOSPC;
	if (damage) {
		r = check_damage(fb, damage);
		if (r < 0)
			return r;
	}
	/* A plane cannot be updated on a disabled CRTC. */
	if (!s->mode_blob)
		return -EINVAL;
	/* No scaling, and the primary plane covers the whole CRTC. */
	if (s->src_w != (uint64_t)s->crtc_w << 16 || s->src_h != (uint64_t)s->crtc_h << 16)
		return -ERANGE;
	if (s->crtc_x != 0 || s->crtc_y != 0 || s->crtc_w != s->mode.hdisplay || s->crtc_h != s->mode.vdisplay)
		return -EINVAL;
	return 0;
}

int drm_kms_check(const struct drm_node *n, const struct drm_kms_state *s, const struct drm_blob *damage,
		  bool *ret_modeset) {
	const struct drm_kms_state *old = &n->state;
	bool enable = s->mode_blob != NULL;
	int r;

	r = check_plane(s, damage);
	if (r < 0)
		return r;
	if (s->active && !enable)
		return -EINVAL;
	/* An enabled CRTC drives the connector, a disabled one none. */
	if (enable != s->conn_on_crtc)
		return -EINVAL;
	*ret_modeset = (old->mode_blob != NULL) != enable || (enable && !mode_equal(&old->mode, &s->mode)) ||
		       old->active != s->active || old->conn_on_crtc != s->conn_on_crtc;
	return 0;
}

void drm_kms_commit(struct drm_node *n, const struct drm_kms_state *s, const struct drm_mode_rect *damage,
		    size_t n_damage) {
	struct drm_kms_state *cur = &n->state;
	struct drm_blob *old_blob = cur->mode_blob;
	bool was_on = cur->mode_blob && cur->active;

	if (s->mode_blob)
		drm_blob_ref(s->mode_blob);
	*cur = *s;
	if (old_blob)
		drm_blob_unref(n, old_blob);
	/* The connector's DPMS follows its CRTC, as after a commit of the helpers. */
	if (cur->conn_on_crtc && cur->mode_blob)
		cur->dpms = cur->active ? DRM_MODE_DPMS_ON : DRM_MODE_DPMS_OFF;
	if (was_on && !(cur->mode_blob && cur->active))
		drm_pending_flush(n, n->clock);
	drm_node_scanout_changed(n, damage, n_damage, damage != NULL);
}

void drm_kms_disable(struct drm_node *n) {
	struct drm_kms_state s = n->state;

	s.fb = NULL;
	s.plane_on_crtc = false;
	s.mode_blob = NULL;
	memset(&s.mode, 0, sizeof(s.mode));
	s.active = false;
	s.conn_on_crtc = false;
	drm_kms_commit(n, &s, NULL, 0);
}
