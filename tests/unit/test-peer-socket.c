/* SPDX-License-Identifier: MIT */
/*
 * Reading a peer's socket: a message with descriptors nobody asked for
 * stays unread, and they are let go on the closer, never by the reader.
 * The descriptors sent are pipes' write ends: the read end sees the end of
 * the pipe when the last reference goes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fd-closer.h"
#include "peer-socket.h"

struct pair {
	int us, peer;
};

static struct pair pair_new(int type) {
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv), 0);
	return (struct pair){ .us = sv[0], .peer = sv[1] };
}

/* Sends len bytes with n descriptors (flags: MSG_OOB, say): each a pipe's write end, whose read end goes to ret_ends[]. */
static ssize_t send_flags(int sock, const char *data, size_t len, unsigned int n, int *ret_ends, int flags) {
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} control = { 0 };
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[8];

	assert_true(n <= 8);
	for (unsigned int i = 0; i < n; i++) {
		int p[2];

		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
		ret_ends[i] = p[0];
		fds[i] = p[1];
	}
	if (n) {
		struct cmsghdr *cmsg;

		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
		cmsg = CMSG_FIRSTHDR(&mh);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cmsg), fds, n * sizeof(int));
	}
	ssize_t sent = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);

	/* The message holds the last reference of each. */
	for (unsigned int i = 0; i < n; i++)
		close(fds[i]);
	return sent < 0 ? -errno : sent;
}

static void send_with(int sock, const char *data, size_t len, unsigned int n, int *ret_ends) {
	assert_int_equal(send_flags(sock, data, len, n, ret_ends, 0), (ssize_t)len);
}

/* Whether the pipe's writers are all gone (its read end at its end), waiting up to ms. */
static bool writers_gone(int end, int ms) {
	struct pollfd p = { .fd = end, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 && read(end, &c, 1) == 0;
}

static void test_recv_without_descriptors(void **state) {
	struct pair s = pair_new(SOCK_STREAM);
	char buf[16];
	int ends[2];

	(void)state;
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), 0), -EAGAIN);
	send_with(s.peer, "plain", 5, 0, NULL);
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), 0), 5);
	assert_memory_equal(buf, "plain", 5);
	/*
	 * Plain bytes, then a message with descriptors: the look sees those of
	 * the message right after what it reads, so nothing is read, however
	 * few bytes are asked for.
	 */
	send_with(s.peer, "ab", 2, 0, NULL);
	send_with(s.peer, "cd", 2, 2, ends);
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), 0), -EBADMSG);
	assert_int_equal(peer_recv(s.us, buf, 2, 0), -EBADMSG);
	/* Both are still there. */
	assert_int_equal(recv(s.us, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT), 4);
	assert_false(writers_gone(ends[0], 0));
	/* Closed with them queued: they go on the closer's thread. */
	peer_close(s.us, NULL);
	assert_true(writers_gone(ends[0], 5000));
	assert_true(writers_gone(ends[1], 5000));
	close(ends[0]);
	close(ends[1]);
	close(s.peer);
}

static void test_recv_fds(void **state) {
	struct fd_closer_quota *q = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	struct pair s = pair_new(SOCK_STREAM);
	int fds[3], ends[4];
	char buf[16];

	(void)state;
	/* As many as asked for, or fewer: taken. */
	send_with(s.peer, "track", 5, 3, ends);
	assert_int_equal(peer_recv_fds(s.us, buf, sizeof(buf), fds, 3, q), 5);
	for (int i = 0; i < 3; i++) {
		assert_true(fds[i] >= 0);
		close(fds[i]);
		/* The count's references were closed on the closer; this was the last. */
		assert_true(writers_gone(ends[i], 5000));
		close(ends[i]);
	}
	/* None: read as it is. */
	send_with(s.peer, "none", 4, 0, NULL);
	assert_int_equal(peer_recv_fds(s.us, buf, sizeof(buf), fds, 3, q), 4);
	assert_int_equal(fds[0], -1);
	/* One more than asked for: nothing read, nothing taken. */
	send_with(s.peer, "more", 4, 4, ends);
	assert_int_equal(peer_recv_fds(s.us, buf, sizeof(buf), fds, 3, q), -EMFILE);
	assert_int_equal(fds[0], -1);
	assert_int_equal(peer_recv_fds(s.us, buf, sizeof(buf), fds, 0, q), -EMFILE);
	assert_false(writers_gone(ends[3], 100));
	peer_close(s.us, q);
	for (int i = 0; i < 4; i++) {
		assert_true(writers_gone(ends[i], 5000));
		close(ends[i]);
	}
	fd_closer_quota_unref(q);
	close(s.peer);
}

