/* SPDX-License-Identifier: MIT */
/*
 * Switching an input device between personas, as devnsd does it: the real
 * manager and the input class's core (input/class.c) over the fake
 * backend, on their own event loop. Every switch goes through
 * manager_switch(); events reach the class through the device's fd.
 */
#include <libevdev/libevdev.h>
#include <stdlib.h>

#include "core-rig.h"
#include "input/input.h"
#include "leds/leds.h"
#include "input-backend.h"
#include "led-backend.h"
#include "light.h"
#include "test-util.h"

#define N_PERSONAS 3

static const char conf_text[] = "[Daemon]\n"
				"SwitchKeys=KEY_LEFTMETA+KEY_F1:p0 KEY_LEFTMETA+KEY_F2:p1 KEY_LEFTMETA+KEY_F3:p2\n"
				"[Persona p0]\nActive=yes\n"
				"[Persona p1]\n"
				"[Persona p2]\n";

struct rig;

/* One persona's node for the device, and one reader of it. */
struct reader {
	struct rig *rig;
	struct persona *persona;
	struct evdev_node *node;
	struct evdev_client *client;
	/* Wakeups the transport got for the reader since clear_records(). */
	unsigned int wakeups;
	/* What the reader was told, replayed from everything it read. */
	struct evdev_state seen;
};

/* One device shared by the personas. */
struct rig {
	struct core_rig *core;
	struct input_class *ic;
	struct input_device *dev;
	struct input_backend *hw;
	struct reader personas[N_PERSONAS];
};

static struct rig *current;

/* The transport's wakeup: where CUSE would answer blocked reads. */
static void count_wakeup(struct input_node *in, struct evdev_client *c) {
	for (unsigned int i = 0; current && i < N_PERSONAS; i++)
		if (current->personas[i].node == in->evdev && current->personas[i].client == c)
			current->personas[i].wakeups++;
}

static const struct input_transport_ops counting_transport = {
	.wakeup = count_wakeup,
};

static struct manager *manager_of(struct rig *r) {
	return r->core->manager;
}

static bool is_active(struct rig *r, unsigned int i) {
	return manager_of(r)->active == r->personas[i].persona;
}

/* A touchscreen with keys, the switch keys and keyboard LEDs. */
static struct libevdev *device_new(void) {
	struct libevdev *d = test_touchscreen_new();
	int delay = KBD_REP_DELAY, period = KBD_REP_PERIOD;

	for (unsigned int code = KEY_ESC; code <= KEY_Z; code++)
		assert_int_equal(libevdev_enable_event_code(d, EV_KEY, code, NULL), 0);
	for (unsigned int code = KEY_F1; code <= KEY_F3; code++)
		assert_int_equal(libevdev_enable_event_code(d, EV_KEY, code, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_KEY, KEY_LEFTMETA, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_LED, LED_NUML, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_LED, LED_CAPSL, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_REP, REP_DELAY, &delay), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_REP, REP_PERIOD, &period), 0);
	return d;
}

static void clear_records(struct rig *r) {
	for (unsigned int i = 0; i < N_PERSONAS; i++)
		r->personas[i].wakeups = 0;
	input_fake_clear_written(r->hw);
}

/* What the hardware reported reaches the class through its fd, as in devnsd. */
static void pump(struct rig *r) {
	core_rig_run(r->core);
}

static void push(struct rig *r, const struct input_event *evs, size_t count) {
	for (size_t i = 0; i < count; i++)
		assert_int_equal(input_fake_push(r->hw, evs[i].type, evs[i].code, evs[i].value), 0);
}
#define PUSH(r, ...) push((r), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

static void hw_events(struct rig *r, const struct input_event *evs, size_t count) {
	push(r, evs, count);
	pump(r);
}
#define HW(r, ...) hw_events((r), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

/* A switch as the bus or a chord asks for it. */
static void switch_to(struct rig *r, unsigned int to) {
	assert_true(manager_switch(manager_of(r), r->personas[to].persona, NULL, NULL) >= 0);
	assert_true(is_active(r, to));
	pump(r);
}

