/* SPDX-License-Identifier: MIT */
/* DRM/KMS semantics without a transport: getters, caps, master, buffers and budgets, the legacy flow, the rounds. */
#include "test-drm.h"

static void test_version_caps(void **state) {
	struct rig *r = rig_new();
	char name[3] = { 0 }, desc[128] = { 0 }, unique[64] = { 0 };
	struct drm_version v = { .name_len = sizeof(name), .name = name, .desc_len = sizeof(desc), .desc = desc };
	struct drm_unique u = { 0 };
	struct drm_get_cap cap;
	struct drm_set_client_cap cc;
	static const uint64_t caps[][2] = {
		{ DRM_CAP_DUMB_BUFFER, 1 },      { DRM_CAP_TIMESTAMP_MONOTONIC, 1 }, { DRM_CAP_CRTC_IN_VBLANK_EVENT, 1 },
		{ DRM_CAP_PRIME, 0 },            { DRM_CAP_ADDFB2_MODIFIERS, 0 },   { DRM_CAP_DUMB_PREFERRED_DEPTH, 24 },
		{ DRM_CAP_ASYNC_PAGE_FLIP, 0 },
	};

	(void)state;
	/* drm_copy_field(): as much as fits, no NUL, and the whole length back. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_VERSION, &v), 0);
	assert_int_equal(v.name_len, 5);
	assert_memory_equal(name, "dev", 3);
	assert_true(v.desc_len > 0 && v.desc_len < sizeof(desc));
	assert_int_equal(v.date_len, 8);
	/* No bus id until SET_VERSION asks for interface 1.1: drmOpen() by name takes only such a node. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_UNIQUE, &u), 0);
	assert_int_equal(u.unique_len, 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_VERSION,
			    &(struct drm_set_version){ .drm_di_major = 1, .drm_di_minor = 4, .drm_dd_major = -1,
						       .drm_dd_minor = -1 }),
			 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_UNIQUE, &u), 0);
	assert_int_equal(u.unique_len, strlen("devns:test"));
	u.unique = unique;
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_UNIQUE, &u), 0);
	assert_string_equal(unique, "devns:test");

	for (size_t i = 0; i < ELEMENTSOF(caps); i++) {
		cap = (struct drm_get_cap){ .capability = caps[i][0], .value = 77 };
		assert_int_equal(io(r, r->a, DRM_IOCTL_GET_CAP, &cap), 0);
		assert_int_equal(cap.value, caps[i][1]);
	}
	cap = (struct drm_get_cap){ .capability = 0x9999 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_CAP, &cap), -EINVAL);

	cc = (struct drm_set_client_cap){ DRM_CLIENT_CAP_STEREO_3D, 1 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), -EINVAL);
	cc = (struct drm_set_client_cap){ DRM_CLIENT_CAP_WRITEBACK_CONNECTORS, 1 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), -EINVAL);
	cc = (struct drm_set_client_cap){ DRM_CLIENT_CAP_ATOMIC, 3 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), -EINVAL);
	/* ATOMIC brings universal planes: the primary plane shows up. */
	cc = (struct drm_set_client_cap){ DRM_CLIENT_CAP_ATOMIC, 1 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), 0);
	{
		uint32_t id = 0;
		struct drm_mode_get_plane_res pr = { .plane_id_ptr = (uintptr_t)&id, .count_planes = 1 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPLANERESOURCES, &pr), 0);
		assert_int_equal(pr.count_planes, 1);
		assert_int_equal(id, DRM_NODE_PLANE_ID);
		pr.count_planes = 1;
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_GETPLANERESOURCES, &pr), 0);
		assert_int_equal(pr.count_planes, 0);
	}
	/* An unknown number is -EINVAL, as the kernel's core answers it. */
	assert_int_equal(io(r, r->a, DRM_IOWR(0x3f, struct drm_get_cap), &cap), -EINVAL);
	rig_free(r);
}

