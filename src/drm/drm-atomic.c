/* SPDX-License-Identifier: MIT */
/* ATOMIC: the objects' properties in four arrays, checked as a whole, applied as a whole or not at all. */
#include "drm-internal.h"
#include "util.h"

static uint32_t get_u32(const uint8_t *p, size_t i) {
	uint32_t v;

	memcpy(&v, p + i * 4, 4);
	return v;
}

static uint64_t get_u64(const uint8_t *p, size_t i) {
	uint64_t v;

	memcpy(&v, p + i * 8, 8);
	return v;
}

int drm_ioctl_atomic(struct drm_call *c) {
	const struct drm_mode_atomic *a = c->arg;
	struct drm_node *n = c->n;
	const struct drm_kms_state *old = &n->state;
	struct drm_kms_state s = n->state;
	struct drm_blob *damage = NULL;
	const uint8_t *objs, *counts, *props, *values;
	bool modeset, touched = false, event = a->flags & DRM_MODE_PAGE_FLIP_EVENT, crtc_in_state;
	uint64_t total = 0;
	size_t k = 0;
	int r;

	if (!c->f->atomic)
		return -EINVAL;
	if ((a->flags & ~(uint32_t)DRM_MODE_ATOMIC_FLAGS) || a->reserved)
		return -EINVAL;
	if (a->flags & DRM_MODE_PAGE_FLIP_ASYNC)
		return -EINVAL;
	/* Testing cannot send an event. */
	if ((a->flags & DRM_MODE_ATOMIC_TEST_ONLY) && event)
		return -EINVAL;
	if (a->count_objs > DRM_ATOMIC_MAX_OBJS)
		return -EINVAL;
	objs = drm_io_in(c->io, a->objs_ptr, (size_t)a->count_objs * 4);
	counts = drm_io_in(c->io, a->count_props_ptr, (size_t)a->count_objs * 4);
	if (!objs || !counts) {
		drm_io_ready(c->io);
		return 0;
	}
	for (uint32_t i = 0; i < a->count_objs; i++)
		total += get_u32(counts, i);
	if (total > DRM_ATOMIC_MAX_PROPS)
		return -EINVAL;
	props = drm_io_in(c->io, a->props_ptr, (size_t)total * 4);
	values = drm_io_in(c->io, a->prop_values_ptr, (size_t)total * 8);
	if (!drm_io_ready(c->io))
		return 0;

	for (uint32_t i = 0; i < a->count_objs; i++) {
		uint32_t obj = get_u32(objs, i), type = drm_obj_type(obj, DRM_MODE_OBJECT_ANY);
		uint32_t count = get_u32(counts, i);

		if (type != DRM_MODE_OBJECT_CRTC && type != DRM_MODE_OBJECT_PLANE && type != DRM_MODE_OBJECT_CONNECTOR)
			return -ENOENT;
		for (uint32_t j = 0; j < count; j++, k++) {
			uint32_t prop = get_u32(props, k);

			if (!drm_obj_has_prop(obj, prop))
				return -ENOENT;
			r = drm_prop_set(n, c->f, &s, obj, prop, get_u64(values, k), &damage);
			if (r < 0)
				return r;
		}
		touched = true;
	}
	/* With one CRTC, any object routed to it brings it into the state (and its event with it). */
	crtc_in_state = touched && (old->mode_blob || s.mode_blob || old->plane_on_crtc || s.plane_on_crtc ||
				    old->conn_on_crtc || s.conn_on_crtc);
	r = drm_kms_check(n, &s, damage, &modeset);
	if (r < 0)
		return r;
	if (event && crtc_in_state && !s.active && !old->active)
		return -EINVAL;
	if (modeset && !(a->flags & DRM_MODE_ATOMIC_ALLOW_MODESET))
		return -EINVAL;
	if (a->flags & DRM_MODE_ATOMIC_TEST_ONLY)
		return 0;
	if ((a->flags & DRM_MODE_ATOMIC_NONBLOCK) && crtc_in_state && n->flip_pending)
		return -EBUSY;
	event = event && crtc_in_state;
	if (event) {
		r = drm_event_reserve(c->f);
		if (r < 0)
			return r;
		r = drm_pending_add(n, c->f, DRM_EVENT_FLIP_COMPLETE, true, 0, a->user_data);
		if (r < 0) {
			drm_event_unreserve(c->f);
			return r;
		}
	}
	/* A nonblocking commit is done at the next vblank; until then another one is -EBUSY. */
	if ((a->flags & DRM_MODE_ATOMIC_NONBLOCK) && crtc_in_state && s.active)
		n->flip_pending = true;
	/* Damage counts only for the framebuffer the commit shows. */
	drm_kms_commit(n, &s, damage && s.fb ? (const void *)damage->data : NULL,
		       damage && s.fb ? damage->len / sizeof(struct drm_mode_rect) : 0);
	return 0;
}
