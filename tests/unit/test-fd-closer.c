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
	assert_true(fd_closer_has_room());
	fd_closer_close(p[0]);
	assert_true(closed_soon(p[0]));
	/* The other end sees the pipe's reader gone. */
	assert_int_equal(write(p[1], "x", 1), -1);
	assert_int_equal(errno, EPIPE);
	close(p[1]);
	fd_closer_close(-1);
	assert_true(fd_closer_has_room());
}

static void test_many(void **state) {
	(void)state;
	for (int i = 0; i < 4 * FD_CLOSER_MAX; i++) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		assert_true(fd >= 0);
		assert_true(fd_closer_has_room());
		fd_closer_close(fd);
		assert_true(closed_soon(fd));
	}
	assert_true(fd_closer_has_room());
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_closes),
		cmocka_unit_test(test_many),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
