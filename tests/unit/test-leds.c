/* SPDX-License-Identifier: MIT */
/* cmocka needs these before its own header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "led-backend.h"
#include "led-text.h"
#include "light.h"

#define STR(s) (s), strlen(s)

static int parse(const char *text, unsigned int base, uint32_t max, uint32_t *ret) {
	return led_parse_value(text, strlen(text), base, max, ret);
}

static void test_parse_value(void **state) {
	static const char *const refused[] = { "", "\n", "-1", " 1", "1 ", "1\n\n", "++1", "1.5", "abc", "0x",
					       "256", "99999999999999999999", "+", "\t7" };
	uint32_t v = 77;

	(void)state;
	assert_int_equal(parse("0", 10, 255, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse("255\n", 10, 255, &v), 0);
	assert_int_equal(v, 255);
	assert_int_equal(parse("+12", 10, 255, &v), 0);
	assert_int_equal(v, 12);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		v = 77;
		assert_int_equal(parse(refused[i], 10, 255, &v), -EINVAL);
		assert_int_equal(v, 77);
	}
	/* Base 10 takes no prefixes; base 0 takes C's. */
	assert_int_equal(parse("0x10", 10, 255, &v), -EINVAL);
	assert_int_equal(parse("0x10", 0, 255, &v), 0);
	assert_int_equal(v, 16);
	assert_int_equal(parse("010", 0, 255, &v), 0);
	assert_int_equal(v, 8);
	assert_int_equal(parse("010", 10, 255, &v), 0);
	assert_int_equal(v, 10);
	assert_int_equal(parse("4294967295", 10, UINT32_MAX, &v), 0);
	assert_int_equal(v, UINT32_MAX);
	assert_int_equal(parse("4294967296", 10, UINT32_MAX, &v), -EINVAL);
	/* A value longer than any number is refused before it is copied. */
	char big[LED_TEXT_MAX];
	memset(big, '1', sizeof(big));
	assert_int_equal(led_parse_value(big, sizeof(big), 10, UINT32_MAX, &v), -EINVAL);
}

static void test_triggers_parse_and_format(void **state) {
	struct led_triggers t;
	size_t current = 99;
	char buf[256];

	(void)state;
	led_triggers_parse("none kbd-scrolllock [kbd-capslock] timer\n", &t, &current);
	assert_int_equal(t.n, 4);
	assert_string_equal(t.names[0], "none");
	assert_string_equal(t.names[2], "kbd-capslock");
	assert_int_equal(current, 2);
	assert_int_equal(led_triggers_format(&t, current, buf, sizeof(buf)), 41);
	assert_string_equal(buf, "none kbd-scrolllock [kbd-capslock] timer\n");
	assert_int_equal(led_triggers_format(&t, 0, buf, sizeof(buf)), 41);
	assert_string_equal(buf, "[none] kbd-scrolllock kbd-capslock timer\n");
	assert_int_equal(led_triggers_format(&t, 0, buf, 20), -ENOBUFS);
	assert_int_equal(led_triggers_format(&t, 0, buf, 41), -ENOBUFS);

	/* "none" always comes first, even when the list lacks it. */
	led_triggers_parse("[timer] heartbeat", &t, &current);
	assert_int_equal(t.n, 3);
	assert_string_equal(t.names[0], "none");
	assert_int_equal(current, 1);
	led_triggers_parse("", &t, &current);
	assert_int_equal(t.n, 1);
	assert_int_equal(current, 0);
}

