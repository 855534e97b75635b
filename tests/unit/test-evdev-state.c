/* SPDX-License-Identifier: MIT */
#include "evdev-state.h"
#include "test-util.h"

#define TRACKING(s, slot) ((s)->mt[(slot)][ABS_MT_TRACKING_ID - EVDEV_MT_FIRST])
#define MT(s, slot, code) ((s)->mt[(slot)][(code) - EVDEV_MT_FIRST])

static void apply_all(struct evdev_state *s, const struct input_event *evs, size_t n) {
	for (size_t i = 0; i < n; i++)
		evdev_state_apply(s, &evs[i]);
}
#define APPLY(s, ...) apply_all((s), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

/* True when nothing is pressed and no slot has a contact. */
static bool nothing_held(const struct evdev_state *s) {
	for (unsigned int code = 0; code <= KEY_MAX; code++)
		if (bit_test(s->key, code))
			return false;
	for (unsigned int i = 0; i < s->n_slots; i++)
		if (TRACKING(s, i) >= 0)
			return false;
	return true;
}

static void test_init(void **state) {
	struct evdev_state s;

	(void)state;
	memset(&s, 0x5a, sizeof(s));
	evdev_state_init(&s, TS_SLOTS);
	assert_int_equal(s.n_slots, TS_SLOTS);
	assert_int_equal(s.slot, 0);
	for (unsigned int i = 0; i < EVDEV_MAX_SLOTS; i++)
		assert_int_equal(TRACKING(&s, i), -1);
	assert_true(nothing_held(&s));
	assert_int_equal(evdev_state_value(&s, EV_LED, LED_CAPSL), 0);
	assert_int_equal(evdev_state_value(&s, EV_ABS, ABS_X), 0);

	evdev_state_init(&s, 1000);
	assert_int_equal(s.n_slots, EVDEV_MAX_SLOTS);
}

static void test_apply_bits_and_axes(void **state) {
	struct evdev_state s, before;

	(void)state;
	evdev_state_init(&s, 0);
	APPLY(&s, EV(EV_KEY, KEY_A, 1), EV(EV_KEY, KEY_B, 1), EV(EV_KEY, KEY_B, 2), EV(EV_LED, LED_CAPSL, 1),
	      EV(EV_SND, SND_BELL, 1), EV(EV_SW, SW_LID, 1), EV(EV_ABS, ABS_X, 1234), EV(EV_REL, REL_X, 5),
	      EV(EV_MSC, MSC_SCAN, 30));
	assert_int_equal(evdev_state_value(&s, EV_KEY, KEY_A), 1);
	assert_int_equal(evdev_state_value(&s, EV_KEY, KEY_B), 1);
	assert_int_equal(evdev_state_value(&s, EV_KEY, KEY_C), 0);
	assert_int_equal(evdev_state_value(&s, EV_LED, LED_CAPSL), 1);
	assert_int_equal(evdev_state_value(&s, EV_LED, LED_NUML), 0);
	assert_int_equal(evdev_state_value(&s, EV_SND, SND_BELL), 1);
	assert_int_equal(evdev_state_value(&s, EV_SW, SW_LID), 1);
	assert_int_equal(evdev_state_value(&s, EV_ABS, ABS_X), 1234);

	APPLY(&s, EV(EV_KEY, KEY_A, 0), EV(EV_LED, LED_CAPSL, 0), EV(EV_SW, SW_LID, 0), EV(EV_ABS, ABS_X, -7));
	assert_int_equal(evdev_state_value(&s, EV_KEY, KEY_A), 0);
	assert_int_equal(evdev_state_value(&s, EV_LED, LED_CAPSL), 0);
	assert_int_equal(evdev_state_value(&s, EV_SW, SW_LID), 0);
	assert_int_equal(evdev_state_value(&s, EV_ABS, ABS_X), -7);

	/* Out-of-range codes and types without state change nothing. */
	before = s;
	APPLY(&s, EV(EV_KEY, KEY_MAX + 1, 1), EV(EV_ABS, ABS_MAX + 1, 9), EV(EV_LED, LED_MAX + 1, 1),
	      EV(EV_SW, SW_MAX + 1, 1), EV(EV_REL, REL_X, 1), EV(EV_FF, FF_RUMBLE, 1));
	assert_memory_equal(&s, &before, sizeof(s));
}

