/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "fd-closer.h"
#include "util.h"

/* A closer thread's stack: it only calls close(). */
#define CLOSER_STACK_BYTES (64 * 1024)

/*
 * An owner's share, with its own queue and the thread that empties it,
 * both made with its first descriptor: a close that never returns holds
 * up that owner's descriptors only. The thread holds a reference; the
 * owner's end closes the queue, and the thread ends once it is empty.
 */
struct fd_closer_quota {
	atomic_uint refs;
	atomic_uint pending;
	unsigned int max;
	int queue[2];
};

/* Descriptors waiting or being closed, of every owner. */
static atomic_uint pending;
/* Descriptors of no owner's (devnsd's own): never freed. */
static struct fd_closer_quota ownerless = { .refs = 1, .max = FD_CLOSER_MAX, .queue = { -1, -1 } };

struct fd_closer_quota *fd_closer_quota_new(unsigned int max) {
	struct fd_closer_quota *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	atomic_init(&q->refs, 1);
	atomic_init(&q->pending, 0);
	q->max = max;
	q->queue[0] = q->queue[1] = -1;
	return q;
}

static void quota_unref(struct fd_closer_quota *q) {
	if (atomic_fetch_sub(&q->refs, 1) == 1)
		free(q);
}

struct fd_closer_quota *fd_closer_quota_unref(struct fd_closer_quota *q) {
	if (!q || q == &ownerless)
		return NULL;
	/* The owner writes no more: the thread closes what is queued, then ends. */
	if (q->queue[1] >= 0)
		close(q->queue[1]);
	quota_unref(q);
	return NULL;
}

static void *closer_main(void *arg) {
	struct fd_closer_quota *q = arg;
	int fd;

	for (;;) {
		ssize_t n = read(q->queue[0], &fd, sizeof(fd));
		if (n == (ssize_t)sizeof(fd)) {
			close(fd);
			atomic_fetch_sub(&q->pending, 1);
			atomic_fetch_sub(&pending, 1);
		} else if (n == 0 || (n < 0 && errno != EINTR))
			break;
	}
	close(q->queue[0]);
	quota_unref(q);
	return NULL;
}

/* The owner's queue and its thread, with every signal blocked there: signals are the event loop's. */
static int closer_start(struct fd_closer_quota *q) {
	int r;

	if (q->queue[1] >= 0)
		return 0;
	if (pipe2(q->queue, O_CLOEXEC) < 0)
		return -errno;
	if (fcntl(q->queue[1], F_SETFL, O_NONBLOCK) < 0)
		goto fail;
	atomic_fetch_add(&q->refs, 1);
	r = thread_start_detached(closer_main, q, CLOSER_STACK_BYTES);
	if (r == 0)
		return 0;
	atomic_fetch_sub(&q->refs, 1);
	errno = -r;
fail:
	r = -errno;
	close(q->queue[0]);
	close(q->queue[1]);
	q->queue[0] = q->queue[1] = -1;
	return r;
}

bool fd_closer_has_room(struct fd_closer_quota *q, unsigned int n) {
	return atomic_load(&pending) + n <= FD_CLOSER_MAX && (!q || atomic_load(&q->pending) + n <= q->max);
}

void fd_closer_close_for(struct fd_closer_quota *q, int fd) {
	if (fd < 0)
		return;
	if (!q)
		q = &ownerless;
	atomic_fetch_add(&pending, 1);
	atomic_fetch_add(&q->pending, 1);
	/* One write, well under PIPE_BUF: never torn. */
	if (closer_start(q) < 0 || write(q->queue[1], &fd, sizeof(fd)) != (ssize_t)sizeof(fd))
		return; /* stays open, and counted */
}

void fd_closer_close(int fd) {
	fd_closer_close_for(NULL, fd);
}
