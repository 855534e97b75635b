/* SPDX-License-Identifier: MIT */
/* Properties of the mode objects, property blobs, and setting a property outside ATOMIC. */
#include <limits.h>

#include "drm-internal.h"
#include "util.h"

enum { ON_CONN = 1, ON_CRTC = 2, ON_PLANE = 4 };

struct prop_enum {
	uint64_t value;
	const char *name;
};

struct prop_def {
	const char *name;
	uint32_t flags;
	unsigned int objs;
	uint64_t min, max; /* ranges; for objects, min is the object type */
	const struct prop_enum *enums;
	size_t n_enums;
};

static const struct prop_enum dpms_enums[] = { { 0, "On" }, { 1, "Standby" }, { 2, "Suspend" }, { 3, "Off" } };
static const struct prop_enum link_enums[] = { { 0, "Good" }, { 1, "Bad" } };
static const struct prop_enum type_enums[] = { { 0, "Overlay" }, { 1, "Primary" }, { 2, "Cursor" } };

#define ENUMS(e) e, ELEMENTSOF(e)
#define I642U64(v) ((uint64_t)(int64_t)(v))
#define ATOMIC_RANGE(n, lo, hi) { n, DRM_MODE_PROP_RANGE | DRM_MODE_PROP_ATOMIC, ON_PLANE, lo, hi, NULL, 0 }
#define ATOMIC_SRANGE(n) \
	{ n, DRM_MODE_PROP_SIGNED_RANGE | DRM_MODE_PROP_ATOMIC, ON_PLANE, I642U64(INT_MIN), INT_MAX, NULL, 0 }

static const struct prop_def props[DRM_PROP_COUNT] = {
	[DRM_PROP_EDID] = { "EDID", DRM_MODE_PROP_BLOB | DRM_MODE_PROP_IMMUTABLE, ON_CONN, 0, 0, NULL, 0 },
	[DRM_PROP_DPMS] = { "DPMS", DRM_MODE_PROP_ENUM, ON_CONN, 0, 0, ENUMS(dpms_enums) },
	[DRM_PROP_LINK_STATUS] = { "link-status", DRM_MODE_PROP_ENUM, ON_CONN, 0, 0, ENUMS(link_enums) },
	[DRM_PROP_NON_DESKTOP] = { "non-desktop", DRM_MODE_PROP_RANGE | DRM_MODE_PROP_IMMUTABLE, ON_CONN, 0, 1,
				   NULL, 0 },
	[DRM_PROP_CRTC_ID] = { "CRTC_ID", DRM_MODE_PROP_OBJECT | DRM_MODE_PROP_ATOMIC, ON_CONN | ON_PLANE,
			       DRM_MODE_OBJECT_CRTC, 0, NULL, 0 },
	[DRM_PROP_ACTIVE] = { "ACTIVE", DRM_MODE_PROP_RANGE | DRM_MODE_PROP_ATOMIC, ON_CRTC, 0, 1, NULL, 0 },
	[DRM_PROP_MODE_ID] = { "MODE_ID", DRM_MODE_PROP_BLOB | DRM_MODE_PROP_ATOMIC, ON_CRTC, 0, 0, NULL, 0 },
	[DRM_PROP_TYPE] = { "type", DRM_MODE_PROP_ENUM | DRM_MODE_PROP_IMMUTABLE, ON_PLANE, 0, 0, ENUMS(type_enums) },
	[DRM_PROP_FB_ID] = { "FB_ID", DRM_MODE_PROP_OBJECT | DRM_MODE_PROP_ATOMIC, ON_PLANE, DRM_MODE_OBJECT_FB, 0,
			     NULL, 0 },
	[DRM_PROP_CRTC_X] = ATOMIC_SRANGE("CRTC_X"),
	[DRM_PROP_CRTC_Y] = ATOMIC_SRANGE("CRTC_Y"),
	[DRM_PROP_CRTC_W] = ATOMIC_RANGE("CRTC_W", 0, INT_MAX),
	[DRM_PROP_CRTC_H] = ATOMIC_RANGE("CRTC_H", 0, INT_MAX),
	[DRM_PROP_SRC_X] = ATOMIC_RANGE("SRC_X", 0, UINT32_MAX),
	[DRM_PROP_SRC_Y] = ATOMIC_RANGE("SRC_Y", 0, UINT32_MAX),
	[DRM_PROP_SRC_W] = ATOMIC_RANGE("SRC_W", 0, UINT32_MAX),
	[DRM_PROP_SRC_H] = ATOMIC_RANGE("SRC_H", 0, UINT32_MAX),
	[DRM_PROP_FB_DAMAGE_CLIPS] = { "FB_DAMAGE_CLIPS", DRM_MODE_PROP_BLOB | DRM_MODE_PROP_ATOMIC, ON_PLANE, 0, 0,
				       NULL, 0 },
};

