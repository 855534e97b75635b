/* SPDX-License-Identifier: MIT */
/* ATOMIC on a persona's node: TEST_ONLY, ALLOW_MODESET, NONBLOCK with events, MODE_ID blobs, damage, validation. */
#include "test-drm.h"

/* Property ids, as GETPROPERTY names them. */
static uint32_t prop_id(struct rig *r, uint32_t obj, uint32_t type, const char *name) {
	uint32_t ids[32];
	uint64_t values[32];
	struct drm_mode_obj_get_properties op = { .props_ptr = (uintptr_t)ids, .prop_values_ptr = (uintptr_t)values,
						  .count_props = 32, .obj_id = obj, .obj_type = type };

	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), 0);
	for (uint32_t i = 0; i < op.count_props; i++) {
		struct drm_mode_get_property gp = { .prop_id = ids[i] };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPERTY, &gp), 0);
		if (streq(gp.name, name))
			return ids[i];
	}
	fail_msg("no property %s", name);
	return 0;
}

/* An atomic request being built: objects in order, each with its properties. */
struct req {
	uint32_t objs[4], counts[4], props[32];
	uint64_t values[32];
	uint32_t n_objs, n_props;
};

static void add(struct req *q, uint32_t obj, uint32_t prop, uint64_t value) {
	if (q->n_objs == 0 || q->objs[q->n_objs - 1] != obj) {
		q->objs[q->n_objs] = obj;
		q->counts[q->n_objs++] = 0;
	}
	q->counts[q->n_objs - 1]++;
	q->props[q->n_props] = prop;
	q->values[q->n_props++] = value;
}

static int commit(struct rig *r, const struct req *q, uint32_t flags, uint64_t user_data) {
	struct drm_mode_atomic a = { .flags = flags, .count_objs = q->n_objs, .objs_ptr = (uintptr_t)q->objs,
				     .count_props_ptr = (uintptr_t)q->counts, .props_ptr = (uintptr_t)q->props,
				     .prop_values_ptr = (uintptr_t)q->values, .user_data = user_data };

	return io(r, r->a, DRM_IOCTL_MODE_ATOMIC, &a);
}

static uint32_t blob(struct rig *r, const void *data, size_t len) {
	struct drm_mode_create_blob b = { .data = (uintptr_t)data, .length = (uint32_t)len };

	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), 0);
	return b.blob_id;
}

struct ids {
	uint32_t active, mode_id, conn_crtc, fb, crtc, cx, cy, cw, ch, sx, sy, sw, sh, damage, type, dpms;
};

static struct ids ids_of(struct rig *r) {
	const uint32_t P = DRM_NODE_PLANE_ID, T = DRM_MODE_OBJECT_PLANE;

	return (struct ids){
		.active = prop_id(r, DRM_NODE_CRTC_ID, DRM_MODE_OBJECT_CRTC, "ACTIVE"),
		.mode_id = prop_id(r, DRM_NODE_CRTC_ID, DRM_MODE_OBJECT_CRTC, "MODE_ID"),
		.conn_crtc = prop_id(r, DRM_NODE_CONNECTOR_ID, DRM_MODE_OBJECT_CONNECTOR, "CRTC_ID"),
		.dpms = prop_id(r, DRM_NODE_CONNECTOR_ID, DRM_MODE_OBJECT_CONNECTOR, "DPMS"),
		.fb = prop_id(r, P, T, "FB_ID"),
		.crtc = prop_id(r, P, T, "CRTC_ID"),
		.cx = prop_id(r, P, T, "CRTC_X"),
		.cy = prop_id(r, P, T, "CRTC_Y"),
		.cw = prop_id(r, P, T, "CRTC_W"),
		.ch = prop_id(r, P, T, "CRTC_H"),
		.sx = prop_id(r, P, T, "SRC_X"),
		.sy = prop_id(r, P, T, "SRC_Y"),
		.sw = prop_id(r, P, T, "SRC_W"),
		.sh = prop_id(r, P, T, "SRC_H"),
		.damage = prop_id(r, P, T, "FB_DAMAGE_CLIPS"),
		.type = prop_id(r, P, T, "type"),
	};
}

static struct rig *atomic_rig(void) {
	struct rig *r = rig_new();
	struct drm_set_client_cap cc = { DRM_CLIENT_CAP_ATOMIC, 1 };

	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), 0);
	return r;
}

