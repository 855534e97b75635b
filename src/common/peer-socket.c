/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer-socket.h"
#include "util.h"

/* How long a listening socket takes no connection once paused. */
#define LISTEN_PAUSE_USEC (1000 * 1000ULL)

/* Messages peer_close() looks through before it leaves the socket to the closer. */
#define CLOSE_DRAIN_MAX 64

/*
 * A look at what comes next: its size (up to len), and whether
 * descriptors come with it (without a control buffer; the kernel's
 * references of the look are not in the file table). A later read of as
 * many bytes takes no message the look did not see: a look goes on to
 * the message after the bytes it copied, and reports its descriptors,
 * while a read stops there; and only this reader takes from the queue.
 */
static ssize_t peek(int fd, void *buf, size_t len, int flags, bool *ret_fds) {
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	*ret_fds = mh.msg_flags & MSG_CTRUNC;
	return n;
}

/* Every descriptor of an SCM_RIGHTS message, in order, to fn. */
static void each_fd(struct msghdr *mh, void (*fn)(int fd, void *userdata), void *userdata) {
	for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(mh); cmsg; cmsg = CMSG_NXTHDR(mh, cmsg)) {
		if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; CMSG_LEN((i + 1) * sizeof(int)) <= cmsg->cmsg_len; i++) {
			int one;

			memcpy(&one, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
			fn(one, userdata);
		}
	}
}

static void to_closer(int fd, void *userdata) {
	fd_closer_close_for(userdata, fd);
}

struct taken {
	int *fds;
	size_t n, max;
	struct fd_closer_quota *q;
};

static void take(int fd, void *userdata) {
	struct taken *t = userdata;

	if (t->n < t->max)
		t->fds[t->n++] = fd;
	else
		fd_closer_close_for(t->q, fd);
}

ssize_t peer_recv(int fd, void *buf, size_t len, int flags) {
	bool fds;
	ssize_t n = peek(fd, buf, len, flags, &fds);

	/* Before the size: an empty packet may carry descriptors too. */
	if (n >= 0 && fds)
		return -EBADMSG;
	if (n <= 0)
		return n;
	n = recv(fd, buf, (flags & MSG_TRUNC) ? len : (size_t)n, MSG_DONTWAIT | flags);
	return n < 0 ? -errno : n;
}

ssize_t peer_recv_fds(int fd, void *buf, size_t len, int *ret_fds, size_t max, struct fd_closer_quota *q) {
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(PEER_RECV_FDS_MAX * sizeof(int))];
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf };
	struct taken t = { .fds = ret_fds, .max = MIN(max, (size_t)PEER_RECV_FDS_MAX), .q = q };
	bool any;
	ssize_t n;

	for (size_t i = 0; i < max; i++)
		ret_fds[i] = -1;
	n = peek(fd, buf, len, 0, &any);
	if (n < 0)
		return n;
	if (!any)
		return n == 0 ? 0 : peer_recv(fd, buf, (size_t)n, 0);
	if (t.max == 0)
		return -EMFILE;
	/*
	 * How many: a look with room for max and no more (CMSG_SPACE's padding
	 * would take one more). What it put in the file table are references
	 * of its own, whose close runs the file's flush: the closer's.
	 */
	mh.msg_controllen = CMSG_LEN(t.max * sizeof(int));
	do
		n = recvmsg(fd, &mh, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	each_fd(&mh, to_closer, q);
	if (mh.msg_flags & MSG_CTRUNC)
		return -EMFILE;
	iov.iov_len = (size_t)n;
	mh.msg_controllen = CMSG_LEN(t.max * sizeof(int));
	mh.msg_flags = 0;
	n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	each_fd(&mh, take, &t);
	return n;
}

void peer_close(int fd, struct fd_closer_quota *q) {
	char buf[4096];
	int type = 0;
	socklen_t len = sizeof(type);

	if (fd < 0)
		return;
	/* Nothing more comes: the peer's sends fail from here on. */
	(void)shutdown(fd, SHUT_RDWR);
	/*
	 * On a stream, 0 is the end of what was sent. A packet socket's empty
	 * packet reads as 0 too, with more behind it: that one is always the
	 * closer's.
	 */
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM)
		for (int i = 0; i < CLOSE_DRAIN_MAX; i++) {
			ssize_t n = peer_recv(fd, buf, sizeof(buf), 0);

			if (n == 0 || n == -EAGAIN) {
				close(fd);
				return;
			}
			if (n < 0)
				break;
		}
	fd_closer_close_for(q, fd);
}

int peer_accept(int listen_fd, struct fd_closer_quota *q, int *ret_fd) {
	int fd, on = 1;

	/* A connection refused, or ended, may go to the closer: none is taken while it has no room. */
	if (!fd_closer_has_room(q, 1))
		return -EBUSY;
	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return -errno;
	/*
	 * Out-of-band data in line with the rest: otherwise a look passes over
	 * it, and its descriptors, which a read then lets go.
	 */
	if (setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &on, sizeof(on)) < 0) {
		int r = -errno;

		fd_closer_close_for(q, fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

int peer_accept_next(sd_event_source *listener, sd_event_source **resume, struct fd_closer_quota *q, int *ret_fd,
		     struct ucred *ret_cred) {
	socklen_t len = sizeof(*ret_cred);
	int fd, r;

	r = peer_accept(sd_event_source_get_io_fd(listener), q, &fd);
	if (r == -EAGAIN || r == -EINTR || r == -ECONNABORTED)
		return r;
	if (r < 0) {
		peer_listen_pause(listener, resume);
		return r;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, ret_cred, &len) < 0) {
		r = -errno;
		peer_close(fd, q);
		return r;
	}
	*ret_fd = fd;
	return 0;
}

static int on_listen_resume(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)s;
	(void)usec;
	/* Cannot fail: the listener lives as long as this timer. */
	(void)sd_event_source_set_enabled(userdata, SD_EVENT_ON);
	return 0;
}

void peer_listen_pause(sd_event_source *listener, sd_event_source **resume) {
	(void)sd_event_source_set_enabled(listener, SD_EVENT_OFF);
	if (*resume) {
		(void)sd_event_source_set_time_relative(*resume, LISTEN_PAUSE_USEC);
		(void)sd_event_source_set_enabled(*resume, SD_EVENT_ONESHOT);
	} else if (sd_event_add_time_relative(sd_event_source_get_event(listener), resume, CLOCK_MONOTONIC,
					      LISTEN_PAUSE_USEC, 0, on_listen_resume, listener) < 0)
		(void)sd_event_source_set_enabled(listener, SD_EVENT_ON);
}