static void test_packets(void **state) {
	struct pair s = pair_new(SOCK_SEQPACKET);
	char buf[4];
	int ends[1];

	(void)state;
	/* A packet's whole size, as MSG_TRUNC gives it. */
	send_with(s.peer, "longer", 6, 0, NULL);
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), MSG_TRUNC), 6);
	send_with(s.peer, "fd", 2, 1, ends);
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), MSG_TRUNC), -EBADMSG);
	close(ends[0]);
	/* An empty packet with one: not taken for the end. */
	send_with(s.peer, "", 0, 1, ends + 0);
	close(s.peer);
	assert_int_equal(peer_recv(s.us, buf, sizeof(buf), MSG_TRUNC), -EBADMSG);
	/* What is queued goes with the socket, on the closer. */
	peer_close(s.us, NULL);
	assert_true(writers_gone(ends[0], 5000));
	close(ends[0]);
	/*
	 * Shut down first: the peer can send nothing more. It is told so
	 * (EPIPE) or, once the closer has closed the socket too, that it is
	 * gone (ECONNRESET).
	 */
	s = pair_new(SOCK_SEQPACKET);
	send_with(s.peer, "x", 1, 0, NULL);
	peer_close(s.us, NULL);
	assert_int_equal(send(s.peer, "y", 1, MSG_NOSIGNAL | MSG_DONTWAIT), -1);
	assert_true(errno == EPIPE || errno == ECONNRESET);
	close(s.peer);
}

/* Out-of-band data with a descriptor, then plain bytes, on a connection peer_accept() took. */
static void test_out_of_band(void **state) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int listener, client, conn, ends[1];
	char buf[16];
	ssize_t sent;

	(void)state;
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "devns-test-peer-%d", (int)getpid());
	listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(listener >= 0);
	assert_int_equal(bind(listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(listener, 4), 0);
	client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(client, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(peer_accept(listener, NULL, &conn), 0);
	sent = send_flags(client, "!", 1, 1, ends, MSG_OOB);
	/* A kernel without out-of-band data on unix sockets refuses it: nothing to get around then. */
	if (sent == -EOPNOTSUPP) {
		close(ends[0]);
		ends[0] = -1;
	} else
		assert_int_equal(sent, 1);
	send_with(client, "data", 4, 0, NULL);
	if (ends[0] >= 0) {
		/* In line with the rest: the look sees its descriptor, and nothing is read. */
		assert_int_equal(peer_recv(conn, buf, sizeof(buf), 0), -EBADMSG);
		assert_false(writers_gone(ends[0], 100));
	} else
		assert_int_equal(peer_recv(conn, buf, sizeof(buf), 0), 4);
	peer_close(conn, NULL);
	if (ends[0] >= 0) {
		assert_true(writers_gone(ends[0], 5000));
		close(ends[0]);
	}
	close(client);
	close(listener);
}

static int on_nothing(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	(void)s;
	(void)fd;
	(void)revents;
	(void)userdata;
	return 0;
}

/* The next connection with its peer's credentials; none waiting; and a closer with no room pauses the listener. */
static void test_accept_next(void **state) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	sd_event_source *source = NULL, *resume = NULL;
	struct fd_closer_quota *full = fd_closer_quota_new(0);
	sd_event *event = NULL;
	int listener, client, conn = -1, enabled = -1;
	struct ucred cred = { 0 };

	(void)state;
	assert_non_null(full);
	snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1, "devns-test-accept-%d", (int)getpid());
	listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(listener >= 0);
	assert_int_equal(bind(listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(listener, 4), 0);
	assert_int_equal(sd_event_new(&event), 0);
	assert_int_equal(sd_event_add_io(event, &source, listener, EPOLLIN, on_nothing, NULL), 0);

	assert_int_equal(peer_accept_next(source, &resume, NULL, &conn, &cred), -EAGAIN);
	assert_int_equal(conn, -1);
	client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(client, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(peer_accept_next(source, &resume, NULL, &conn, &cred), 0);
	assert_true(conn >= 0);
	assert_int_equal(cred.pid, getpid());
	assert_int_equal(cred.uid, getuid());
	assert_null(resume);
	peer_close(conn, NULL);
	close(client);

	/* Waiting, but the closer could not take the socket back: left waiting, and the listener rests. */
	client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(client, (struct sockaddr *)&sa, sizeof(sa)), 0);
	conn = -1;
	assert_int_equal(peer_accept_next(source, &resume, full, &conn, &cred), -EBUSY);
	assert_int_equal(conn, -1);
	assert_int_equal(sd_event_source_get_enabled(source, &enabled), 0);
	assert_int_equal(enabled, SD_EVENT_OFF);
	assert_non_null(resume);
	assert_int_equal(peer_accept_next(source, &resume, NULL, &conn, &cred), 0);
	peer_close(conn, NULL);
	close(client);

	sd_event_source_disable_unref(resume);
	sd_event_source_disable_unref(source);
	sd_event_unref(event);
	fd_closer_quota_unref(full);
	close(listener);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_recv_without_descriptors),
		cmocka_unit_test(test_recv_fds),
		cmocka_unit_test(test_packets),
		cmocka_unit_test(test_out_of_band),
		cmocka_unit_test(test_accept_next),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
