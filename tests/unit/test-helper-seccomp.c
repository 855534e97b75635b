/* SPDX-License-Identifier: MIT */
/*
 * The populate helper's system call filter: after it, a process runs no
 * program, makes no process, opens no socket and signals no one (EPERM),
 * and still opens, reads and writes files.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "populate/populate-internal.h"

/* In the filtered child: 0, or the number of the check that failed. */
static int filtered_checks(void) {
	char *const argv[] = { "true", NULL };
	char buf[1];
	int fd;

	if (populate_helper_seccomp() < 0)
		return 1;
	if (execve("/bin/true", argv, NULL) != -1 || errno != EPERM)
		return 2;
	if (socket(AF_UNIX, SOCK_STREAM, 0) != -1 || errno != EPERM)
		return 3;
	if (fork() != -1 || errno != EPERM)
		return 4;
	if (kill(getppid(), 0) != -1 || errno != EPERM)
		return 5;
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, 1) != 1)
		return 6;
	close(fd);
	return 0;
}

static void test_filter_refuses_what_the_helper_never_needs(void **state) {
	int status = 0;
	pid_t pid;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(filtered_checks());
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Without the filter the same calls work: the checks above see the filter, not this machine. */
static void test_without_it_they_work(void **state) {
	int fd;

	(void)state;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(kill(getpid(), 0), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_filter_refuses_what_the_helper_never_needs),
		cmocka_unit_test(test_without_it_they_work),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
