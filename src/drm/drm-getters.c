/* SPDX-License-Identifier: MIT */
/* The getters of the mode objects: resources, CRTC, encoder, connector, planes. */
#include "drm-internal.h"
#include "util.h"

static void put_u32(void *at, size_t i, uint32_t v) {
	memcpy((uint8_t *)at + i * sizeof(v), &v, sizeof(v));
}

/*
 * One id to an array the caller sized: written when count > 0 (the kernel
 * writes the first min(count, total) entries), count becomes the total.
 */
static void put_ids(struct drm_io *io, uint64_t ptr, uint32_t *count, const uint32_t *ids, uint32_t total) {
	uint32_t n = MIN(*count, total);

	if (n > 0) {
		uint8_t *out = drm_io_out(io, ptr, (size_t)n * 4);

		for (uint32_t i = 0; i < n; i++)
			put_u32(out, i, ids[i]);
	}
	*count = total;
}

static int get_resources(struct drm_call *c) {
	struct drm_mode_card_res *r = c->arg;
	uint32_t fbs[DRM_FILE_MAX_FBS], n_fbs = 0;
	const uint32_t crtc = DRM_NODE_CRTC_ID, enc = DRM_NODE_ENCODER_ID, conn = DRM_NODE_CONNECTOR_ID;
	const struct drm_fb *fb;
	uint32_t want = MIN(r->count_fbs, (uint32_t)DRM_FILE_MAX_FBS);

	LIST_FOREACH(fb, &c->n->fbs, link)
		if (fb->owner == c->f && n_fbs < DRM_FILE_MAX_FBS)
			fbs[n_fbs++] = fb->id;
	/* One range per array: the ids are contiguous in the caller's memory. */
	if (MIN(want, n_fbs) > 0) {
		uint8_t *out = drm_io_out(c->io, r->fb_id_ptr, MIN(want, n_fbs) * 4);

		for (uint32_t i = 0; i < MIN(want, n_fbs); i++)
			put_u32(out, i, fbs[i]);
	}
	r->count_fbs = n_fbs;
	put_ids(c->io, r->crtc_id_ptr, &r->count_crtcs, &crtc, 1);
	put_ids(c->io, r->connector_id_ptr, &r->count_connectors, &conn, 1);
	put_ids(c->io, r->encoder_id_ptr, &r->count_encoders, &enc, 1);
	r->min_width = r->min_height = 0;
	r->max_width = r->max_height = DRM_NODE_MAX_SIDE;
	return 0;
}

static int get_crtc(struct drm_call *c) {
	struct drm_mode_crtc *r = c->arg;
	const struct drm_kms_state *s = &c->n->state;

	if (r->crtc_id != DRM_NODE_CRTC_ID)
		return -ENOENT;
	r->gamma_size = DRM_NODE_GAMMA_SIZE;
	r->fb_id = s->fb ? s->fb->id : 0;
	r->x = s->src_x >> 16;
	r->y = s->src_y >> 16;
	r->mode_valid = s->mode_blob != NULL;
	memset(&r->mode, 0, sizeof(r->mode));
	if (r->mode_valid) {
		r->mode = s->mode;
		if (!c->f->aspect_ratio)
			r->mode.flags &= ~(uint32_t)DRM_MODE_FLAG_PIC_AR_MASK;
	}
	return 0;
}

static int get_encoder(struct drm_call *c) {
	struct drm_mode_get_encoder *r = c->arg;

	if (r->encoder_id != DRM_NODE_ENCODER_ID)
		return -ENOENT;
	r->encoder_type = DRM_MODE_ENCODER_VIRTUAL;
	r->crtc_id = c->n->state.conn_on_crtc ? DRM_NODE_CRTC_ID : 0;
	r->possible_crtcs = 1;
	r->possible_clones = 1;
	return 0;
}