static void test_apply_slots(void **state) {
	struct evdev_state s;

	(void)state;
	evdev_state_init(&s, TS_SLOTS);
	APPLY(&s, EV(EV_ABS, ABS_MT_TRACKING_ID, 10), EV(EV_ABS, ABS_MT_POSITION_X, 100),
	      EV(EV_ABS, ABS_MT_SLOT, 3), EV(EV_ABS, ABS_MT_TRACKING_ID, 11), EV(EV_ABS, ABS_MT_POSITION_X, 300),
	      EV(EV_ABS, ABS_MT_POSITION_Y, 301));
	assert_int_equal(s.slot, 3);
	assert_int_equal(evdev_state_value(&s, EV_ABS, ABS_MT_SLOT), 3);
	assert_int_equal(TRACKING(&s, 0), 10);
	assert_int_equal(MT(&s, 0, ABS_MT_POSITION_X), 100);
	assert_int_equal(TRACKING(&s, 3), 11);
	assert_int_equal(MT(&s, 3, ABS_MT_POSITION_X), 300);
	assert_int_equal(MT(&s, 3, ABS_MT_POSITION_Y), 301);
	assert_int_equal(TRACKING(&s, 1), -1);

	/* A slot the device does not have is not selected: later values stay in slot 3. */
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, TS_SLOTS), EV(EV_ABS, ABS_MT_POSITION_X, 333));
	assert_int_equal(s.slot, 3);
	assert_int_equal(MT(&s, 3, ABS_MT_POSITION_X), 333);
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, -1), EV(EV_ABS, ABS_MT_POSITION_Y, 334));
	assert_int_equal(s.slot, 3);
	assert_int_equal(MT(&s, 3, ABS_MT_POSITION_Y), 334);
}

static void test_slots_beyond_those_tracked(void **state) {
	struct evdev_state s;
	struct input_event out[EVDEV_RELEASE_MAX];
	size_t n;

	(void)state;
	/* A device with more slots than devnsd tracks: a lift in slot 70 must not lift the touch in slot 2. */
	evdev_state_init(&s, EVDEV_MAX_SLOTS + 10);
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 5), EV(EV_ABS, ABS_MT_POSITION_X, 20),
	      EV(EV_ABS, ABS_MT_SLOT, 70), EV(EV_ABS, ABS_MT_TRACKING_ID, 9), EV(EV_ABS, ABS_MT_POSITION_X, 700),
	      EV(EV_ABS, ABS_MT_TRACKING_ID, -1));
	assert_int_equal(TRACKING(&s, 2), 5);
	assert_int_equal(MT(&s, 2, ABS_MT_POSITION_X), 20);
	n = evdev_state_release(&s, out);
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, -1), SYN_EV);
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, -1));
	assert_int_equal(TRACKING(&s, 2), -1);
}

static void test_release_nothing_held(void **state) {
	struct evdev_state s;
	struct input_event out[EVDEV_RELEASE_MAX];

	(void)state;
	evdev_state_init(&s, TS_SLOTS);
	APPLY(&s, EV(EV_LED, LED_CAPSL, 1), EV(EV_SW, SW_LID, 1), EV(EV_ABS, ABS_X, 5), EV(EV_KEY, KEY_A, 1),
	      EV(EV_KEY, KEY_A, 0));
	assert_int_equal(evdev_state_release(&s, out), 0);
}

static void test_release_keys_and_touches(void **state) {
	struct evdev_state s, before;
	struct input_event out[EVDEV_RELEASE_MAX];
	size_t n;

	(void)state;
	evdev_state_init(&s, TS_SLOTS);
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 5), EV(EV_ABS, ABS_MT_SLOT, 7),
	      EV(EV_ABS, ABS_MT_TRACKING_ID, 6), EV(EV_KEY, BTN_TOUCH, 1), EV(EV_KEY, KEY_LEFTSHIFT, 1),
	      EV(EV_KEY, KEY_A, 1), EV(EV_ABS, ABS_MT_SLOT, 4));
	before = s;
	n = evdev_state_release(&s, out);
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, -1),
		      EV(EV_ABS, ABS_MT_SLOT, 7), EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_KEY, KEY_A, 0),
		      EV(EV_KEY, KEY_LEFTSHIFT, 0), EV(EV_KEY, BTN_TOUCH, 0), SYN_EV);
	assert_memory_equal(&s, &before, sizeof(s));

	/* Whoever replays them holds nothing any more. */
	apply_all(&s, out, n);
	assert_true(nothing_held(&s));
}

static void test_release_hats(void **state) {
	struct evdev_state s;
	struct input_event out[EVDEV_RELEASE_MAX];
	size_t n;

	(void)state;
	evdev_state_init(&s, 0);
	/* A d-pad held left and down, a stick pushed, a button held. */
	APPLY(&s, EV(EV_ABS, ABS_HAT0X, -1), EV(EV_ABS, ABS_HAT0Y, 1), EV(EV_ABS, ABS_X, 200),
	      EV(EV_KEY, BTN_SOUTH, 1));
	n = evdev_state_release(&s, out);
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_HAT0X, 0), EV(EV_ABS, ABS_HAT0Y, 0), EV(EV_KEY, BTN_SOUTH, 0), SYN_EV);
	apply_all(&s, out, n);
	assert_int_equal(evdev_state_value(&s, EV_ABS, ABS_HAT0X), 0);
	assert_int_equal(evdev_state_release(&s, out), 0);

	/* A hat alone is held too. */
	APPLY(&s, EV(EV_ABS, ABS_HAT1Y, 1));
	n = evdev_state_release(&s, out);
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_HAT1Y, 0), SYN_EV);
}