/* A full modeset: mode, active, connector, the plane covering the mode. */
static void modeset_req(struct req *q, const struct ids *p, uint32_t mode_blob, uint32_t fb, uint32_t w, uint32_t h) {
	*q = (struct req){ 0 };
	add(q, DRM_NODE_CRTC_ID, p->mode_id, mode_blob);
	add(q, DRM_NODE_CRTC_ID, p->active, 1);
	add(q, DRM_NODE_CONNECTOR_ID, p->conn_crtc, DRM_NODE_CRTC_ID);
	add(q, DRM_NODE_PLANE_ID, p->fb, fb);
	add(q, DRM_NODE_PLANE_ID, p->crtc, DRM_NODE_CRTC_ID);
	add(q, DRM_NODE_PLANE_ID, p->cx, 0);
	add(q, DRM_NODE_PLANE_ID, p->cy, 0);
	add(q, DRM_NODE_PLANE_ID, p->cw, w);
	add(q, DRM_NODE_PLANE_ID, p->ch, h);
	add(q, DRM_NODE_PLANE_ID, p->sx, 0);
	add(q, DRM_NODE_PLANE_ID, p->sy, 0);
	add(q, DRM_NODE_PLANE_ID, p->sw, (uint64_t)w << 16);
	add(q, DRM_NODE_PLANE_ID, p->sh, (uint64_t)h << 16);
}

static void test_atomic_cap(void **state) {
	struct rig *r = rig_new();
	struct req q = { 0 };

	(void)state;
	assert_int_equal(commit(r, &q, 0, 0), -EINVAL);
	rig_free(r);
}

static void test_atomic_modeset(void **state) {
	struct rig *r = atomic_rig();
	struct ids p = ids_of(r);
	struct drm_mode_modeinfo m = preferred(r, r->a);
	uint32_t mode = blob(r, &m, sizeof(m)), fb = fb2(r, r->a, W, H);
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID };
	struct drm_mode_get_blob gb = { 0 };
	struct drm_mode_modeinfo back;
	struct req q;

	(void)state;
	modeset_req(&q, &p, mode, fb, W, H);
	/* A modeset needs ALLOW_MODESET. */
	assert_int_equal(commit(r, &q, 0, 0), -EINVAL);
	/* TEST_ONLY checks it and changes nothing. */
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_TEST_ONLY | DRM_MODE_ATOMIC_ALLOW_MODESET, 0), 0);
	assert_int_equal(r->n_scanout, 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
	assert_int_equal(crtc.mode_valid, 0);
	/* TEST_ONLY with an event is refused. */
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_TEST_ONLY | DRM_MODE_PAGE_FLIP_EVENT, 0), -EINVAL);
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_ALLOW_MODESET, 0), 0);
	assert_int_equal(r->n_scanout, 1);
	assert_true(r->last.active);
	assert_int_equal(r->last.fb_id, fb);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
	assert_int_equal(crtc.mode_valid, 1);
	assert_int_equal(crtc.mode.hdisplay, W);

	/* MODE_ID reads back as the blob, which outlives its owner's destroy while the CRTC holds it. */
	{
		uint32_t ids[8];
		uint64_t values[8];
		struct drm_mode_obj_get_properties op = { .props_ptr = (uintptr_t)ids,
							  .prop_values_ptr = (uintptr_t)values, .count_props = 8,
							  .obj_id = DRM_NODE_CRTC_ID };
		struct drm_mode_destroy_blob db = { .blob_id = mode };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), 0);
		assert_int_equal(op.count_props, 2);
		assert_int_equal(values[1], mode);
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_DESTROYPROPBLOB, &db), -EPERM);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROYPROPBLOB, &db), 0);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROYPROPBLOB, &db), -EPERM);
		gb.blob_id = mode;
		gb.length = sizeof(back);
		gb.data = (uintptr_t)&back;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPBLOB, &gb), 0);
		assert_int_equal(back.vdisplay, H);
	}
	/* The same state again is no modeset. */
	modeset_req(&q, &p, mode, fb, W, H);
	assert_int_equal(commit(r, &q, 0, 0), 0);
	/* Turning off with an event: sent at once. */
	q = (struct req){ 0 };
	add(&q, DRM_NODE_CRTC_ID, p.active, 0);
	assert_int_equal(commit(r, &q, DRM_MODE_PAGE_FLIP_EVENT, 5), -EINVAL); /* ACTIVE is a modeset */
	assert_int_equal(commit(r, &q, DRM_MODE_PAGE_FLIP_EVENT | DRM_MODE_ATOMIC_ALLOW_MODESET, 5), 0);
	assert_false(r->last.active);
	{
		struct drm_event_vblank ev;

		assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), sizeof(ev));
		assert_int_equal(ev.user_data, 5);
	}
	/* An event on a CRTC that stays off is refused. */
	assert_int_equal(commit(r, &q, DRM_MODE_PAGE_FLIP_EVENT, 6), -EINVAL);
	/* DPMS is not an atomic property. */
	q = (struct req){ 0 };
	add(&q, DRM_NODE_CONNECTOR_ID, p.dpms, 0);
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_ALLOW_MODESET, 0), -EINVAL);
	rig_free(r);
}

