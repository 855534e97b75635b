/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "restart/fdstore.h"
#include "util.h"

/*
 * A message of the holder's protocol: "PUT name" (with an fd), "DEL name",
 * "LIST", "FD name" (with an fd), "END", "SYNC" (answered "OK"), "EXIT".
 */
#define MSG_MAX (16 + FDSTORE_NAME_MAX)
/* How long devnsd waits for a holder's answer before it does without. */
#define HOLDER_TIMEOUT_MSEC 2000

struct kept {
	char name[FDSTORE_NAME_MAX + 1];
	int fd;
};

struct fdstore {
	bool systemd;
	/* How many names the store keeps at most. */
	size_t max;
	/* The connection to the holder; -1 under systemd or without one. */
	int holder;
	/* What the last run left, until taken. */
	struct kept received[FDSTORE_MAX];
	size_t n_received;
	/* Names kept now (systemd: to remove them on a clean stop). */
	char (*names)[FDSTORE_NAME_MAX + 1];
	size_t n_names;
};

static bool name_ok(const char *name) {
	size_t n = strlen(name);

	return n > 0 && n <= FDSTORE_NAME_MAX &&
	       strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static int send_msg(int sock, const char *text, int fd) {
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = { 0 };
	struct iovec iov = { .iov_base = (void *)text, .iov_len = strlen(text) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = control.buf;
		mh.msg_controllen = sizeof(control.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* One message into buf (NUL-terminated) and at most one fd (others are closed); 0 at EOF. */
static ssize_t recv_msg(int sock, char *buf, size_t size, int *ret_fd) {
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} control;
	struct iovec iov = { .iov_base = buf, .iov_len = size - 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf) };
	ssize_t n;

	*ret_fd = -1;
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k;
		int fds[8];

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		memcpy(fds, CMSG_DATA(c), MIN(k, ELEMENTSOF(fds)) * sizeof(int));
		for (size_t i = 0; i < MIN(k, ELEMENTSOF(fds)); i++) {
			if (*ret_fd < 0)
				*ret_fd = fds[i];
			else
				close(fds[i]);
		}
	}
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n == (ssize_t)(size - 1)) {
		closep(ret_fd);
		*ret_fd = -1;
		return -EBADMSG;
	}
	buf[n] = '\0';
	return n;
}

/* --- the holder ------------------------------------------------------------ */

static void holder_serve(int conn, struct kept *kept, size_t *n_kept) {
	char msg[MSG_MAX];

	for (;;) {
		int fd;
		ssize_t n = recv_msg(conn, msg, sizeof(msg), &fd);
		const char *name = NULL;
		size_t i;

		if (n == 0 || (n < 0 && n != -EBADMSG && n != -EINTR))
			return;
		if (n < 0)
			continue;
		if (strncmp(msg, "PUT ", 4) == 0 || strncmp(msg, "DEL ", 4) == 0)
			name = msg + 4;
		if (name && name_ok(name)) {
			for (i = 0; i < *n_kept && !streq(kept[i].name, name); i++)
				;
			if (i < *n_kept) {
				close(kept[i].fd);
				kept[i] = kept[--*n_kept];
			}
			if (msg[0] == 'P' && fd >= 0 && *n_kept < FDSTORE_MAX) {
				snprintf(kept[*n_kept].name, sizeof(kept[*n_kept].name), "%s", name);
				kept[(*n_kept)++].fd = take_fd(&fd);
			}
		} else if (streq(msg, "LIST")) {
			for (i = 0; i < *n_kept; i++) {
				char out[MSG_MAX];

				snprintf(out, sizeof(out), "FD %s", kept[i].name);
				if (send_msg(conn, out, kept[i].fd) < 0)
					break;
			}
			(void)send_msg(conn, "END", -1);
		} else if (streq(msg, "SYNC"))
			(void)send_msg(conn, "OK", -1);
		else if (streq(msg, "EXIT"))
			_exit(0);
		closep(&fd);
	}
}

static void holder_drop_cuse(struct kept *kept, size_t *n_kept) {
	for (size_t i = 0; i < *n_kept;)
		if (strncmp(kept[i].name, FDSTORE_CUSE_PREFIX, strlen(FDSTORE_CUSE_PREFIX)) == 0) {
			close(kept[i].fd);
			kept[i] = kept[--*n_kept];
		} else
			i++;
}