static void test_triggers_long_list(void **state) {
	char text[LED_TRIGGERS_MAX * 16 + 64] = "none";
	struct led_triggers t;
	size_t current, len = 4;

	(void)state;
	for (int i = 0; i < LED_TRIGGERS_MAX + 10; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, " t%d", i);
	snprintf(text + len, sizeof(text) - len, " [last]");
	led_triggers_parse(text, &t, &current);
	assert_int_equal(t.n, LED_TRIGGERS_MAX);
	assert_string_equal(t.names[current], "last");

	/* A current trigger too long to keep cuts nothing: the one before it stays current. */
	snprintf(text + len, sizeof(text) - len, " [last] [%0*d]", LED_TRIGGER_NAME_MAX + 1, 0);
	led_triggers_parse(text, &t, &current);
	assert_int_equal(t.n, LED_TRIGGERS_MAX);
	assert_string_equal(t.names[current], "last");
}

static void test_triggers_find(void **state) {
	struct led_triggers t;
	size_t current;

	(void)state;
	led_triggers_parse("[none] timer heartbeat", &t, &current);
	assert_int_equal(led_triggers_find(&t, STR("timer")), 1);
	assert_int_equal(led_triggers_find(&t, STR("timer\n")), 1);
	assert_int_equal(led_triggers_find(&t, STR("none\n")), 0);
	assert_int_equal(led_triggers_find(&t, STR("time")), -EINVAL);
	assert_int_equal(led_triggers_find(&t, STR("timer\n\n")), -EINVAL);
	assert_int_equal(led_triggers_find(&t, STR(" timer")), -EINVAL);
	assert_int_equal(led_triggers_find(&t, STR("")), -EINVAL);
}

/* Personas, as the light sees them: any distinct pointers. */
static const char A[] = "a", B[] = "b", C[] = "c";

static struct light *make(enum led_kind kind, enum light_policy policy, uint32_t max) {
	struct led_backend *b;
	struct light *l;

	assert_int_equal(led_fake_new(kind, "fake", max, &b), 0);
	assert_int_equal(light_new(&l, b, policy), 0);
	assert_int_equal(light_set_active(l, A), 0);
	assert_int_equal(light_add_owner(l, A), 0);
	assert_int_equal(light_add_owner(l, B), 0);
	assert_int_equal(light_add_owner(l, C), 0);
	assert_int_equal(light_add_owner(l, A), -EEXIST);
	return l;
}

static uint32_t shown(struct light *l) {
	return led_fake_brightness(l->backend);
}

static uint32_t brightness(struct light *l, const void *owner) {
	return light_state_of(l, owner)->brightness;
}

static void test_exclusive(void **state) {
	struct light *l = make(LED_KIND_BACKLIGHT, LIGHT_EXCLUSIVE, 100);
	const struct led_fake_write *w;

	(void)state;
	assert_int_equal(light_set_brightness(l, A, 40), 0);
	assert_int_equal(shown(l), 40);
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_brightness(l, B, 90), 0);
	assert_int_equal(light_set_power(l, B, 4), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 0);
	assert_int_equal(brightness(l, B), 90);
	assert_ptr_equal(l->shown, A);

	assert_int_equal(light_set_active(l, B), 0);
	assert_int_equal(shown(l), 90);
	assert_int_equal(led_fake_written(l->backend, &w), 2);
	assert_int_equal(w[0].attr, LED_FAKE_POWER);
	assert_int_equal(w[0].value, 4);
	assert_ptr_equal(l->shown, B);

	/* Back again: A's state was kept. */
	assert_int_equal(light_set_active(l, A), 0);
	assert_int_equal(shown(l), 40);
	assert_int_equal(light_state_of(l, B)->bl_power, 4);

	/* Refused values change nothing. */
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_brightness(l, A, 101), -EINVAL);
	assert_int_equal(light_set_power(l, A, 5), -EINVAL);
	assert_int_equal(brightness(l, A), 40);
	assert_int_equal(led_fake_written(l->backend, &w), 0);
	light_free(l);
}

