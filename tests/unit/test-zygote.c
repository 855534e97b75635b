/* SPDX-License-Identifier: MIT */
/* Populate helpers are forked by the zygote: the plan and descriptors it is sent, the pidfd it answers with. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "populate/populate-internal.h"

#define MARKER "sent through the plan"

struct rig {
	struct zygote *zygote;
	struct plan *plan;
	char dir[64];
	int root_fd, mnt_fd, pipe[2];
};

static int setup(void **state) {
	struct rig *rig = calloc(1, sizeof(*rig));

	assert_non_null(rig);
	assert_int_equal(zygote_start(&rig->zygote), 0);
	rig->plan = calloc(1, sizeof(*rig->plan));
	assert_non_null(rig->plan);
	snprintf(rig->plan->result.first_refused, sizeof(rig->plan->result.first_refused), "%s", MARKER);
	/* A container root with no /dev: whoever runs the helper, it fails and says why. */
	snprintf(rig->dir, sizeof(rig->dir), "/tmp/test-zygote-XXXXXX");
	assert_non_null(mkdtemp(rig->dir));
	rig->root_fd = open(rig->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	rig->mnt_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
	assert_true(rig->root_fd >= 0 && rig->mnt_fd >= 0);
	assert_int_equal(pipe2(rig->pipe, O_CLOEXEC | O_NONBLOCK), 0);
	*state = rig;
	return 0;
}

static int teardown(void **state) {
	struct rig *rig = *state;

	zygote_free(rig->zygote);
	close(rig->root_fd);
	close(rig->mnt_fd);
	closep(&rig->pipe[0]);
	closep(&rig->pipe[1]);
	rmdir(rig->dir);
	free(rig->plan);
	free(rig);
	return 0;
}

/* The helper's report, once its pidfd says it ended. */
static void wait_report(struct rig *rig, int pidfd, struct child_report *report) {
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	assert_int_equal(poll(&p, 1, 10000), 1);
	assert_int_equal(read(rig->pipe[0], report, sizeof(*report)), (ssize_t)sizeof(*report));
}

static void test_helper_runs_the_plan(void **state) {
	struct rig *rig = *state;
	struct child_report report;
	int pidfd = -1;

	assert_int_equal(zygote_spawn(rig->zygote, ZYGOTE_REMOVE, rig->plan, rig->pipe[1], rig->root_fd, rig->mnt_fd,
				      &pidfd), 0);
	closep(&rig->pipe[1]);
	assert_true(pidfd >= 0);
	wait_report(rig, pidfd, &report);
	/* The plan arrived whole, and the helper says how it went in its report, not in an exit status. */
	assert_string_equal(report.result.first_refused, MARKER);
	assert_true(report.r < 0);
	assert_true(report.result.failed[0] != '\0');
	/* The helper is not this process's child: the zygote reaps it. */
	assert_int_equal(waitid(P_PIDFD, (id_t)pidfd, &(siginfo_t){ 0 }, WEXITED | WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
	close(pidfd);
}

static void test_unknown_function_is_refused(void **state) {
	struct rig *rig = *state;
	struct child_report report;
	int pidfd = -1;

	assert_int_equal(zygote_spawn(rig->zygote, _ZYGOTE_FN_MAX, rig->plan, rig->pipe[1], rig->root_fd,
				      rig->mnt_fd, &pidfd), -EINVAL);
	assert_int_equal(zygote_spawn(rig->zygote, (enum zygote_fn)-1, rig->plan, rig->pipe[1], rig->root_fd,
				      rig->mnt_fd, &pidfd), -EINVAL);
	assert_int_equal(pidfd, -1);
	/* The zygote serves on. */
	assert_int_equal(zygote_spawn(rig->zygote, ZYGOTE_POPULATE, rig->plan, rig->pipe[1], rig->root_fd,
				      rig->mnt_fd, &pidfd), 0);
	closep(&rig->pipe[1]);
	wait_report(rig, pidfd, &report);
	assert_string_equal(report.result.first_refused, MARKER);
	close(pidfd);
}

static void test_no_zygote_forks_nothing(void **state) {
	struct rig *rig = *state;
	int pidfd = -1;

	assert_int_equal(zygote_spawn(NULL, ZYGOTE_POPULATE, rig->plan, rig->pipe[1], rig->root_fd, rig->mnt_fd,
				      &pidfd), -ENOTCONN);
	assert_int_equal(pidfd, -1);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_helper_runs_the_plan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_function_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_zygote_forks_nothing, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