static void test_getters(void **state) {
	struct rig *r = rig_new();
	uint32_t crtcs[4], conns[4], encs[4], props[32], formats[4];
	uint64_t values[32];
	struct drm_mode_modeinfo modes[DRM_NODE_MAX_MODES];
	struct drm_mode_card_res res = { 0 };
	struct drm_mode_get_connector conn = { .connector_id = DRM_NODE_CONNECTOR_ID };
	struct drm_mode_get_encoder enc = { .encoder_id = DRM_NODE_ENCODER_ID };
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID };
	struct drm_mode_get_plane plane = { .plane_id = DRM_NODE_PLANE_ID };
	struct drm_mode_obj_get_properties op = { .obj_id = DRM_NODE_PLANE_ID, .obj_type = DRM_MODE_OBJECT_PLANE };
	struct drm_mode_property_enum enums[4];
	struct drm_mode_get_property gp = { .prop_id = 0 };
	bool has_type = false;

	(void)state;
	/* Asked twice, as libdrm does: counts first, then the arrays. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETRESOURCES, &res), 0);
	assert_int_equal(res.count_crtcs, 1);
	assert_int_equal(res.count_connectors, 1);
	assert_int_equal(res.count_encoders, 1);
	assert_int_equal(res.count_fbs, 0);
	assert_int_equal(res.max_width, DRM_NODE_MAX_SIDE);
	res.crtc_id_ptr = (uintptr_t)crtcs;
	res.connector_id_ptr = (uintptr_t)conns;
	res.encoder_id_ptr = (uintptr_t)encs;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETRESOURCES, &res), 0);
	assert_int_equal(crtcs[0], DRM_NODE_CRTC_ID);
	assert_int_equal(conns[0], DRM_NODE_CONNECTOR_ID);
	assert_int_equal(encs[0], DRM_NODE_ENCODER_ID);

	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCONNECTOR, &conn), 0);
	assert_int_equal(conn.connection, 1);
	assert_int_equal(conn.count_modes, 2); /* 800x600, and 640x480 below it */
	assert_int_equal(conn.encoder_id, 0);
	conn.modes_ptr = (uintptr_t)modes;
	conn.encoders_ptr = (uintptr_t)encs;
	conn.props_ptr = (uintptr_t)props;
	conn.prop_values_ptr = (uintptr_t)values;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCONNECTOR, &conn), 0);
	assert_int_equal(modes[0].hdisplay, W);
	assert_int_equal(modes[0].vdisplay, H);
	assert_true(modes[0].type & DRM_MODE_TYPE_PREFERRED);
	assert_int_equal(modes[0].vrefresh, 60);
	assert_string_equal(modes[0].name, "800x600");
	assert_int_equal(modes[1].hdisplay, 640);
	/* Without ATOMIC: EDID, DPMS, link-status, non-desktop; CRTC_ID is hidden. */
	assert_int_equal(conn.count_props, 4);

	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETENCODER, &enc), 0);
	assert_int_equal(enc.encoder_type, DRM_MODE_ENCODER_VIRTUAL);
	assert_int_equal(enc.possible_crtcs, 1);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
	assert_int_equal(crtc.mode_valid, 0);
	assert_int_equal(crtc.gamma_size, DRM_NODE_GAMMA_SIZE);
	crtc.crtc_id = 99;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), -ENOENT);

	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPLANE, &plane), 0);
	assert_int_equal(plane.count_format_types, 2);
	plane.format_type_ptr = (uintptr_t)formats;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPLANE, &plane), 0);
	assert_int_equal(formats[0], DRM_FORMAT_XRGB8888);
	assert_int_equal(formats[1], DRM_FORMAT_ARGB8888);

	/* The plane's properties: "type" is Primary. */
	op.props_ptr = (uintptr_t)props;
	op.prop_values_ptr = (uintptr_t)values;
	op.count_props = ELEMENTSOF(props);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), 0);
	assert_int_equal(op.count_props, 1); /* atomic ones hidden */
	for (uint32_t i = 0; i < op.count_props; i++) {
		char name[DRM_PROP_NAME_LEN];

		gp = (struct drm_mode_get_property){ .prop_id = props[i] };
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPERTY, &gp), 0);
		memcpy(name, gp.name, sizeof(name));
		if (streq(name, "type")) {
			has_type = true;
			assert_int_equal(values[i], 1);
			assert_true(gp.flags & DRM_MODE_PROP_IMMUTABLE);
			assert_int_equal(gp.count_enum_blobs, 3);
			gp.enum_blob_ptr = (uintptr_t)enums;
			gp.values_ptr = (uintptr_t)values;
			assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPERTY, &gp), 0);
			assert_string_equal(enums[1].name, "Primary");
		}
	}
	assert_true(has_type);
	/* The object must be of the type named; an encoder has no properties. */
	op.obj_type = DRM_MODE_OBJECT_CRTC;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), -ENOENT);
	op = (struct drm_mode_obj_get_properties){ .obj_id = DRM_NODE_ENCODER_ID };
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &op), -EINVAL);
	gp = (struct drm_mode_get_property){ .prop_id = 9999 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPERTY, &gp), -ENOENT);
	rig_free(r);
}

