/* SPDX-License-Identifier: MIT */
/*
 * Force feedback through persona nodes: the real manager and input core
 * over the fake backend, which records what reaches the hardware. The
 * rules are the kernel's ff-core ones; the hardware holds the active
 * persona's effects only.
 */
#include <libevdev/libevdev.h>
#include <stdlib.h>

#include "core-rig.h"
#include "input/input.h"
#include "input-backend.h"
#include "test-util.h"

#define HW_EFFECTS 4

static const char conf_text[] = "[Persona p0]\nActive=yes\n"
				"[Persona p1]\n";

struct rig {
	struct core_rig *core;
	struct input_class *ic;
	struct input_device *dev;
	struct input_backend *hw;
	struct evdev_node *node[2];
	struct evdev_client *client[2];
};

/* A game pad: rumble, periodic sine, constant force, gain. */
static struct libevdev *device_new(void) {
	struct libevdev *d = test_keyboard_new();
	static const unsigned int ff[] = { FF_RUMBLE, FF_PERIODIC, FF_SINE, FF_CONSTANT, FF_GAIN };

	for (size_t i = 0; i < ELEMENTSOF(ff); i++)
		assert_int_equal(libevdev_enable_event_code(d, EV_FF, ff[i], NULL), 0);
	return d;
}

static int rig_setup(void **state) {
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->core = core_rig_new(conf_text);
	assert_int_equal(input_class_new_core(r->core->manager, NULL, &r->ic), 0);
	assert_int_equal(manager_add_class(r->core->manager, &r->ic->base), 0);
	assert_int_equal(input_fake_new("event3", device_new(), &r->hw), 0);
	input_fake_set_ff_max(r->hw, HW_EFFECTS);
	assert_int_equal(input_class_add_device(r->ic, r->hw, &r->dev), 0);
	for (unsigned int i = 0; i < 2; i++) {
		struct input_node *in = input_node_of(r->dev, core_rig_persona(r->core, i == 0 ? "p0" : "p1"));

		assert_non_null(in);
		r->node[i] = in->evdev;
		assert_int_equal(evdev_node_open(r->node[i], &r->client[i]), 0);
	}
	*state = r;
	return 0;
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	for (unsigned int i = 0; i < 2; i++)
		if (r->client[i])
			evdev_node_close(r->node[i], r->client[i]);
	core_rig_free(r->core);
	free(r);
	return 0;
}

static void switch_to(struct rig *r, unsigned int to) {
	assert_true(manager_switch(r->core->manager, core_rig_persona(r->core, to == 0 ? "p0" : "p1"), NULL, NULL) >=
		    0);
	core_rig_run(r->core);
	assert_true(r->node[to]->active);
}

static int upload(struct rig *r, unsigned int i, struct evdev_client *c, struct ff_effect *e) {
	return do_ioctl(r->node[i], c, EVIOCSFF, e);
}

static struct ff_effect rumble(int16_t id, uint16_t strong) {
	return (struct ff_effect){ .type = FF_RUMBLE, .id = id, .u.rumble.strong_magnitude = strong,
				   .replay.length = 500 };
}

/* The EV_FF events the hardware was sent since the last look. */
static size_t ff_written(struct rig *r, struct input_event *out, size_t max) {
	const struct input_event *w;
	size_t n = input_fake_written(r->hw, &w), k = 0;

	for (size_t i = 0; i < n; i++)
		if (w[i].type == EV_FF && k < max)
			out[k++] = w[i];
	input_fake_clear_written(r->hw);
	return k;
}

static unsigned int hw_loaded(struct rig *r) {
	unsigned int count = 0;

	for (int id = 0; id < HW_EFFECTS; id++)
		count += input_fake_ff_effect(r->hw, id) != NULL;
	return count;
}

static void play(struct rig *r, unsigned int i, uint16_t code, int32_t value) {
	assert_int_equal(evdev_node_write(r->node[i], r->client[i], EVENTS(EV(EV_FF, code, value)), 1), 1);
}

/* Every persona node reports the hardware's number of effects. */
static void test_effects_count(void **state) {
	struct rig *r = *state;
	int effects = -1;

	for (unsigned int i = 0; i < 2; i++) {
		assert_int_equal(do_ioctl(r->node[i], r->client[i], EVIOCGEFFECTS, &effects), 0);
		assert_int_equal(effects, HW_EFFECTS);
	}
}

