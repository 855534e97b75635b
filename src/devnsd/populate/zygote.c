/* SPDX-License-Identifier: MIT */
/*
 * The zygote: a small process devnsd forks as it starts, holding nothing
 * but its end of a socketpair. Every populate helper is forked from it,
 * never from devnsd, so that no helper inherits a descriptor devnsd holds
 * for a client (one sent in a track message, waiting for the fd closer:
 * closing a copy of it could wait for good on a FUSE server).
 *
 * devnsd sends one request at a time (struct zygote_request) with
 * ZYGOTE_FDS descriptors: the plan (a sealed memfd), the result pipe's
 * write end, the container's root and its mount namespace. The zygote
 * forks the helper, opens its pidfd before it can be reaped, and answers
 * with one struct zygote_reply and, on success, that pidfd. It reaps its
 * helpers itself; devnsd watches their pidfds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "populate/populate-internal.h"
#include "log.h"

#define ZYGOTE_MAGIC 0x647a7967u
/* The plan, the result pipe's write end, the container's root, its mount namespace. */
#define ZYGOTE_FDS 4
/* How long devnsd waits for the zygote's answer: it forks and answers, nothing more. */
#define ZYGOTE_REPLY_MSEC 5000
#define PLAN_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)

struct zygote_request {
	uint32_t magic;
	uint32_t fn; /* an index in child_fns[] */
};

struct zygote_reply {
	uint32_t magic;
	int32_t error; /* 0 (the pidfd comes with it) or a negative errno */
};

struct zygote {
	int sock;
	int pidfd;
	sd_event *event;
	sd_event_source *source;
};

static const child_fn child_fns[] = {
	[ZYGOTE_POPULATE] = populate_child,
	[ZYGOTE_REMOVE] = populate_child_remove,
};
_Static_assert(ELEMENTSOF(child_fns) == _ZYGOTE_FN_MAX, "every function has its index");

/* --- the zygote process ------------------------------------------------------ */

/* The descriptors of msg's SCM_RIGHTS messages, at most max (the rest closed); their number. */
static size_t take_fds(struct msghdr *msg, int *fds, size_t max) {
	size_t n = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t count;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
			continue;
		count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n] = fd;
			else
				close(fd);
			n++;
		}
	}
	return n;
}

/* Forks the helper that runs fn on the plan in fds[0], with the other three fds; its pidfd. */
static int start_helper(uint32_t fn, const int *fds, int *ret_pidfd) {
	struct plan *plan;
	struct stat st;
	int seals, pidfd, r = 0;
	pid_t pid;

	if (fn >= ELEMENTSOF(child_fns))
		return -EINVAL;
	if (fstat(fds[0], &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size != (off_t)sizeof(struct plan))
		return -EINVAL;
	seals = fcntl(fds[0], F_GET_SEALS);
	if (seals < 0 || (seals & PLAN_SEALS) != PLAN_SEALS)
		return -EPERM;
	/* A private copy: the helper writes its result into it. */
	plan = mmap(NULL, sizeof(*plan), PROT_READ | PROT_WRITE, MAP_PRIVATE, fds[0], 0);
	if (plan == MAP_FAILED)
		return -errno;
	pid = fork();
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGCHLD, SIG_DFL);
		(void)prctl(PR_SET_NAME, "devnsd-populate");
		plan->persona = NULL;
		child_fns[fn](plan, fds[1], fds[2], fds[3]);
		_exit(EXIT_FAILURE);
	}
	if (pid < 0)
		r = -errno;
	(void)munmap(plan, sizeof(*plan));
	if (r < 0)
		return r;
	/* Only this process reaps, and only in its loop: the helper is still there to be named. */
	pidfd = pidfd_open(pid, 0);
	if (pidfd < 0) {
		r = -errno;
		(void)kill(pid, SIGKILL);
		return r;
	}
	*ret_pidfd = pidfd;
	return 0;
}