static void test_legacy_flow(void **state) {
	struct rig *r = rig_new();
	struct drm_mode_modeinfo m = preferred(r, r->a);
	uint32_t fb_a = fb2(r, r->a, W, H), fb_b = fb2(r, r->a, W, H);
	struct drm_mode_crtc_page_flip flip = { .crtc_id = DRM_NODE_CRTC_ID, .fb_id = fb_b,
						.flags = DRM_MODE_PAGE_FLIP_EVENT, .user_data = 0xfeed };
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID };
	struct drm_event_vblank ev;
	uint32_t rm;

	(void)state;
	/* A page flip before the CRTC has a framebuffer is -EBUSY. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), -EBUSY);
	assert_int_equal(setcrtc(r, r->a, fb_a, &m), 0);
	assert_int_equal(r->n_scanout, 1);
	assert_true(r->last.active);
	assert_int_equal(r->last.fb_id, fb_a);
	assert_int_equal(r->last.mode.hdisplay, W);
	assert_true(r->last.memfd >= 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
	assert_int_equal(crtc.fb_id, fb_a);
	assert_int_equal(crtc.mode_valid, 1);
	assert_false(drm_node_wants_vblank(r->node));

	/* The flip shows at once (news), completes at the next vblank (event). */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), 0);
	assert_int_equal(r->n_scanout, 2);
	assert_int_equal(r->last.fb_id, fb_b);
	assert_int_equal(r->n_vblank, 1);
	assert_true(drm_node_wants_vblank(r->node));
	flip.fb_id = fb_a;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), -EBUSY);
	/* Only the master flips. */
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_PAGE_FLIP, &flip), -EACCES);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), -EAGAIN);
	vblank(r);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), sizeof(ev));
	assert_int_equal(ev.base.type, DRM_EVENT_FLIP_COMPLETE);
	assert_int_equal(ev.base.length, sizeof(ev));
	assert_int_equal(ev.user_data, 0xfeed);
	assert_int_equal(ev.sequence, 1);
	assert_int_equal(ev.crtc_id, DRM_NODE_CRTC_ID);
	assert_int_equal((uint64_t)ev.tv_sec * 1000000 + ev.tv_usec, r->now);
	assert_false(drm_node_wants_vblank(r->node));
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), 0);

	/* A framebuffer smaller than the mode cannot be flipped to. */
	vblank(r);
	flip.fb_id = fb2(r, r->a, 640, 480);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), -ENOSPC);
	/* DIRTYFB of what is shown: damage news, clipped to the framebuffer. */
	{
		struct drm_clip_rect clips[2] = { { 10, 20, 30, 40 }, { 790, 590, 900, 900 } };
		struct drm_mode_fb_dirty_cmd d = { .fb_id = fb_a, .num_clips = 2, .clips_ptr = (uintptr_t)clips };
		unsigned int before = r->n_scanout;

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DIRTYFB, &d), 0);
		assert_int_equal(r->n_scanout, before + 1);
		assert_int_equal(r->n_damage, 2);
		assert_int_equal(r->damage[1].x2, W);
		assert_int_equal(r->damage[1].y2, H);
		d.num_clips = 0;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DIRTYFB, &d), -EINVAL);
		d.clips_ptr = 0;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DIRTYFB, &d), 0);
		assert_int_equal(r->n_damage, 0);
	}
	/* RMFB of the shown framebuffer turns the CRTC off, as the kernel does; only its owner may. */
	rm = fb_a;
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_RMFB, &rm), -ENOENT);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_RMFB, &rm), 0);
	assert_false(r->last.enabled);
	assert_int_equal(r->last.fb_id, 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_RMFB, &rm), -ENOENT);
	/*
	 * Gamma: a table of the CRTC's size, linear at first, kept as set (CUSE
	 * turns an ENOSYS answer into ENOTTY, which clients take for an error,
	 * so there is a table to set). Cursors: none.
	 */
	{
		static uint16_t red[DRM_NODE_GAMMA_SIZE], green[DRM_NODE_GAMMA_SIZE], blue[DRM_NODE_GAMMA_SIZE];
		struct drm_mode_crtc_lut lut = { .crtc_id = DRM_NODE_CRTC_ID, .gamma_size = DRM_NODE_GAMMA_SIZE,
						 .red = (uintptr_t)red, .green = (uintptr_t)green, .blue = (uintptr_t)blue };
		struct drm_mode_cursor cur = { .flags = DRM_MODE_CURSOR_BO, .crtc_id = DRM_NODE_CRTC_ID };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETGAMMA, &lut), 0);
		assert_int_equal(red[255], 0xffff);
		assert_int_equal(blue[1], 0x101);
		for (unsigned int i = 0; i < DRM_NODE_GAMMA_SIZE; i++)
			red[i] = green[i] = blue[i] = (uint16_t)(0xffff - i);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETGAMMA, &lut), 0);
		memset(green, 0, sizeof(green));
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETGAMMA, &lut), 0);
		assert_int_equal(green[3], 0xfffc);
		/* Only the CRTC's own size; only the master sets it. */
		lut.gamma_size = 255;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETGAMMA, &lut), -EINVAL);
		lut.gamma_size = DRM_NODE_GAMMA_SIZE;
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_SETGAMMA, &lut), -EACCES);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CURSOR, &cur), -ENXIO);
	}
	rig_free(r);
}

static void test_setcrtc_checks(void **state) {
	struct rig *r = rig_new();
	struct drm_mode_modeinfo m = preferred(r, r->a);
	uint32_t small = fb2(r, r->a, 640, 480), fb = fb2(r, r->a, W + 100, H);
	struct drm_mode_crtc c = { .crtc_id = DRM_NODE_CRTC_ID };
	struct drm_mode_obj_set_property dpms = { .value = DRM_MODE_DPMS_OFF, .prop_id = 2,
						  .obj_id = DRM_NODE_CONNECTOR_ID,
						  .obj_type = DRM_MODE_OBJECT_CONNECTOR };
	struct drm_mode_modeinfo odd = m;

	(void)state;
	assert_int_equal(setcrtc(r, r->a, small, &m), -ENOSPC);
	assert_int_equal(setcrtc(r, r->a, 12345, &m), -ENOENT);
	assert_int_equal(setcrtc(r, r->a, UINT32_MAX, &m), -EINVAL); /* -1: the current one, and there is none */
	odd.hdisplay = 700;
	odd.hsync_start = 720;
	assert_int_equal(setcrtc(r, r->a, fb, &odd), -EINVAL); /* not one of the connector's sizes */
	odd = m;
	odd.clock = 0;
	assert_int_equal(setcrtc(r, r->a, fb, &odd), -EINVAL);
	c.mode_valid = 1;
	c.mode = m;
	c.fb_id = fb;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETCRTC, &c), -EINVAL); /* a mode, no connectors */
	c.x = 1u << 16;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETCRTC, &c), -ERANGE);
	assert_int_equal(r->n_scanout, 0);
	/* Panned 100 pixels into a wider framebuffer. */
	c.x = 100;
	c.count_connectors = 1;
	c.set_connectors_ptr = (uintptr_t)(uint32_t[]){ DRM_NODE_CONNECTOR_ID };
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETCRTC, &c), 0);
	assert_int_equal(r->last.src_x, 100);
	c.x = 101;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_SETCRTC, &c), -ENOSPC);
	/* The 640x480 mode on the small framebuffer. */
	{
		struct drm_mode_modeinfo modes[2];
		struct drm_mode_get_connector gc = { .connector_id = DRM_NODE_CONNECTOR_ID, .count_modes = 2,
						     .modes_ptr = (uintptr_t)modes };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCONNECTOR, &gc), 0);
		assert_int_equal(setcrtc(r, r->a, small, &modes[1]), 0);
		assert_int_equal(r->last.mode.hdisplay, 640);
	}
	/* DPMS off: the CRTC goes inactive (the scanout with it), and back on. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_SETPROPERTY, &dpms), 0);
	assert_true(r->last.enabled);
	assert_false(r->last.active);
	dpms.value = 7;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_SETPROPERTY, &dpms), -EINVAL);
	dpms.value = DRM_MODE_DPMS_ON;
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_OBJ_SETPROPERTY, &dpms), -EACCES);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_OBJ_SETPROPERTY, &dpms), 0);
	assert_true(r->last.active);
	assert_int_equal(r->last.fb_id, small);
	/* Disabling: no mode, no connectors. */
	assert_int_equal(setcrtc(r, r->a, 0, NULL), 0);
	assert_false(r->last.enabled);
	rig_free(r);
}

