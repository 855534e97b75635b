/* SPDX-License-Identifier: MIT */
/*
 * Whatever a container sends, the node answers without crashing, within
 * its bounds: random ioctls, writes and reads against a touchscreen and a
 * keyboard node, interleaved with hardware events and switches.
 */
#include <stdlib.h>

#include "test-util.h"

#define ROUNDS 20000
#define ARG_SIZE (4 * EVDEV_IOCTL_BUF_MAX)

static uint8_t arg[ARG_SIZE];

static unsigned int random_cmd(void) {
	unsigned int dir = (unsigned int)rand() % 4, nr = (unsigned int)rand() % 256;
	unsigned int size = rand() % 4 ? (unsigned int)rand() % 64 : (unsigned int)rand() % (_IOC_SIZEMASK + 1);
	unsigned int type = rand() % 16 ? 'E' : (unsigned int)rand() % 256;

	return _IOC(dir, type, nr, size);
}

static void fill_random(uint8_t *p, size_t n) {
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rand();
}

/* Mask requests carry a pointer: aim it into the test's own buffer, as a real caller would. */
static void aim_mask(unsigned int cmd) {
	struct input_mask m;

	if (cmd != EVIOCGMASK && cmd != EVIOCSMASK)
		return;
	memcpy(&m, arg, sizeof(m));
	m.type %= EV_CNT + 2;
	m.codes_size %= ARG_SIZE / 2;
	m.codes_ptr = (uint64_t)(uintptr_t)(arg + ARG_SIZE / 2);
	memcpy(arg, &m, sizeof(m));
}

static void one_round(struct fixture *f, struct evdev_client **c) {
	struct input_event evs[64], out[64];
	unsigned int cmd;
	size_t n;
	int r;

	switch (rand() % 6) {
	case 0:
	case 1:
		cmd = random_cmd();
		if (rand() % 8 == 0)
			cmd = (unsigned int[]){ EVIOCGMASK, EVIOCSMASK, EVIOCGRAB, EVIOCSCLOCKID,
						EVIOCGMTSLOTS(ARG_SIZE / 8), EVIOCSREP }[rand() % 6];
		fill_random(arg, 64);
		aim_mask(cmd);
		/* EVIOCGRAB and EVIOCREVOKE take the argument as a value. */
		r = do_ioctl(f->node, *c, cmd,
			     cmd == EVIOCGRAB || cmd == EVIOCREVOKE ? (void *)(uintptr_t)(rand() % 2) : arg);
		assert_true(r >= -4095 && r <= (int)_IOC_SIZE(cmd));
		break;
	case 2:
		n = (size_t)rand() % ELEMENTSOF(evs) + 1;
		fill_random((uint8_t *)evs, n * sizeof(evs[0]));
		r = evdev_node_write(f->node, *c, evs, n);
		assert_true(r == (int)n || r == -ENODEV);
		break;
	case 3:
		n = (size_t)rand() % ELEMENTSOF(evs) + 1;
		fill_random((uint8_t *)evs, n * sizeof(evs[0]));
		for (size_t i = 0; i < n; i++)
			evs[i].type %= EV_CNT;
		evdev_node_deliver(f->node, evs, n);
		break;
	case 4:
		r = evdev_client_read(*c, out, ELEMENTSOF(out));
		assert_true(r == -ENODEV || (r >= 0 && r <= (int)ELEMENTSOF(out)));
		break;
	default:
		if (f->node->active)
			evdev_node_deactivate(f->node);
		else
			evdev_node_activate(f->node, &f->state);
		break;
	}
	/* A revoked handle is closed and opened anew, as a client would. */
	if ((*c)->revoked) {
		evdev_node_close(f->node, *c);
		*c = fixture_open(f);
	}
}

static void run(void **state, unsigned int seed) {
	struct fixture *f = *state;
	struct evdev_client *c = f->client;

	srand(seed);
	for (int i = 0; i < ROUNDS; i++)
		one_round(f, &c);
	f->client = c;
	assert_true(f->node->n_clients >= 1);
}

static void test_touchscreen_survives(void **state) {
	run(state, 1);
}

static void test_keyboard_survives(void **state) {
	run(state, 2);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_touchscreen_survives, fixture_touchscreen_setup, fixture_teardown),
		cmocka_unit_test_setup_teardown(test_keyboard_survives, fixture_keyboard_setup, fixture_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
