/* SPDX-License-Identifier: MIT */
#include "evdev-queue.h"
#include "test-util.h"

static int queue_setup(void **state) {
	struct evdev_queue *q = calloc(1, sizeof(*q));

	assert_non_null(q);
	assert_int_equal(evdev_queue_init(q, EVDEV_QUEUE_MIN), 0);
	*state = q;
	return 0;
}

static int queue_teardown(void **state) {
	struct evdev_queue *q = *state;

	evdev_queue_fini(q);
	free(q);
	return 0;
}

static void push_all(struct evdev_queue *q, const struct input_event *evs, size_t n) {
	for (size_t i = 0; i < n; i++)
		evdev_queue_push(q, &evs[i]);
}
#define PUSH(q, ...) push_all((q), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

static size_t pop_all(struct evdev_queue *q, struct input_event *out, size_t max) {
	return evdev_queue_pop(q, out, max);
}

static void check_pop(struct evdev_queue *q, const struct input_event *want, size_t n_want, const char *file,
		      int line) {
	struct input_event got[EVDEV_QUEUE_MAX];
	size_t n = pop_all(q, got, ELEMENTSOF(got));

	check_events(got, n, want, n_want, file, line);
}
#define EXPECT_POP(q, ...) check_pop((q), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__), __FILE__, __LINE__)
#define EXPECT_POP_NOTHING(q) check_pop((q), NULL, 0, __FILE__, __LINE__)

static void test_init_sizes(void **state) {
	struct evdev_queue q;

	(void)state;
	assert_int_equal(evdev_queue_init(&q, 0), 0);
	assert_int_equal(q.size, EVDEV_QUEUE_MIN);
	evdev_queue_fini(&q);
	assert_int_equal(evdev_queue_init(&q, 100), 0);
	assert_int_equal(q.size, 128);
	evdev_queue_fini(&q);
	assert_int_equal(evdev_queue_init(&q, 256), 0);
	assert_int_equal(q.size, 256);
	evdev_queue_fini(&q);
	assert_int_equal(evdev_queue_init(&q, 100000), 0);
	assert_int_equal(q.size, EVDEV_QUEUE_MAX);
	evdev_queue_fini(&q);
}

static void test_packet_visible_after_report(void **state) {
	struct evdev_queue *q = *state;
	struct input_event ev = EV(EV_KEY, KEY_A, 1);
	struct input_event syn = SYN_EV;

	assert_false(evdev_queue_push(q, &ev));
	ev = EV(EV_MSC, MSC_SCAN, 30);
	assert_false(evdev_queue_push(q, &ev));
	assert_false(evdev_queue_readable(q));
	EXPECT_POP_NOTHING(q);

	assert_true(evdev_queue_push(q, &syn));
	assert_true(evdev_queue_readable(q));
	EXPECT_POP(q, EV(EV_KEY, KEY_A, 1), EV(EV_MSC, MSC_SCAN, 30), SYN_EV);
	assert_false(evdev_queue_readable(q));
}

static void test_incomplete_packet_stays(void **state) {
	struct evdev_queue *q = *state;

	PUSH(q, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0));
	EXPECT_POP(q, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_POP_NOTHING(q);
	PUSH(q, SYN_EV);
	EXPECT_POP(q, EV(EV_KEY, KEY_A, 0), SYN_EV);
}

static void test_pop_in_pieces(void **state) {
	struct evdev_queue *q = *state;
	struct input_event out[2];

	PUSH(q, EV(EV_REL, REL_X, 1), EV(EV_REL, REL_Y, 2), SYN_EV);
	assert_int_equal(evdev_queue_pop(q, out, 1), 1);
	EXPECT_EVENTS(out, 1, EV(EV_REL, REL_X, 1));
	assert_int_equal(evdev_queue_pop(q, out, 2), 2);
	EXPECT_EVENTS(out, 2, EV(EV_REL, REL_Y, 2), SYN_EV);
	assert_int_equal(evdev_queue_pop(q, out, 2), 0);
}