static void test_master(void **state) {
	struct rig *r = rig_new();
	struct drm_file *c;
	struct drm_auth auth = { 0 };

	(void)state;
	/* The first opener is master; the second is not. */
	assert_true(drm_file_is_master(r->a));
	assert_false(drm_file_is_master(r->b));
	assert_int_equal(r->n_master, 1);
	assert_ptr_equal(r->master_news, r->a);
	/* Another file cannot take it while it is held, nor drop what it has not. */
	r->ctx.pid = 200;
	assert_int_equal(io(r, r->b, DRM_IOCTL_SET_MASTER, NULL), -EACCES);
	r->ctx.privileged = true;
	assert_int_equal(io(r, r->b, DRM_IOCTL_SET_MASTER, NULL), -EBUSY);
	assert_int_equal(io(r, r->b, DRM_IOCTL_DROP_MASTER, NULL), -EINVAL);
	r->ctx.privileged = false;
	r->ctx.pid = 100;
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_MASTER, NULL), 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_DROP_MASTER, NULL), 0);
	assert_null(r->master_news);
	assert_false(drm_file_is_master(r->a));
	/* Dropped: an unprivileged process that never was master may not take it... */
	r->ctx.pid = 200;
	assert_int_equal(io(r, r->b, DRM_IOCTL_SET_MASTER, NULL), -EACCES);
	/* ... a privileged one may (logind), and the last master's process may again once it is free. */
	r->ctx.privileged = true;
	assert_int_equal(io(r, r->b, DRM_IOCTL_SET_MASTER, NULL), 0);
	assert_ptr_equal(r->master_news, r->b);
	r->ctx.privileged = false;
	r->ctx.pid = 100;
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_MASTER, NULL), -EBUSY);
	/* Magic: AUTH_MAGIC is the master's; drmIsMaster() reads -EACCES as "not master". */
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_MAGIC, &auth), 0);
	assert_true(auth.magic != 0);
	assert_int_equal(io(r, r->a, DRM_IOCTL_AUTH_MAGIC, &auth), -EACCES);
	assert_int_equal(io(r, r->b, DRM_IOCTL_AUTH_MAGIC, &auth), 0);
	assert_int_equal(io(r, r->b, DRM_IOCTL_AUTH_MAGIC, &(struct drm_auth){ 0 }), -EINVAL);
	/* The master closes: nobody is master; the next opener becomes it. */
	drm_file_close(r->b);
	r->b = NULL;
	assert_null(r->master_news);
	assert_int_equal(drm_file_open(r->node, 300, &c), 0);
	assert_true(drm_file_is_master(c));
	drm_file_close(c);
	rig_free(r);
}

/* A frame of 800x600 in whole pages. */
#define FRAME ((W * H * 4 + 4095) / 4096 * 4096)

