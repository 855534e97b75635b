/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "loop.h"
#include "util.h"

/* Descriptors taken from one epoll_wait(). */
#define LOOP_BATCH 64

struct loop_io {
	struct loop *loop;
	int fd;
	uint32_t events;
	bool enabled;
	bool dead;
	loop_io_handler_t fn;
	void *userdata;
	struct loop_io *next_dead;
};

struct loop {
	sd_event *event;
	int epfd;
	/* sd-event must look at itself before the loop sleeps: something not quiet ran, or its fd woke. */
	bool event_due;
	/* Inside a batch: an io freed now is freed at its end, when no event of the batch points to it. */
	bool dispatching;
	/* sd-event finished (sd_event_exit(), then its exit sources): only sd-event's dispatch gets it there. */
	bool finished;
	struct loop_io *dead;
	/* loop_now(): CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, each read once a wakeup. */
	uint64_t now[3];
	unsigned int now_known;
};

int loop_new(struct loop **ret, sd_event *event) {
	_cleanup_(loop_freep) struct loop *l = NULL;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int fd;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->epfd = -1;
	l->event = sd_event_ref(event);
	l->event_due = true;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return -errno;
	fd = sd_event_get_fd(event);
	if (fd < 0)
		return fd;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	*ret = TAKE_PTR(l);
	return 0;
}

static void free_dead(struct loop *l) {
	while (l->dead) {
		struct loop_io *io = l->dead;

		l->dead = io->next_dead;
		free(io);
	}
}

struct loop *loop_free(struct loop *l) {
	if (!l)
		return NULL;
	free_dead(l);
	if (l->epfd >= 0)
		close(l->epfd);
	sd_event_unref(l->event);
	free(l);
	return NULL;
}

sd_event *loop_event(struct loop *l) {
	return l->event;
}

int loop_add_io(struct loop *l, struct loop_io **ret, int fd, uint32_t events, loop_io_handler_t fn,
		void *userdata) {
	struct loop_io *io;
	int r;

	if (fd < 0 || !fn)
		return -EINVAL;
	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	*io = (struct loop_io){ .loop = l, .fd = fd, .events = events, .fn = fn, .userdata = userdata };
	r = loop_io_set_enabled(io, true);
	if (r < 0) {
		free(io);
		return r;
	}
	*ret = io;
	return 0;
}

/*
 * Off is out of the epoll set, not a zero event mask: epoll reports an
 * error or a hangup whatever the mask, and a dead connection left in would
 * wake the loop for ever.
 */
int loop_io_set_enabled(struct loop_io *io, bool enabled) {
	struct epoll_event ev = { .events = io->events, .data.ptr = io };

	if (io->dead)
		return -ESTALE;
	if (io->enabled == enabled)
		return 0;
	if (epoll_ctl(io->loop->epfd, enabled ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, io->fd, &ev) < 0)
		return -errno;
	io->enabled = enabled;
	return 0;
}

bool loop_io_get_enabled(const struct loop_io *io) {
	return io && io->enabled;
}

struct loop_io *loop_io_free(struct loop_io *io) {
	struct loop *l;

	if (!io)
		return NULL;
	l = io->loop;
	(void)loop_io_set_enabled(io, false);
	io->dead = true;
	if (l->dispatching) {
		io->next_dead = l->dead;
		l->dead = io;
	} else
		free(io);
	return NULL;
}

static int clock_index(clockid_t clock) {
	switch (clock) {
	case CLOCK_MONOTONIC:
		return 0;
	case CLOCK_REALTIME:
		return 1;
	case CLOCK_BOOTTIME:
		return 2;
	default:
		return -1;
	}
}

int loop_now(struct loop *l, clockid_t clock, uint64_t *ret_usec) {
	int i = clock_index(clock);
	struct timespec ts;

	if (i < 0)
		return -EOPNOTSUPP;
	if (!(l->now_known & (1U << i))) {
		if (clock_gettime(clock, &ts) < 0)
			return -errno;
		l->now[i] = (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
		l->now_known |= 1U << i;
	}
	*ret_usec = l->now[i];
	return 0;
}

/* Dispatches what sd-event has pending (it is in SD_EVENT_PENDING); 1, or a negative errno. */
static int event_dispatch(struct loop *l) {
	int r;

	l->now_known = 0;
	r = sd_event_dispatch(l->event);
	l->now_known = 0;
	l->finished = sd_event_get_state(l->event) == SD_EVENT_FINISHED;
	return r < 0 ? r : 1;
}

/*
 * One step of sd-event's own iteration, never blocking: dispatches one
 * source if one is pending (returns 1: look again), or leaves sd-event
 * armed, its fd in the loop's set telling when it has more (returns 0).
 */
static int event_step(struct loop *l) {
	int r;

	if (sd_event_get_state(l->event) == SD_EVENT_ARMED) {
		r = sd_event_wait(l->event, 0);
		if (r < 0)
			return r;
		if (r > 0)
			return event_dispatch(l);
	}
	r = sd_event_prepare(l->event);
	if (r <= 0)
		return r;
	return event_dispatch(l);
}

static void dispatch_io(struct loop_io *io, uint32_t revents) {
	struct loop *l = io->loop;
	int r;

	if (io->dead || !io->enabled)
		return;
	r = io->fn(io, revents, io->userdata);
	if (r == LOOP_QUIET)
		return;
	l->event_due = true;
	/* As sd-event does with a source whose handler fails; the handler said why. */
	if (r < 0)
		(void)loop_io_set_enabled(io, false);
}

int loop_iterate(struct loop *l, int timeout_ms) {
	struct epoll_event evs[LOOP_BATCH];
	bool dispatched = false;
	int n, r;

	if (l->finished)
		return -ESTALE;
	if (l->event_due) {
		r = event_step(l);
		if (r < 0)
			return r;
		if (l->finished)
			return 1;
		/* Something was dispatched: more may be pending, so the loop only looks before coming back. */
		if (r > 0) {
			dispatched = true;
			timeout_ms = 0;
		} else
			l->event_due = false;
	}
	n = epoll_wait(l->epfd, evs, LOOP_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? dispatched : -errno;
	if (n == 0 && !dispatched) {
		/* Idle: sd-event is left as sd_event_run() leaves it, for a caller that runs it directly. */
		if (sd_event_get_state(l->event) == SD_EVENT_ARMED) {
			r = sd_event_wait(l->event, 0);
			if (r < 0)
				return r;
			l->event_due = true;
			if (r > 0)
				return event_dispatch(l);
		}
		return 0;
	}
	l->now_known = 0;
	l->dispatching = true;
	for (int i = 0; i < n; i++) {
		if (evs[i].data.ptr)
			dispatch_io(evs[i].data.ptr, evs[i].events);
		else
			l->event_due = true;
	}
	l->dispatching = false;
	free_dead(l);
	return 1;
}

int loop_run(struct loop *l) {
	int code = 0, r;

	if (sd_event_get_state(l->event) != SD_EVENT_INITIAL)
		return -EBUSY;
	while (!l->finished) {
		r = loop_iterate(l, -1);
		if (r < 0)
			return r;
	}
	r = sd_event_get_exit_code(l->event, &code);
	return r < 0 ? r : code;
}
