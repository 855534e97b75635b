/* SPDX-License-Identifier: MIT */
/* devnsd's main loop: descriptors dispatched beside sd-event, and sd-event still running everything else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "util.h"

struct rig {
	sd_event *event;
	struct loop *loop;
	int a[2], b[2];
	struct loop_io *io_a, *io_b;
	unsigned int calls_a, calls_b;
	int result;
	sd_event_source *defer;
	uint64_t now[2];
};

static int setup(void **state) {
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	assert_int_equal(sd_event_new(&r->event), 0);
	assert_int_equal(loop_new(&r->loop, r->event), 0);
	assert_int_equal(pipe2(r->a, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(pipe2(r->b, O_CLOEXEC | O_NONBLOCK), 0);
	*state = r;
	return 0;
}

static int teardown(void **state) {
	struct rig *r = *state;

	loop_io_free(r->io_a);
	loop_io_free(r->io_b);
	sd_event_source_disable_unref(r->defer);
	loop_free(r->loop);
	sd_event_unref(r->event);
	for (int i = 0; i < 2; i++) {
		closep(&r->a[i]);
		closep(&r->b[i]);
	}
	free(r);
	return 0;
}

static void drain_pipe(int fd) {
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static int on_exit_defer(sd_event_source *s, void *userdata) {
	struct rig *r = userdata;

	return sd_event_exit(sd_event_source_get_event(s), r->result);
}

static int on_exit_time(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)usec;
	return sd_event_exit(sd_event_source_get_event(s), (int)(intptr_t)userdata);
}

/* Reads a byte each time, quietly; the third byte ends the loop through sd-event. */
static int on_count_then_exit(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;
	char c;

	(void)io;
	assert_true(revents & EPOLLIN);
	assert_int_equal(read(r->a[0], &c, 1), 1);
	if (++r->calls_a < 3) {
		assert_int_equal(write(r->a[1], "x", 1), 1);
		return LOOP_QUIET;
	}
	assert_int_equal(sd_event_exit(r->event, 7), 0);
	return 0;
}

static void test_io_and_exit(void **state) {
	struct rig *r = *state;

	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_count_then_exit, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 7);
	assert_int_equal(r->calls_a, 3);
}

/* Turns on a defer source of sd-event's and says so: the loop must run it without any fd of sd-event's waking. */
static int on_turn_on_defer(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	drain_pipe(r->a[0]);
	r->calls_a++;
	assert_int_equal(sd_event_source_set_enabled(r->defer, SD_EVENT_ONESHOT), 0);
	return 0;
}

static void test_not_quiet_wakes_sd_event(void **state) {
	struct rig *r = *state;

	r->result = 3;
	assert_int_equal(sd_event_add_defer(r->event, &r->defer, on_exit_defer, r), 0);
	assert_int_equal(sd_event_source_set_enabled(r->defer, SD_EVENT_OFF), 0);
	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_turn_on_defer, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 3);
	assert_int_equal(r->calls_a, 1);
}

/* a's handler frees b, whose event came in the same batch; then ends the loop. */
static int on_free_other(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	r->calls_a++;
	drain_pipe(r->a[0]);
	r->io_b = loop_io_free(r->io_b);
	closep(&r->b[0]);
	return sd_event_exit(r->event, 0);
}

static int on_b(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	r->calls_b++;
	drain_pipe(r->b[0]);
	r->io_b = loop_io_free(r->io_b);
	closep(&r->b[0]);
	return 0;
}