static void test_budget(void **state) {
	/* Two frames of 800x600. */
	struct rig *r = rig_new_budget(2 * FRAME);
	struct drm_mode_create_dumb c = { .width = W, .height = H, .bpp = 32 };
	struct drm_mode_map_dumb map = { 0 };
	uint32_t h1, h2;
	uint64_t used, off1;
	int fd;
	uint64_t size;

	(void)state;
	h1 = dumb(r, r->a, W, H);
	h2 = dumb(r, r->a, W, H);
	used = drm_node_memory_used(r->node);
	assert_int_equal(used, 2 * FRAME);
	/* Past the budget: -ENOMEM, nothing allocated, nothing counted, the struct untouched. */
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_CREATE_DUMB, &c), -ENOMEM);
	assert_int_equal(c.handle, 0);
	assert_int_equal(r->allocs, 2);
	assert_int_equal(drm_node_memory_used(r->node), used);
	/* Bad sizes. */
	c.bpp = 24;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATE_DUMB, &c), -EINVAL);
	c = (struct drm_mode_create_dumb){ .width = DRM_NODE_MAX_SIDE + 1, .height = 1, .bpp = 32 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATE_DUMB, &c), -EINVAL);
	c = (struct drm_mode_create_dumb){ .width = 0, .height = 1, .bpp = 32 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATE_DUMB, &c), -EINVAL);

	/* MAP_DUMB: a page-aligned token, the file's own, the same each time. */
	map.handle = h1;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_MAP_DUMB, &map), 0);
	off1 = map.offset;
	assert_true(off1 != 0 && off1 % 4096 == 0 && off1 < (UINT64_C(1) << 63));
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_MAP_DUMB, &map), 0);
	assert_int_equal(map.offset, off1);
	map.handle = h2;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_MAP_DUMB, &map), 0);
	assert_true(map.offset != off1);
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_MAP_DUMB, &map), -ENOENT);
	assert_int_equal(drm_node_map_lookup(r->node, r->a, off1, &fd, &size), 0);
	assert_int_equal(size, FRAME);
	assert_true(fd >= 0);
	assert_int_equal(drm_node_map_lookup(r->node, r->b, off1, &fd, &size), -ENOENT);
	assert_int_equal(drm_node_map_lookup(r->node, NULL, off1 + 4096, &fd, &size), -ENOENT);

	/* A buffer held by a framebuffer outlives its handle; GEM_CLOSE of an unknown handle is -EINVAL. */
	{
		struct drm_mode_fb_cmd fb = { .width = W, .height = H, .pitch = W * 4, .bpp = 32, .depth = 24,
					      .handle = h1 };
		struct drm_mode_destroy_dumb d = { .handle = h1 };
		struct drm_gem_close gc = { .handle = h2 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB, &fb), 0);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROY_DUMB, &d), 0);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROY_DUMB, &d), -EINVAL);
		assert_int_equal(io(r, r->a, DRM_IOCTL_GEM_CLOSE, &gc), 0);
		assert_int_equal(r->releases, 1);
		assert_int_equal(drm_node_memory_used(r->node), FRAME);
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_RMFB, &fb.fb_id), 0);
		assert_int_equal(r->releases, 2);
		assert_int_equal(drm_node_memory_used(r->node), 0);
	}
	/* Handles per file are bounded: -ENOSPC, nothing allocated. */
	for (unsigned int i = 0; i < DRM_FILE_MAX_HANDLES; i++)
		dumb(r, r->b, 16, 16);
	c = (struct drm_mode_create_dumb){ .width = 16, .height = 16, .bpp = 32 };
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_CREATE_DUMB, &c), -ENOSPC);
	assert_int_equal(r->allocs, 2 + DRM_FILE_MAX_HANDLES);
	drm_file_close(r->b);
	r->b = NULL;
	assert_int_equal(drm_node_memory_used(r->node), 0);
	rig_free(r);
}

static int prime_import(struct rig *r, struct drm_file *f, int fd, uint32_t *ret) {
	struct drm_prime_handle p = { .fd = fd };
	int k = io(r, f, DRM_IOCTL_PRIME_FD_TO_HANDLE, &p);

	*ret = p.handle;
	return k;
}

static int export_handle(struct rig *r, struct drm_file *f, uint32_t handle, int *ret) {
	struct drm_mode_map_dumb map = { .handle = handle };
	int k = io(r, f, DRM_IOCTL_MODE_MAP_DUMB, &map);

	return k < 0 ? k : drm_node_export(r->node, f, map.offset, ret);
}