/* One request: false once devnsd is gone. */
static bool serve(int sock) {
	struct zygote_request req;
	struct zygote_reply reply = { .magic = ZYGOTE_MAGIC };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS)];
	} control;
	struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	int fds[ZYGOTE_FDS] = { -1, -1, -1, -1 }, pidfd = -1;
	size_t n_fds;
	ssize_t n;

	n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0)
		return false;
	n_fds = take_fds(&msg, fds, ZYGOTE_FDS);
	if (n != (ssize_t)sizeof(req) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n_fds != ZYGOTE_FDS ||
	    req.magic != ZYGOTE_MAGIC)
		reply.error = -EBADMSG;
	else
		reply.error = start_helper(req.fn, fds, &pidfd);
	for (size_t i = 0; i < ZYGOTE_FDS; i++)
		closep(&fds[i]);

	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} out = { 0 };
	struct iovec oiov = { .iov_base = &reply, .iov_len = sizeof(reply) };
	struct msghdr omsg = { .msg_iov = &oiov, .msg_iovlen = 1 };

	if (pidfd >= 0) {
		struct cmsghdr *c;

		omsg.msg_control = out.buf;
		omsg.msg_controllen = sizeof(out.buf);
		c = CMSG_FIRSTHDR(&omsg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
	}
	while ((n = sendmsg(sock, &omsg, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	if (n < 0 && pidfd >= 0)
		(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	closep(&pidfd);
	return n >= 0;
}

static void reap(int sigfd) {
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof(si)) > 0)
		;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

_Noreturn static void zygote_main(int sock, pid_t parent) {
	static const int ignored[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2 };
	sigset_t chld;
	int sigfd;

	/* It ends with devnsd, and holds nothing of devnsd's but its socket (fd 3). */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(EXIT_FAILURE);
	if (sock != 3) {
		if (dup2(sock, 3) < 0)
			_exit(EXIT_FAILURE);
		sock = 3;
	}
	(void)close_range(4, ~0U, 0);
	(void)prctl(PR_SET_NAME, "devnsd-zygote");
	/* Stopping the unit signals its whole cgroup: the zygote ends when devnsd does, not before. */
	for (size_t i = 0; i < ELEMENTSOF(ignored); i++)
		(void)signal(ignored[i], SIG_IGN);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	(void)sigprocmask(SIG_SETMASK, &chld, NULL);
	sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		_exit(EXIT_FAILURE);
	for (;;) {
		struct pollfd p[2] = { { .fd = sock, .events = POLLIN }, { .fd = sigfd, .events = POLLIN } };

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(EXIT_FAILURE);
		}
		if (p[1].revents)
			reap(sigfd);
		if ((p[0].revents & POLLIN) && !serve(sock))
			_exit(EXIT_SUCCESS);
		if (!(p[0].revents & POLLIN) && (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)))
			_exit(EXIT_SUCCESS);
	}
}

/* --- devnsd's side ----------------------------------------------------------- */

struct zygote *zygote_free(struct zygote *z) {
	if (!z)
		return NULL;
	sd_event_source_disable_unref(z->source);
	sd_event_unref(z->event);
	closep(&z->sock);
	if (z->pidfd >= 0) {
		/* Its socket closed, it ends: reaped now if it has, else by init once devnsd exits. */
		(void)waitid(P_PIDFD, (id_t)z->pidfd, &(siginfo_t){ 0 }, WEXITED | WNOHANG);
		closep(&z->pidfd);
	}
	free(z);
	return NULL;
}

int zygote_start(struct zygote **ret) {
	struct zygote *z;
	int pair[2];
	pid_t parent = getpid(), pid;

	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->sock = z->pidfd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0) {
		free(z);
		return -errno;
	}
	pid = fork();
	if (pid == 0)
		zygote_main(pair[1], parent);
	close(pair[1]);
	z->sock = pair[0];
	if (pid < 0) {
		int r = -errno;

		zygote_free(z);
		return r;
	}
	z->pidfd = pidfd_open(pid, 0);
	if (z->pidfd < 0) {
		int r = -errno;

		(void)kill(pid, SIGKILL);
		zygote_free(z);
		return r;
	}
	*ret = z;
	return 0;
}