/* Reads what a persona's reader has, folding it into what that reader was told. */
static size_t take(struct reader *p, struct input_event *out, size_t max) {
	size_t n = read_events(p->client, out, max);

	for (size_t i = 0; i < n; i++)
		evdev_state_apply(&p->seen, &out[i]);
	return n;
}

static void check_take(struct reader *p, const struct input_event *want, size_t n_want, const char *file, int line) {
	struct input_event got[256];
	size_t n = take(p, got, ELEMENTSOF(got));

	check_events(got, n, want, n_want, file, line);
}
#define EXPECT_TAKE(p, ...) check_take((p), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__), __FILE__, __LINE__)
#define EXPECT_TAKE_NOTHING(p) check_take((p), NULL, 0, __FILE__, __LINE__)

static void drain(struct reader *p) {
	struct input_event got[256];

	take(p, got, ELEMENTSOF(got));
}

static bool holds_nothing(const struct evdev_state *s) {
	for (unsigned int code = 0; code <= KEY_MAX; code++)
		if (bit_test(s->key, code))
			return false;
	for (unsigned int i = 0; i < s->n_slots; i++)
		if (s->mt[i][ABS_MT_TRACKING_ID - EVDEV_MT_FIRST] >= 0)
			return false;
	return true;
}

static bool key_down(struct reader *p, unsigned int code) {
	unsigned long keys[BITS_TO_LONGS(KEY_CNT)];

	assert_int_equal(do_ioctl(p->node, p->client, EVIOCGKEY(sizeof(keys)), keys), EVDEV_BITS_LEN(KEY_MAX));
	return bit_test(keys, code);
}

static bool led_on(struct reader *p, unsigned int led) {
	unsigned long leds[BITS_TO_LONGS(LED_CNT)];

	assert_int_equal(do_ioctl(p->node, p->client, EVIOCGLED(sizeof(leds)), leds), EVDEV_BITS_LEN(LED_MAX));
	return bit_test(leds, led);
}

static int rig_setup(void **state) {
	static const char *const names[N_PERSONAS] = { "p0", "p1", "p2" };
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	current = r;
	r->core = core_rig_new(conf_text);
	assert_int_equal(input_class_new_core(manager_of(r), &counting_transport, &r->ic), 0);
	assert_int_equal(input_fake_new("event5", device_new(), &r->hw), 0);
	assert_int_equal(input_class_add_device(r->ic, r->hw, &r->dev), 0);
	assert_int_equal(manager_add_class(manager_of(r), &r->ic->base), 0);
	for (unsigned int i = 0; i < N_PERSONAS; i++) {
		struct reader *p = &r->personas[i];
		struct input_node *in;

		p->rig = r;
		p->persona = core_rig_persona(r->core, names[i]);
		in = input_node_of(r->dev, p->persona);
		assert_non_null(in);
		p->node = in->evdev;
		assert_int_equal(evdev_node_open(p->node, &p->client), 0);
		p->seen = r->dev->hw;
	}
	assert_true(is_active(r, 0));
	assert_true(r->personas[0].node->active);
	EXPECT_NOTHING(r->personas[0].client);
	clear_records(r);
	*state = r;
	return 0;
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	for (unsigned int i = 0; i < N_PERSONAS; i++)
		evdev_node_close(r->personas[i].node, r->personas[i].client);
	core_rig_free(r->core);
	current = NULL;
	free(r);
	return 0;
}

