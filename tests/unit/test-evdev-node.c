/* SPDX-License-Identifier: MIT */
#include "test-util.h"

/* Brings the node forward with the hardware in the state the persona already knows. */
static void make_active(struct fixture *f) {
	struct evdev_state hw = f->node->view;

	evdev_node_activate(f->node, &hw);
	recorder_clear(&f->rec);
}

static bool led_on(struct fixture *f, struct evdev_client *c, unsigned int led) {
	unsigned long bits[BITS_TO_LONGS(LED_CNT)] = { 0 };

	assert_int_equal(do_ioctl(f->node, c, EVIOCGLED(sizeof(bits)), bits), EVDEV_BITS_LEN(LED_MAX));
	return bit_test(bits, led);
}

static void test_starts_in_background(void **state) {
	struct fixture *f = *state;

	assert_false(f->node->active);
	assert_false(evdev_client_ready(f->client));
	EXPECT_NOTHING(f->client);
}

static void test_open_limit(void **state) {
	struct fixture *f = *state;
	struct evdev_client *clients[EVDEV_NODE_MAX_CLIENTS], *extra = NULL;

	/* The fixture holds one already. */
	for (unsigned int i = 1; i < EVDEV_NODE_MAX_CLIENTS; i++)
		clients[i] = fixture_open(f);
	assert_int_equal(evdev_node_open(f->node, &extra), -EMFILE);
	evdev_node_close(f->node, clients[1]);
	assert_int_equal(evdev_node_open(f->node, &extra), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(extra, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(clients[EVDEV_NODE_MAX_CLIENTS - 1], EV(EV_KEY, KEY_A, 1), SYN_EV);
}

static void test_read_whole_packets(void **state) {
	struct fixture *f = *state;

	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1));
	assert_false(evdev_client_ready(f->client));
	EXPECT_NOTHING(f->client);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 0);

	DELIVER(f->node, SYN_EV);
	assert_true(evdev_client_ready(f->client));
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	EXPECT_READ(f->client, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_false(evdev_client_ready(f->client));
}

static void test_read_in_pieces(void **state) {
	struct fixture *f = *state;
	struct input_event ev[1];

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_int_equal(evdev_client_read(f->client, ev, 1), 1);
	EXPECT_EVENTS(ev, 1, EV(EV_KEY, KEY_A, 1));
	assert_int_equal(evdev_client_read(f->client, ev, 1), 1);
	EXPECT_EVENTS(ev, 1, SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_int_equal(evdev_client_read(f->client, ev, 1), 0);
}

static void test_empty_reports_dropped(void **state) {
	struct fixture *f = *state;

	DELIVER(f->node, SYN_EV, SYN_EV);
	assert_false(evdev_client_ready(f->client));
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_B, 1), SYN_EV, SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_B, 1), SYN_EV);
}

static void test_every_client_gets_events(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	DELIVER(f->node, EV(EV_KEY, KEY_Q, 1), SYN_EV);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	assert_int_equal(recorder_wakeups(&f->rec, other), 1);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_Q, 1), SYN_EV);
	EXPECT_READ(other, EV(EV_KEY, KEY_Q, 1), SYN_EV);
}

static void test_queue_overflow(void **state) {
	struct fixture *f = *state;
	struct input_event got[EVDEV_QUEUE_MAX];
	size_t n;

	/* A reader that falls behind gets SYN_DROPPED and the newest event, as with the kernel's evdev. */
	for (int i = 0; i < 4 * EVDEV_QUEUE_MAX; i++)
		DELIVER(f->node, EV(EV_KEY, KEY_A, !(i & 1)), SYN_EV);
	n = read_events(f->client, got, ELEMENTSOF(got));
	assert_in_range(n, 3, EVDEV_QUEUE_MAX);
	EXPECT_EVENTS(got, 1, EV(EV_SYN, SYN_DROPPED, 0));
	EXPECT_EVENTS(got + n - 2, 2, EV(EV_KEY, KEY_A, 0), SYN_EV);
}

static void test_event_time_in_client_clock(void **state) {
	struct fixture *f = *state;
	struct input_event ev[2];

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(evdev_client_read(f->client, ev, 2), 2);
	/* Hardware times are CLOCK_MONOTONIC; a new client reads CLOCK_REALTIME, as with the kernel. */
	assert_true(llabs(timeval_usec(ev[0].time) - clock_usec(CLOCK_REALTIME)) < 2000000);
}