static void test_atomic_flip(void **state) {
	struct rig *r = atomic_rig();
	struct ids p = ids_of(r);
	struct drm_mode_modeinfo m = preferred(r, r->a);
	uint32_t mode = blob(r, &m, sizeof(m)), fb_a = fb2(r, r->a, W, H), fb_b = fb2(r, r->a, W, H);
	struct drm_event_vblank ev[2];
	struct req q;
	const uint32_t nb = DRM_MODE_ATOMIC_NONBLOCK | DRM_MODE_PAGE_FLIP_EVENT;

	(void)state;
	modeset_req(&q, &p, mode, fb_a, W, H);
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_ALLOW_MODESET, 0), 0);
	/* NONBLOCK with an event: shown now, done at the next vblank; another meanwhile is -EBUSY. */
	q = (struct req){ 0 };
	add(&q, DRM_NODE_PLANE_ID, p.fb, fb_b);
	assert_int_equal(commit(r, &q, nb, 41), 0);
	assert_int_equal(r->last.fb_id, fb_b);
	assert_true(drm_node_wants_vblank(r->node));
	q.values[0] = fb_a;
	assert_int_equal(commit(r, &q, nb, 42), -EBUSY);
	/* A test is fine meanwhile. */
	assert_int_equal(commit(r, &q, DRM_MODE_ATOMIC_TEST_ONLY | DRM_MODE_ATOMIC_NONBLOCK, 0), 0);
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), -EAGAIN);
	vblank(r);
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), sizeof(ev[0]));
	assert_int_equal(ev[0].base.type, DRM_EVENT_FLIP_COMPLETE);
	assert_int_equal(ev[0].user_data, 41);
	assert_int_equal(ev[0].crtc_id, DRM_NODE_CRTC_ID);
	assert_int_equal(commit(r, &q, nb, 42), 0);
	vblank(r);
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), sizeof(ev[0]));
	assert_int_equal(ev[0].user_data, 42);
	assert_int_equal(ev[0].sequence, 2);
	assert_false(drm_node_wants_vblank(r->node));

	/* FB_DAMAGE_CLIPS: the damage goes up with the news. */
	{
		struct drm_mode_rect clips[2] = { { 0, 0, 10, 10 }, { 100, 100, 200, 150 } }, bad = { 0, 0, W + 1, 1 };
		uint32_t d = blob(r, clips, sizeof(clips)), dbad = blob(r, &bad, sizeof(bad)), odd = blob(r, clips, 20);

		q = (struct req){ 0 };
		add(&q, DRM_NODE_PLANE_ID, p.fb, fb_b);
		add(&q, DRM_NODE_PLANE_ID, p.damage, d);
		assert_int_equal(commit(r, &q, nb, 43), 0);
		assert_int_equal(r->last.fb_id, fb_b);
		assert_int_equal(r->n_damage, 2);
		assert_int_equal(r->damage[1].x2, 200);
		vblank(r);
		q.values[1] = dbad;
		assert_int_equal(commit(r, &q, nb, 44), -EINVAL);
		q.values[1] = odd;
		assert_int_equal(commit(r, &q, nb, 44), -EINVAL);
		/* Damage is not kept: the property reads 0. */
		{
			uint32_t ids[32];
			uint64_t values[32];
			struct drm_mode_obj_get_properties op = { .props_ptr = (uintptr_t)ids,
								  .prop_values_ptr = (uintptr_t)values,
								  .count_props = 32, .obj_id = DRM_NODE_PLANE_ID };

			assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), 0);
			for (uint32_t i = 0; i < op.count_props; i++)
				if (ids[i] == p.damage)
					assert_int_equal(values[i], 0);
		}
	}
	drm_file_read(r->a, ev, sizeof(ev));
	rig_free(r);
}