static void test_deactivate_releases(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];
	struct {
		uint32_t code;
		int32_t values[TS_SLOTS];
	} slots = { .code = ABS_MT_TRACKING_ID };

	HW(r, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 7), EV(EV_ABS, ABS_MT_POSITION_X, 100),
	   EV(EV_ABS, ABS_MT_POSITION_Y, 200), EV(EV_KEY, BTN_TOUCH, 1), EV(EV_ABS, ABS_X, 100), EV(EV_ABS, ABS_Y, 200),
	   SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_SLOT, 0), EV(EV_ABS, ABS_MT_TRACKING_ID, 8), EV(EV_ABS, ABS_MT_POSITION_X, 50),
	   SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_TRACKING_ID, -1), SYN_EV);
	HW(r, EV(EV_KEY, KEY_A, 1), SYN_EV);
	drain(p0);
	clear_records(r);

	switch_to(r, 1);
	assert_int_equal(p0->wakeups, 1);
	EXPECT_TAKE(p0, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_KEY, KEY_A, 0),
		    EV(EV_KEY, BTN_TOUCH, 0), SYN_EV);
	assert_true(holds_nothing(&p0->seen));

	/* Its state says the same. */
	assert_false(key_down(p0, KEY_A));
	assert_false(key_down(p0, BTN_TOUCH));
	assert_int_equal(do_ioctl(p0->node, p0->client, EVIOCGMTSLOTS(sizeof(slots)), &slots), 0);
	for (unsigned int i = 0; i < TS_SLOTS; i++)
		assert_int_equal(slots.values[i], -1);
	/* Nothing reached the hardware. */
	assert_int_equal(input_fake_written(r->hw, &(const struct input_event *){ NULL }), 0);
}

static void test_deactivate_release_in_current_slot(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 7), EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	drain(p0);
	switch_to(r, 1);
	/* The reader is on slot 2 already: no slot change is needed for it. */
	EXPECT_TAKE(p0, EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_KEY, BTN_TOUCH, 0), SYN_EV);
	assert_true(holds_nothing(&p0->seen));
}

static void test_deactivate_releases_every_touch(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 7), EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_SLOT, 9), EV(EV_ABS, ABS_MT_TRACKING_ID, 8), SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_SLOT, 5), EV(EV_ABS, ABS_MT_TRACKING_ID, 9), SYN_EV);
	drain(p0);
	switch_to(r, 1);
	EXPECT_TAKE(p0, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_ABS, ABS_MT_SLOT, 5),
		    EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_ABS, ABS_MT_SLOT, 9), EV(EV_ABS, ABS_MT_TRACKING_ID, -1),
		    EV(EV_KEY, BTN_TOUCH, 0), SYN_EV);
	assert_true(holds_nothing(&p0->seen));
}

static void test_deactivate_nothing_held(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV);
	drain(p0);
	clear_records(r);
	switch_to(r, 1);
	EXPECT_TAKE_NOTHING(p0);
	assert_int_equal(p0->wakeups, 0);
}

static void test_background_gets_nothing(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];

	switch_to(r, 1);
	drain(p1);
	clear_records(r);
	HW(r, EV(EV_KEY, KEY_B, 1), SYN_EV, EV(EV_KEY, KEY_B, 0), SYN_EV);
	EXPECT_TAKE(p1, EV(EV_KEY, KEY_B, 1), SYN_EV, EV(EV_KEY, KEY_B, 0), SYN_EV);
	EXPECT_TAKE_NOTHING(p0);
	assert_int_equal(p0->wakeups, 0);
}

static void test_activation_resyncs(void **state) {
	struct rig *r = *state;
	struct reader *p1 = &r->personas[1];
	struct input_absinfo ai;

	HW(r, EV(EV_KEY, KEY_A, 1), SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_SLOT, 3), EV(EV_ABS, ABS_MT_TRACKING_ID, 11), EV(EV_ABS, ABS_MT_POSITION_X, 640),
	   EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	switch_to(r, 1);

	/* The new persona is told it missed something, and its state is the hardware's. */
	assert_int_equal(p1->wakeups, 1);
	EXPECT_TAKE(p1, EV(EV_SYN, SYN_DROPPED, 0), SYN_EV);
	assert_true(key_down(p1, KEY_A));
	assert_true(key_down(p1, BTN_TOUCH));
	assert_false(key_down(p1, KEY_B));
	assert_int_equal(do_ioctl(p1->node, p1->client, EVIOCGABS(ABS_MT_SLOT), &ai), 0);
	assert_int_equal(ai.value, 3);
	{
		struct {
			uint32_t code;
			int32_t values[TS_SLOTS];
		} slots = { .code = ABS_MT_POSITION_X };

		assert_int_equal(do_ioctl(p1->node, p1->client, EVIOCGMTSLOTS(sizeof(slots)), &slots), 0);
		assert_int_equal(slots.values[3], 640);
	}

	/* Later changes come as events. */
	HW(r, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_TAKE(p1, EV(EV_KEY, KEY_A, 0), SYN_EV);
}

static void test_activation_equal_state_is_quiet(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_ABS, ABS_MT_SLOT, 1), EV(EV_ABS, ABS_MT_TRACKING_ID, 3), EV(EV_ABS, ABS_MT_POSITION_X, 10),
	   EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	HW(r, EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_KEY, BTN_TOUCH, 0), SYN_EV);
	HW(r, EV(EV_KEY, KEY_Q, 1), SYN_EV, EV(EV_KEY, KEY_Q, 0), SYN_EV);
	drain(p0);
	switch_to(r, 1);
	clear_records(r);

	/* Nothing happened while p0 was in the background: coming back tells it nothing. */
	switch_to(r, 0);
	assert_false(evdev_client_ready(p0->client));
	EXPECT_TAKE_NOTHING(p0);
	assert_int_equal(p0->wakeups, 0);
}

