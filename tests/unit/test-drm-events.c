/* SPDX-License-Identifier: MIT */
/* The event queue of an open file: whole events, bounded space, sequence and time, WAIT_VBLANK, asking for vblanks. */
#include "test-drm.h"

static struct rig *lit_rig(void) {
	struct rig *r = rig_new();
	struct drm_mode_modeinfo m = preferred(r, r->a);

	assert_int_equal(setcrtc(r, r->a, fb2(r, r->a, W, H), &m), 0);
	return r;
}

static int wait_event(struct rig *r, struct drm_file *f, uint32_t type, uint32_t seq, uint64_t user_data,
		      union drm_wait_vblank *ret) {
	union drm_wait_vblank v = { .request = { .type = type | _DRM_VBLANK_EVENT, .sequence = seq,
						 .signal = (unsigned long)user_data } };
	int k = io(r, f, DRM_IOCTL_WAIT_VBLANK, &v);

	if (ret)
		*ret = v;
	return k;
}

static void test_read(void **state) {
	struct rig *r = lit_rig();
	struct drm_event_vblank ev[3];
	uint8_t buf[sizeof(ev[0]) * 3 / 2];
	uint32_t last = 0;

	(void)state;
	/* Nothing queued: -EAGAIN (a blocking reader waits for events.readable). */
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), -EAGAIN);
	assert_false(drm_file_readable(r->a));
	/* No vblank is asked for while nobody waits: an idle client costs no wakeups. */
	assert_false(drm_node_wants_vblank(r->node));
	assert_int_equal(r->n_vblank, 0);
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, 1, NULL), 0);
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, 2, NULL), 0);
	assert_int_equal(wait_event(r, r->b, _DRM_VBLANK_RELATIVE, 2, 3, NULL), 0);
	assert_true(drm_node_wants_vblank(r->node));
	assert_int_equal(r->n_vblank, 1);
	vblank(r);
	assert_true(drm_file_readable(r->a));
	assert_false(drm_file_readable(r->b));
	/* A buffer too short for one event: 0, the event stays. */
	assert_int_equal(drm_file_read(r->a, buf, sizeof(ev[0]) - 1), 0);
	/* Whole events only: one and a half events' room gives one. */
	assert_int_equal(drm_file_read(r->a, buf, sizeof(buf)), sizeof(ev[0]));
	memcpy(&ev[0], buf, sizeof(ev[0]));
	assert_int_equal(ev[0].base.type, DRM_EVENT_VBLANK);
	assert_int_equal(ev[0].user_data, 1);
	assert_int_equal(ev[0].sequence, 1);
	assert_int_equal(ev[0].tv_sec, r->now / 1000000);
	assert_int_equal(ev[0].tv_usec, r->now % 1000000);
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), sizeof(ev[0]));
	assert_int_equal(ev[0].user_data, 2);
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), -EAGAIN);
	vblank(r);
	assert_int_equal(drm_file_read(r->b, ev, sizeof(ev)), sizeof(ev[0]));
	assert_int_equal(ev[0].sequence, 2);
	assert_false(drm_node_wants_vblank(r->node));
	/* The sequence strictly increases, vblank after vblank. */
	for (int i = 0; i < 5; i++) {
		assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, (uint64_t)i, NULL), 0);
		vblank(r);
		assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), sizeof(ev[0]));
		assert_true(ev[0].sequence > last);
		last = ev[0].sequence;
	}
	rig_free(r);
}

static void test_bounded(void **state) {
	struct rig *r = lit_rig();
	struct drm_event_vblank ev[4];
	unsigned int n = DRM_FILE_EVENT_SPACE / sizeof(ev[0]);

	(void)state;
	/* Space is reserved when an event is asked for: past the file's space, -ENOMEM. */
	for (unsigned int i = 0; i < n; i++)
		assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1 + i % 3, i, NULL), 0);
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, 0, NULL), -ENOMEM);
	{
		struct drm_mode_crtc_page_flip flip = { .crtc_id = DRM_NODE_CRTC_ID, .flags = DRM_MODE_PAGE_FLIP_EVENT };
		struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID };

		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
		flip.fb_id = crtc.fb_id;
		assert_int_equal(io(r, r->a, DRM_IOCTL_MODE_PAGE_FLIP, &flip), -ENOMEM);
	}
	/* Another file has its own space. */
	assert_int_equal(wait_event(r, r->b, _DRM_VBLANK_RELATIVE, 1, 0, NULL), 0);
	for (int i = 0; i < 3; i++)
		vblank(r);
	/* Reading gives the space back. */
	assert_int_equal(drm_file_read(r->a, ev, sizeof(ev)), sizeof(ev));
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, 0, NULL), 0);
	rig_free(r);
}

