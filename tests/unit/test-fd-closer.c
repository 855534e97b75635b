/* SPDX-License-Identifier: MIT */
/* Descriptors a client sent are closed on the closer thread, a bounded number at a time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "fd-closer.h"
#include "util.h"

/* Whether fd gets closed within a second. */
static bool closed_soon(int fd) {
	struct timespec ms = { .tv_nsec = 1000000 };

	for (int i = 0; i < 1000; i++) {
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF)
			return true;
		nanosleep(&ms, NULL);
	}
	return false;
}

static void test_closes(void **state) {
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_true(fd_closer_has_room(NULL, 1));
	fd_closer_close(p[0]);
	assert_true(closed_soon(p[0]));
	/* The other end sees the pipe's reader gone. */
	assert_int_equal(write(p[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	fd_closer_close(-1);
	assert_true(fd_closer_has_room(NULL, 1));
}

static void test_many(void **state) {
	(void)state;
	for (int i = 0; i < 4 * FD_CLOSER_MAX; i++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		assert_true(fd_closer_has_room(NULL, 1));
		fd_closer_close(fd);
		assert_true(closed_soon(fd));
	}
	assert_true(fd_closer_has_room(NULL, 1));
}

/* An owner's share: full at its max, and free again once its descriptors are closed, even after the owner went. */
static void test_quota(void **state) {
	struct fd_closer_quota *none = fd_closer_quota_new(0), *q = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	int fds[FD_CLOSER_PER_OWNER];

	(void)state;
	assert_non_null(none);
	assert_non_null(q);
	assert_false(fd_closer_has_room(none, 1));
	assert_true(fd_closer_has_room(q, 1));
	/* Room for a message's worth of descriptors, all of them, or none. */
	assert_true(fd_closer_has_room(q, FD_CLOSER_PER_OWNER));
	assert_false(fd_closer_has_room(q, FD_CLOSER_PER_OWNER + 1));
	assert_false(fd_closer_has_room(NULL, FD_CLOSER_MAX + 1));
	for (int i = 0; i < FD_CLOSER_PER_OWNER; i++) {
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		assert_true(fds[i] >= 0);
		fd_closer_close_for(q, fds[i]);
	}
	for (int i = 0; i < FD_CLOSER_PER_OWNER; i++)
		assert_true(closed_soon(fds[i]));
	assert_true(fd_closer_has_room(q, 1));
	/* The closer holds its own reference: the owner may drop the share while one waits. */
	fds[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fds[0] >= 0);
	fd_closer_close_for(q, fds[0]);
	fd_closer_quota_unref(q);
	assert_true(closed_soon(fds[0]));
	fd_closer_quota_unref(none);
	assert_true(fd_closer_has_room(NULL, 1));
}

/* closep() closes and forgets: closing through the same variable again leaves alone the file that took the number. */
static void test_closep_forgets(void **state) {
	int first = open("/dev/null", O_RDONLY | O_CLOEXEC), other = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int second, number = first;

	(void)state;
	assert_true(first >= 0 && other >= 0);
	closep(&first);
	assert_int_equal(first, -1);
	/* Another file at the number, as the next open() would have it. */
	second = dup3(other, number, O_CLOEXEC);
	assert_int_equal(second, number);
	closep(&first);
	assert_int_not_equal(fcntl(second, F_GETFD), -1);
	closep(&second);
	closep(&other);
	assert_int_equal(fcntl(number, F_GETFD), -1);
	assert_int_equal(errno, EBADF);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closes),
		cmocka_unit_test(test_many),
		cmocka_unit_test(test_quota),
		cmocka_unit_test(test_closep_forgets),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