/* The active persona's upload, play, stop and erase reach the hardware, under the hardware's id. */
static void test_active_upload_play_erase(void **state) {
	struct rig *r = *state;
	struct ff_effect e = rumble(-1, 0x4000);
	struct input_event out[8];
	const struct ff_effect *hw;

	ff_written(r, out, 0);
	assert_int_equal(upload(r, 0, r->client[0], &e), 0);
	assert_int_equal(e.id, 0);
	hw = input_fake_ff_effect(r->hw, 0);
	assert_non_null(hw);
	assert_int_equal(hw->u.rumble.strong_magnitude, 0x4000);

	/* An update goes to the same hardware effect. */
	e.u.rumble.strong_magnitude = 0x7000;
	assert_int_equal(upload(r, 0, r->client[0], &e), 0);
	assert_int_equal(e.id, 0);
	assert_int_equal(input_fake_ff_effect(r->hw, 0)->u.rumble.strong_magnitude, 0x7000);
	assert_int_equal(hw_loaded(r), 1);

	play(r, 0, 0, 3);
	play(r, 0, 0, 0);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, 0, 3), EV(EV_FF, 0, 0));

	assert_int_equal(do_ioctl(r->node[0], r->client[0], EVIOCRMFF, (void *)(uintptr_t)0), 0);
	assert_int_equal(hw_loaded(r), 0);
	/* The id is free again: a play of it goes nowhere, a second erase is EINVAL. */
	play(r, 0, 0, 1);
	assert_int_equal(ff_written(r, out, ELEMENTSOF(out)), 0);
	assert_int_equal(do_ioctl(r->node[0], r->client[0], EVIOCRMFF, (void *)(uintptr_t)0), -EINVAL);
}

/* ff-core's rules: types of the device only, ids of this file only, types kept on update. */
static void test_kernel_rules(void **state) {
	struct rig *r = *state;
	struct evdev_client *other;
	struct ff_effect e = rumble(-1, 0x1000), spring = { .type = FF_SPRING, .id = -1 };
	struct ff_effect square = { .type = FF_PERIODIC, .id = -1, .u.periodic.waveform = FF_SQUARE };
	struct ff_effect custom = { .type = FF_PERIODIC, .id = -1, .u.periodic.waveform = FF_CUSTOM };
	struct ff_effect wrong_id = rumble(HW_EFFECTS, 1), negative = rumble(-2, 1);
	struct ff_effect constant = { .type = FF_CONSTANT, .id = 0 };
	struct input_event out[8];

	assert_int_equal(upload(r, 0, r->client[0], &spring), -EINVAL);
	assert_int_equal(upload(r, 0, r->client[0], &square), -EINVAL);
	assert_int_equal(upload(r, 0, r->client[0], &custom), -EINVAL);
	assert_int_equal(upload(r, 0, r->client[0], &wrong_id), -EINVAL);
	assert_int_equal(upload(r, 0, r->client[0], &negative), -EINVAL);
	assert_int_equal(upload(r, 0, r->client[0], &e), 0);
	assert_int_equal(upload(r, 0, r->client[0], &constant), -EINVAL);

	assert_int_equal(evdev_node_open(r->node[0], &other), 0);
	e.u.rumble.strong_magnitude = 2;
	assert_int_equal(upload(r, 0, other, &e), -EACCES);
	assert_int_equal(do_ioctl(r->node[0], other, EVIOCRMFF, (void *)(uintptr_t)e.id), -EACCES);
	assert_int_equal(do_ioctl(r->node[0], other, EVIOCRMFF, (void *)(uintptr_t)1), -EINVAL);
	/* Plays are not checked for ownership, as in input_ff_event(). */
	ff_written(r, out, 0);
	assert_int_equal(evdev_node_write(r->node[0], other, EVENTS(EV(EV_FF, 0, 1)), 1), 1);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, 0, 1));
	evdev_node_close(r->node[0], other);
	assert_int_equal(hw_loaded(r), 1);
}

/* A background persona's effects stay off the hardware, and its plays are dropped. */
static void test_background_never_plays(void **state) {
	struct rig *r = *state;
	struct ff_effect e = rumble(-1, 0x2000);
	struct input_event out[8];
	unsigned int uploads, erases;

	ff_written(r, out, 0);
	assert_int_equal(upload(r, 1, r->client[1], &e), 0);
	assert_int_equal(e.id, 0);
	play(r, 1, 0, 1);
	input_fake_ff_counts(r->hw, &uploads, &erases);
	assert_int_equal(uploads, 0);
	assert_int_equal(hw_loaded(r), 0);
	assert_int_equal(ff_written(r, out, ELEMENTSOF(out)), 0);

	/* Coming forward uploads it, but the play made in the background does not resume. */
	switch_to(r, 1);
	assert_int_equal(hw_loaded(r), 1);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, FF_GAIN, 0xffff));
	play(r, 1, 0, 2);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, 0, 2));
}