static void test_freed_in_the_same_batch(void **state) {
	struct rig *r = *state;

	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_free_other, r), 0);
	assert_int_equal(loop_add_io(r->loop, &r->io_b, r->b[0], EPOLLIN, on_b, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(write(r->b[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 0);
	/* a became readable first, and epoll reports in that order: b's event was in the batch, and dropped. */
	assert_int_equal(r->calls_a, 1);
	assert_int_equal(r->calls_b, 0);
	assert_null(r->io_b);
}

/* Always readable, always quiet: sd-event's timer must still end the loop. */
static int on_busy(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	r->calls_a++;
	return LOOP_QUIET;
}

static void test_busy_io_leaves_sd_event_its_turn(void **state) {
	struct rig *r = *state;

	assert_int_equal(sd_event_add_time_relative(r->event, NULL, CLOCK_MONOTONIC, 20 * 1000, 0, on_exit_time,
						    (void *)(intptr_t)5),
			 0);
	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_busy, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 5);
	assert_true(r->calls_a > 1);
}

static int on_always(sd_event_source *s, void *userdata) {
	struct rig *r = userdata;

	(void)s;
	r->calls_b++;
	return 0;
}

static int on_exit_now(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	drain_pipe(r->a[0]);
	r->calls_a++;
	return sd_event_exit(r->event, 9);
}

static void test_busy_sd_event_leaves_io_its_turn(void **state) {
	struct rig *r = *state;

	/* On for ever: sd-event has something pending at every look. */
	assert_int_equal(sd_event_add_defer(r->event, &r->defer, on_always, r), 0);
	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_exit_now, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 9);
	assert_int_equal(r->calls_a, 1);
}

/* Turned off, an io is not called, though its fd stays readable; turned on again, it is. */
static int on_time_enable(sd_event_source *s, uint64_t usec, void *userdata) {
	struct rig *r = userdata;

	(void)s;
	(void)usec;
	assert_int_equal(r->calls_a, 0);
	assert_false(loop_io_get_enabled(r->io_a));
	return loop_io_set_enabled(r->io_a, true);
}

static void test_off_is_not_called(void **state) {
	struct rig *r = *state;

	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_exit_now, r), 0);
	assert_int_equal(loop_io_set_enabled(r->io_a, false), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(sd_event_add_time_relative(r->event, NULL, CLOCK_MONOTONIC, 20 * 1000, 0, on_time_enable, r),
			 0);
	assert_int_equal(loop_run(r->loop), 9);
	assert_int_equal(r->calls_a, 1);
}

/* The time of a wakeup: the same within it, later at the next. */
static int on_now(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;
	struct timespec pause = { .tv_nsec = 2 * 1000 * 1000 };
	uint64_t again, real;

	(void)io;
	(void)revents;
	drain_pipe(r->a[0]);
	assert_int_equal(loop_now(r->loop, CLOCK_MONOTONIC, &r->now[r->calls_a]), 0);
	nanosleep(&pause, NULL);
	assert_int_equal(loop_now(r->loop, CLOCK_MONOTONIC, &again), 0);
	assert_int_equal(again, r->now[r->calls_a]);
	assert_int_equal(loop_now(r->loop, CLOCK_REALTIME, &real), 0);
	assert_true(real > again);
	assert_int_equal(loop_now(r->loop, CLOCK_PROCESS_CPUTIME_ID, &again), -EOPNOTSUPP);
	if (++r->calls_a == 2)
		return sd_event_exit(r->event, 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	return LOOP_QUIET;
}

static void test_now(void **state) {
	struct rig *r = *state;

	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_now, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(loop_run(r->loop), 0);
	assert_true(r->now[1] >= r->now[0] + 2000);
}

/* A failing handler has its io turned off, as sd-event does; the loop goes on. */
static int on_fail(struct loop_io *io, uint32_t revents, void *userdata) {
	struct rig *r = userdata;

	(void)io;
	(void)revents;
	r->calls_a++;
	return -EIO;
}

static void test_failing_handler_turned_off(void **state) {
	struct rig *r = *state;

	assert_int_equal(loop_add_io(r->loop, &r->io_a, r->a[0], EPOLLIN, on_fail, r), 0);
	assert_int_equal(write(r->a[1], "x", 1), 1);
	assert_int_equal(sd_event_add_time_relative(r->event, NULL, CLOCK_MONOTONIC, 20 * 1000, 0, on_exit_time,
						    (void *)(intptr_t)4),
			 0);
	assert_int_equal(loop_run(r->loop), 4);
	assert_int_equal(r->calls_a, 1);
	assert_false(loop_io_get_enabled(r->io_a));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_io_and_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_quiet_wakes_sd_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_freed_in_the_same_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_io_leaves_sd_event_its_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_busy_sd_event_leaves_io_its_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_off_is_not_called, setup, teardown),
		cmocka_unit_test_setup_teardown(test_now, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failing_handler_turned_off, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
