/* SPDX-License-Identifier: MIT */
/*
 * Device memory that vanishes under an access (SIGBUS): a guarded mapping
 * is replaced and the access completes; any other still kills. A shared
 * mapping of a memfd truncated under it raises the same SIGBUS as a DMA
 * buffer whose device was unplugged. Each case runs in a child, whose
 * SIGBUS action is the default one before the first guard, as in devnsd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device-memory.h"

#define LEN (4 * 4096)

/* A shared mapping whose file is then cut to nothing: touching it raises SIGBUS. */
static uint8_t *vanishing_mapping(void) {
	int fd = memfd_create("device-memory-test", MFD_CLOEXEC);
	uint8_t *p;

	if (fd < 0 || ftruncate(fd, LEN) < 0)
		_exit(10);
	p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		_exit(11);
	memset(p, 1, LEN);
	if (ftruncate(fd, 0) < 0)
		_exit(12);
	close(fd);
	return p;
}

enum { GUARDED, UNGUARDED, UNGUARDED_AGAIN, SENT };

/* Exits 0 when the accesses completed and read back what was written. */
static void child(int what) {
	uint8_t *guarded = vanishing_mapping(), *other = vanishing_mapping();

	if (sigaction(SIGBUS, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL) < 0)
		_exit(13);
	if (device_memory_guard(guarded, LEN) < 0)
		_exit(14);
	if (what == UNGUARDED_AGAIN)
		device_memory_unguard(guarded);
	/* A SIGBUS sent, not raised by a fault, does what it always does. */
	if (what == SENT) {
		raise(SIGBUS);
		_exit(0);
	}
	/* The copy a present makes: from a place in the middle on. */
	memset((what == UNGUARDED ? other : guarded) + 4096 + 100, 0x5a, 2 * 4096);
	for (size_t i = 4096 + 100; i < 3 * 4096 + 100; i++)
		if (guarded[i] != 0x5a)
			_exit(15);
	_exit(0);
}

static int run(int what) {
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		child(what);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

static void test_guarded_mapping_is_replaced_and_the_copy_completes(void **state) {
	int status = run(GUARDED);

	(void)state;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void assert_killed_by_sigbus(int what) {
	int status = run(what);

	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGBUS);
}

static void test_other_memory_still_kills(void **state) {
	(void)state;
	assert_killed_by_sigbus(UNGUARDED);
}

static void test_unguarded_mapping_kills(void **state) {
	(void)state;
	assert_killed_by_sigbus(UNGUARDED_AGAIN);
}

static void test_sent_sigbus_still_kills(void **state) {
	(void)state;
	assert_killed_by_sigbus(SENT);
}

static void test_bounds(void **state) {
	static uint8_t some[64];
	unsigned int n = 0;

	(void)state;
	assert_int_equal(device_memory_guard(NULL, 1), -EINVAL);
	assert_int_equal(device_memory_guard(some, 0), -EINVAL);
	while (device_memory_guard(some + n % 64, 1) == 0)
		n++;
	assert_int_equal(n, DEVICE_MEMORY_GUARDS);
	assert_int_equal(device_memory_guard(some, 1), -ENOSPC);
	for (unsigned int i = 0; i < 64; i++)
		device_memory_unguard(some + i);
	assert_int_equal(device_memory_guard(some, 1), 0);
	device_memory_unguard(some);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guarded_mapping_is_replaced_and_the_copy_completes),
		cmocka_unit_test(test_other_memory_still_kills),
		cmocka_unit_test(test_unguarded_mapping_kills),
		cmocka_unit_test(test_sent_sigbus_still_kills),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