static void test_prime(void **state) {
	struct rig *r = rig_new_with(2 * FRAME, true);
	struct drm_get_cap cap = { .capability = DRM_CAP_PRIME };
	struct drm_prime_handle p = { 0 };
	uint32_t h1, h2, hb, hb2, ha;
	int d1, d1again, d2, fds[2];

	(void)state;
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_CAP, &cap), 0);
	assert_int_equal(cap.value, DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT);
	/* Before anything was exported: an fd the caller lacks is EBADF, any other file EINVAL. */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(prime_import(r, r->a, 1000000, &hb), -EBADF);
	assert_int_equal(prime_import(r, r->a, fds[0], &hb), -EINVAL);
	assert_int_equal(close(fds[0]), 0);
	assert_int_equal(close(fds[1]), 0);
	h1 = dumb(r, r->a, W, H);
	h2 = dumb(r, r->a, 64, 64);
	/* One dma-buf per buffer, made at the first export; only the file's own buffers. */
	assert_int_equal(export_handle(r, r->a, h1, &d1), 0);
	assert_int_equal(export_handle(r, r->a, h1, &d1again), 0);
	assert_int_equal(d1, d1again);
	assert_int_equal(r->exports, 1);
	assert_int_equal(export_handle(r, r->a, h2, &d2), 0);
	assert_true(d2 != d1);
	assert_int_equal(export_handle(r, r->b, h1, &d1again), -ENOENT);
	/* The ioctl itself cannot hand an fd over: the kernel's checks, then EOPNOTSUPP. */
	p = (struct drm_prime_handle){ .handle = h1, .flags = DRM_CLOEXEC | DRM_RDWR };
	assert_int_equal(io(r, r->a, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p), -EOPNOTSUPP);
	p.flags = 0x10;
	assert_int_equal(io(r, r->a, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p), -EINVAL);
	p = (struct drm_prime_handle){ .handle = 999 };
	assert_int_equal(io(r, r->a, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p), -ENOENT);

	/* Import: the other file gets its own handle to the same buffer, the same one each time. */
	assert_int_equal(prime_import(r, r->b, d1, &hb), 0);
	assert_true(hb != 0);
	assert_int_equal(prime_import(r, r->b, d1, &hb2), 0);
	assert_int_equal(hb, hb2);
	assert_int_equal(prime_import(r, r->a, d1, &ha), 0);
	assert_int_equal(ha, h1);
	{
		struct drm_mode_fb_cmd2 c = { .width = W, .height = H, .pixel_format = DRM_FORMAT_XRGB8888 };

		c.handles[0] = hb;
		c.pitches[0] = W * 4;
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_ADDFB2, &c), 0);
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_RMFB, &c.fb_id), 0);
	}
	/* Files that are no dma-buf of the node's, and fds that are none at all. */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(prime_import(r, r->b, fds[0], &hb2), -EINVAL);
	close(fds[0]);
	close(fds[1]);
	assert_int_equal(prime_import(r, r->b, -1, &hb2), -EBADF);
	assert_int_equal(prime_import(r, r->b, 1000000, &hb2), -EBADF);

	/* A buffer gone from every file while a program holds its dma-buf: still counted, and importable. */
	r->dmabuf_held = true;
	{
		struct drm_mode_destroy_dumb d = { .handle = h1 };
		struct drm_gem_close gc = { .handle = hb };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_DESTROY_DUMB, &d), 0);
		assert_int_equal(io(r, r->b, DRM_IOCTL_GEM_CLOSE, &gc), 0);
	}
	assert_int_equal(drm_node_n_held(r->node), 1);
	assert_int_equal(r->releases, 0);
	assert_int_equal(drm_node_memory_used(r->node), FRAME + 64 * 64 * 4);
	/* The budget sees it: a second frame does not fit while the dma-buf is held. */
	{
		struct drm_mode_create_dumb c = { .width = W, .height = H, .bpp = 32 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATE_DUMB, &c), -ENOMEM);
	}
	assert_int_equal(prime_import(r, r->b, d1, &hb), 0);
	assert_int_equal(drm_node_n_held(r->node), 0);
	{
		struct drm_gem_close gc = { .handle = hb };

		assert_int_equal(io(r, r->b, DRM_IOCTL_GEM_CLOSE, &gc), 0);
	}
	assert_int_equal(drm_node_n_held(r->node), 1);
	/*
	 * Once the program let it go, the room is there again, at the next
	 * create that needs it, but not within DRM_HELD_LOOK_USEC of a look
	 * that found it held.
	 */
	r->dmabuf_held = false;
	{
		struct drm_mode_create_dumb c = { .width = W, .height = H, .bpp = 32 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATE_DUMB, &c), -ENOMEM);
		assert_int_equal(drm_node_n_held(r->node), 1);
	}
	r->ctx.now_usec += 250000;
	dumb(r, r->a, W, H);
	assert_int_equal(drm_node_n_held(r->node), 0);
	assert_int_equal(r->releases, 1);
	/* A buffer never exported, or whose dma-buf nobody holds, goes at its last handle. */
	{
		struct drm_gem_close gc = { .handle = h2 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_GEM_CLOSE, &gc), 0);
	}
	assert_int_equal(r->releases, 2);
	assert_int_equal(drm_node_n_held(r->node), 0);
	/* A file closing with an exported buffer leaves it held. */
	r->dmabuf_held = true;
	h1 = dumb(r, r->b, 64, 64);
	assert_int_equal(export_handle(r, r->b, h1, &d1), 0);
	drm_file_close(r->b);
	r->b = NULL;
	assert_int_equal(drm_node_n_held(r->node), 1);
	/* A revoked persona's held buffers are forgotten: no longer counted, no longer importable. */
	{
		uint64_t used = drm_node_memory_used(r->node);
		unsigned int releases = r->releases;
		/* The program's own copy of the dma-buf. */
		int mine = dup(d1);

		assert_true(mine >= 0);
		drm_node_drop_held(r->node);
		assert_int_equal(drm_node_n_held(r->node), 0);
		assert_int_equal(r->releases, releases + 1);
		assert_int_equal(drm_node_memory_used(r->node), used - 64 * 64 * 4);
		assert_int_equal(prime_import(r, r->a, mine, &hb), -EINVAL);
		close(mine);
	}
	/* Held ones go with the node. */
	h1 = dumb(r, r->a, 64, 64);
	assert_int_equal(export_handle(r, r->a, h1, &d1), 0);
	{
		struct drm_gem_close gc = { .handle = h1 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_GEM_CLOSE, &gc), 0);
	}
	assert_int_equal(drm_node_n_held(r->node), 1);
	rig_free(r);
}

static void test_prime_off(void **state) {
	struct rig *r = rig_new();
	struct drm_get_cap cap = { .capability = DRM_CAP_PRIME };
	uint32_t h = dumb(r, r->a, 64, 64), hb;
	int d;

	(void)state;
	assert_int_equal(io(r, r->a, DRM_IOCTL_GET_CAP, &cap), 0);
	assert_int_equal(cap.value, 0);
	assert_int_equal(export_handle(r, r->a, h, &d), -EOPNOTSUPP);
	assert_int_equal(prime_import(r, r->a, 0, &hb), -EOPNOTSUPP);
	assert_int_equal(prime_import(r, r->a, -1, &hb), -EBADF);
	rig_free(r);
}

