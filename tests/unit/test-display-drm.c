/* SPDX-License-Identifier: MIT */
/*
 * card0 in the display core, on the headless display with the real
 * manager: its scanout wins over fb0 while its CRTC has a mode, fb0 comes
 * back when it has none, a background persona's card0 stays off the screen
 * until a switch, and the active persona's flip completes once the display
 * shows it, a background persona's at a virtual vblank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <drm_fourcc.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core-rig.h"
#include "display-rig.h"
#include "display/display-internal.h"
#include "display-backend.h"
#include "drm-ioctl.h"
#include "fb-node.h"

#define W 32
#define H 16

static const char conf_text[] = "[Persona a]\nActive=yes\n[Persona b]\n";

static struct drm_ioctl_step step;

struct rig {
	struct core_rig *core;
	struct manager *m;
	struct display_class *dc;
	struct display_output *out;
	struct persona *a, *b;
};

/* A client of a persona's card0: one open file and its buffers, mapped. */
struct client {
	struct rig *rig;
	struct drm_node *node;
	struct drm_file *f;
	struct drm_ioctl_ctx ctx;
	uint32_t fb[2];
	uint8_t *map[2];
	size_t size;
	struct drm_mode_modeinfo mode;
};

static struct display_node *node_of(struct rig *r, struct persona *p) {
	return display_rig_node(r->dc, p);
}

static bool screen_is(struct rig *r, uint8_t v) {
	return display_rig_screen_is(r->out, W, H, v);
}

static int io(struct client *c, unsigned int cmd, void *arg) {
	c->ctx.now_usec = monotonic_usec();
	return drm_ioctl_direct(c->f, &c->ctx, cmd, arg, &step);
}

/* A buffer of the mode, added as a framebuffer and mapped, all v. */
static void add_buffer(struct client *c, unsigned int i, uint8_t v) {
	struct drm_mode_create_dumb d = { .width = W, .height = H, .bpp = 32 };
	struct drm_mode_fb_cmd2 f = { .width = W, .height = H, .pixel_format = DRM_FORMAT_XRGB8888 };
	struct drm_mode_map_dumb m = { 0 };
	uint64_t size;
	int fd;

	assert_int_equal(io(c, DRM_IOCTL_MODE_CREATE_DUMB, &d), 0);
	f.handles[0] = m.handle = d.handle;
	f.pitches[0] = d.pitch;
	assert_int_equal(io(c, DRM_IOCTL_MODE_ADDFB2, &f), 0);
	assert_int_equal(io(c, DRM_IOCTL_MODE_MAP_DUMB, &m), 0);
	assert_int_equal(drm_node_map_lookup(c->node, c->f, m.offset, &fd, &size), 0);
	c->map[i] = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(c->map[i] != MAP_FAILED);
	c->size = (size_t)size;
	memset(c->map[i], v, c->size);
	c->fb[i] = f.fb_id;
}

static void client_open(struct rig *r, struct persona *p, struct client *c) {
	struct drm_mode_modeinfo modes[DRM_NODE_MAX_MODES];
	struct drm_mode_get_connector gc = { .connector_id = DRM_NODE_CONNECTOR_ID };

	*c = (struct client){ .rig = r, .node = node_of(r, p)->drm, .ctx = { .pid = getpid() } };
	assert_non_null(c->node);
	assert_int_equal(drm_file_open(c->node, getpid(), &c->f), 0);
	assert_int_equal(io(c, DRM_IOCTL_MODE_GETCONNECTOR, &gc), 0);
	/* The persona's mode alone: the display shows no other size. */
	assert_int_equal(gc.count_modes, 1);
	gc.modes_ptr = (uintptr_t)modes;
	gc.count_props = gc.count_encoders = 0;
	assert_int_equal(io(c, DRM_IOCTL_MODE_GETCONNECTOR, &gc), 0);
	c->mode = modes[0];
	assert_int_equal(c->mode.hdisplay, W);
	assert_int_equal(c->mode.vdisplay, H);
	add_buffer(c, 0, 0x11);
	add_buffer(c, 1, 0x22);
}

static void client_close(struct client *c) {
	for (unsigned int i = 0; i < 2; i++)
		if (c->map[i])
			munmap(c->map[i], c->size);
	if (c->f)
		drm_file_close(c->f);
	c->f = NULL;
}