static void test_atomic_validation(void **state) {
	struct rig *r = atomic_rig();
	struct ids p = ids_of(r);
	struct drm_mode_modeinfo m = preferred(r, r->a), other = m;
	uint32_t mode = blob(r, &m, sizeof(m)), fb = fb2(r, r->a, W, H), small = fb2(r, r->a, 640, 480);
	uint32_t bad_len = blob(r, &m, sizeof(m) - 4), other_mode;
	const uint32_t ms = DRM_MODE_ATOMIC_ALLOW_MODESET;
	struct req q;

	(void)state;
	other.hdisplay = 1000;
	other.hsync_start = 1010;
	other.hsync_end = 1020;
	other.htotal = 1100;
	other_mode = blob(r, &other, sizeof(other));
	/* A plane on a CRTC without a mode. */
	q = (struct req){ 0 };
	add(&q, DRM_NODE_PLANE_ID, p.fb, fb);
	add(&q, DRM_NODE_PLANE_ID, p.crtc, DRM_NODE_CRTC_ID);
	add(&q, DRM_NODE_PLANE_ID, p.cw, W);
	add(&q, DRM_NODE_PLANE_ID, p.ch, H);
	add(&q, DRM_NODE_PLANE_ID, p.sw, (uint64_t)W << 16);
	add(&q, DRM_NODE_PLANE_ID, p.sh, (uint64_t)H << 16);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* A framebuffer without a CRTC, or a CRTC without a framebuffer. */
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[4] = 0;
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, mode, 0, W, H);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* Source outside the framebuffer: -ENOSPC; scaling: -ERANGE; not covering the CRTC: -EINVAL. */
	modeset_req(&q, &p, mode, small, W, H);
	assert_int_equal(commit(r, &q, ms, 0), -ENOSPC);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[11] = (uint64_t)(W - 1) << 16;
	assert_int_equal(commit(r, &q, ms, 0), -ERANGE);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[5] = 10; /* CRTC_X */
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[7] = (uint64_t)INT32_MAX + 1; /* CRTC_W out of its range */
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* Mode blobs: the wrong size, a mode the connector lacks, an unknown blob. */
	modeset_req(&q, &p, bad_len, fb, W, H);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, other_mode, fb, W, H);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, 999999, fb, W, H);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* ACTIVE without a mode; the connector left out of an enabled CRTC. */
	modeset_req(&q, &p, 0, 0, W, H);
	q.n_objs = 1;
	q.counts[0] = 2;
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[2] = 0;
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* Unknown objects and properties, immutable ones, bad values. */
	modeset_req(&q, &p, mode, fb, W, H);
	q.objs[0] = 12345;
	assert_int_equal(commit(r, &q, ms, 0), -ENOENT);
	q.objs[0] = fb; /* a framebuffer has no properties */
	assert_int_equal(commit(r, &q, ms, 0), -ENOENT);
	modeset_req(&q, &p, mode, fb, W, H);
	q.props[0] = p.fb; /* FB_ID is not the CRTC's */
	assert_int_equal(commit(r, &q, ms, 0), -ENOENT);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[1] = 2; /* ACTIVE is a bool */
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	modeset_req(&q, &p, mode, fb, W, H);
	q.values[2] = 777; /* no such CRTC */
	assert_int_equal(commit(r, &q, ms, 0), -EACCES);
	q = (struct req){ 0 };
	add(&q, DRM_NODE_PLANE_ID, p.type, 0);
	assert_int_equal(commit(r, &q, ms, 0), -EINVAL);
	/* Bad flags. */
	modeset_req(&q, &p, mode, fb, W, H);
	assert_int_equal(commit(r, &q, ms | 0x8000, 0), -EINVAL);
	assert_int_equal(commit(r, &q, ms | DRM_MODE_PAGE_FLIP_ASYNC, 0), -EINVAL);
	/* Nothing of that changed anything. */
	assert_int_equal(r->n_scanout, 0);
	/* Only the master commits. */
	{
		struct drm_mode_atomic a = { .flags = ms };
		struct drm_set_client_cap cc = { DRM_CLIENT_CAP_ATOMIC, 1 };

		assert_int_equal(io(r, r->b, DRM_IOCTL_SET_CLIENT_CAP, &cc), 0);
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_ATOMIC, &a), -EACCES);
	}
	assert_int_equal(commit(r, &(struct req){ 0 }, 0, 0), 0);
	rig_free(r);
}

static void test_blob_limits(void **state) {
	struct rig *r = atomic_rig();
	static uint8_t big[DRM_BLOB_MAX_LEN + 1];
	struct drm_mode_create_blob b = { .data = (uintptr_t)big, .length = sizeof(big) };
	uint32_t first = 0;

	(void)state;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), -EINVAL);
	b.length = 0;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), -EINVAL);
	b.length = 16;
	for (unsigned int i = 0; i < DRM_FILE_MAX_BLOBS; i++) {
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), 0);
		first = first ? first : b.blob_id;
	}
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), -ENOSPC);
	/* Another file still may. */
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), 0);
	{
		struct drm_mode_destroy_blob d = { .blob_id = first };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROYPROPBLOB, &d), 0);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &b), 0);
	}
	rig_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_atomic_cap),        cmocka_unit_test(test_atomic_modeset),
		cmocka_unit_test(test_atomic_flip),       cmocka_unit_test(test_atomic_validation),
		cmocka_unit_test(test_blob_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
