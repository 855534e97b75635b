/* SPDX-License-Identifier: MIT */
#include "test-util.h"

#include "hotkey.h"

struct feed {
	struct input_event out[256];
	size_t n;
	int chord;
};

/* Feeds a sequence; collects what passes and the last chord completed. */
static void feed(struct hotkey *h, struct feed *f, const struct input_event *evs, size_t count) {
	for (size_t i = 0; i < count; i++) {
		struct input_event out[HOTKEY_OUT_MAX];
		int chord;
		size_t n = hotkey_feed(h, &evs[i], out, &chord);

		assert_true(f->n + n <= ELEMENTSOF(f->out));
		memcpy(f->out + f->n, out, n * sizeof(out[0]));
		f->n += n;
		if (chord >= 0)
			f->chord = chord;
	}
}

#define FEED(h, f, ...) feed((h), (f), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

static bool saw(const struct feed *f, uint16_t type, uint16_t code, int32_t value) {
	for (size_t i = 0; i < f->n; i++)
		if (f->out[i].type == type && f->out[i].code == code && f->out[i].value == value)
			return true;
	return false;
}

static void setup_chords(struct hotkey *h) {
	hotkey_init(h);
	assert_int_equal(hotkey_add(h, (uint16_t[]){ KEY_LEFTMETA, KEY_F1 }, 2), 0);
	assert_int_equal(hotkey_add(h, (uint16_t[]){ KEY_LEFTMETA, KEY_F2 }, 2), 1);
}

static void test_chord_is_consumed(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	FEED(&h, &f, EV(EV_MSC, MSC_SCAN, 0xdb), EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV);
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 2), SYN_EV);
	FEED(&h, &f, EV(EV_MSC, MSC_SCAN, 0x3c), EV(EV_KEY, KEY_F2, 1), SYN_EV);
	assert_int_equal(f.chord, 1);
	FEED(&h, &f, EV(EV_KEY, KEY_F2, 2), SYN_EV);
	FEED(&h, &f, EV(EV_MSC, MSC_SCAN, 0x3c), EV(EV_KEY, KEY_F2, 0), SYN_EV);
	FEED(&h, &f, EV(EV_MSC, MSC_SCAN, 0xdb), EV(EV_KEY, KEY_LEFTMETA, 0), SYN_EV);
	assert_int_equal(f.n, 0);

	/* Afterwards keys pass as before. */
	FEED(&h, &f, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_true(saw(&f, EV_KEY, KEY_A, 1));
}

static void test_modifier_alone_passes_in_order(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV);
	assert_int_equal(f.n, 0); /* held back: it may start a chord */
	FEED(&h, &f, EV(EV_KEY, KEY_L, 1), SYN_EV);
	assert_int_equal(f.chord, -1);
	assert_int_equal(f.n, 4);
	assert_int_equal(f.out[0].code, KEY_LEFTMETA);
	assert_int_equal(f.out[1].type, EV_SYN);
	assert_int_equal(f.out[2].code, KEY_L);

	f.n = 0;
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 0), SYN_EV);
	assert_true(saw(&f, EV_KEY, KEY_LEFTMETA, 0));
}

static void test_tap_of_modifier(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV, EV(EV_KEY, KEY_LEFTMETA, 0), SYN_EV);
	assert_int_equal(f.n, 4);
	assert_int_equal(f.out[0].value, 1);
	assert_int_equal(f.out[2].value, 0);
	assert_int_equal(f.chord, -1);
}

static void test_last_key_alone_is_not_held(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	/* F1 first cannot be Meta+F1 typed in order: it passes at once, repeats and all. */
	FEED(&h, &f, EV(EV_KEY, KEY_F1, 1), SYN_EV);
	assert_true(saw(&f, EV_KEY, KEY_F1, 1));
	FEED(&h, &f, EV(EV_KEY, KEY_F1, 2), SYN_EV);
	assert_true(saw(&f, EV_KEY, KEY_F1, 2));
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV);
	assert_int_equal(f.chord, -1);
}

static void test_other_devices_pass_untouched(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	FEED(&h, &f, EV(EV_ABS, ABS_MT_SLOT, 1), EV(EV_ABS, ABS_MT_TRACKING_ID, 5), EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	assert_int_equal(f.n, 4);
}

static void test_no_chords_is_a_pass_through(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	hotkey_init(&h);
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 1), EV(EV_KEY, KEY_F1, 1), SYN_EV);
	assert_int_equal(f.n, 3);
	assert_int_equal(f.chord, -1);
}

static void test_limits(void **state) {
	struct hotkey h;

	(void)state;
	hotkey_init(&h);
	assert_int_equal(hotkey_add(&h, (uint16_t[]){ KEY_A }, 0), -EINVAL);
	assert_int_equal(hotkey_add(&h, (uint16_t[]){ KEY_A, KEY_B, KEY_C, KEY_D, KEY_E }, 5), -EINVAL);
	assert_int_equal(hotkey_add(&h, (uint16_t[]){ KEY_MAX + 1 }, 1), -EINVAL);
	for (int i = 0; i < HOTKEY_MAX_CHORDS; i++)
		assert_int_equal(hotkey_add(&h, (uint16_t[]){ KEY_F1 + i }, 1), i);
	assert_int_equal(hotkey_add(&h, (uint16_t[]){ KEY_A }, 1), -E2BIG);
}

static void test_long_hold_does_not_overflow(void **state) {
	struct hotkey h;
	struct feed f = { .chord = -1 };

	(void)state;
	setup_chords(&h);
	FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV);
	for (int i = 0; i < 1000; i++)
		FEED(&h, &f, EV(EV_KEY, KEY_LEFTMETA, 2), SYN_EV);
	FEED(&h, &f, EV(EV_KEY, KEY_F1, 1), SYN_EV);
	assert_int_equal(f.chord, 0);
	assert_int_equal(f.n, 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chord_is_consumed),
		cmocka_unit_test(test_modifier_alone_passes_in_order),
		cmocka_unit_test(test_tap_of_modifier),
		cmocka_unit_test(test_last_key_alone_is_not_held),
		cmocka_unit_test(test_other_devices_pass_untouched),
		cmocka_unit_test(test_no_chords_is_a_pass_through),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_long_hold_does_not_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