static void test_key_released_in_background(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_KEY, KEY_LEFTSHIFT, 1), SYN_EV);
	drain(p0);
	switch_to(r, 1);
	EXPECT_TAKE(p0, EV(EV_KEY, KEY_LEFTSHIFT, 0), SYN_EV);

	/* The key comes up while p1 is in front: p0 already saw it released, so no resync. */
	HW(r, EV(EV_KEY, KEY_LEFTSHIFT, 0), SYN_EV);
	switch_to(r, 0);
	EXPECT_TAKE_NOTHING(p0);
}

static void test_key_still_held_on_return(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	HW(r, EV(EV_KEY, KEY_LEFTSHIFT, 1), SYN_EV);
	drain(p0);
	switch_to(r, 1);
	drain(p0);
	switch_to(r, 0);
	EXPECT_TAKE(p0, EV(EV_SYN, SYN_DROPPED, 0), SYN_EV);
	assert_true(key_down(p0, KEY_LEFTSHIFT));
}

static void test_led_write_in_background(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];
	const struct input_event *written;

	WRITE(p1->node, p1->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	pump(r);
	/* Never to the hardware... */
	assert_int_equal(input_fake_written(r->hw, &written), 0);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_CAPSL), 0);
	/* ...but the persona's own readers see it. */
	EXPECT_TAKE(p1, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_true(led_on(p1, LED_CAPSL));
	EXPECT_TAKE_NOTHING(p0);
	assert_false(led_on(p0, LED_CAPSL));
}

static void test_led_write_when_active(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];
	const struct input_event *written;
	size_t n;

	WRITE(p0->node, p0->client, EV(EV_LED, LED_NUML, 1), SYN_EV);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_NUML, 1), SYN_EV);
	pump(r);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_NUML), 1);
	EXPECT_TAKE(p0, EV(EV_LED, LED_NUML, 1), SYN_EV);
	assert_true(led_on(p0, LED_NUML));
}

static void test_leds_per_persona(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];
	const struct input_event *written;
	size_t n;

	/* p0 turns caps lock on; p1, in the background, turns num lock on. */
	WRITE(p0->node, p0->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	WRITE(p1->node, p1->client, EV(EV_LED, LED_NUML, 1), SYN_EV);
	pump(r);
	drain(p0);
	drain(p1);
	clear_records(r);

	switch_to(r, 1);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_NUML, 1), EV(EV_LED, LED_CAPSL, 0), SYN_EV);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_NUML), 1);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_CAPSL), 0);
	assert_true(led_on(p1, LED_NUML));
	assert_false(led_on(p1, LED_CAPSL));
	assert_true(led_on(p0, LED_CAPSL));
	assert_false(led_on(p0, LED_NUML));

	clear_records(r);
	switch_to(r, 0);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_NUML, 0), EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_NUML), 0);
	assert_int_equal(evdev_state_value(&r->dev->hw, EV_LED, LED_CAPSL), 1);
}

static void test_same_leds_nothing_written(void **state) {
	struct rig *r = *state;
	const struct input_event *written;

	switch_to(r, 1);
	assert_int_equal(input_fake_written(r->hw, &written), 0);
	switch_to(r, 0);
	assert_int_equal(input_fake_written(r->hw, &written), 0);
}