static void test_write_input_to_own_clients(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	WRITE(f->node, f->client, EV(EV_KEY, KEY_A, 1), EV(EV_KEY, KEY_F24, 1), SYN_EV);
	/* KEY_F24 is not on the device. */
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(other, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(f->rec.n_forwarded, 0);

	make_active(f);
	WRITE(f->node, other, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_int_equal(f->rec.n_forwarded, 0);
}

static void test_write_led_background(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	WRITE(f->node, f->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	/* Nothing reaches the hardware; the persona's readers see the change. */
	assert_int_equal(f->rec.n_forwarded, 0);
	EXPECT_READ(f->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_READ(other, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_true(led_on(f, other, LED_CAPSL));
	assert_false(led_on(f, other, LED_NUML));

	/* Writing the state it already has changes nothing. */
	WRITE(f->node, f->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_NOTHING(other);
	assert_int_equal(f->rec.n_forwarded, 0);
}

static void test_write_led_active(void **state) {
	struct fixture *f = *state;

	make_active(f);
	WRITE(f->node, f->client, EV(EV_LED, LED_NUML, 1), SYN_EV);
	EXPECT_EVENTS(f->rec.forwarded, f->rec.n_forwarded, EV(EV_LED, LED_NUML, 1), SYN_EV);
	/* Readers see it when the hardware reports it back. */
	EXPECT_NOTHING(f->client);
	DELIVER(f->node, EV(EV_LED, LED_NUML, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_LED, LED_NUML, 1), SYN_EV);
	assert_true(led_on(f, f->client, LED_NUML));

	recorder_clear(&f->rec);
	WRITE(f->node, f->client, EV(EV_LED, LED_NUML, 1), SYN_EV);
	assert_int_equal(f->rec.n_forwarded, 0);
	WRITE(f->node, f->client, EV(EV_LED, LED_NUML, 0), EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_EVENTS(f->rec.forwarded, f->rec.n_forwarded, EV(EV_LED, LED_NUML, 0), EV(EV_LED, LED_CAPSL, 1),
		      SYN_EV);
	DELIVER(f->node, EV(EV_LED, LED_NUML, 0), EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_LED, LED_NUML, 0), EV(EV_LED, LED_CAPSL, 1), SYN_EV);

	/* On and off again in one write, before the hardware echoes either: both go out, and it ends off. */
	recorder_clear(&f->rec);
	WRITE(f->node, f->client, EV(EV_LED, LED_SCROLLL, 1), EV(EV_LED, LED_SCROLLL, 0), SYN_EV);
	EXPECT_EVENTS(f->rec.forwarded, f->rec.n_forwarded, EV(EV_LED, LED_SCROLLL, 1), EV(EV_LED, LED_SCROLLL, 0),
		      SYN_EV);
	DELIVER(f->node, EV(EV_LED, LED_SCROLLL, 1), SYN_EV, EV(EV_LED, LED_SCROLLL, 0), SYN_EV);
	EXPECT_READ(f->client, EV(EV_LED, LED_SCROLLL, 1), SYN_EV, EV(EV_LED, LED_SCROLLL, 0), SYN_EV);
	assert_false(led_on(f, f->client, LED_SCROLLL));
}

static void test_write_led_not_on_device(void **state) {
	struct fixture *f = *state;

	make_active(f);
	WRITE(f->node, f->client, EV(EV_LED, LED_MUTE, 1), SYN_EV);
	assert_int_equal(f->rec.n_forwarded, 0);
	EXPECT_NOTHING(f->client);
}

static void test_write_repeat(void **state) {
	struct fixture *f = *state;
	int rep[2];

	WRITE(f->node, f->client, EV(EV_REP, REP_DELAY, 400), EV(EV_REP, REP_PERIOD, 20));
	assert_int_equal(f->rec.n_set_repeat, 0);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGREP, rep), 0);
	assert_int_equal(rep[0], 400);
	assert_int_equal(rep[1], 20);

	make_active(f);
	WRITE(f->node, f->client, EV(EV_REP, REP_PERIOD, 25));
	assert_int_equal(f->rec.n_set_repeat, 1);
	assert_int_equal(f->rec.rep_delay, 400);
	assert_int_equal(f->rec.rep_period, 25);
}

static void test_gone(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f), *late = NULL;
	struct input_event ev[4];
	int version;

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	recorder_clear(&f->rec);
	evdev_node_set_gone(f->node);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	assert_int_equal(recorder_wakeups(&f->rec, other), 1);
	assert_true(evdev_client_ready(f->client));
	assert_int_equal(evdev_client_read(f->client, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(evdev_client_read(other, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(evdev_node_write(f->node, f->client, EVENTS(EV(EV_LED, LED_CAPSL, 1)), 1), -ENODEV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGVERSION, &version), -ENODEV);
	assert_int_equal(evdev_node_open(f->node, &late), -ENODEV);
}

static void test_revoked_client(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);
	struct input_event ev[4];

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	recorder_clear(&f->rec);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCREVOKE, NULL), 0);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	assert_true(evdev_client_ready(f->client));
	assert_int_equal(evdev_client_read(f->client, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(evdev_node_write(f->node, f->client, EVENTS(EV(EV_KEY, KEY_A, 0)), 1), -ENODEV);

	DELIVER(f->node, EV(EV_KEY, KEY_A, 0), SYN_EV);
	assert_int_equal(evdev_client_read(f->client, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	EXPECT_READ(other, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV);
}

static void test_open_limit_per_uid(void **state) {
	struct fixture *f = *state;
	struct evdev_client *mine[EVDEV_NODE_MAX_CLIENTS_PER_UID], *c = NULL;

	for (unsigned int i = 0; i < EVDEV_NODE_MAX_CLIENTS_PER_UID; i++)
		assert_int_equal(evdev_node_open_as(f->node, 1000, &mine[i]), 0);
	assert_int_equal(evdev_node_open_as(f->node, 1000, &c), -EMFILE);
	/* Others still get in: another user, and handles of no user. */
	assert_int_equal(evdev_node_open_as(f->node, 1001, &c), 0);
	assert_int_equal(c->uid, 1001u);
	assert_int_equal(evdev_node_open(f->node, &c), 0);
	evdev_node_close(f->node, mine[3]);
	assert_int_equal(evdev_node_open_as(f->node, 1000, &mine[3]), 0);
	assert_int_equal(evdev_node_open_as(f->node, 1000, &c), -EMFILE);
}

/* Every client of the node: ENODEV, woken once, no events from now on. */
static void expect_revoked(struct fixture *f, struct evdev_client *c) {
	struct input_event ev[4];
	int version;

	assert_int_equal(recorder_wakeups(&f->rec, c), 1);
	assert_true(evdev_client_ready(c));
	assert_int_equal(evdev_client_read(c, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(evdev_node_write(f->node, c, EVENTS(EV(EV_KEY, KEY_A, 0)), 1), -ENODEV);
	assert_int_equal(do_ioctl(f->node, c, EVIOCGVERSION, &version), -ENODEV);
}

static void test_revoke_background(void **state) {
	struct fixture *f = *state;
	struct evdev_client *grabber = fixture_open(f), *late;
	struct evdev_state hw = f->node->view;

	assert_int_equal(do_ioctl(f->node, grabber, EVIOCGRAB, (void *)1), 0);
	/* What the old container wrote into the persona's node: a key held, caps lock on. */
	WRITE(f->node, grabber, EV(EV_KEY, KEY_D, 1), EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	assert_true(evdev_state_value(&f->node->view, EV_KEY, KEY_D));
	recorder_clear(&f->rec);

	evdev_node_revoke(f->node, &hw);
	expect_revoked(f, f->client);
	expect_revoked(f, grabber);
	assert_null(f->node->grab);
	assert_false(evdev_state_value(&f->node->view, EV_KEY, KEY_D));
	assert_true(evdev_state_value(&f->node->view, EV_LED, LED_CAPSL));

	/* A new opener gets the node's events; the revoked ones never again. */
	late = fixture_open(f);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(late, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(recorder_wakeups(&f->rec, grabber), 1);
	expect_revoked(f, grabber);
}

static void test_revoke_active_takes_the_hardware_state(void **state) {
	struct fixture *f = *state;
	struct evdev_state hw;

	make_active(f);
	hw = f->node->view;
	WRITE(f->node, f->client, EV(EV_KEY, KEY_D, 1), SYN_EV);
	/* Held on the real keyboard meanwhile. */
	bit_assign(hw.key, KEY_B, true);
	recorder_clear(&f->rec);

	evdev_node_revoke(f->node, &hw);
	expect_revoked(f, f->client);
	assert_false(evdev_state_value(&f->node->view, EV_KEY, KEY_D));
	assert_true(evdev_state_value(&f->node->view, EV_KEY, KEY_B));
	assert_int_equal(f->rec.n_forwarded, 0);
}

#define KBD(name) cmocka_unit_test_setup_teardown(name, fixture_keyboard_setup, fixture_teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		KBD(test_starts_in_background),
		KBD(test_open_limit),
		KBD(test_read_whole_packets),
		KBD(test_read_in_pieces),
		KBD(test_empty_reports_dropped),
		KBD(test_every_client_gets_events),
		KBD(test_queue_overflow),
		KBD(test_event_time_in_client_clock),
		KBD(test_write_input_to_own_clients),
		KBD(test_write_led_background),
		KBD(test_write_led_active),
		KBD(test_write_led_not_on_device),
		KBD(test_write_repeat),
		KBD(test_gone),
		KBD(test_revoked_client),
		KBD(test_open_limit_per_uid),
		KBD(test_revoke_background),
		KBD(test_revoke_active_takes_the_hardware_state),
	};

	return cmocka_run_group_tests_name("evdev node", tests, NULL, NULL);
}