static unsigned int obj_bit(uint32_t obj) {
	switch (obj) {
	case DRM_NODE_CONNECTOR_ID:
		return ON_CONN;
	case DRM_NODE_CRTC_ID:
		return ON_CRTC;
	case DRM_NODE_PLANE_ID:
		return ON_PLANE;
	default:
		return 0;
	}
}

uint32_t drm_obj_type(uint32_t obj, uint32_t type) {
	uint32_t t;

	switch (obj) {
	case DRM_NODE_CONNECTOR_ID:
		t = DRM_MODE_OBJECT_CONNECTOR;
		break;
	case DRM_NODE_CRTC_ID:
		t = DRM_MODE_OBJECT_CRTC;
		break;
	case DRM_NODE_PLANE_ID:
		t = DRM_MODE_OBJECT_PLANE;
		break;
	case DRM_NODE_ENCODER_ID:
		t = DRM_MODE_OBJECT_ENCODER;
		break;
	default:
		t = obj >= 1 && obj < DRM_PROP_COUNT ? DRM_MODE_OBJECT_PROPERTY : 0;
		break;
	}
	return type == DRM_MODE_OBJECT_ANY || type == t ? t : 0;
}

bool drm_obj_has_prop(uint32_t obj, uint32_t prop) {
	return prop >= 1 && prop < DRM_PROP_COUNT && (props[prop].objs & obj_bit(obj));
}

bool drm_prop_is_atomic(uint32_t prop) {
	return prop >= 1 && prop < DRM_PROP_COUNT && (props[prop].flags & DRM_MODE_PROP_ATOMIC);
}

int drm_prop_value(const struct drm_node *n, const struct drm_kms_state *s, uint32_t obj, uint32_t prop,
		   uint64_t *ret) {
	uint64_t v = 0;

	if (!drm_obj_has_prop(obj, prop))
		return -EINVAL;
	switch (prop) {
	case DRM_PROP_EDID:
		v = n->edid ? n->edid->id : 0;
		break;
	case DRM_PROP_DPMS:
		v = s->dpms;
		break;
	case DRM_PROP_CRTC_ID:
		v = (obj == DRM_NODE_PLANE_ID ? s->plane_on_crtc : s->conn_on_crtc) ? DRM_NODE_CRTC_ID : 0;
		break;
	case DRM_PROP_ACTIVE:
		v = s->active;
		break;
	case DRM_PROP_MODE_ID:
		v = s->mode_blob ? s->mode_blob->id : 0;
		break;
	case DRM_PROP_TYPE:
		v = 1; /* DRM_PLANE_TYPE_PRIMARY */
		break;
	case DRM_PROP_FB_ID:
		v = s->fb ? s->fb->id : 0;
		break;
	case DRM_PROP_CRTC_X:
		v = I642U64(s->crtc_x);
		break;
	case DRM_PROP_CRTC_Y:
		v = I642U64(s->crtc_y);
		break;
	case DRM_PROP_CRTC_W:
		v = s->crtc_w;
		break;
	case DRM_PROP_CRTC_H:
		v = s->crtc_h;
		break;
	case DRM_PROP_SRC_X:
		v = s->src_x;
		break;
	case DRM_PROP_SRC_Y:
		v = s->src_y;
		break;
	case DRM_PROP_SRC_W:
		v = s->src_w;
		break;
	case DRM_PROP_SRC_H:
		v = s->src_h;
		break;
	default: /* link-status Good, non-desktop 0, no damage */
		break;
	}
	*ret = v;
	return 0;
}