static int setcrtc(struct client *c, uint32_t fb) {
	uint32_t conn = DRM_NODE_CONNECTOR_ID;
	struct drm_mode_crtc s = { .crtc_id = DRM_NODE_CRTC_ID, .fb_id = fb, .set_connectors_ptr = (uintptr_t)&conn,
				   .count_connectors = 1, .mode_valid = 1, .mode = c->mode };

	return io(c, DRM_IOCTL_MODE_SETCRTC, &s);
}

static int flip(struct client *c, uint32_t fb) {
	struct drm_mode_crtc_page_flip f = { .crtc_id = DRM_NODE_CRTC_ID, .fb_id = fb,
					     .flags = DRM_MODE_PAGE_FLIP_EVENT, .user_data = fb };

	return io(c, DRM_IOCTL_MODE_PAGE_FLIP, &f);
}

/* The flip event the file has, if any: its user data (the framebuffer flipped to), or 0. */
static uint64_t flip_event(struct client *c) {
	union {
		struct drm_event_vblank ev;
		uint8_t buf[256];
	} u;
	ssize_t n = drm_file_read(c->f, u.buf, sizeof(u.buf));

	if (n == -EAGAIN)
		return 0;
	assert_int_equal(n, sizeof(struct drm_event_vblank));
	assert_int_equal(u.ev.base.type, DRM_EVENT_FLIP_COMPLETE);
	assert_int_equal(u.ev.crtc_id, DRM_NODE_CRTC_ID);
	return u.ev.user_data;
}

/* The display's pending flip completes. */
static void display_flip(struct rig *r) {
	assert_true(r->out->flip_pending);
	display_output_flip_done(r->out);
	core_rig_run(r->core);
}

/* Runs the loop for about usec, timers included. */
static void run_for(struct rig *r, uint64_t usec) {
	uint64_t end = monotonic_usec() + usec;

	while (monotonic_usec() < end)
		assert_true(sd_event_run(r->core->event, 1000) >= 0);
}

/* Runs the loop until the screen is all v, or 10 s went (a machine busy with other work is slow to present). */
static bool screen_becomes(struct rig *r, uint8_t v) {
	for (int i = 0; i < 500 && !screen_is(r, v); i++)
		run_for(r, 20000);
	return screen_is(r, v);
}

static void fill_fb0(struct rig *r, struct persona *p, uint8_t v) {
	struct display_node *dn = node_of(r, p);

	memset((uint8_t *)fb_node_visible(dn->fb), v, (size_t)dn->fb->state.fix.line_length * H);
	display_node_written(dn, &(struct fb_rows){ 0, H });
}

static int rig_setup(void **state) {
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->core = core_rig_new(conf_text);
	r->m = r->core->manager;
	r->a = core_rig_persona(r->core, "a");
	r->b = core_rig_persona(r->core, "b");
	display_rig_class(r->core, W, H, 0, &r->out, &r->dc);
	core_rig_run(r->core);
	fill_fb0(r, r->a, 0xaa);
	fill_fb0(r, r->b, 0xbb);
	assert_true(screen_becomes(r, 0xaa));
	display_headless_hold_flips(r->out, true);
	*state = r;
	return 0;
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	core_rig_free(r->core);
	free(r);
	return 0;
}

/* The client shows buffer i with SETCRTC, and the screen shows it once the display flips. */
static void show(struct client *c, unsigned int i) {
	assert_int_equal(setcrtc(c, c->fb[i]), 0);
	core_rig_run(c->rig->core);
	display_flip(c->rig);
}

static void switch_to(struct rig *r, struct persona *p) {
	assert_true(manager_switch(r->m, p, NULL, NULL) >= 0);
	core_rig_run(r->core);
	if (r->out->flip_pending)
		display_flip(r);
}

static void test_scanout_wins_and_fb0_comes_back(void **state) {
	struct rig *r = *state;
	struct client c;

	client_open(r, r->a, &c);
	show(&c, 0);
	assert_true(screen_is(r, 0x11));
	/* fb0's writes wait while card0 is shown. */
	fill_fb0(r, r->a, 0xa1);
	core_rig_run(r->core);
	assert_false(r->out->flip_pending);
	assert_true(screen_is(r, 0x11));
	/* DIRTYFB shows what was drawn into the scanout's buffer. */
	memset(c.map[0], 0x33, c.size);
	assert_int_equal(io(&c, DRM_IOCTL_MODE_DIRTYFB, &(struct drm_mode_fb_dirty_cmd){ .fb_id = c.fb[0] }), 0);
	core_rig_run(r->core);
	display_flip(r);
	assert_true(screen_is(r, 0x33));
	/* The master goes: its framebuffers go, the CRTC is off, fb0's latest frame is back. */
	client_close(&c);
	core_rig_run(r->core);
	display_flip(r);
	assert_true(screen_is(r, 0xa1));
}