static void test_release_current_slot(void **state) {
	struct evdev_state s;
	struct input_event out[EVDEV_RELEASE_MAX];
	size_t n;

	(void)state;
	evdev_state_init(&s, TS_SLOTS);
	APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 5));
	n = evdev_state_release(&s, out);
	/* The reader is already on slot 2. */
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_MT_TRACKING_ID, -1), SYN_EV);
}

static void test_release_every_slot(void **state) {
	struct evdev_state s;
	struct input_event out[EVDEV_RELEASE_MAX];
	size_t n;

	(void)state;
	evdev_state_init(&s, EVDEV_MAX_SLOTS);
	for (unsigned int i = 0; i < EVDEV_MAX_SLOTS; i++)
		APPLY(&s, EV(EV_ABS, ABS_MT_SLOT, (int)i), EV(EV_ABS, ABS_MT_TRACKING_ID, (int)i + 100));
	for (unsigned int code = 0; code <= KEY_MAX; code++)
		APPLY(&s, EV(EV_KEY, code, 1));
	n = evdev_state_release(&s, out);
	assert_in_range(n, 1, EVDEV_RELEASE_MAX);
	assert_int_equal(out[n - 1].type, EV_SYN);
	apply_all(&s, out, n);
	assert_true(nothing_held(&s));
}

static void test_input_equal(void **state) {
	struct evdev_state a, b;

	(void)state;
	evdev_state_init(&a, TS_SLOTS);
	evdev_state_init(&b, TS_SLOTS);
	assert_true(evdev_state_input_equal(&a, &b));

	APPLY(&a, EV(EV_LED, LED_CAPSL, 1), EV(EV_SND, SND_BELL, 1));
	assert_true(evdev_state_input_equal(&a, &b));

	APPLY(&a, EV(EV_KEY, KEY_A, 1));
	assert_false(evdev_state_input_equal(&a, &b));
	APPLY(&b, EV(EV_KEY, KEY_A, 1));
	assert_true(evdev_state_input_equal(&a, &b));

	APPLY(&a, EV(EV_SW, SW_LID, 1));
	assert_false(evdev_state_input_equal(&a, &b));
	APPLY(&b, EV(EV_SW, SW_LID, 1));

	APPLY(&a, EV(EV_ABS, ABS_X, 9));
	assert_false(evdev_state_input_equal(&a, &b));
	APPLY(&b, EV(EV_ABS, ABS_X, 9));

	APPLY(&a, EV(EV_ABS, ABS_MT_SLOT, 4), EV(EV_ABS, ABS_MT_POSITION_X, 20));
	assert_false(evdev_state_input_equal(&a, &b));
	APPLY(&b, EV(EV_ABS, ABS_MT_SLOT, 4));
	assert_false(evdev_state_input_equal(&a, &b));
	APPLY(&b, EV(EV_ABS, ABS_MT_POSITION_X, 20));
	assert_true(evdev_state_input_equal(&a, &b));
}

static void test_copy_input_keeps_leds(void **state) {
	struct evdev_state hw, view;

	(void)state;
	evdev_state_init(&hw, TS_SLOTS);
	evdev_state_init(&view, TS_SLOTS);
	APPLY(&hw, EV(EV_KEY, KEY_A, 1), EV(EV_LED, LED_NUML, 1), EV(EV_ABS, ABS_MT_SLOT, 1),
	      EV(EV_ABS, ABS_MT_TRACKING_ID, 3), EV(EV_SW, SW_LID, 1));
	APPLY(&view, EV(EV_LED, LED_CAPSL, 1), EV(EV_KEY, KEY_B, 1));
	evdev_state_copy_input(&view, &hw);
	assert_true(evdev_state_input_equal(&view, &hw));
	assert_int_equal(evdev_state_value(&view, EV_KEY, KEY_A), 1);
	assert_int_equal(evdev_state_value(&view, EV_KEY, KEY_B), 0);
	assert_int_equal(evdev_state_value(&view, EV_LED, LED_CAPSL), 1);
	assert_int_equal(evdev_state_value(&view, EV_LED, LED_NUML), 0);
	assert_int_equal(TRACKING(&view, 1), 3);
	assert_int_equal(view.slot, 1);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_apply_bits_and_axes),
		cmocka_unit_test(test_apply_slots),
		cmocka_unit_test(test_slots_beyond_those_tracked),
		cmocka_unit_test(test_release_nothing_held),
		cmocka_unit_test(test_release_keys_and_touches),
		cmocka_unit_test(test_release_hats),
		cmocka_unit_test(test_release_current_slot),
		cmocka_unit_test(test_release_every_slot),
		cmocka_unit_test(test_input_equal),
		cmocka_unit_test(test_copy_input_keeps_leds),
	};

	return cmocka_run_group_tests_name("evdev state", tests, NULL, NULL);
}