/* drm_property_change_valid_get(): whether value is one prop takes. */
static bool value_valid(const struct prop_def *d, uint64_t value) {
	if (d->flags & DRM_MODE_PROP_RANGE)
		return value >= d->min && value <= d->max;
	if (d->flags & DRM_MODE_PROP_SIGNED_RANGE)
		return (int64_t)value >= (int64_t)d->min && (int64_t)value <= (int64_t)d->max;
	if (d->flags & DRM_MODE_PROP_ENUM) {
		for (size_t i = 0; i < d->n_enums; i++)
			if (d->enums[i].value == value)
				return true;
		return false;
	}
	return value <= UINT32_MAX; /* object and blob ids */
}

int drm_prop_set(struct drm_node *n, struct drm_file *f, struct drm_kms_state *s, uint32_t obj, uint32_t prop,
		 uint64_t value, struct drm_blob **damage) {
	struct drm_blob *b;

	(void)f;
	if (!drm_obj_has_prop(obj, prop) || (props[prop].flags & DRM_MODE_PROP_IMMUTABLE) ||
	    !value_valid(&props[prop], value))
		return -EINVAL;
	switch (prop) {
	case DRM_PROP_DPMS: /* only through the legacy path, as the kernel's atomic ioctl */
		return -EINVAL;
	case DRM_PROP_LINK_STATUS: /* never downgraded on request */
		return 0;
	case DRM_PROP_CRTC_ID:
		if (value != 0 && value != DRM_NODE_CRTC_ID)
			return -EACCES;
		if (obj == DRM_NODE_PLANE_ID)
			s->plane_on_crtc = value != 0;
		else
			s->conn_on_crtc = value != 0;
		return 0;
	case DRM_PROP_ACTIVE:
		s->active = value != 0;
		return 0;
	case DRM_PROP_MODE_ID:
		if (value == 0) {
			s->mode_blob = NULL;
			memset(&s->mode, 0, sizeof(s->mode));
			return 0;
		}
		b = drm_blob_find(n, (uint32_t)value);
		if (!b || b->len != sizeof(struct drm_mode_modeinfo))
			return -EINVAL;
		memcpy(&s->mode, b->data, sizeof(s->mode));
		if (drm_node_check_mode(n, &s->mode) < 0)
			return -EINVAL;
		s->mode_blob = b;
		return 0;
	case DRM_PROP_FB_ID:
		if (value == 0) {
			s->fb = NULL;
			return 0;
		}
		s->fb = drm_fb_find(n, (uint32_t)value);
		return s->fb ? 0 : -EINVAL;
	case DRM_PROP_CRTC_X:
		s->crtc_x = (int32_t)value;
		return 0;
	case DRM_PROP_CRTC_Y:
		s->crtc_y = (int32_t)value;
		return 0;
	case DRM_PROP_CRTC_W:
		s->crtc_w = (uint32_t)value;
		return 0;
	case DRM_PROP_CRTC_H:
		s->crtc_h = (uint32_t)value;
		return 0;
	case DRM_PROP_SRC_X:
		s->src_x = (uint32_t)value;
		return 0;
	case DRM_PROP_SRC_Y:
		s->src_y = (uint32_t)value;
		return 0;
	case DRM_PROP_SRC_W:
		s->src_w = (uint32_t)value;
		return 0;
	case DRM_PROP_SRC_H:
		s->src_h = (uint32_t)value;
		return 0;
	case DRM_PROP_FB_DAMAGE_CLIPS:
		if (value == 0) {
			*damage = NULL;
			return 0;
		}
		b = drm_blob_find(n, (uint32_t)value);
		if (!b || b->len % sizeof(struct drm_mode_rect) != 0 ||
		    b->len / sizeof(struct drm_mode_rect) > DRM_DAMAGE_MAX_CLIPS)
			return -EINVAL;
		*damage = b;
		return 0;
	default:
		return -EINVAL;
	}
}