static void test_repeat_per_persona(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];
	unsigned int rep[2] = { 500, 50 };
	int delay, period;

	(void)p0;
	/* Set in the background: nothing reaches the hardware. */
	assert_int_equal(do_ioctl(p1->node, p1->client, EVIOCSREP, rep), 0);
	assert_int_equal(input_fake_repeat(r->hw, &delay, &period), 0);

	switch_to(r, 1);
	assert_in_range(input_fake_repeat(r->hw, &delay, &period), 1, 2);
	assert_int_equal(delay, 500);
	assert_int_equal(period, 50);

	switch_to(r, 0);
	input_fake_repeat(r->hw, &delay, &period);
	assert_int_equal(delay, KBD_REP_DELAY);
	assert_int_equal(period, KBD_REP_PERIOD);
}

/* Meta+Fn, pressed and released. */
#define CHORD(fn)                                                                                      \
	EV(EV_KEY, KEY_LEFTMETA, 1), SYN_EV, EV(EV_KEY, (fn), 1), SYN_EV, EV(EV_KEY, (fn), 0), SYN_EV, \
		EV(EV_KEY, KEY_LEFTMETA, 0), SYN_EV

static void test_chord_switches_after_the_handler(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];

	PUSH(r, CHORD(KEY_F2));
	/* The fd handler reads the chord but does not switch from inside. */
	input_device_dispatch(r->dev);
	assert_true(is_active(r, 0));
	pump(r);
	assert_true(is_active(r, 1));
	/* Nobody saw the chord. */
	EXPECT_TAKE_NOTHING(p0);
	EXPECT_TAKE_NOTHING(p1);
	HW(r, EV(EV_KEY, KEY_B, 1), SYN_EV, EV(EV_KEY, KEY_B, 0), SYN_EV);
	EXPECT_TAKE(p1, EV(EV_KEY, KEY_B, 1), SYN_EV, EV(EV_KEY, KEY_B, 0), SYN_EV);
}

static void test_two_chords_in_one_drain(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0];

	/* Read in one go: the last chord wins. */
	PUSH(r, CHORD(KEY_F2), CHORD(KEY_F3));
	pump(r);
	assert_true(is_active(r, 2));
	EXPECT_TAKE_NOTHING(p0);
	/* And back, by chord. */
	HW(r, CHORD(KEY_F1));
	assert_true(is_active(r, 0));
}

static void test_chord_read_by_a_switch(void **state) {
	struct rig *r = *state;

	/* A chord not read yet when a switch comes from elsewhere (the bus): the switch's drain reads it. */
	PUSH(r, CHORD(KEY_F3));
	assert_int_equal(manager_switch(manager_of(r), r->personas[1].persona, NULL, NULL), 1);
	assert_true(is_active(r, 1));
	pump(r);
	assert_true(is_active(r, 2));
}

static void test_led_view_applied_and_restored(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];
	const struct input_event *written;
	size_t n;

	/* As the LED class sets caps lock in p0's sysfs view. */
	assert_int_equal(input_led_set(r->dev, p0->persona, LED_CAPSL, true), 0);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	pump(r);
	clear_records(r);

	switch_to(r, 1);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_CAPSL, 0), SYN_EV);
	assert_int_equal(input_led_get(r->dev, p0->persona, LED_CAPSL), 1);
	assert_int_equal(input_led_get(r->dev, p1->persona, LED_CAPSL), 0);
	assert_false(led_on(p1, LED_CAPSL));

	clear_records(r);
	switch_to(r, 0);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_true(led_on(p0, LED_CAPSL));
	assert_int_equal(input_led_get(r->dev, p0->persona, LED_SCROLLL), -EINVAL);
}