/* The display powers down: the backlight too, with every persona's state kept, and back when it comes up. */
static void test_blanked_with_the_display(void **state) {
	struct light *l = make(LED_KIND_BACKLIGHT, LIGHT_EXCLUSIVE, 100);
	const struct led_fake_write *w;

	(void)state;
	assert_int_equal(light_set_brightness(l, A, 40), 0);
	assert_int_equal(light_set_power(l, B, 1), 0);
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_blanked(l, true), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 1);
	assert_int_equal(w[0].attr, LED_FAKE_POWER);
	assert_int_equal(w[0].value, LED_BL_POWER_MAX);
	assert_int_equal(light_state_of(l, A)->bl_power, 0);
	assert_int_equal(shown(l), 40);
	/* Writes and switches while down change states and the level, never the power. */
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_power(l, A, 2), 0);
	assert_int_equal(light_set_active(l, B), 0);
	assert_int_equal(light_set_brightness(l, B, 70), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 2);
	assert_int_equal(w[0].attr, LED_FAKE_BRIGHTNESS);
	assert_int_equal(w[1].attr, LED_FAKE_BRIGHTNESS);
	assert_int_equal(light_state_of(l, A)->bl_power, 2);
	/* Up again: the active persona's power. */
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_blanked(l, false), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 1);
	assert_int_equal(w[0].attr, LED_FAKE_POWER);
	assert_int_equal(w[0].value, 1);
	assert_int_equal(shown(l), 70);
	light_free(l);
}

/*
 * A backlight found powered down (by a killed daemon's blanking) is not
 * what personas start with: they start powered up, with the level found,
 * and the hardware follows once the display is up.
 */
static void test_found_powered_down(void **state) {
	struct led_backend *b;
	struct light *l;
	const struct led_fake_write *w;

	(void)state;
	assert_int_equal(led_fake_new(LED_KIND_BACKLIGHT, "fake", 100, &b), 0);
	b->brightness = 30;
	b->bl_power = LED_BL_POWER_MAX;
	assert_int_equal(light_new(&l, b, LIGHT_EXCLUSIVE), 0);
	assert_int_equal(light_set_blanked(l, true), 0);
	assert_int_equal(light_set_active(l, A), 0);
	assert_int_equal(light_add_owner(l, A), 0);
	assert_int_equal(light_add_owner(l, B), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 0);
	assert_int_equal(light_state_of(l, A)->bl_power, 0);
	assert_int_equal(light_state_of(l, B)->bl_power, 0);
	assert_int_equal(brightness(l, B), 30);
	assert_int_equal(light_set_blanked(l, false), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 1);
	assert_int_equal(w[0].attr, LED_FAKE_POWER);
	assert_int_equal(w[0].value, 0);
	light_free(l);

	/* Any other power is the personas' to start with. */
	assert_int_equal(led_fake_new(LED_KIND_BACKLIGHT, "fake", 100, &b), 0);
	b->bl_power = 1;
	assert_int_equal(light_new(&l, b, LIGHT_EXCLUSIVE), 0);
	assert_int_equal(light_add_owner(l, A), 0);
	assert_int_equal(light_state_of(l, A)->bl_power, 1);
	light_free(l);
}

static void test_shared_max(void **state) {
	struct light *l = make(LED_KIND_LED, LIGHT_SHARED, 255);

	(void)state;
	assert_int_equal(light_set_brightness(l, B, 200), 0);
	assert_int_equal(shown(l), 200);
	assert_ptr_equal(l->shown, B);
	assert_int_equal(light_set_brightness(l, C, 50), 0);
	assert_int_equal(light_set_brightness(l, A, 10), 0);
	assert_int_equal(shown(l), 200);
	assert_int_equal(light_set_brightness(l, B, 0), 0);
	assert_int_equal(shown(l), 50);
	/* A tie goes to the active persona. */
	assert_int_equal(light_set_brightness(l, A, 50), 0);
	assert_ptr_equal(l->shown, A);
	assert_int_equal(light_set_active(l, C), 0);
	assert_ptr_equal(l->shown, C);
	/* A persona going away takes its light with it. */
	assert_int_equal(light_set_brightness(l, B, 255), 0);
	assert_int_equal(shown(l), 255);
	assert_int_equal(light_remove_owner(l, B), 0);
	assert_int_equal(shown(l), 50);
	assert_null(light_state_of(l, B));
	light_free(l);
}