_Noreturn static void holder_main(int listen_fd) {
	struct kept *kept = calloc(FDSTORE_MAX, sizeof(*kept));
	size_t n_kept = 0;
	sigset_t all;
	int null;

	/* Nothing of devnsd's stays open here: a device or CUSE fd would outlive it. */
	if (listen_fd != 3) {
		if (dup2(listen_fd, 3) < 0)
			_exit(1);
		listen_fd = 3;
	}
	close_range(4, ~0U, 0);
	null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	(void)setsid();
	(void)prctl(PR_SET_NAME, "devnsd-fdstore");
	if (!kept)
		_exit(1);
	for (bool served = false;;) {
		struct pollfd p = { .fd = listen_fd, .events = POLLIN };
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int conn;

		/* devnsd went without a clean stop: the clients of its nodes wait only so long. */
		if (served && poll(&p, 1, FDSTORE_HOLD_CUSE_SEC * 1000) == 0) {
			holder_drop_cuse(kept, &n_kept);
			served = false;
		}
		conn = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == geteuid()) {
			holder_serve(conn, kept, &n_kept);
			served = true;
		}
		close(conn);
	}
}

static int socket_address(const char *dir, struct sockaddr_un *sa, socklen_t *ret_len) {
	*sa = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if ((size_t)snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, FDSTORE_SOCKET) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	*ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(sa->sun_path) + 1);
	return 0;
}

/* A socket for the holder's address in dir. */
static int holder_socket(const char *dir, struct sockaddr_un *sa, socklen_t *len, int *ret_fd) {
	int r = socket_address(dir, sa, len), fd;

	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

static int holder_start(const char *dir) {
	_cleanup_(closep) int listen_fd = -1;
	struct sockaddr_un sa;
	socklen_t len;
	mode_t old;
	pid_t pid;
	int r;

	r = holder_socket(dir, &sa, &len, &listen_fd);
	if (r < 0)
		return r;
	(void)unlink(sa.sun_path);
	old = umask(0077);
	r = bind(listen_fd, (struct sockaddr *)&sa, len) < 0 ? -errno : 0;
	umask(old);
	if (r < 0)
		return r;
	if (listen(listen_fd, 4) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		holder_main(listen_fd);
	return 0;
}

static int holder_connect(const char *dir, int *ret) {
	_cleanup_(closep) int fd = -1;
	struct sockaddr_un sa;
	struct timeval tv = { .tv_sec = HOLDER_TIMEOUT_MSEC / 1000, .tv_usec = (HOLDER_TIMEOUT_MSEC % 1000) * 1000 };
	socklen_t len;
	int r;

	r = holder_socket(dir, &sa, &len, &fd);
	if (r < 0)
		return r;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, len) < 0)
		return -errno;
	*ret = take_fd(&fd);
	return 0;
}

static void note_name(struct fdstore *s, const char *name, bool kept);

static void add_received(struct fdstore *s, const char *name, int fd) {
	if (s->n_received == FDSTORE_MAX || !name_ok(name)) {
		close(fd);
		return;
	}
	snprintf(s->received[s->n_received].name, sizeof(s->received[0].name), "%s", name);
	s->received[s->n_received++].fd = fd;
	/* The store still has it: a clean stop removes it too. */
	note_name(s, name, true);
}

static int holder_list(struct fdstore *s) {
	int r = send_msg(s->holder, "LIST", -1);

	while (r >= 0) {
		char msg[MSG_MAX];
		int fd;
		ssize_t n = recv_msg(s->holder, msg, sizeof(msg), &fd);

		if (n <= 0)
			return n == 0 ? -ECONNRESET : (int)n;
		if (streq(msg, "END"))
			return 0;
		if (strncmp(msg, "FD ", 3) == 0 && fd >= 0)
			add_received(s, msg + 3, take_fd(&fd));
		closep(&fd);
	}
	return r;
}

static void received_from_systemd(struct fdstore *s) {
	char **names = NULL;
	int n = sd_listen_fds_with_names(true, &names);

	for (int i = 0; i < n; i++)
		add_received(s, names && names[i] ? names[i] : "", SD_LISTEN_FDS_START + i);
	for (int i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
}

int fdstore_new(struct fdstore **ret, const char *dir) {
	_cleanup_(fdstore_freep) struct fdstore *s = NULL;
	const char *e = getenv("FDSTORE");
	int r;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->holder = -1;
	s->systemd = e && atoi(e) > 0 && getenv("NOTIFY_SOCKET");
	s->max = s->systemd ? MIN((size_t)atoi(e), (size_t)FDSTORE_MAX) : FDSTORE_MAX;
	if (s->systemd) {
		received_from_systemd(s);
		*ret = TAKE_PTR(s);
		return 0;
	}
	if (holder_connect(dir, &s->holder) >= 0) {
		r = holder_list(s);
		if (r >= 0) {
			*ret = TAKE_PTR(s);
			return 0;
		}
		closep(&s->holder);
		s->holder = -1;
	}
	r = holder_start(dir);
	if (r >= 0)
		r = holder_connect(dir, &s->holder);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(s);
	return 0;
}

struct fdstore *fdstore_free(struct fdstore *s) {
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_received; i++)
		closep(&s->received[i].fd);
	closep(&s->holder);
	free(s->names);
	free(s);
	return NULL;
}

