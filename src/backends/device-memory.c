/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#include "device-memory.h"

/* A slot is in use while its len is not 0; the handler reads the slots as they are. */
static struct {
	uintptr_t start;
	size_t len;
} guards[DEVICE_MEMORY_GUARDS];
static struct sigaction previous;
static bool installed;

static bool replace(uintptr_t addr) {
	for (unsigned int i = 0; i < DEVICE_MEMORY_GUARDS; i++) {
		size_t len = __atomic_load_n(&guards[i].len, __ATOMIC_ACQUIRE);
		uintptr_t start = guards[i].start;

		if (len == 0 || addr - start >= len)
			continue;
		return mmap((void *)start, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
		       MAP_FAILED;
	}
	return false;
}

/* What the signal would have done without the guards. */
static void as_before(int sig, siginfo_t *si, void *context) {
	/* si_code > 0: raised by a fault, not sent. */
	bool sent = si->si_code <= 0;

	if (previous.sa_handler == SIG_IGN && sent)
		return;
	if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
		if (previous.sa_flags & SA_SIGINFO)
			previous.sa_sigaction(sig, si, context);
		else
			previous.sa_handler(sig);
		return;
	}
	/* The default action: a fault happens again on return, a sent signal is sent again. */
	(void)sigaction(SIGBUS, &(struct sigaction){ .sa_handler = SIG_DFL }, NULL);
	if (sent)
		(void)raise(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *context) {
	int saved = errno;

	if (si->si_code <= 0 || !replace((uintptr_t)si->si_addr))
		as_before(sig, si, context);
	errno = saved;
}

int device_memory_guard(void *addr, size_t len) {
	if (!addr || len == 0)
		return -EINVAL;
	if (!installed) {
		struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_ONSTACK };

		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, &previous) < 0)
			return -errno;
		installed = true;
	}
	for (unsigned int i = 0; i < DEVICE_MEMORY_GUARDS; i++)
		if (guards[i].len == 0) {
			guards[i].start = (uintptr_t)addr;
			__atomic_store_n(&guards[i].len, len, __ATOMIC_RELEASE);
			return 0;
		}
	return -ENOSPC;
}

void device_memory_unguard(void *addr) {
	for (unsigned int i = 0; i < DEVICE_MEMORY_GUARDS; i++)
		if (guards[i].len != 0 && guards[i].start == (uintptr_t)addr)
			__atomic_store_n(&guards[i].len, 0, __ATOMIC_RELEASE);
}
