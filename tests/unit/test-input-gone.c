/* SPDX-License-Identifier: MIT */
/*
 * A device that goes away while devnsd runs, and one that comes in its
 * place, as hotplug drives them: the real manager and the input core over
 * the fake backend. The device says it is gone the way the kernel's evdev
 * does (ENODEV from its fd).
 */
#include <libevdev/libevdev.h>
#include <stdlib.h>

#include "core-rig.h"
#include "input/input.h"
#include "input-backend.h"
#include "test-util.h"

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

/* A keyboard with a touchscreen: keys to hold and touches to keep down. */
static struct libevdev *device_new(void) {
	struct libevdev *d = test_touchscreen_new();

	for (unsigned int code = KEY_ESC; code <= KEY_Z; code++)
		assert_int_equal(libevdev_enable_event_code(d, EV_KEY, code, NULL), 0);
	return d;
}

static void add_device(struct rig *r, const char *name) {
	assert_int_equal(input_fake_new(name, device_new(), &r->hw), 0);
	assert_int_equal(input_class_add_device(r->ic, r->hw, &r->dev), 0);
	for (unsigned int i = 0; i < 2; i++) {
		struct persona *p = core_rig_persona(r->core, i == 0 ? "p0" : "p1");
		struct input_node *in = input_node_of(r->dev, p);

		assert_non_null(in);
		r->node[i] = in->evdev;
		assert_int_equal(evdev_node_open(r->node[i], &r->client[i]), 0);
	}
}

static void close_clients(struct rig *r) {
	for (unsigned int i = 0; i < 2; i++)
		if (r->client[i])
			evdev_node_close(r->node[i], r->client[i]);
	r->client[0] = r->client[1] = NULL;
}

static int rig_setup(void **state) {
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->core = core_rig_new(conf_text);
	assert_int_equal(input_class_new_core(r->core->manager, NULL, &r->ic), 0);
	assert_int_equal(manager_add_class(r->core->manager, &r->ic->base), 0);
	add_device(r, "event7");
	*state = r;
	return 0;
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	close_clients(r);
	core_rig_free(r->core);
	free(r);
	return 0;
}

static void hw(struct rig *r, uint16_t type, uint16_t code, int32_t value) {
	assert_int_equal(input_fake_push(r->hw, type, code, value), 0);
}

static void unplug(struct rig *r) {
	input_fake_unplug(r->hw);
	core_rig_run(r->core);
}

static void expect_enodev(struct evdev_client *c) {
	struct input_event ev;

	assert_int_equal(evdev_client_read(c, &ev, 1), -ENODEV);
	assert_true(evdev_client_ready(c));
}

/* The active persona's readers see what was held go up, then ENODEV; the others only ENODEV. */
static void test_gone_releases_then_enodev(void **state) {
	struct rig *r = *state;
	struct input_event out[64];
	size_t n;

	hw(r, EV_KEY, KEY_A, 1);
	hw(r, EV_ABS, ABS_MT_SLOT, 0);
	hw(r, EV_ABS, ABS_MT_TRACKING_ID, 5);
	hw(r, EV_KEY, BTN_TOUCH, 1);
	hw(r, EV_SYN, SYN_REPORT, 0);
	core_rig_run(r->core);
	EXPECT_READ(r->client[0], EV(EV_KEY, KEY_A, 1), EV(EV_ABS, ABS_MT_SLOT, 0), EV(EV_ABS, ABS_MT_TRACKING_ID, 5),
		    EV(EV_KEY, BTN_TOUCH, 1), SYN_EV);
	EXPECT_NOTHING(r->client[1]);

	unplug(r);
	assert_true(r->dev->gone);
	/* Read as the queue has it before the device is marked gone: the releases come first. */
	n = evdev_queue_pop(&r->client[0]->queue, out, ELEMENTSOF(out));
	EXPECT_EVENTS(out, n, EV(EV_ABS, ABS_MT_TRACKING_ID, -1), EV(EV_KEY, KEY_A, 0), EV(EV_KEY, BTN_TOUCH, 0),
		      SYN_EV);
	expect_enodev(r->client[0]);
	assert_int_equal(evdev_queue_pop(&r->client[1]->queue, out, ELEMENTSOF(out)), 0);
	expect_enodev(r->client[1]);
	/* Opens, writes and feedback get ENODEV too. */
	assert_int_equal(evdev_node_open(r->node[1], &(struct evdev_client *){ NULL }), -ENODEV);
	assert_int_equal(evdev_node_write(r->node[0], r->client[0], EVENTS(EV(EV_LED, LED_CAPSL, 1)), 1), -ENODEV);
}

static void count_node(void *userdata, const struct node_desc *nd) {
	(void)nd;
	(*(unsigned int *)userdata)++;
}

/* A gone device takes no part in switches, lists no nodes, and gives personas made later none. */
static void test_gone_device_is_left_alone(void **state) {
	struct rig *r = *state;
	struct manager *m = r->core->manager;
	struct persona *p1 = core_rig_persona(r->core, "p1"), *p2;
	unsigned int listed = 0;

	unplug(r);
	assert_int_equal(manager_switch(m, p1, NULL, NULL), 1);
	core_rig_run(r->core);
	assert_false(r->node[1]->active);
	assert_null(r->dev->active);
	manager_foreach_node(m, p1, count_node, &listed);
	assert_int_equal(listed, 0);
	assert_int_equal(manager_create_persona(m, "p2", &p2), 0);
	assert_null(input_node_of(r->dev, p2));
}

/* The device is removed and another comes under the same name: every persona gets a working node again. */
static void test_device_comes_back(void **state) {
	struct rig *r = *state;

	unplug(r);
	close_clients(r);
	input_class_remove_device(r->ic, r->dev);
	add_device(r, "event7");
	assert_false(r->dev->gone);
	assert_true(r->node[0]->active);
	hw(r, EV_KEY, KEY_B, 1);
	hw(r, EV_SYN, SYN_REPORT, 0);
	core_rig_run(r->core);
	EXPECT_READ(r->client[0], EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_NOTHING(r->client[1]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_gone_releases_then_enodev, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_gone_device_is_left_alone, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_device_comes_back, rig_setup, rig_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