static void test_wait_vblank(void **state) {
	struct rig *r = lit_rig();
	union drm_wait_vblank v;
	struct drm_event_vblank ev;

	(void)state;
	vblank(r);
	vblank(r);
	/* A query: relative 0, blocking, answers at once with the last vblank. */
	v = (union drm_wait_vblank){ .request = { .type = _DRM_VBLANK_RELATIVE } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), 0);
	assert_false(step.wait);
	assert_int_equal(v.reply.sequence, 2);
	assert_int_equal((uint64_t)v.reply.tval_sec * 1000000 + (uint64_t)v.reply.tval_usec, r->now);
	/* Blocking until vblank 4: the step says so, the transport answers at that vblank. */
	v = (union drm_wait_vblank){ .request = { .type = _DRM_VBLANK_ABSOLUTE, .sequence = 4 } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), 0);
	assert_true(step.wait);
	assert_int_equal(step.wait_seq, 4);
	assert_true(drm_node_wants_vblank(r->node));
	vblank(r);
	assert_false(drm_node_wait_done(r->node, 4));
	vblank(r);
	assert_true(drm_node_wait_done(r->node, 4));
	drm_node_wait_end(r->node, &v);
	assert_int_equal(v.reply.sequence, 4);
	assert_int_equal((uint64_t)v.reply.tval_sec * 1000000 + (uint64_t)v.reply.tval_usec, r->now);
	assert_false(drm_node_wants_vblank(r->node));
	/* An absolute target already passed: the event comes at once, with the current sequence. */
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_ABSOLUTE, 1, 9, &v), 0);
	assert_int_equal(v.reply.sequence, 4);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), sizeof(ev));
	assert_int_equal(ev.sequence, 4);
	assert_int_equal(ev.user_data, 9);
	/* ... unless NEXTONMISS: the next one. */
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_ABSOLUTE | _DRM_VBLANK_NEXTONMISS, 1, 10, &v), 0);
	assert_int_equal(v.reply.sequence, 5);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), -EAGAIN);
	/* Bad requests: a second CRTC, unknown bits, SIGNAL. */
	v = (union drm_wait_vblank){ .request = { .type = _DRM_VBLANK_RELATIVE | _DRM_VBLANK_SECONDARY } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), -EINVAL);
	v = (union drm_wait_vblank){ .request = { .type = _DRM_VBLANK_RELATIVE | (1u << 2) } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), -EINVAL);
	v = (union drm_wait_vblank){ .request = { .type = 0x100 } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), -EINVAL);
	/* The CRTC goes off: waiting events are sent, blocking waits end, and new ones are refused. */
	assert_int_equal(setcrtc(r, r->a, 0, NULL), 0);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), sizeof(ev));
	assert_int_equal(ev.user_data, 10);
	assert_true(drm_node_wait_done(r->node, 100));
	v = (union drm_wait_vblank){ .request = { .type = _DRM_VBLANK_RELATIVE, .sequence = 1 } };
	assert_int_equal(io(r, r->a, DRM_IOCTL_WAIT_VBLANK, &v), -EINVAL);
	/* No vblanks while off. */
	vblank(r);
	assert_int_equal(drm_node_sequence(r->node), 4);
	rig_free(r);
}

static void test_close_pending(void **state) {
	struct rig *r = lit_rig();
	struct drm_event_vblank ev;

	(void)state;
	/* A file that closes with events waiting: they go with it; the other file's stay. */
	assert_int_equal(wait_event(r, r->b, _DRM_VBLANK_RELATIVE, 1, 1, NULL), 0);
	assert_int_equal(wait_event(r, r->a, _DRM_VBLANK_RELATIVE, 1, 2, NULL), 0);
	drm_file_close(r->b);
	r->b = NULL;
	vblank(r);
	assert_int_equal(drm_file_read(r->a, &ev, sizeof(ev)), sizeof(ev));
	assert_int_equal(ev.user_data, 2);
	/* The master closes: its framebuffer goes, and the CRTC goes off with it. */
	drm_file_close(r->a);
	r->a = NULL;
	assert_false(r->last.enabled);
	assert_int_equal(drm_node_memory_used(r->node), 0);
	rig_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read),
		cmocka_unit_test(test_bounded),
		cmocka_unit_test(test_wait_vblank),
		cmocka_unit_test(test_close_pending),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
