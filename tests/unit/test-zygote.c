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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "populate/populate-internal.h"

#define MARKER "sent through the plan"
/* The wire format, as populate/zygote.c has it. */
#define ZYGOTE_MAGIC 0x647a7967u
#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

struct rig {
	struct zygote *zygote;
	/* devnsd's end of the zygote's socket: the socket zygote_start() opened. */
	int sock;
	struct plan *plan;
	char dir[64];
	int root_fd, mnt_fd, pipe[2];
};

static int setup(void **state) {
	struct rig *rig = calloc(1, sizeof(*rig));

	bool before[256] = { false };
	struct stat st;

	assert_non_null(rig);
	for (int fd = 0; fd < 256; fd++)
		before[fd] = fcntl(fd, F_GETFD) >= 0;
	assert_int_equal(zygote_start(&rig->zygote), 0);
	rig->sock = -1;
	for (int fd = 0; fd < 256; fd++)
		if (!before[fd] && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
			rig->sock = fd;
	assert_true(rig->sock >= 0);
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

/* A memfd of size bytes with seals; -1 on failure. */
static int memfd_of(size_t size, int seals) {
	int fd = memfd_create("test-plan", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0 || (seals && fcntl(fd, F_ADD_SEALS, seals) < 0))
		return -1;
	return fd;
}

/* Sends the zygote len bytes of buf with n fds as they are, straight on its socket: the error it answers. */
static int32_t raw_request(struct rig *rig, const void *buf, size_t len, const int *fds, size_t n) {
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} control = { 0 }, in;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct { uint32_t magic; int32_t error; } reply = { 0 };
	struct pollfd p = { .fd = rig->sock, .events = POLLIN };

	if (n > 0) {
		struct cmsghdr *c;

		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	assert_int_equal(sendmsg(rig->sock, &msg, 0), (ssize_t)len);
	assert_int_equal(poll(&p, 1, 5000), 1);
	iov = (struct iovec){ .iov_base = &reply, .iov_len = sizeof(reply) };
	msg = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = in.buf, .msg_controllen = sizeof(in.buf) };
	assert_int_equal(recvmsg(rig->sock, &msg, MSG_CMSG_CLOEXEC), (ssize_t)sizeof(reply));
	assert_int_equal(reply.magic, ZYGOTE_MAGIC);
	/* A refusal comes without a pidfd. */
	assert_null(CMSG_FIRSTHDR(&msg));
	return reply.error;
}

static void test_malformed_requests_fork_nothing(void **state) {
	struct rig *rig = *state;
	const uint32_t good[2] = { ZYGOTE_MAGIC, ZYGOTE_REMOVE }, bad_magic[2] = { 0x12345678, ZYGOTE_REMOVE };
	const uint32_t bad_fn[2] = { ZYGOTE_MAGIC, 1000 };
	const char longer[64] = { 0 };
	int plan = memfd_of(sizeof(struct plan), SEALS), unsealed = memfd_of(sizeof(struct plan), 0);
	int small = memfd_of(4096, SEALS), pipe_fd = rig->pipe[1];
	int fds[4] = { plan, pipe_fd, rig->root_fd, rig->mnt_fd };
	int five[5] = { plan, pipe_fd, rig->root_fd, rig->mnt_fd, rig->mnt_fd };
	struct child_report report;
	int pidfd = -1;

	assert_true(plan >= 0 && unsealed >= 0 && small >= 0);
	/* Sizes and descriptor counts other than the request's. */
	assert_int_equal(raw_request(rig, good, 1, fds, 4), -EBADMSG);
	assert_int_equal(raw_request(rig, longer, sizeof(longer), fds, 4), -EBADMSG);
	assert_int_equal(raw_request(rig, good, sizeof(good), fds, 3), -EBADMSG);
	assert_int_equal(raw_request(rig, good, sizeof(good), five, 5), -EBADMSG);
	assert_int_equal(raw_request(rig, good, sizeof(good), NULL, 0), -EBADMSG);
	assert_int_equal(raw_request(rig, bad_magic, sizeof(bad_magic), fds, 4), -EBADMSG);
	/* A function it does not have, and plans it does not take. */
	assert_int_equal(raw_request(rig, bad_fn, sizeof(bad_fn), fds, 4), -EINVAL);
	fds[0] = unsealed;
	assert_int_equal(raw_request(rig, good, sizeof(good), fds, 4), -EPERM);
	fds[0] = small;
	assert_int_equal(raw_request(rig, good, sizeof(good), fds, 4), -EINVAL);
	fds[0] = rig->root_fd;
	assert_int_equal(raw_request(rig, good, sizeof(good), fds, 4), -EINVAL);
	close(plan);
	close(unsealed);
	close(small);
	/* No helper ran: nothing was written on the pipe. */
	assert_int_equal(read(rig->pipe[0], &report, sizeof(report)), -1);
	assert_int_equal(errno, EAGAIN);
	/* The zygote serves on. */
	assert_int_equal(zygote_spawn(rig->zygote, ZYGOTE_REMOVE, rig->plan, rig->pipe[1], rig->root_fd, rig->mnt_fd,
				      &pidfd), 0);
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
		cmocka_unit_test_setup_teardown(test_malformed_requests_fork_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_zygote_forks_nothing, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