/* The LED class's view of the device's caps lock: a light source like a sysfs LED. */
static void test_evdev_light_source(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];
	const struct input_event *written;
	struct light_source *src;
	struct led_backend *b;
	struct light *l;
	size_t n;

	assert_int_equal(led_fake_new(LED_KIND_LED, "input5::capslock", 1, &b), 0);
	assert_int_equal(light_new(&l, b, LIGHT_SHARED), 0);
	assert_int_equal(light_add_owner(l, p0->persona), 0);
	assert_int_equal(light_add_owner(l, p1->persona), 0);
	strcpy(r->dev->kdev, "/sys/devices/virtual/input/input5");
	assert_int_equal(leds_evdev_source_new(l, r->ic, r->dev->kdev, LED_CAPSL, &src), 0);
	assert_int_equal(l->policy, LIGHT_EXCLUSIVE);

	/* p1 writes in the background: its node has it, the hardware does not. */
	assert_int_equal(src->ops->set_brightness(src, p1->persona, 1), 0);
	assert_int_equal(src->ops->brightness(src, p1->persona), 1);
	assert_int_equal(src->ops->brightness(src, p0->persona), 0);
	assert_int_equal(input_fake_written(r->hw, &written), 0);
	assert_true(src->ops->shows(src, p0->persona));
	assert_false(src->ops->shows(src, p1->persona));
	pump(r);
	switch_to(r, 1);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_true(src->ops->shows(src, p1->persona));
	/* Leaving a trigger turns it off, in p1's node and so on the hardware. */
	clear_records(r);
	assert_int_equal(src->ops->set_trigger(src, p1->persona, 1), 0);
	assert_int_equal(src->ops->set_trigger(src, p1->persona, 2), 0);
	assert_int_equal(src->ops->brightness(src, p1->persona), 0);
	n = input_fake_written(r->hw, &written);
	EXPECT_EVENTS(written, n, EV(EV_LED, LED_CAPSL, 0), SYN_EV);
	/* Nothing went to the sysfs LED itself. */
	assert_int_equal(led_fake_brightness(b), 0);
	/* The device goes: the LED reads 0 and refuses writes. */
	assert_int_equal(src->ops->set_brightness(src, p0->persona, 1), 0);
	assert_int_equal(src->ops->brightness(src, p0->persona), 1);
	input_device_set_gone(r->dev);
	assert_int_equal(src->ops->brightness(src, p0->persona), 0);
	assert_int_equal(src->ops->set_brightness(src, p0->persona, 1), -ENODEV);
	assert_int_equal(src->ops->set_trigger(src, p0->persona, 1), -ENODEV);
	leds_evdev_source_free(src);
	light_free(l);
}

static void test_held_key_released_nothing_stuck(void **state) {
	struct rig *r = *state;
	struct reader *p0 = &r->personas[0], *p1 = &r->personas[1];

	/* Pressed, not read by the class yet when the switch comes: it belongs to p0, which gets its release. */
	PUSH(r, EV(EV_KEY, KEY_A, 1), SYN_EV);
	switch_to(r, 1);
	EXPECT_TAKE(p0, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_true(holds_nothing(&p0->seen));
	/* p1 comes in with the key down, as the hardware has it, and sees it go up. */
	drain(p1);
	assert_true(key_down(p1, KEY_A));
	HW(r, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_TAKE(p1, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_false(key_down(p1, KEY_A));
	switch_to(r, 0);
	assert_false(key_down(p0, KEY_A));
}

#define T(name) cmocka_unit_test_setup_teardown(name, rig_setup, rig_teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_deactivate_releases),
		T(test_deactivate_release_in_current_slot),
		T(test_deactivate_releases_every_touch),
		T(test_deactivate_nothing_held),
		T(test_background_gets_nothing),
		T(test_activation_resyncs),
		T(test_activation_equal_state_is_quiet),
		T(test_key_released_in_background),
		T(test_key_still_held_on_return),
		T(test_led_write_in_background),
		T(test_led_write_when_active),
		T(test_leds_per_persona),
		T(test_same_leds_nothing_written),
		T(test_repeat_per_persona),
		T(test_chord_switches_after_the_handler),
		T(test_two_chords_in_one_drain),
		T(test_chord_read_by_a_switch),
		T(test_led_view_applied_and_restored),
		T(test_held_key_released_nothing_stuck),
		T(test_evdev_light_source),
	};

	return cmocka_run_group_tests_name("evdev switch", tests, NULL, NULL);
}
