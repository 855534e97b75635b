/* SPDX-License-Identifier: MIT */
/*
 * Input after a switch the user did not start (a persona's RequestActive):
 * the real manager with the input core over the fake backend and the
 * display core on the headless display, whose flips complete when the test
 * says so. The new persona gets input only once every key is up and its
 * frame is shown; the secure attention chord always brings its persona
 * forward, is seen by no persona, and holds off personas' requests until
 * the user switches.
 */
#include <libevdev/libevdev.h>
#include <stdlib.h>

#include "core-rig.h"
#include "display/display-internal.h"
#include "display-backend.h"
#include "input/input.h"
#include "input-backend.h"
#include "test-util.h"

static const char conf_text[] = "[Daemon]\n"
				"SecureAttentionKey=KEY_LEFTCTRL+KEY_ESC:home\n"
				"[Persona home]\nActive=yes\n"
				"[Persona other]\n";

struct rig {
	struct core_rig *core;
	struct manager *m;
	struct input_class *ic;
	struct display_class *dc;
	struct display_output *out;
	struct input_device *dev;
	struct input_backend *hw;
	struct persona *home, *other;
	struct evdev_client *home_c, *other_c;
};

static struct evdev_client *open_node(struct rig *r, struct persona *p) {
	struct evdev_client *c;

	assert_int_equal(evdev_node_open(input_node_of(r->dev, p)->evdev, &c), 0);
	return c;
}

static int rig_setup(void **state) {
	struct rig *r = calloc(1, sizeof(*r));
	struct libevdev *desc = libevdev_new();

	assert_non_null(r);
	r->core = core_rig_new(conf_text);
	r->m = r->core->manager;
	r->home = core_rig_persona(r->core, "home");
	r->other = core_rig_persona(r->core, "other");
	assert_int_equal(display_headless_new(32, 16, &(struct display_spares){ 0, UINT64_MAX }, &r->out), 0);
	assert_int_equal(display_class_new_core(r->m, r->out, "headless", NULL, &r->dc), 0);
	assert_int_equal(manager_add_class(r->m, &r->dc->base), 0);
	assert_int_equal(input_class_new_core(r->m, NULL, &r->ic), 0);
	assert_int_equal(manager_add_class(r->m, &r->ic->base), 0);
	libevdev_set_name(desc, "keyboard");
	for (unsigned int code = KEY_ESC; code <= KEY_Z; code++)
		assert_int_equal(libevdev_enable_event_code(desc, EV_KEY, code, NULL), 0);
	assert_int_equal(input_fake_new("event3", desc, &r->hw), 0);
	assert_int_equal(input_class_add_device(r->ic, r->hw, &r->dev), 0);
	core_rig_run(r->core);
	/* The first frame is up; from now on flips wait for the test. */
	display_headless_hold_flips(r->out, true);
	r->home_c = open_node(r, r->home);
	r->other_c = open_node(r, r->other);
	*state = r;
	return 0;
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	evdev_node_close(input_node_of(r->dev, r->home)->evdev, r->home_c);
	evdev_node_close(input_node_of(r->dev, r->other)->evdev, r->other_c);
	core_rig_free(r->core);
	free(r);
	return 0;
}

/* A key event and its SYN_REPORT from the hardware, handled. */
static void key(struct rig *r, uint16_t code, int32_t value) {
	assert_int_equal(input_fake_push(r->hw, EV_KEY, code, value), 0);
	assert_int_equal(input_fake_push(r->hw, EV_SYN, SYN_REPORT, 0), 0);
	core_rig_run(r->core);
}

static void vblank(struct rig *r) {
	assert_true(r->out->flip_pending);
	display_output_flip_done(r->out);
	core_rig_run(r->core);
}