static int get_property(struct drm_call *c) {
	struct drm_mode_get_property *r = c->arg;
	const struct prop_def *d;
	uint64_t values[4];
	size_t n_values = 0, k;

	if (r->prop_id < 1 || r->prop_id >= DRM_PROP_COUNT)
		return -ENOENT;
	d = &props[r->prop_id];
	memset(r->name, 0, sizeof(r->name));
	memcpy(r->name, d->name, strlen(d->name));
	r->flags = d->flags;
	if (d->flags & (DRM_MODE_PROP_RANGE | DRM_MODE_PROP_SIGNED_RANGE)) {
		values[n_values++] = d->min;
		values[n_values++] = d->max;
	} else if (d->flags & DRM_MODE_PROP_OBJECT) {
		values[n_values++] = d->min;
	} else if (d->flags & DRM_MODE_PROP_ENUM) {
		for (size_t i = 0; i < d->n_enums; i++)
			values[n_values++] = d->enums[i].value;
	}
	k = MIN((size_t)r->count_values, n_values);
	if (k > 0)
		memcpy(drm_io_out(c->io, r->values_ptr, k * 8), values, k * 8);
	r->count_values = (uint32_t)n_values;
	if (d->flags & DRM_MODE_PROP_ENUM) {
		k = MIN((size_t)r->count_enum_blobs, d->n_enums);
		if (k > 0) {
			uint8_t *out = drm_io_out(c->io, r->enum_blob_ptr, k * sizeof(struct drm_mode_property_enum));

			for (size_t i = 0; i < k; i++) {
				struct drm_mode_property_enum e = { .value = d->enums[i].value };

				memcpy(e.name, d->enums[i].name, strlen(d->enums[i].name));
				memcpy(out + i * sizeof(e), &e, sizeof(e));
			}
		}
		r->count_enum_blobs = (uint32_t)d->n_enums;
	} else {
		r->count_enum_blobs = 0;
	}
	return 0;
}

static int get_blob(struct drm_call *c) {
	struct drm_mode_get_blob *r = c->arg;
	const struct drm_blob *b = drm_blob_find(c->n, r->blob_id);

	if (!b)
		return -ENOENT;
	/* Copied only into a buffer of exactly its length. */
	if (r->length == b->len)
		memcpy(drm_io_out(c->io, r->data, b->len), b->data, b->len);
	r->length = (uint32_t)b->len;
	return 0;
}

static int create_blob(struct drm_call *c) {
	struct drm_mode_create_blob *r = c->arg;
	struct drm_blob *b;
	const void *data;
	int k;

	/* Bounded before the data is asked for. */
	if (r->length == 0 || r->length > DRM_BLOB_MAX_LEN)
		return -EINVAL;
	if (c->f->n_blobs >= DRM_FILE_MAX_BLOBS || c->n->n_blobs >= DRM_NODE_MAX_BLOBS)
		return -ENOSPC;
	if (r->length > DRM_NODE_MAX_BLOB_BYTES - c->n->blob_bytes)
		return -ENOMEM;
	data = drm_io_in(c->io, r->data, r->length);
	if (!drm_io_ready(c->io))
		return 0;
	k = drm_blob_new(c->n, c->f, data, r->length, &b);
	if (k < 0)
		return k;
	r->blob_id = b->id;
	return 0;
}

static int destroy_blob(struct drm_call *c) {
	const struct drm_mode_destroy_blob *r = c->arg;
	struct drm_blob *b = drm_blob_find(c->n, r->blob_id);

	if (!b)
		return -ENOENT;
	if (b->owner != c->f)
		return -EPERM;
	b->owner = NULL;
	c->f->n_blobs--;
	drm_blob_unref(c->n, b);
	return 0;
}

