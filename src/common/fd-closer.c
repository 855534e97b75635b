/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "fd-closer.h"
#include "util.h"

struct fd_closer_quota {
	atomic_uint refs;
	atomic_uint pending;
	unsigned int max;
};

/* What goes through the queue: one write, well under PIPE_BUF, so never torn. */
struct entry {
	int fd;
	struct fd_closer_quota *quota;
};

static atomic_uint pending;
static int queue[2] = { -1, -1 };

struct fd_closer_quota *fd_closer_quota_new(unsigned int max) {
	struct fd_closer_quota *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	atomic_init(&q->refs, 1);
	atomic_init(&q->pending, 0);
	q->max = max;
	return q;
}

struct fd_closer_quota *fd_closer_quota_unref(struct fd_closer_quota *q) {
	if (q && atomic_fetch_sub(&q->refs, 1) == 1)
		free(q);
	return NULL;
}

static void *closer_main(void *arg) {
	struct entry e;

	(void)arg;
	for (;;) {
		ssize_t n = read(queue[0], &e, sizeof(e));
		if (n == (ssize_t)sizeof(e)) {
			close(e.fd);
			if (e.quota) {
				atomic_fetch_sub(&e.quota->pending, 1);
				fd_closer_quota_unref(e.quota);
			}
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

bool fd_closer_has_room(struct fd_closer_quota *q, unsigned int n) {
	return atomic_load(&pending) + n <= FD_CLOSER_MAX && (!q || atomic_load(&q->pending) + n <= q->max);
}

void fd_closer_close_for(struct fd_closer_quota *q, int fd) {
	struct entry e = { .fd = fd, .quota = q };

	if (fd < 0)
		return;
	atomic_fetch_add(&pending, 1);
	if (q) {
		atomic_fetch_add(&q->pending, 1);
		atomic_fetch_add(&q->refs, 1);
	}
	if (closer_start() < 0 || write(queue[1], &e, sizeof(e)) != (ssize_t)sizeof(e))
		return; /* stays open, and counted */
}

void fd_closer_close(int fd) {
	fd_closer_close_for(NULL, fd);
}