/* A switch erases the previous persona's effects from the hardware, which stops them. */
static void test_switch_stops_previous(void **state) {
	struct rig *r = *state;
	struct ff_effect a = rumble(-1, 0x1111), b = rumble(-1, 0x2222);
	unsigned int uploads, erases;

	assert_int_equal(upload(r, 0, r->client[0], &a), 0);
	play(r, 0, a.id, 1);
	assert_int_equal(upload(r, 1, r->client[1], &b), 0);
	switch_to(r, 1);
	input_fake_ff_counts(r->hw, &uploads, &erases);
	assert_int_equal(uploads, 2);
	assert_int_equal(erases, 1);
	assert_int_equal(hw_loaded(r), 1);
	assert_int_equal(input_fake_ff_effect(r->hw, 0)->u.rumble.strong_magnitude, 0x2222);

	/* p0 keeps its effect; it is back on the hardware when p0 is. */
	switch_to(r, 0);
	assert_int_equal(hw_loaded(r), 1);
	assert_int_equal(input_fake_ff_effect(r->hw, 0)->u.rumble.strong_magnitude, 0x1111);
}

/* Each persona has every slot; one more is ENOSPC; the active one's are all on the hardware. */
static void test_slots(void **state) {
	struct rig *r = *state;
	struct ff_effect e;

	for (unsigned int i = 0; i < 2; i++) {
		for (int k = 0; k < HW_EFFECTS; k++) {
			e = rumble(-1, (uint16_t)(0x100 * (i + 1) + k));
			assert_int_equal(upload(r, i, r->client[i], &e), 0);
			assert_int_equal(e.id, k);
		}
		e = rumble(-1, 1);
		assert_int_equal(upload(r, i, r->client[i], &e), -ENOSPC);
	}
	assert_int_equal(hw_loaded(r), HW_EFFECTS);
	switch_to(r, 1);
	assert_int_equal(hw_loaded(r), HW_EFFECTS);
	for (int k = 0; k < HW_EFFECTS; k++)
		assert_int_equal(input_fake_ff_effect(r->hw, k)->u.rumble.strong_magnitude, 0x200 + k);
}

/* Closing or revoking the file that owns effects erases them; the id is free again. */
static void test_close_erases(void **state) {
	struct rig *r = *state;
	struct ff_effect e = rumble(-1, 1);
	struct evdev_client *c;

	assert_int_equal(upload(r, 0, r->client[0], &e), 0);
	evdev_node_close(r->node[0], r->client[0]);
	r->client[0] = NULL;
	assert_int_equal(hw_loaded(r), 0);

	assert_int_equal(evdev_node_open(r->node[0], &c), 0);
	r->client[0] = c;
	e = rumble(-1, 1);
	assert_int_equal(upload(r, 0, c, &e), 0);
	assert_int_equal(e.id, 0);
	assert_int_equal(do_ioctl(r->node[0], c, EVIOCREVOKE, NULL), 0);
	assert_int_equal(hw_loaded(r), 0);
}

/* FF_GAIN: bounded, kept per persona, sent only while active and again on coming forward. */
static void test_gain(void **state) {
	struct rig *r = *state;
	struct input_event out[8];

	ff_written(r, out, 0);
	play(r, 0, FF_GAIN, 0x10000);
	play(r, 0, FF_AUTOCENTER, 5);
	assert_int_equal(ff_written(r, out, ELEMENTSOF(out)), 0);
	play(r, 0, FF_GAIN, 0x8000);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, FF_GAIN, 0x8000));
	play(r, 1, FF_GAIN, 0x1000);
	assert_int_equal(ff_written(r, out, ELEMENTSOF(out)), 0);
	switch_to(r, 1);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, FF_GAIN, 0x1000));
	switch_to(r, 0);
	EXPECT_EVENTS(out, ff_written(r, out, ELEMENTSOF(out)), EV(EV_FF, FF_GAIN, 0x8000));
}

/* A device without force feedback: no effects, uploads are ENOSYS. */
static void test_no_ff(void **state) {
	struct rig *r = *state;
	struct input_backend *kbd;
	struct input_device *dev;
	struct evdev_client *c;
	struct ff_effect e = rumble(-1, 1);
	int effects = -1;

	assert_int_equal(input_fake_new("event4", test_keyboard_new(), &kbd), 0);
	assert_int_equal(input_class_add_device(r->ic, kbd, &dev), 0);
	struct evdev_node *n = input_node_of(dev, core_rig_persona(r->core, "p0"))->evdev;
	assert_int_equal(evdev_node_open(n, &c), 0);
	assert_int_equal(do_ioctl(n, c, EVIOCGEFFECTS, &effects), 0);
	assert_int_equal(effects, 0);
	assert_int_equal(do_ioctl(n, c, EVIOCSFF, &e), -ENOSYS);
	assert_int_equal(do_ioctl(n, c, EVIOCRMFF, (void *)(uintptr_t)0), -ENOSYS);
	evdev_node_close(n, c);
}

#define T(name) cmocka_unit_test_setup_teardown(name, rig_setup, rig_teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		T(test_effects_count),	     T(test_active_upload_play_erase), T(test_kernel_rules),
		T(test_background_never_plays), T(test_switch_stops_previous),  T(test_slots),
		T(test_close_erases),	     T(test_gain),		       T(test_no_ff),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
