/* SPDX-License-Identifier: MIT */
/*
 * cuse-relay: the leanest forwarder that serves a CUSE node, as a floor for
 * the input latency benchmark: what devnsd's transport costs before devnsd
 * does any work of its own.
 *
 * Usage: cuse-relay [--epoll] SOURCE_NODE NAME
 *
 * Grabs SOURCE_NODE (an evdev node) and serves what it reads on /dev/NAME,
 * a CUSE character device that answers read() and poll() and nothing else.
 * One thread runs libfuse's session loop and parks each read request; another
 * sleeps in read() on the source and answers the parked request with what it
 * got (or keeps it, up to one buffer, until the next request comes, waking a
 * parked poll()). No event loop, no clock read, no persona: one blocking
 * read() and one reply per wakeup. It serves one reader at a time: a read
 * that comes while another is parked gets EBUSY.
 *
 * With --epoll one thread does both, waiting in epoll_wait() on the source
 * and on the CUSE channel, as a daemon with one event loop does.
 *
 * Prints "ready" once the node exists.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 35
#include <cuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <linux/input.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_EVENTS 512

static struct {
	pthread_mutex_t lock;
	int source;
	fuse_req_t parked;
	struct fuse_pollhandle *poller;
	size_t parked_size;
	struct input_event pending[MAX_EVENTS];
	size_t n_pending;
} R = { .lock = PTHREAD_MUTEX_INITIALIZER, .source = -1 };

/* Called with R.lock held: answers the parked request from the pending events. */
static void answer(void) {
	size_t n = R.parked_size / sizeof(struct input_event);
	fuse_req_t req = R.parked;

	if (n > R.n_pending)
		n = R.n_pending;
	R.parked = NULL;
	fuse_reply_buf(req, (const char *)R.pending, n * sizeof(struct input_event));
	memmove(R.pending, R.pending + n, (R.n_pending - n) * sizeof(struct input_event));
	R.n_pending -= n;
}

static void relay_open(fuse_req_t req, struct fuse_file_info *fi) {
	fi->direct_io = 1;
	fi->nonseekable = 1;
	fuse_reply_open(req, fi);
}

static void relay_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)off;
	if (size < sizeof(struct input_event)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	pthread_mutex_lock(&R.lock);
	if (!R.n_pending && (fi->flags & O_NONBLOCK)) {
		pthread_mutex_unlock(&R.lock);
		fuse_reply_err(req, EAGAIN);
		return;
	}
	if (R.parked) {
		pthread_mutex_unlock(&R.lock);
		fuse_reply_err(req, EBUSY);
		return;
	}
	R.parked = req;
	R.parked_size = size;
	if (R.n_pending)
		answer();
	pthread_mutex_unlock(&R.lock);
}

static void relay_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph) {
	unsigned revents;

	(void)fi;
	pthread_mutex_lock(&R.lock);
	if (ph) {
		if (R.poller)
			fuse_pollhandle_destroy(R.poller);
		R.poller = ph;
	}
	revents = R.n_pending ? POLLIN : 0;
	pthread_mutex_unlock(&R.lock);
	fuse_reply_poll(req, revents);
}

static void relay_init_done(void *userdata) {
	(void)userdata;
	printf("ready\n");
	fflush(stdout);
}

/* One read() of the source, handed to the parked request if there is one. */
static void pump_once(void) {
	struct input_event ev[MAX_EVENTS];
	ssize_t n = read(R.source, ev, sizeof(ev));
	size_t k, room;

	if (n < 0 && errno == EINTR)
		return;
	if (n <= 0) {
		fprintf(stderr, "cuse-relay: read: %s\n", n < 0 ? strerror(errno) : "end of file");
		exit(1);
	}
	k = (size_t)n / sizeof(struct input_event);
	pthread_mutex_lock(&R.lock);
	room = MAX_EVENTS - R.n_pending;
	if (k > room)
		k = room;
	memcpy(R.pending + R.n_pending, ev, k * sizeof(struct input_event));
	R.n_pending += k;
	if (R.parked)
		answer();
	if (R.n_pending && R.poller) {
		fuse_lowlevel_notify_poll(R.poller);
		fuse_pollhandle_destroy(R.poller);
		R.poller = NULL;
	}
	pthread_mutex_unlock(&R.lock);
}

static void *pump(void *arg) {
	(void)arg;
	for (;;)
		pump_once();
	return NULL;
}

static int epoll_loop(int argc, char **argv, const struct cuse_info *ci, const struct cuse_lowlevel_ops *ops) {
	struct fuse_session *se;
	struct fuse_buf buf = { 0 };
	int multithreaded, ep, r = 0;

	se = cuse_lowlevel_setup(argc, argv, ci, ops, &multithreaded, NULL);
	if (!se)
		return 1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, R.source, &(struct epoll_event){ .events = EPOLLIN, .data.fd = R.source }) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, fuse_session_fd(se),
		      &(struct epoll_event){ .events = EPOLLIN, .data.fd = fuse_session_fd(se) }) < 0) {
		fprintf(stderr, "cuse-relay: epoll: %s\n", strerror(errno));
		cuse_lowlevel_teardown(se);
		return 1;
	}
	while (!fuse_session_exited(se)) {
		struct epoll_event ev[2];
		int n = epoll_wait(ep, ev, 2, -1);

		for (int i = 0; i < n; i++) {
			if (ev[i].data.fd == R.source) {
				pump_once();
				continue;
			}
			r = fuse_session_receive_buf(se, &buf);
			if (r == -EINTR || r == -EAGAIN)
				continue;
			if (r <= 0)
				goto out;
			fuse_session_process_buf(se, &buf);
		}
	}
out:
	free(buf.mem);
	close(ep);
	cuse_lowlevel_teardown(se);
	return r < 0 ? 1 : 0;
}

static const struct cuse_lowlevel_ops relay_ops = {
	.init_done = relay_init_done,
	.open = relay_open,
	.read = relay_read,
	.poll = relay_poll,
};

int main(int argc, char **argv) {
	char devname[128];
	const char *dev_info[] = { devname };
	struct cuse_info ci = { .dev_info_argc = 1, .dev_info_argv = dev_info };
	char *fuse_argv[] = { argv[0], "-f", "-s", NULL };
	bool with_epoll = argc > 1 && strcmp(argv[1], "--epoll") == 0;
	pthread_t thread;

	argv += with_epoll;
	argc -= with_epoll;
	if (argc != 3 || strlen(argv[2]) > 64) {
		fprintf(stderr, "usage: cuse-relay [--epoll] SOURCE_NODE NAME\n");
		return 2;
	}
	snprintf(devname, sizeof(devname), "DEVNAME=%s", argv[2]);
	R.source = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (R.source < 0 || ioctl(R.source, EVIOCGRAB, 1) < 0) {
		fprintf(stderr, "cuse-relay: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (with_epoll)
		return epoll_loop(3, fuse_argv, &ci, &relay_ops);
	if (pthread_create(&thread, NULL, pump, NULL)) {
		fprintf(stderr, "cuse-relay: cannot start its reader thread\n");
		return 1;
	}
	return cuse_lowlevel_main(3, fuse_argv, &ci, &relay_ops, NULL);
}