static int on_zygote_gone(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct zygote *z = userdata;

	(void)s;
	(void)fd;
	(void)revents;
	log_error("the process that starts populate helpers (devnsd-zygote) ended; devnsd cannot start a clean one "
		  "while it holds its clients' descriptors, and exits so that it starts again and takes its state back");
	z->source = sd_event_source_disable_unref(z->source);
	return sd_event_exit(z->event, -ECHILD);
}

int zygote_watch(struct zygote *z, sd_event *event) {
	z->event = sd_event_ref(event);
	return sd_event_add_io(event, &z->source, z->sock, EPOLLRDHUP, on_zygote_gone, z);
}

/* The plan as a sealed memfd: a flat copy, without the persona pointer the helper must not use. */
static int plan_memfd(const struct plan *plan, int *ret_fd) {
	_cleanup_(closep) int fd = memfd_create("devnsd-plan", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	const char *p = (const char *)plan;
	struct persona *none = NULL;
	size_t done = 0;

	if (fd < 0)
		return -errno;
	while (done < sizeof(*plan)) {
		ssize_t n = write(fd, p + done, sizeof(*plan) - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	if (pwrite(fd, &none, sizeof(none), offsetof(struct plan, persona)) != (ssize_t)sizeof(none))
		return -EIO;
	if (fcntl(fd, F_ADD_SEALS, PLAN_SEALS) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	return 0;
}

/* The zygote did not answer as it must: it is stopped, and devnsd hears of its end in its loop. */
static int zygote_broken(struct zygote *z, int r) {
	if (z->pidfd >= 0)
		(void)pidfd_send_signal(z->pidfd, SIGKILL, NULL, 0);
	(void)shutdown(z->sock, SHUT_RDWR);
	return r;
}

int zygote_spawn(struct zygote *z, enum zygote_fn fn, const struct plan *plan, int result_fd, int root_fd,
		 int mnt_fd, int *ret_pidfd) {
	_cleanup_(closep) int plan_fd = -1;
	struct zygote_request req = { .magic = ZYGOTE_MAGIC, .fn = fn };
	struct zygote_reply reply;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * ZYGOTE_FDS)];
	} control = { 0 };
	struct iovec iov = { .iov_base = &req, .iov_len = sizeof(req) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct pollfd p = { .events = POLLIN };
	struct cmsghdr *c;
	int fds[ZYGOTE_FDS], pidfd = -1, r;
	size_t n_fds;
	ssize_t n;

	if (!z || z->sock < 0)
		return -ENOTCONN;
	r = plan_memfd(plan, &plan_fd);
	if (r < 0)
		return r;
	fds[0] = plan_fd;
	fds[1] = result_fd;
	fds[2] = root_fd;
	fds[3] = mnt_fd;
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	while ((n = sendmsg(z->sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(req))
		return zygote_broken(z, n < 0 ? -errno : -EIO);

	/* Its answer comes at once: it forks, opens a pidfd and answers. */
	p.fd = z->sock;
	do
		r = poll(&p, 1, ZYGOTE_REPLY_MSEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return zygote_broken(z, r < 0 ? -errno : -ETIMEDOUT);

	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} in;
	iov = (struct iovec){ .iov_base = &reply, .iov_len = sizeof(reply) };
	msg = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1, .msg_control = in.buf, .msg_controllen = sizeof(in.buf) };
	n = recvmsg(z->sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0)
		return zygote_broken(z, -errno);
	n_fds = take_fds(&msg, &pidfd, 1);
	if (n != (ssize_t)sizeof(reply) || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || reply.magic != ZYGOTE_MAGIC ||
	    reply.error > 0 || (reply.error == 0) != (n_fds == 1)) {
		closep(&pidfd);
		return zygote_broken(z, -EBADMSG);
	}
	if (reply.error < 0)
		return reply.error;
	*ret_pidfd = pidfd;
	return 0;
}
