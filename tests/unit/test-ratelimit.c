/* SPDX-License-Identifier: MIT */
#include "test-util.h"

#include "ratelimit.h"

#define S 1000000ull

/* How many of n events, one every step microseconds from start, the bucket lets through. */
static unsigned int count_taken(struct ratelimit *rl, uint64_t start, uint64_t step, unsigned int n) {
	unsigned int taken = 0;

	for (unsigned int i = 0; i < n; i++)
		taken += ratelimit_take(rl, start + i * step);
	return taken;
}

static void test_burst_then_one_an_interval(void **state) {
	struct ratelimit rl = RATELIMIT_INIT(10 * S, 3);

	(void)state;
	assert_int_equal(count_taken(&rl, 5 * S, 1000, 10), 3);
	assert_false(ratelimit_take(&rl, 14 * S));
	assert_true(ratelimit_take(&rl, 15 * S));
	assert_false(ratelimit_take(&rl, 15 * S + 1));
	assert_false(ratelimit_take(&rl, 24 * S));
	assert_true(ratelimit_take(&rl, 25 * S));
	/* A steady stream gets one an interval, however fast it asks. */
	assert_int_equal(count_taken(&rl, 26 * S, S / 10, 600), 6);
}

static void test_next_token(void **state) {
	struct ratelimit rl = RATELIMIT_INIT(10 * S, 2);

	(void)state;
	assert_int_equal(ratelimit_next(&rl), 0);
	assert_true(ratelimit_take(&rl, 5 * S));
	assert_int_equal(ratelimit_next(&rl), 0);
	assert_true(ratelimit_take(&rl, 6 * S));
	assert_int_equal(ratelimit_next(&rl), 15 * S);
	assert_false(ratelimit_take(&rl, 14 * S));
	assert_int_equal(ratelimit_next(&rl), 15 * S);
	/* The token of 15 s is taken at 17 s: the next one still comes at 25 s. */
	assert_true(ratelimit_take(&rl, 17 * S));
	assert_int_equal(ratelimit_next(&rl), 25 * S);
	assert_false(ratelimit_take(&rl, 25 * S - 1));
	assert_true(ratelimit_take(&rl, 25 * S));
}

static void test_refills_after_a_pause(void **state) {
	struct ratelimit rl = RATELIMIT_INIT(10 * S, 3);

	(void)state;
	assert_int_equal(count_taken(&rl, 0, 1, 5), 3);
	assert_int_equal(count_taken(&rl, 1000 * S, 1, 5), 3);
	/* Part of a refill: 25 s after the last burst's start gives two back. */
	assert_int_equal(count_taken(&rl, 1025 * S, 1, 5), 2);
}

static void test_clock_going_back_gives_nothing(void **state) {
	struct ratelimit rl = RATELIMIT_INIT(10 * S, 1);

	(void)state;
	assert_true(ratelimit_take(&rl, 100 * S));
	assert_false(ratelimit_take(&rl, 0));
	assert_true(ratelimit_take(&rl, 110 * S));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_one_an_interval),
		cmocka_unit_test(test_refills_after_a_pause),
		cmocka_unit_test(test_clock_going_back_gives_nothing),
		cmocka_unit_test(test_next_token),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