/* Keys held while a persona takes the screen, and keys typed before its frame is up, reach nobody. */
static void test_request_waits_for_keys_up_and_frame(void **state) {
	struct rig *r = *state;

	key(r, KEY_A, 1);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), 1);
	core_rig_run(r->core);
	/* The old persona lets go of what it held; the new one sees nothing held. */
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_NOTHING(r->other_c);
	/* Typed on while A is held: nobody. */
	key(r, KEY_B, 1);
	key(r, KEY_B, 0);
	EXPECT_NOTHING(r->other_c);
	EXPECT_NOTHING(r->home_c);
	/* Every key up, but the frame is not shown yet: still nobody. */
	key(r, KEY_A, 0);
	key(r, KEY_C, 1);
	key(r, KEY_C, 0);
	EXPECT_NOTHING(r->other_c);
	EXPECT_NOTHING(r->home_c);
	/* The flip: with every key up, input goes to the new persona. */
	vblank(r);
	key(r, KEY_D, 1);
	key(r, KEY_D, 0);
	EXPECT_READ(r->other_c, EV(EV_KEY, KEY_D, 1), SYN_EV, EV(EV_KEY, KEY_D, 0), SYN_EV);
	EXPECT_NOTHING(r->home_c);
}

/* The frame is shown while a key is still down: input waits for its release. */
static void test_request_shown_waits_for_release(void **state) {
	struct rig *r = *state;

	key(r, KEY_A, 1);
	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), 1);
	core_rig_run(r->core);
	vblank(r);
	key(r, KEY_B, 1);
	key(r, KEY_B, 0);
	EXPECT_NOTHING(r->other_c);
	key(r, KEY_A, 0);
	EXPECT_NOTHING(r->other_c);
	key(r, KEY_E, 1);
	EXPECT_READ(r->other_c, EV(EV_KEY, KEY_E, 1), SYN_EV);
}

/* A switch the user starts is not held: input follows at once, held keys and all. */
static void test_user_switch_is_not_held(void **state) {
	struct rig *r = *state;

	key(r, KEY_A, 1);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), 1);
	core_rig_run(r->core);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_A, 0), SYN_EV);
	/* The user switches back meanwhile: home has its input at once (a resync: A is down again). */
	assert_int_equal(manager_switch(r->m, r->home, NULL, NULL), 1);
	core_rig_run(r->core);
	EXPECT_READ(r->home_c, EV(EV_SYN, SYN_DROPPED, 0), SYN_EV);
	key(r, KEY_B, 1);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_NOTHING(r->other_c);
}

/* The chord reaches no persona, brings home forward, and personas' requests wait for the user's next switch. */
static void test_secure_attention_key(void **state) {
	struct rig *r = *state;

	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), 1);
	vblank(r);
	key(r, KEY_Q, 1);
	EXPECT_READ(r->other_c, EV(EV_KEY, KEY_Q, 1), SYN_EV);
	key(r, KEY_Q, 0);
	EXPECT_READ(r->other_c, EV(EV_KEY, KEY_Q, 0), SYN_EV);
	key(r, KEY_LEFTCTRL, 1);
	key(r, KEY_ESC, 1);
	key(r, KEY_ESC, 0);
	key(r, KEY_LEFTCTRL, 0);
	assert_ptr_equal(r->m->active, r->home);
	EXPECT_NOTHING(r->other_c);
	EXPECT_NOTHING(r->home_c);
	vblank(r);
	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), -EPERM);
	assert_ptr_equal(r->m->active, r->home);
	key(r, KEY_X, 1);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_X, 1), SYN_EV);
	key(r, KEY_X, 0);
	EXPECT_READ(r->home_c, EV(EV_KEY, KEY_X, 0), SYN_EV);
	/* The user's own switch ends the hold. */
	assert_int_equal(manager_switch(r->m, r->other, NULL, NULL), 1);
	vblank(r);
	assert_int_equal(manager_switch(r->m, r->home, NULL, NULL), 1);
	vblank(r);
	assert_int_equal(manager_switch_by(r->m, r->other, SWITCH_BY_PERSONA, NULL, NULL), 1);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_request_waits_for_keys_up_and_frame, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_request_shown_waits_for_release, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_user_switch_is_not_held, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_secure_attention_key, rig_setup, rig_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