const char *fdstore_kind(const struct fdstore *s) {
	return s->systemd ? "systemd" : "holder";
}

int fdstore_take(struct fdstore *s, const char *name, int *ret_fd) {
	for (size_t i = 0; i < s->n_received; i++)
		if (s->received[i].fd >= 0 && streq(s->received[i].name, name)) {
			*ret_fd = take_fd(&s->received[i].fd);
			return 0;
		}
	return -ENOENT;
}

static void note_name(struct fdstore *s, const char *name, bool kept) {
	size_t i;

	for (i = 0; i < s->n_names && !streq(s->names[i], name); i++)
		;
	if (!kept) {
		if (i < s->n_names)
			memcpy(s->names[i], s->names[--s->n_names], sizeof(s->names[0]));
		return;
	}
	if (i < s->n_names || s->n_names == FDSTORE_MAX)
		return;
	if (!s->names) {
		s->names = calloc(FDSTORE_MAX, sizeof(*s->names));
		if (!s->names)
			return;
	}
	snprintf(s->names[s->n_names++], sizeof(s->names[0]), "%s", name);
}

int fdstore_remove(struct fdstore *s, const char *name) {
	char msg[MSG_MAX];

	if (!name_ok(name))
		return -EINVAL;
	note_name(s, name, false);
	if (s->systemd) {
		snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
		return sd_notify(0, msg);
	}
	if (s->holder < 0)
		return -ENOTCONN;
	snprintf(msg, sizeof(msg), "DEL %s", name);
	return send_msg(s->holder, msg, -1);
}

static bool name_noted(const struct fdstore *s, const char *name) {
	for (size_t i = 0; i < s->n_names; i++)
		if (streq(s->names[i], name))
			return true;
	return false;
}

size_t fdstore_room(const struct fdstore *s) {
	return s->max > s->n_names ? s->max - s->n_names : 0;
}

int fdstore_put(struct fdstore *s, const char *name, int fd) {
	char msg[MSG_MAX];
	int r;

	if (!name_ok(name) || fd < 0)
		return -EINVAL;
	/* The store drops what is past its limit without a word: it is not asked to. */
	if (!name_noted(s, name) && fdstore_room(s) == 0)
		return -ENOSPC;
	/* What the last run kept under the name is replaced, not left over. */
	for (size_t i = 0; i < s->n_received; i++)
		if (s->received[i].fd >= 0 && streq(s->received[i].name, name))
			closep(&s->received[i].fd);
	if (s->systemd) {
		/* The store keeps every fd given under a name: the old one goes first. */
		(void)fdstore_remove(s, name);
		snprintf(msg, sizeof(msg), "FDSTORE=1\nFDNAME=%s", name);
		r = sd_pid_notify_with_fds(0, false, msg, &fd, 1);
		r = r < 0 ? r : r == 0 ? -ENOTCONN : 0;
	} else if (s->holder < 0)
		r = -ENOTCONN;
	else {
		snprintf(msg, sizeof(msg), "PUT %s", name);
		r = send_msg(s->holder, msg, fd);
	}
	if (r >= 0)
		note_name(s, name, true);
	return r;
}

void fdstore_sync(struct fdstore *s) {
	char msg[MSG_MAX];

	if (s->systemd) {
		(void)sd_notify_barrier(0, HOLDER_TIMEOUT_MSEC * 1000ULL);
		return;
	}
	if (s->holder < 0 || send_msg(s->holder, "SYNC", -1) < 0)
		return;
	for (;;) {
		int fd;
		ssize_t n = recv_msg(s->holder, msg, sizeof(msg), &fd);

		closep(&fd);
		if (n <= 0 || streq(msg, "OK"))
			return;
	}
}

void fdstore_drop_left_over(struct fdstore *s, const char *prefix) {
	bool dropped = false;

	for (size_t i = 0; i < s->n_received; i++)
		if (s->received[i].fd >= 0 && strncmp(s->received[i].name, prefix, strlen(prefix)) == 0) {
			(void)fdstore_remove(s, s->received[i].name);
			closep(&s->received[i].fd);
			dropped = true;
		}
	if (dropped)
		fdstore_sync(s);
}

void fdstore_clear(struct fdstore *s) {
	if (s->systemd) {
		while (s->n_names > 0) {
			char name[FDSTORE_NAME_MAX + 1];

			memcpy(name, s->names[s->n_names - 1], sizeof(name));
			(void)fdstore_remove(s, name);
		}
		return;
	}
	if (s->holder >= 0)
		(void)send_msg(s->holder, "EXIT", -1);
}

const char *fdstore_left_over(const struct fdstore *s, size_t i) {
	for (size_t k = 0; k < s->n_received; k++)
		if (s->received[k].fd >= 0 && i-- == 0)
			return s->received[k].name;
	return NULL;
}