static void test_background_card_stays_off_the_screen(void **state) {
	struct rig *r = *state;
	struct client c;
	uint64_t flips;

	client_open(r, r->b, &c);
	flips = r->out->n_flips;
	assert_int_equal(setcrtc(&c, c.fb[1]), 0);
	core_rig_run(r->core);
	/* Nothing of b reaches the display. */
	assert_int_equal(r->out->n_flips, flips);
	assert_false(r->out->flip_pending);
	assert_true(screen_is(r, 0xaa));
	/* Its flips complete at its own vblank, throttled but never stalled. */
	assert_int_equal(flip(&c, c.fb[0]), 0);
	assert_int_equal(flip_event(&c), 0);
	for (int i = 0; i < 50 && !drm_file_readable(c.f); i++)
		run_for(r, 20000);
	assert_int_equal(flip_event(&c), c.fb[0]);
	assert_int_equal(r->out->n_flips, flips);
	assert_true(screen_is(r, 0xaa));
	/* A switch shows b's latest frame: card0's, not fb0's. */
	switch_to(r, r->b);
	assert_true(screen_is(r, 0x11));
	/* And back: a's fb0. */
	switch_to(r, r->a);
	assert_true(screen_is(r, 0xaa));
	client_close(&c);
}

static void test_active_flip_completes_when_shown(void **state) {
	struct rig *r = *state;
	struct client c;

	client_open(r, r->a, &c);
	show(&c, 0);
	assert_int_equal(flip(&c, c.fb[1]), 0);
	core_rig_run(r->core);
	/* The display's flip to the new frame is under way: the event waits for it, past any number of refreshes. */
	assert_true(r->out->flip_pending);
	run_for(r, 100000);
	assert_int_equal(flip_event(&c), 0);
	display_flip(r);
	assert_true(screen_is(r, 0x22));
	assert_int_equal(flip_event(&c), c.fb[1]);
	/* A second flip while nothing is pending: one more frame, one more event. */
	assert_int_equal(flip(&c, c.fb[0]), 0);
	core_rig_run(r->core);
	display_flip(r);
	assert_int_equal(flip_event(&c), c.fb[0]);
	assert_true(screen_is(r, 0x11));
	client_close(&c);
}

static void test_dpms_off_is_dark(void **state) {
	struct rig *r = *state;
	struct client c;
	struct drm_mode_connector_set_property dpms = { .connector_id = DRM_NODE_CONNECTOR_ID };
	struct drm_mode_obj_get_properties gp = { .obj_id = DRM_NODE_CONNECTOR_ID, .obj_type = DRM_MODE_OBJECT_CONNECTOR };
	uint32_t props[32];
	uint64_t values[32];

	client_open(r, r->a, &c);
	show(&c, 0);
	assert_true(screen_is(r, 0x11));
	assert_int_equal(io(&c, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &gp), 0);
	assert_true(gp.count_props <= 32);
	gp.props_ptr = (uintptr_t)props;
	gp.prop_values_ptr = (uintptr_t)values;
	assert_int_equal(io(&c, DRM_IOCTL_MODE_OBJ_GETPROPERTIES, &gp), 0);
	for (uint32_t i = 0; i < gp.count_props; i++) {
		struct drm_mode_get_property p = { .prop_id = props[i] };

		assert_int_equal(io(&c, DRM_IOCTL_MODE_GETPROPERTY, &p), 0);
		if (strcmp(p.name, "DPMS") == 0)
			dpms.prop_id = props[i];
	}
	assert_int_not_equal(dpms.prop_id, 0);
	dpms.value = DRM_MODE_DPMS_OFF;
	assert_int_equal(io(&c, DRM_IOCTL_MODE_SETPROPERTY, &dpms), 0);
	core_rig_run(r->core);
	if (r->out->flip_pending)
		display_flip(r);
	assert_true(screen_becomes(r, 0x00));
	assert_true(display_node_dark(node_of(r, r->a)));
	client_close(&c);
}

int main(void) {
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, rig_setup, rig_teardown)
		T(test_scanout_wins_and_fb0_comes_back),
		T(test_background_card_stays_off_the_screen),
		T(test_active_flip_completes_when_shown),
		T(test_dpms_off_is_dark),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