static void test_dmabuf_count(void **state) {
	char plain[] = "pos:\t0\nflags:\t02000002\nmnt_id:\t12\nino:\t7\nsize:\t65536\ncount:\t3\n"
		       "exp_name:\tudmabuf\n";
	/* A name its holder set, made of lines that look like the count. */
	char named[] = "pos:\t0\nflags:\t02000002\nmnt_id:\t12\nino:\t7\nsize:\t65536\ncount:\t3\n"
		       "exp_name:\tudmabuf\nname:\tx\ncount:\t1\n";
	/* Locks listed before the dma-buf's lines, and a text cut off before its count. */
	char locked[] = "pos:\t0\nflags:\t02\nmnt_id:\t12\nino:\t7\nlock:\t1: FLOCK  ADVISORY  WRITE 9 00:0c:7 0 EOF\n"
			"size:\t4096\ncount:\t2\nexp_name:\tudmabuf\n";
	char cut[] = "pos:\t0\nflags:\t02\nmnt_id:\t12\nino:\t7\nlock:\t1: OFDLCK ADVISORY  WRITE -1 00:0c:7 0 0\n";
	char no_exporter[] = "pos:\t0\nflags:\t02\nmnt_id:\t12\nino:\t7\n";
	long count;

	(void)state;
	assert_int_equal(drm_dmabuf_count(plain, &count), 0);
	assert_int_equal(count, 3);
	assert_int_equal(drm_dmabuf_count(named, &count), 0);
	assert_int_equal(count, 3);
	assert_int_equal(drm_dmabuf_count(locked, &count), 0);
	assert_int_equal(count, 2);
	assert_int_equal(drm_dmabuf_count(cut, &count), -EINVAL);
	assert_int_equal(drm_dmabuf_count(no_exporter, &count), -EINVAL);
}

static void test_addfb_checks(void **state) {
	struct rig *r = rig_new();
	uint32_t h = dumb(r, r->a, 64, 64);
	struct drm_mode_fb_cmd2 c = { .width = 64, .height = 64, .pixel_format = DRM_FORMAT_XRGB8888,
				      .handles = { h }, .pitches = { 256 } };
	struct drm_mode_fb_cmd legacy = { .width = 64, .height = 64, .pitch = 256, .bpp = 16, .depth = 16,
					  .handle = h };
	struct drm_mode_fb_cmd get = { 0 };

	(void)state;
	c.pixel_format = DRM_FORMAT_NV12;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB2, &c), -EINVAL);
	c.pixel_format = DRM_FORMAT_XRGB8888;
	c.flags = DRM_MODE_FB_MODIFIERS;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB2, &c), -EINVAL);
	c.flags = 0;
	c.pitches[0] = 128;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB2, &c), -EINVAL);
	c.pitches[0] = 512; /* larger than the buffer holds */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB2, &c), -EINVAL);
	c.pitches[0] = 256;
	c.handles[0] = 77;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB2, &c), -ENOENT);
	c.handles[0] = h;
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_ADDFB2, &c), -ENOENT); /* another file's handle */
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB, &legacy), -EINVAL); /* RGB565: not the plane's */
	legacy.bpp = 32;
	legacy.depth = 32;
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_ADDFB, &legacy), 0);
	/* GETFB: a handle for the master only. */
	get.fb_id = legacy.fb_id;
	assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_GETFB, &get), 0);
	assert_int_equal(get.handle, 0);
	assert_int_equal(get.depth, 32);
	assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETFB, &get), 0);
	assert_true(get.handle != 0 && get.handle != h);
	/* Only the file's own framebuffers are listed. */
	{
		struct drm_mode_card_res res = { 0 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETRESOURCES, &res), 0);
		assert_int_equal(res.count_fbs, 1);
		res = (struct drm_mode_card_res){ 0 };
		assert_int_equal(io(r, r->b, DRM_IOCTL_MODE_GETRESOURCES, &res), 0);
		assert_int_equal(res.count_fbs, 0);
	}
	rig_free(r);
}