static void test_empty_report_dropped(void **state) {
	struct evdev_queue *q = *state;
	struct input_event syn = SYN_EV;

	assert_false(evdev_queue_push(q, &syn));
	assert_false(evdev_queue_readable(q));
	PUSH(q, EV(EV_KEY, KEY_B, 1), SYN_EV);
	assert_false(evdev_queue_push(q, &syn));
	assert_false(evdev_queue_push(q, &syn));
	EXPECT_POP(q, EV(EV_KEY, KEY_B, 1), SYN_EV);
}

static void test_overflow_keeps_dropped_and_newest(void **state) {
	struct evdev_queue *q = *state;
	struct input_event ev;

	PUSH(q, EV(EV_KEY, KEY_A, 1), SYN_EV);
	/* Fills the rest of the 64 slots: the last one overflows. */
	for (int i = 0; i < EVDEV_QUEUE_MIN - 2; i++) {
		ev = EV(EV_ABS, ABS_X, i);
		ev.time.tv_sec = 1000 + i;
		evdev_queue_push(q, &ev);
	}
	/* Everything unread is gone, and what is left is not a whole packet yet. */
	assert_false(evdev_queue_readable(q));
	EXPECT_POP_NOTHING(q);

	PUSH(q, SYN_EV);
	{
		struct input_event got[8];
		size_t n = evdev_queue_pop(q, got, ELEMENTSOF(got));

		EXPECT_EVENTS(got, n, EV(EV_SYN, SYN_DROPPED, 0), EV(EV_ABS, ABS_X, EVDEV_QUEUE_MIN - 3), SYN_EV);
		/* SYN_DROPPED carries the time of the event that overflowed. */
		assert_int_equal(got[0].time.tv_sec, 1000 + EVDEV_QUEUE_MIN - 3);
	}
}

static void test_overflow_then_more(void **state) {
	struct evdev_queue *q = *state;

	for (int i = 0; i < EVDEV_QUEUE_MIN + 10; i++) {
		struct input_event ev = EV(EV_REL, REL_X, i);
		evdev_queue_push(q, &ev);
	}
	PUSH(q, SYN_EV);
	{
		struct input_event got[EVDEV_QUEUE_MIN];
		size_t n = evdev_queue_pop(q, got, ELEMENTSOF(got));

		/* SYN_DROPPED, the event that overflowed (the 64th) and the ten after it, then the report. */
		assert_int_equal(n, 13);
		EXPECT_EVENTS(got, 2, EV(EV_SYN, SYN_DROPPED, 0), EV(EV_REL, REL_X, EVDEV_QUEUE_MIN - 1));
		EXPECT_EVENTS(got + 11, 2, EV(EV_REL, REL_X, EVDEV_QUEUE_MIN + 9), SYN_EV);
	}
}

static void test_no_overflow_when_read(void **state) {
	struct evdev_queue *q = *state;
	struct input_event got[4];

	/* A reader that keeps up never sees SYN_DROPPED, however much goes through. */
	for (int i = 0; i < 10 * EVDEV_QUEUE_MIN; i++) {
		PUSH(q, EV(EV_KEY, KEY_A, i & 1), SYN_EV);
		assert_int_equal(evdev_queue_pop(q, got, ELEMENTSOF(got)), 2);
		EXPECT_EVENTS(got, 2, EV(EV_KEY, KEY_A, i & 1), SYN_EV);
	}
}

static void test_flush_type(void **state) {
	struct evdev_queue *q = *state;

	PUSH(q, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_B, 1), SYN_EV,
	     EV(EV_ABS, ABS_X, 5), EV(EV_KEY, KEY_C, 1), SYN_EV, EV(EV_KEY, KEY_D, 1), SYN_EV);
	evdev_queue_flush_type(q, EV_KEY);
	/* Packets left empty lose their SYN_REPORT. */
	EXPECT_POP(q, EV(EV_MSC, MSC_SCAN, 30), SYN_EV, EV(EV_ABS, ABS_X, 5), SYN_EV);
	assert_false(evdev_queue_readable(q));
}