/* The connector's properties into the caller's two arrays (drm_mode_object_get_properties()). */
static void put_props(struct drm_call *c, uint32_t obj, uint64_t props_ptr, uint64_t values_ptr, uint32_t *count) {
	uint32_t ids[DRM_PROP_COUNT], n = 0, k;
	uint64_t values[DRM_PROP_COUNT];

	for (uint32_t p = 1; p < DRM_PROP_COUNT; p++)
		if (drm_obj_has_prop(obj, p) && (c->f->atomic || !drm_prop_is_atomic(p)) &&
		    drm_prop_value(c->n, &c->n->state, obj, p, &values[n]) == 0)
			ids[n++] = p;
	k = MIN(*count, n);
	if (k > 0) {
		uint8_t *pi = drm_io_out(c->io, props_ptr, (size_t)k * 4);
		uint8_t *pv = drm_io_out(c->io, values_ptr, (size_t)k * 8);

		for (uint32_t i = 0; i < k; i++) {
			put_u32(pi, i, ids[i]);
			memcpy(pv + (size_t)i * 8, &values[i], 8);
		}
	}
	*count = n;
}

void drm_put_props(struct drm_call *c, uint32_t obj, uint64_t props_ptr, uint64_t values_ptr, uint32_t *count) {
	put_props(c, obj, props_ptr, values_ptr, count);
}

static int get_connector(struct drm_call *c) {
	struct drm_mode_get_connector *r = c->arg;
	struct drm_node *n = c->n;
	const uint32_t enc = DRM_NODE_ENCODER_ID;

	if (r->connector_id != DRM_NODE_CONNECTOR_ID)
		return -ENOENT;
	/* Encoders and modes: all or nothing, as the kernel copies them. */
	if (r->count_encoders >= 1)
		put_u32(drm_io_out(c->io, r->encoders_ptr, 4), 0, enc);
	r->count_encoders = 1;
	if (r->count_modes >= n->n_modes) {
		uint8_t *out = drm_io_out(c->io, r->modes_ptr, n->n_modes * sizeof(struct drm_mode_modeinfo));

		memcpy(out, n->modes, n->n_modes * sizeof(struct drm_mode_modeinfo));
	}
	r->count_modes = (uint32_t)n->n_modes;
	r->connector_type = DRM_MODE_CONNECTOR_VIRTUAL;
	r->connector_type_id = 1;
	r->connection = 1; /* connector_status_connected */
	r->mm_width = n->width_mm;
	r->mm_height = n->height_mm;
	r->subpixel = 1; /* SubPixelUnknown */
	r->encoder_id = n->state.conn_on_crtc ? DRM_NODE_ENCODER_ID : 0;
	put_props(c, DRM_NODE_CONNECTOR_ID, r->props_ptr, r->prop_values_ptr, &r->count_props);
	return 0;
}

static int get_plane_resources(struct drm_call *c) {
	struct drm_mode_get_plane_res *r = c->arg;
	const uint32_t plane = DRM_NODE_PLANE_ID;

	/* Only overlays without UNIVERSAL_PLANES: the primary plane is hidden then. */
	if (c->f->universal_planes)
		put_ids(c->io, r->plane_id_ptr, &r->count_planes, &plane, 1);
	else
		r->count_planes = 0;
	return 0;
}

static int get_plane(struct drm_call *c) {
	struct drm_mode_get_plane *r = c->arg;
	const struct drm_kms_state *s = &c->n->state;

	if (r->plane_id != DRM_NODE_PLANE_ID)
		return -ENOENT;
	r->crtc_id = s->plane_on_crtc ? DRM_NODE_CRTC_ID : 0;
	r->fb_id = s->fb ? s->fb->id : 0;
	r->possible_crtcs = 1;
	r->gamma_size = 0;
	if (r->count_format_types >= drm_n_plane_formats) {
		uint8_t *out = drm_io_out(c->io, r->format_type_ptr, drm_n_plane_formats * 4);

		for (size_t i = 0; i < drm_n_plane_formats; i++)
			put_u32(out, i, drm_plane_formats[i]);
	}
	r->count_format_types = (uint32_t)drm_n_plane_formats;
	return 0;
}

int drm_ioctl_modes(struct drm_call *c, unsigned int nr) {
	/* Getters: they only name what they write, the rounds end when it is all there. */
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_GETRESOURCES):
		return get_resources(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETCRTC):
		return get_crtc(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETENCODER):
		return get_encoder(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETCONNECTOR):
		return get_connector(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETPLANERESOURCES):
		return get_plane_resources(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETPLANE):
		return get_plane(c);
	default:
		return -EINVAL;
	}
}
