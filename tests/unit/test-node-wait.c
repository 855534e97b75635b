/* SPDX-License-Identifier: MIT */
/* Waiting for a device node to appear, on a temporary directory standing in for /dev. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node-wait.h"
#include "util.h"

struct maker {
	char dir[PATH_MAX];
	char path[PATH_MAX];
};

/* Makes the directory, then the node in it, a little apart: as devtmpfs makes /dev/dri, then card0. */
static void *make_later(void *data) {
	struct maker *mk = data;
	int fd;

	/* No cmocka asserts off the main thread: the result is checked after the join. */
	usleep(100 * 1000);
	if (mkdir(mk->dir, 0755) < 0)
		return (void *)"mkdir";
	usleep(100 * 1000);
	fd = open(mk->path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return (void *)"open";
	close(fd);
	return NULL;
}

static char *tmpdir(void) {
	char tmpl[] = "/tmp/node-wait-XXXXXX";
	char *d = mkdtemp(tmpl);

	assert_non_null(d);
	return strdup(d);
}

static void test_node_and_directory_come_later(void **state) {
	_cleanup_(freep) char *top = tmpdir();
	struct maker mk;
	pthread_t t;
	void *failed;
	uint64_t start = monotonic_usec();

	(void)state;
	snprintf(mk.dir, sizeof(mk.dir), "%s/dri", top);
	snprintf(mk.path, sizeof(mk.path), "%s/dri/card0", top);
	assert_int_equal(pthread_create(&t, NULL, make_later, &mk), 0);
	assert_int_equal(node_wait(mk.path, 5 * 1000000u), 0);
	assert_int_equal(access(mk.path, F_OK), 0);
	assert_true(monotonic_usec() - start < 4 * 1000000u);
	pthread_join(t, &failed);
	assert_null(failed);
	/* Already there: at once. */
	assert_int_equal(node_wait(mk.path, 0), 0);
	unlink(mk.path);
	rmdir(mk.dir);
	rmdir(top);
}

static void test_times_out(void **state) {
	_cleanup_(freep) char *top = tmpdir();
	char path[PATH_MAX];
	uint64_t start = monotonic_usec();

	(void)state;
	snprintf(path, sizeof(path), "%s/dri/card0", top);
	assert_int_equal(node_wait(path, 200 * 1000), -ETIMEDOUT);
	assert_true(monotonic_usec() - start >= 200 * 1000);
	/* Another file in the directory is no end to the wait. */
	snprintf(path, sizeof(path), "%s/card0", top);
	assert_int_equal(node_wait(path, 0), -ETIMEDOUT);
	rmdir(top);
}

/* A stop asked for meanwhile ends the wait, and the signal is taken: nothing is left pending. */
static void test_stop_ends_the_wait(void **state) {
	_cleanup_(freep) char *top = tmpdir();
	char path[PATH_MAX];
	sigset_t stop, old, pending;

	(void)state;
	snprintf(path, sizeof(path), "%s/fb0", top);
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	assert_int_equal(sigprocmask(SIG_BLOCK, &stop, &old), 0);
	assert_int_equal(raise(SIGTERM), 0);
	assert_int_equal(node_wait(path, 5 * 1000000u), -ECANCELED);
	assert_int_equal(sigpending(&pending), 0);
	assert_false(sigismember(&pending, SIGTERM));
	assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
	rmdir(top);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_and_directory_come_later),
		cmocka_unit_test(test_times_out),
		cmocka_unit_test(test_stop_ends_the_wait),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