static void test_flush_keeps_leading_report(void **state) {
	struct evdev_queue *q = *state;

	/* The first packet's report stays even when emptied: it may end a packet read in part. */
	PUSH(q, EV(EV_ABS, ABS_X, 1), SYN_EV, EV(EV_ABS, ABS_Y, 2), SYN_EV, EV(EV_KEY, KEY_A, 1), SYN_EV);
	evdev_queue_flush_type(q, EV_ABS);
	EXPECT_POP(q, SYN_EV, EV(EV_KEY, KEY_A, 1), SYN_EV);
}

static void test_flush_after_partial_read(void **state) {
	struct evdev_queue *q = *state;
	struct input_event got[1];

	PUSH(q, EV(EV_KEY, KEY_A, 1), EV(EV_ABS, ABS_X, 3), SYN_EV);
	assert_int_equal(evdev_queue_pop(q, got, 1), 1);
	evdev_queue_flush_type(q, EV_ABS);
	EXPECT_POP(q, SYN_EV);
}

static void test_flush_keeps_incomplete_packet(void **state) {
	struct evdev_queue *q = *state;

	PUSH(q, EV(EV_REL, REL_X, 1), SYN_EV, EV(EV_KEY, KEY_A, 1), EV(EV_REL, REL_Y, 2));
	evdev_queue_flush_type(q, EV_KEY);
	EXPECT_POP(q, EV(EV_REL, REL_X, 1), SYN_EV);
	PUSH(q, SYN_EV);
	EXPECT_POP(q, EV(EV_REL, REL_Y, 2), SYN_EV);
}

static void test_flush_wrapped(void **state) {
	struct evdev_queue *q = *state;
	struct input_event got[EVDEV_QUEUE_MIN];

	/* Moves head and tail near the end of the ring so the flush crosses the wrap. */
	for (int i = 0; i < EVDEV_QUEUE_MIN - 3; i++) {
		PUSH(q, EV(EV_REL, REL_X, i));
		assert_int_equal(evdev_queue_pop(q, got, 1), 0);
	}
	PUSH(q, SYN_EV);
	evdev_queue_pop(q, got, ELEMENTSOF(got));
	PUSH(q, EV(EV_KEY, KEY_A, 1), EV(EV_REL, REL_X, 7), SYN_EV, EV(EV_KEY, KEY_B, 1), SYN_EV,
	     EV(EV_REL, REL_Y, 9), SYN_EV);
	evdev_queue_flush_type(q, EV_KEY);
	EXPECT_POP(q, EV(EV_REL, REL_X, 7), SYN_EV, EV(EV_REL, REL_Y, 9), SYN_EV);
}

static void test_clear(void **state) {
	struct evdev_queue *q = *state;

	PUSH(q, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0));
	evdev_queue_clear(q);
	assert_false(evdev_queue_readable(q));
	PUSH(q, SYN_EV);
	EXPECT_POP_NOTHING(q);
	PUSH(q, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_POP(q, EV(EV_KEY, KEY_B, 1), SYN_EV);
}

#define T(name) cmocka_unit_test_setup_teardown(name, queue_setup, queue_teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_sizes),
		T(test_packet_visible_after_report),
		T(test_incomplete_packet_stays),
		T(test_pop_in_pieces),
		T(test_empty_report_dropped),
		T(test_overflow_keeps_dropped_and_newest),
		T(test_overflow_then_more),
		T(test_no_overflow_when_read),
		T(test_flush_type),
		T(test_flush_keeps_leading_report),
		T(test_flush_after_partial_read),
		T(test_flush_keeps_incomplete_packet),
		T(test_flush_wrapped),
		T(test_clear),
	};

	return cmocka_run_group_tests_name("evdev queue", tests, NULL, NULL);
}