/* Whether id is an object of type (or any): 1 with properties, 0 without, -ENOENT for none. */
static int obj_lookup(const struct drm_node *n, uint32_t id, uint32_t type) {
	uint32_t t = drm_obj_type(id, type);

	if (t)
		return t != DRM_MODE_OBJECT_ENCODER && t != DRM_MODE_OBJECT_PROPERTY;
	if ((type == DRM_MODE_OBJECT_ANY || type == DRM_MODE_OBJECT_FB) && drm_fb_find(n, id))
		return 0;
	if ((type == DRM_MODE_OBJECT_ANY || type == DRM_MODE_OBJECT_BLOB) && drm_blob_find(n, id))
		return 0;
	return -ENOENT;
}

static int obj_get_properties(struct drm_call *c) {
	struct drm_mode_obj_get_properties *r = c->arg;
	int k = obj_lookup(c->n, r->obj_id, r->obj_type);

	if (k <= 0)
		return k < 0 ? k : -EINVAL;
	drm_put_props(c, r->obj_id, r->props_ptr, r->prop_values_ptr, &r->count_props);
	return 0;
}

/* drm_atomic_connector_commit_dpms(): anything but On is Off, and the CRTC follows the connector. */
static int set_dpms(struct drm_call *c, uint64_t value) {
	struct drm_kms_state s = c->n->state;
	bool modeset;
	int r;

	s.dpms = value == DRM_MODE_DPMS_ON ? DRM_MODE_DPMS_ON : DRM_MODE_DPMS_OFF;
	if (s.conn_on_crtc && s.mode_blob)
		s.active = s.dpms == DRM_MODE_DPMS_ON;
	r = drm_kms_check(c->n, &s, NULL, &modeset);
	if (r < 0)
		return r;
	drm_kms_commit(c->n, &s, NULL, 0);
	return 0;
}

static int set_property(struct drm_call *c, uint32_t obj, uint32_t type, uint32_t prop, uint64_t value) {
	struct drm_kms_state s = c->n->state;
	struct drm_blob *damage = NULL;
	bool modeset;
	int r;

	r = obj_lookup(c->n, obj, type);
	if (r <= 0)
		return r < 0 ? r : -EINVAL;
	if (!drm_obj_has_prop(obj, prop))
		return -EINVAL;
	if (prop == DRM_PROP_DPMS)
		return value_valid(&props[prop], value) ? set_dpms(c, value) : -EINVAL;
	/* The atomic properties only for clients that speak atomic. */
	if (drm_prop_is_atomic(prop) && !c->f->atomic)
		return -EINVAL;
	r = drm_prop_set(c->n, c->f, &s, obj, prop, value, &damage);
	if (r < 0)
		return r;
	r = drm_kms_check(c->n, &s, damage, &modeset);
	if (r < 0)
		return r;
	drm_kms_commit(c->n, &s, damage ? (const void *)damage->data : NULL,
		       damage ? damage->len / sizeof(struct drm_mode_rect) : 0);
	return 0;
}

int drm_ioctl_props(struct drm_call *c, unsigned int nr) {
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_GETPROPERTY):
		return get_property(c);
	case _IOC_NR(DRM_IOCTL_MODE_GETPROPBLOB):
		return get_blob(c);
	case _IOC_NR(DRM_IOCTL_MODE_OBJ_GETPROPERTIES):
		return obj_get_properties(c);
	case _IOC_NR(DRM_IOCTL_MODE_CREATEPROPBLOB):
		return create_blob(c);
	default:
		break;
	}
	/* The rest change things: only once every range is here. */
	if (!drm_io_ready(c->io))
		return 0;
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_MODE_DESTROYPROPBLOB):
		return destroy_blob(c);
	case _IOC_NR(DRM_IOCTL_MODE_OBJ_SETPROPERTY): {
		const struct drm_mode_obj_set_property *r = c->arg;

		return set_property(c, r->obj_id, r->obj_type, r->prop_id, r->value);
	}
	case _IOC_NR(DRM_IOCTL_MODE_SETPROPERTY): {
		const struct drm_mode_connector_set_property *r = c->arg;

		return set_property(c, r->connector_id, DRM_MODE_OBJECT_CONNECTOR, r->prop_id, r->value);
	}
	default:
		return -EINVAL;
	}
}