static void test_trigger_rules(void **state) {
	struct light *l = make(LED_KIND_LED, LIGHT_EXCLUSIVE, 255);
	const struct led_fake_write *w;

	(void)state;
	assert_int_equal(light_set_brightness(l, A, 100), 0);
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_trigger(l, A, 1), 0);
	/* Leaving "none" keeps the brightness. */
	assert_int_equal(brightness(l, A), 100);
	assert_int_equal(led_fake_written(l->backend, &w), 2);
	assert_int_equal(w[0].attr, LED_FAKE_TRIGGER);
	assert_int_equal(w[0].value, 1);
	assert_int_equal(w[1].attr, LED_FAKE_BRIGHTNESS);
	/* Leaving a trigger for another turns the light off. */
	assert_int_equal(light_set_trigger(l, A, 2), 0);
	assert_int_equal(brightness(l, A), 0);
	/* Brightness 0 turns the trigger off. */
	assert_int_equal(light_set_brightness(l, A, 5), 0);
	assert_int_equal(light_state_of(l, A)->trigger, 2);
	assert_int_equal(light_set_brightness(l, A, 0), 0);
	assert_int_equal(light_state_of(l, A)->trigger, 0);
	assert_int_equal(light_set_trigger(l, A, 3), -EINVAL);
	light_free(l);
}

static void test_detached(void **state) {
	struct light *l = make(LED_KIND_LED, LIGHT_EXCLUSIVE, 1);
	const struct led_fake_write *w;

	(void)state;
	l->detached = true;
	led_fake_clear_written(l->backend);
	assert_int_equal(light_set_trigger(l, A, 1), 0);
	assert_int_equal(light_set_active(l, B), 0);
	assert_int_equal(led_fake_written(l->backend, &w), 0);
	light_free(l);
}

/* The light as a light source, the interface the LED class reads and writes through; apply and restore across switches. */
static void test_sysfs_source(void **state) {
	struct light *l = make(LED_KIND_LED, LIGHT_EXCLUSIVE, 1);
	struct light_source *src = &l->source;

	(void)state;
	assert_ptr_equal(src->light, l);
	assert_int_equal(src->ops->set_brightness(src, B, 1), 0);
	assert_int_equal(src->ops->brightness(src, B), 1);
	assert_int_equal(src->ops->brightness(src, A), 0);
	/* B is in the background: the hardware shows A. */
	assert_int_equal(shown(l), 0);
	assert_true(src->ops->shows(src, A));
	assert_false(src->ops->shows(src, B));
	/* Applied when B comes forward, restored when A does. */
	assert_int_equal(light_set_active(l, B), 0);
	assert_int_equal(shown(l), 1);
	assert_true(src->ops->shows(src, B));
	assert_int_equal(light_set_active(l, A), 0);
	assert_int_equal(shown(l), 0);
	/* A trigger picked and left turns the light off, as in the kernel. */
	assert_int_equal(src->ops->set_brightness(src, A, 1), 0);
	assert_int_equal(src->ops->set_trigger(src, A, 1), 0);
	assert_int_equal(src->ops->set_trigger(src, A, 0), 0);
	assert_int_equal(src->ops->brightness(src, A), 0);
	light_free(l);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_value),
		cmocka_unit_test(test_triggers_parse_and_format),
		cmocka_unit_test(test_triggers_long_list),
		cmocka_unit_test(test_triggers_find),
		cmocka_unit_test(test_exclusive),
		cmocka_unit_test(test_blanked_with_the_display),
		cmocka_unit_test(test_found_powered_down),
		cmocka_unit_test(test_shared_max),
		cmocka_unit_test(test_trigger_rules),
		cmocka_unit_test(test_detached),
		cmocka_unit_test(test_sysfs_source),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
