/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <unistd.h>

#include "fd-closer.h"
#include "util.h"

static atomic_uint pending;
static int queue[2] = { -1, -1 };

static void *closer_main(void *arg) {
	int fd;

	(void)arg;
	for (;;) {
		ssize_t n = read(queue[0], &fd, sizeof(fd));
		if (n == (ssize_t)sizeof(fd)) {
			close(fd);
			atomic_fetch_sub(&pending, 1);
		} else if (n == 0 || (n < 0 && errno != EINTR))
			return NULL;
	}
}

/* The queue and its thread, with every signal blocked there: signals are the event loop's. */
static int closer_start(void) {
	int r;

	if (queue[1] >= 0)
		return 0;
	if (pipe2(queue, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(queue[1], F_SETFL, O_NONBLOCK) < 0)
		goto fail;
	r = thread_start_detached(closer_main, NULL, 0);
	if (r == 0)
		return 0;
	errno = -r;
fail:
	r = -errno;
	close(queue[0]);
	close(queue[1]);
	queue[0] = queue[1] = -1;
	return r;
}

bool fd_closer_has_room(void) {
	return atomic_load(&pending) < FD_CLOSER_MAX;
}

void fd_closer_close(int fd) {
	if (fd < 0)
		return;
	atomic_fetch_add(&pending, 1);
	if (closer_start() < 0 || write(queue[1], &fd, sizeof(fd)) != (ssize_t)sizeof(fd))
		return; /* stays open, and counted */
}