/* The rounds as CUSE runs them: what a handler asks for, and what it refuses before asking. */
static void test_rounds(void **state) {
	struct rig *r = rig_new();
	struct drm_mode_get_connector conn = { .connector_id = DRM_NODE_CONNECTOR_ID, .count_modes = 8,
					       .modes_ptr = 0x1000 };
	struct drm_mode_atomic atomic = { .count_objs = 1u << 30, .objs_ptr = 0x2000 };
	struct drm_mode_create_blob blob = { .data = 0x3000, .length = 1u << 30 };
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID, .count_connectors = 100000,
				      .set_connectors_ptr = 0x4000 };
	struct drm_mode_fb_dirty_cmd dirty = { .num_clips = 100000, .clips_ptr = 0x5000 };
	struct drm_set_client_cap cc = { DRM_CLIENT_CAP_ATOMIC, 1 };
	unsigned int cmd = DRM_IOCTL_MODE_GETCONNECTOR;

	(void)state;
	/* The first call has nothing: it asks for the struct, to read and to write. */
	drm_ioctl(r->a, &r->ctx, cmd, &conn, NULL, 0, 0, &step);
	assert_true(step.retry);
	assert_int_equal(step.n_in, 1);
	assert_ptr_equal(step.in_iov[0].iov_base, &conn);
	assert_int_equal(step.in_iov[0].iov_len, sizeof(conn));
	assert_int_equal(step.n_out, 1);
	assert_int_equal(step.out_iov[0].iov_len, sizeof(conn));
	/* With the struct: the modes' range too, the struct first. */
	drm_ioctl(r->a, &r->ctx, cmd, &conn, &conn, sizeof(conn), sizeof(conn), &step);
	assert_true(step.retry);
	assert_int_equal(step.n_out, 2);
	assert_int_equal((uintptr_t)step.out_iov[1].iov_base, 0x1000);
	assert_int_equal(step.out_iov[1].iov_len, 2 * sizeof(struct drm_mode_modeinfo));
	/* With everything: done, the struct then the modes. */
	drm_ioctl(r->a, &r->ctx, cmd, &conn, &conn, sizeof(conn), sizeof(conn) + 2 * sizeof(struct drm_mode_modeinfo),
		  &step);
	assert_false(step.retry);
	assert_int_equal(step.result, 0);
	assert_int_equal(step.out_size, sizeof(conn) + 2 * sizeof(struct drm_mode_modeinfo));
	assert_int_equal(((struct drm_mode_get_connector *)(void *)step.out)->count_modes, 2);

	/* Hostile counts are refused with only the struct read. */
	assert_int_equal(io(r, r->a, DRM_IOCTL_SET_CLIENT_CAP, &cc), 0);
	drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_ATOMIC, &atomic, &atomic, sizeof(atomic), sizeof(atomic), &step);
	assert_false(step.retry);
	assert_int_equal(step.result, -EINVAL);
	drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_CREATEPROPBLOB, &blob, &blob, sizeof(blob), sizeof(blob), &step);
	assert_false(step.retry);
	assert_int_equal(step.result, -EINVAL);
	drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_SETCRTC, &crtc, &crtc, sizeof(crtc), sizeof(crtc), &step);
	assert_false(step.retry);
	assert_int_equal(step.result, -EINVAL);
	dirty.fb_id = fb2(r, r->a, 64, 64);
	drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_DIRTYFB, &dirty, &dirty, sizeof(dirty), sizeof(dirty), &step);
	assert_false(step.retry);
	assert_int_equal(step.result, -EINVAL);
	/* ATOMIC within bounds asks in rounds: the objects and counts, then the properties and values. */
	atomic = (struct drm_mode_atomic){ .count_objs = 2, .objs_ptr = 0x2000, .count_props_ptr = 0x2100,
					   .props_ptr = 0x2200, .prop_values_ptr = 0x2300 };
	drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_ATOMIC, &atomic, &atomic, sizeof(atomic), sizeof(atomic), &step);
	assert_true(step.retry);
	assert_int_equal(step.n_in, 3);
	assert_int_equal(step.in_iov[1].iov_len, 8);
	{
		uint8_t in[sizeof(atomic) + 16];
		uint32_t objs[2] = { DRM_NODE_CRTC_ID, DRM_NODE_PLANE_ID }, counts[2] = { 1, 600 };

		memcpy(in, &atomic, sizeof(atomic));
		memcpy(in + sizeof(atomic), objs, 8);
		memcpy(in + sizeof(atomic) + 8, counts, 8);
		drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_ATOMIC, &atomic, in, sizeof(in), sizeof(atomic), &step);
		assert_true(step.retry);
		assert_int_equal(step.n_in, 5);
		assert_int_equal(step.in_iov[3].iov_len, 601 * 4);
		assert_int_equal(step.in_iov[4].iov_len, 601 * 8);
		/* Past DRM_ATOMIC_MAX_PROPS in all: refused before the properties are read. */
		counts[1] = DRM_ATOMIC_MAX_PROPS;
		memcpy(in + sizeof(atomic) + 8, counts, 8);
		drm_ioctl(r->a, &r->ctx, DRM_IOCTL_MODE_ATOMIC, &atomic, in, sizeof(in), sizeof(atomic), &step);
		assert_false(step.retry);
		assert_int_equal(step.result, -EINVAL);
	}
	/* A struct longer than the kernel's comes back with what the caller had past it, as the kernel copies it. */
	{
		struct drm_get_cap cap = { .capability = DRM_CAP_DUMB_BUFFER };
		uint8_t longer[sizeof(cap) + 8];

		memset(longer, 0xaa, sizeof(longer));
		memcpy(longer, &cap, sizeof(cap));
		assert_int_equal(io(r, r->a, _IOWR(DRM_IOCTL_BASE, 0x0c, uint8_t[sizeof(longer)]), longer), 0);
		memcpy(&cap, longer, sizeof(cap));
		assert_int_equal(cap.value, 1);
		assert_int_equal(longer[sizeof(cap)], 0xaa);
	}
	/* GETPROPBLOB with a length that is not the blob's writes nothing but the length. */
	{
		struct drm_mode_create_blob cb = { .data = (uintptr_t)"0123456789", .length = 10 };
		struct drm_mode_get_blob gb = { .length = 1u << 30, .data = 0x6000 };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_CREATEPROPBLOB, &cb), 0);
		gb.blob_id = cb.blob_id;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETPROPBLOB, &gb), 0);
		assert_int_equal(gb.length, 10);
	}
	rig_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_caps), cmocka_unit_test(test_getters),
		cmocka_unit_test(test_legacy_flow),  cmocka_unit_test(test_setcrtc_checks),
		cmocka_unit_test(test_master),       cmocka_unit_test(test_budget),
		cmocka_unit_test(test_addfb_checks), cmocka_unit_test(test_rounds),
		cmocka_unit_test(test_prime),        cmocka_unit_test(test_prime_off),
		cmocka_unit_test(test_dmabuf_count),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
