/* SPDX-License-Identifier: MIT */
/*
 * The persona's framebuffer socket: hands the memfd to a program that
 * brings a ticket of an open fb0 file (devns-fb.h). Nothing about the
 * peer is trusted but the ticket: the peer's uid (SO_PEERCRED) only
 * bounds how many requests one uid may have waiting, and what it gets is
 * decided by the open file behind the ticket.
 */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "cuse-drm.h"
#include "cuse-fb.h"
#include "devns-fb.h"
#include "display/display-internal.h"
#include "fd-closer.h"
#include "log.h"
#include "peer-socket.h"
#include "ratelimit.h"
#include "util.h"

/* Linux 6.16: a socket that refuses descriptors; sendmsg() with SCM_RIGHTS to it fails with EPERM. */
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Programs of one persona that may map the framebuffer at once, and how many of them one uid may run. */
#define DISPLAY_SOCKET_MAX_MAPPERS 64
#define DISPLAY_SOCKET_MAX_MAPPERS_PER_UID (DISPLAY_SOCKET_MAX_MAPPERS / 4)
/* Connections that have not sent their request yet, and how many of them one uid may have. */
#define DISPLAY_SOCKET_MAX_PENDING 16
#define DISPLAY_SOCKET_MAX_PENDING_PER_UID (DISPLAY_SOCKET_MAX_PENDING / 4)
/* Uids whose refusal was logged. */
#define REFUSALS_REMEMBERED 16
/* Failures to hand over the memory that are logged: a few at once, then one a minute. */
#define GRANT_FAILURES_LOGGED 5
#define GRANT_FAILURE_LOG_INTERVAL_USEC (60 * 1000000ULL)
#define SOCKET_NAME "fb0"

/*
 * A connection: pending until its request comes (uid: the peer's), then,
 * for DEVNS_FB_INTENT_MAP, a mapping until it closes (uid: the opener of
 * the fb0 file behind its ticket).
 */
struct conn {
	struct display_socket *socket;
	int fd;
	bool mapping;
	/* A mapping of a read-only memfd: the program cannot write through it. */
	bool read_only;
	/* The mapping's track message came (or something else in its place); its tracking, if it was taken. */
	bool track_asked;
	/*
	 * Something came with descriptors devnsd does not take: it stays unread
	 * (peer-socket.h), and only the connection's end is watched.
	 */
	bool deaf;
	struct display_track *track;
	uid_t uid;
	sd_event_source *io, *deadline;
	LIST_ENTRY(conn) link;
};

struct display_socket {
	struct display_node *node;
	int fd;
	/* The socket's directory, and the socket file as it was bound there. */
	int dir_fd;
	dev_t dev;
	ino_t ino;
	sd_event_source *source, *resume;
	LIST_HEAD(, conn) conns;
	unsigned int n_pending, n_mappers;
	uid_t refused[REFUSALS_REMEMBERED];
	unsigned int n_refused;
	struct ratelimit grant_failures;
};

static void conn_free(struct conn *c) {
	struct display_node *dn = c->socket->node;

	if (!dn->closer_quota)
		dn->closer_quota = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	LIST_REMOVE(c, link);
	if (c->mapping)
		c->socket->n_mappers--;
	else
		c->socket->n_pending--;
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->deadline);
	display_track_free(c->track);
	peer_close(c->fd, dn->closer_quota);
	free(c);
}

static unsigned int conns_of_uid(const struct display_socket *ds, bool mapping, uid_t uid) {
	const struct conn *c;
	unsigned int n = 0;

	LIST_FOREACH(c, &ds->conns, link)
		n += c->mapping == mapping && c->uid == uid;
	return n;
}

/* Whether this is the first refusal of uid to log. */
static bool first_refusal(struct display_socket *ds, uid_t uid) {
	for (unsigned int i = 0; i < MIN(ds->n_refused, REFUSALS_REMEMBERED); i++)
		if (ds->refused[i] == uid)
			return false;
	ds->refused[ds->n_refused++ % REFUSALS_REMEMBERED] = uid;
	return true;
}

/* Logs a refusal, the first one of each uid. */
static void log_refused(struct display_socket *ds, uid_t uid, const char *why) {
	if (!first_refusal(ds, uid))
		return;
	log_notice("%s: refused uid %u: %s; nothing was sent (further refusals of this uid are not logged)",
		   ds->node->socket_path, (unsigned int)uid, why);
}

static void refuse(struct conn *c, const char *why) {
	log_refused(c->socket, c->uid, why);
	conn_free(c);
}

/* The grant, with memfd unless it is -1 (then error says why). */
static int send_grant(int fd, int memfd, uint64_t size, uint64_t serial, int error) {
	struct devns_fb_grant grant = {
		.magic = DEVNS_FB_GRANT_MAGIC, .error = (uint32_t)error, .size = size, .serial = serial
	};
	struct iovec iov = { .iov_base = &grant, .iov_len = sizeof(grant) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control = { 0 };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);

	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &memfd, sizeof(int));
	if (memfd < 0) {
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
	}
	if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(grant))
		return errno ? -errno : -EIO;
	return 0;
}

/*
 * The memory with the open file's access, in a description of the
 * program's own: never devnsd's, whose flags and leases the program could
 * otherwise change for devnsd and every other program.
 */
static int grant_memfd(struct conn *c, int access_mode) {
	const struct fb_node *fb = c->socket->node->fb;
	_cleanup_(closep) int fd = -1;
	int r;

	r = fb_node_reopen(fb, access_mode, &fd);
	if (r < 0)
		return r;
	return send_grant(c->fd, fd, fb->size, fb->serial, 0);
}

/*
 * A card0 dumb buffer's memory, likewise in a description of the program's
 * own; its dma-buf as it is (nothing of devnsd's reads or locks it).
 */
static int grant_buffer(struct conn *c, const struct cuse_drm_grant *grant, bool dmabuf) {
	_cleanup_(closep) int fd = -1;
	int r;

	if (dmabuf)
		return send_grant(c->fd, grant->memfd, grant->size, grant->serial, 0);
	r = memfd_reopen(grant->memfd, grant->access_mode, &fd);
	if (r < 0)
		return r;
	return send_grant(c->fd, fd, grant->size, grant->serial, 0);
}

/* Logs a failure to hand memory over, a few at once, then once a minute. */
static void log_grant_failure(struct conn *c, uid_t uid, int r) {
	struct display_socket *ds = c->socket;
	struct display_node *dn = ds->node;
	uint64_t now = 0;

	(void)sd_event_now(dn->class->base.manager->event, CLOCK_MONOTONIC, &now);
	if (!ratelimit_take(&ds->grant_failures, now))
		return;
	if (r == -EAGAIN)
		log_notice("%s: refused uid %u the memory: someone holds a lease on it, and devnsd does not wait for "
			   "one to break (failures are logged at most once a minute)",
			   dn->socket_path, (unsigned int)uid);
	else
		log_warning_errno(r, "%s: cannot send the memory to uid %u: %m (failures are logged at most once a "
				  "minute)", dn->socket_path, (unsigned int)uid);
}

/*
 * A ticket of card0: the dumb buffer it names, or its dma-buf, sent once;
 * the connection ends. A valid ticket whose dma-buf cannot be had gets a
 * grant without an fd, saying why.
 */
static void handle_buffer_request(struct conn *c, const struct devns_fb_request *req) {
	struct display_node *dn = c->socket->node;
	bool dmabuf = req->intent == DEVNS_FB_INTENT_DMABUF;
	struct cuse_drm_grant grant;
	int r;

	r = dn->drm_cuse ? cuse_drm_redeem(dn->drm_cuse, &req->ticket, dmabuf, &grant) : -ENOENT;
	if (r == -ENOENT)
		return refuse(c, "no valid ticket");
	if (r < 0) {
		log_debug_errno(r, "%s: no dma-buf of %s for this ticket: %m", dn->socket_path, dn->drm_path);
		(void)send_grant(c->fd, -1, 0, 0, -r);
		return conn_free(c);
	}
	c->uid = grant.uid;
	r = grant_buffer(c, &grant, dmabuf);
	if (r < 0)
		log_grant_failure(c, grant.uid, r);
	else
		log_debug("%s: uid %u got a dumb buffer%s of %s", dn->socket_path, (unsigned int)grant.uid,
			  dmabuf ? "'s dma-buf" : "", dn->drm_path);
	conn_free(c);
}

/*
 * Whether the kernel lets the peer send c's socket descriptors at all
 * (Linux 6.16 and later; older kernels ignore this and devnsd takes what
 * comes as below). Each descriptor devnsd takes is one more file it has to
 * close, and closing some files waits for whoever serves them.
 */
static void pass_rights(int fd, bool on) {
	int v = on;

	(void)setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &v, sizeof(v));
}

/* The request of a pending connection: a ticket, redeemed for the memfd. */
static void handle_request(struct conn *c) {
	struct display_socket *ds = c->socket;
	struct display_node *dn = ds->node;
	struct devns_fb_request req;
	struct cuse_fb_grant grant;
	uint8_t buf[sizeof(req) + 1];
	ssize_t n;
	int r;

	n = peer_recv(c->fd, buf, sizeof(buf), 0);
	if (n == -EAGAIN)
		return;
	if (n == -EBADMSG)
		return refuse(c, "descriptors sent along with a request");
	if (n != (ssize_t)sizeof(req))
		return refuse(c, n <= 0 ? "no request" : "a malformed request");
	memcpy(&req, buf, sizeof(req));
	if (req.magic != DEVNS_FB_REQUEST_MAGIC || (req.intent != DEVNS_FB_INTENT_MAP &&
						    req.intent != DEVNS_FB_INTENT_WRITE &&
						    req.intent != DEVNS_FB_INTENT_DMABUF))
		return refuse(c, "a malformed request");
	/* Only card0's buffers have a dma-buf. */
	if (req.intent == DEVNS_FB_INTENT_DMABUF)
		return handle_buffer_request(c, &req);
	/* Single use: from here on the ticket is gone, whatever happens. */
	if (!dn->cuse || cuse_fb_redeem(dn->cuse, &req.ticket, &grant) < 0)
		return handle_buffer_request(c, &req);
	c->uid = grant.uid;
	if (req.intent == DEVNS_FB_INTENT_MAP && (ds->n_mappers >= DISPLAY_SOCKET_MAX_MAPPERS ||
						  conns_of_uid(ds, true, grant.uid) >= DISPLAY_SOCKET_MAX_MAPPERS_PER_UID))
		return refuse(c, "too many mappings");
	/* A mapping sends one track message, with a descriptor: before it can, the socket takes them again. */
	if (req.intent == DEVNS_FB_INTENT_MAP)
		pass_rights(c->fd, true);
	r = grant_memfd(c, grant.access_mode);
	if (r < 0) {
		log_grant_failure(c, grant.uid, r);
		return conn_free(c);
	}
	if (req.intent != DEVNS_FB_INTENT_MAP) {
		log_debug("%s: uid %u got the framebuffer to write", dn->socket_path, (unsigned int)grant.uid);
		return conn_free(c);
	}
	c->deadline = sd_event_source_disable_unref(c->deadline);
	c->mapping = true;
	c->read_only = grant.access_mode == O_RDONLY;
	ds->n_pending--;
	ds->n_mappers++;
	log_debug("%s: uid %u maps the framebuffer", dn->socket_path, (unsigned int)grant.uid);
	display_node_mappers_changed(dn);
}

static void reply_track(struct conn *c, int status) {
	struct devns_fb_track_reply reply = { .magic = DEVNS_FB_TRACK_MAGIC, .status = status };

	/* Nothing waits for it: a program that does not read it loses nothing. */
	(void)send(c->fd, &reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Only the connection's end is watched from here on: what waits on it is not read. */
static void conn_deafen(struct conn *c) {
	c->deaf = true;
	/* Cannot fail: the source exists and its fd is watched already. */
	(void)sd_event_source_set_io_events(c->io, EPOLLRDHUP);
}

/* The program at the other end of fd, as a pidfd (Linux 6.5 and later); -1 if the kernel gives none. */
static int peer_pidfd(int fd) {
	socklen_t len = sizeof(int);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || len != sizeof(int))
		return -1;
	return pidfd;
}

/*
 * The first message of a mapping: a request to track it, with its
 * userfaultfd (and its pagemap and second userfaultfd, with
 * DEVNS_FB_TRACK_ASYNC). Descriptors are taken only while tracking is on
 * (TrackWrites=) and the closer has room for as many as a message can
 * carry, in case they turn out to be something else. A message with
 * descriptors that are not taken (more than three, or any at all
 * otherwise) is left unread: letting go of them is the closer's, once the
 * connection ends (peer-socket.h). The mapping is scanned meanwhile.
 */
static void handle_track(struct conn *c) {
	struct display_node *dn = c->socket->node;
	struct devns_fb_track msg = { 0 };
	uint8_t buf[sizeof(msg) + 1];
	bool tracking = dn->class->base.manager->conf->display_track;
	bool room;
	const char *why;
	ssize_t n;
	int fds[3] = { -1, -1, -1 }, r;

	if (!dn->closer_quota)
		dn->closer_quota = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	/*
	 * Room for the three that may be taken. Counting them takes one more
	 * reference of each (peer-socket.h), closed at once unless a flush
	 * waits: that may take the persona three past its share.
	 */
	room = tracking && dn->closer_quota && fd_closer_has_room(dn->closer_quota, 3);

	n = peer_recv_fds(c->fd, buf, sizeof(buf), fds, room ? 3 : 0, dn->closer_quota);
	if (n == -EAGAIN)
		return;
	c->track_asked = true;
	/* One track message per mapping: nothing more to take. */
	pass_rights(c->fd, false);
	if (n == -EMFILE)
		conn_deafen(c);
	else if (n <= 0)
		return;
	else
		memcpy(&msg, buf, MIN((size_t)n, sizeof(msg)));
	if (!tracking)
		r = -EOPNOTSUPP;
	else if (!room)
		r = -EBUSY;
	else if (n != (ssize_t)sizeof(msg) || msg.magic != DEVNS_FB_TRACK_MAGIC)
		r = -EINVAL;
	else if (c->read_only)
		r = -EBADF;
	else {
		_cleanup_(closep) int peer = msg.flags & DEVNS_FB_TRACK_ASYNC ? peer_pidfd(c->fd) : -1;

		r = display_track_new(dn, &msg, fds, peer, &c->track);
		fds[0] = fds[1] = fds[2] = -1;
	}
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			fd_closer_close_for(dn->closer_quota, fds[i]);
	if (r < 0) {
		why = r == -EBADF  ? "sent no userfaultfd (or, asking for asynchronous tracking, no pagemap of its own) "
				     "to track its mapping with" :
		      r == -EBUSY  ? "asked for tracking while too many of its persona's descriptors wait to be closed, "
				     "or too many of its persona's are tracked" :
		      r == -EINVAL ? (n == -EMFILE ? "sent more descriptors than a track message has" :
						     "asked for tracking of a range that is not its registered mapping") :
		      r == -EOPNOTSUPP ? "asked for tracking, which is off (TrackWrites=)" :
		      r == -ETIMEDOUT ? "asked for tracking, which its persona lost by holding devnsd up" :
				     "asked for tracking, which failed";
		if (first_refusal(c->socket, c->uid))
			log_notice("%s: uid %u %s (%s); its mapping is scanned every refresh (further refusals of this uid "
				   "are not logged)",
				   dn->socket_path, (unsigned int)c->uid, why, strerror(-r));
		reply_track(c, r);
		return;
	}
	reply_track(c, 0);
	log_debug("%s: uid %u has its mapping tracked", dn->socket_path, (unsigned int)c->uid);
	display_node_mapped_written(dn);
}

static int on_conn(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct conn *c = userdata;
	struct display_node *dn = c->socket->node;
	char buf[64];
	ssize_t n;

	(void)s;
	if (!c->mapping) {
		handle_request(c);
		return 0;
	}
	if (!c->deaf && !c->track_asked && !(revents & (EPOLLHUP | EPOLLERR))) {
		handle_track(c);
		return 0;
	}
	/* After the track message a mapping sends nothing; whatever comes ends its tracking. */
	n = c->deaf ? 0 : peer_recv(fd, buf, sizeof(buf), 0);
	if (n > 0 || n == -EAGAIN || n == -EBADMSG) {
		if (n != -EAGAIN && c->track) {
			c->track = display_track_free(c->track);
			display_node_mapped_written(dn);
		}
		if (n == -EBADMSG)
			conn_deafen(c);
		return 0;
	}
	conn_free(c);
	display_node_mappers_changed(dn);
	return 0;
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)s;
	(void)usec;
	refuse(userdata, "no request in time");
	return 0;
}

static int conn_new(struct display_socket *ds, int fd, uid_t uid) {
	sd_event *event = ds->node->class->base.manager->event;
	struct conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->socket = ds;
	c->fd = fd;
	c->uid = uid;
	/* A request brings no descriptor; a mapping may, once (handle_request()). */
	pass_rights(fd, false);
	LIST_INSERT_HEAD(&ds->conns, c, link);
	ds->n_pending++;
	r = sd_event_add_io(event, &c->io, fd, EPOLLIN, on_conn, c);
	if (r >= 0)
		r = sd_event_add_time_relative(event, &c->deadline, CLOCK_MONOTONIC,
					       (uint64_t)DEVNS_FB_REQUEST_SECONDS * 1000000u, 0, on_deadline, c);
	if (r < 0) {
		c->fd = -1;
		conn_free(c);
		return r;
	}
	return 0;
}

static int on_connect(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct display_socket *ds = userdata;
	struct display_node *dn = ds->node;
	struct ucred cred;
	int conn, r;

	(void)fd;
	(void)revents;
	if (!dn->closer_quota)
		dn->closer_quota = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	/* cred.uid only counts the peer's waiting requests; it grants nothing. */
	if (peer_accept_next(s, &ds->resume, dn->closer_quota, &conn, &cred) < 0)
		return 0;
	if (ds->n_pending >= DISPLAY_SOCKET_MAX_PENDING ||
	    conns_of_uid(ds, false, cred.uid) >= DISPLAY_SOCKET_MAX_PENDING_PER_UID) {
		log_refused(ds, cred.uid, "too many requests waiting");
		peer_close(conn, dn->closer_quota);
		return 0;
	}
	r = conn_new(ds, conn, cred.uid);
	if (r < 0) {
		log_warning_errno(r, "%s: cannot take a connection: %m", dn->socket_path);
		peer_close(conn, dn->closer_quota);
	}
	return 0;
}

/* Opens dir (absolute), making what is missing (0755), without following symbolic links. */
static int open_dir(const char *dir, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	char buf[sizeof(((struct sockaddr_un *)NULL)->sun_path)], *part, *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", dir) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (part = strtok_r(buf, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
		int next;

		if (mkdirat(fd, part, 0755) < 0 && errno != EEXIST)
			return -errno;
		next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0)
			return -errno;
		close(fd);
		fd = next;
	}
	*ret_fd = take_fd(&fd);
	return 0;
}

/* The socket file in its directory, if it is still the one bound there. */
static int open_socket_file(const struct display_socket *ds, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	struct stat st;

	fd = openat(ds->dir_fd, SOCKET_NAME, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode) || st.st_dev != ds->dev || st.st_ino != ds->ino)
		return -ESTALE;
	*ret_fd = take_fd(&fd);
	return 0;
}

int display_socket_set_owner(struct display_socket *ds, uid_t uid, gid_t gid) {
	_cleanup_(closep) int fd = -1;
	int r;

	r = open_socket_file(ds, &fd);
	if (r < 0)
		return r;
	return fd_set_owner(fd, uid, gid, 0660);
}

/* Binds ds->fd at SOCKET_NAME in its directory, reachable only by root until it gets its owner. */
static int bind_socket(struct display_socket *ds) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t mask;
	int r;

	if (unlinkat(ds->dir_fd, SOCKET_NAME, 0) < 0 && errno != ENOENT)
		return -errno;
	/* The directory's fd names it: no path component is looked up again. */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" SOCKET_NAME, ds->dir_fd);
	/* Connections it accepts start refusing descriptors too, where the kernel copies that. */
	pass_rights(ds->fd, false);
	mask = umask(0177);
	r = bind(ds->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(mask);
	if (r < 0)
		return -errno;
	if (fstatat(ds->dir_fd, SOCKET_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	ds->dev = st.st_dev;
	ds->ino = st.st_ino;
	return 0;
}

int display_socket_new(struct display_socket **ret, struct display_node *dn) {
	const struct persona_owner *owner = &dn->persona->owner;
	struct display_socket *ds;
	int r;

	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->node = dn;
	ds->dir_fd = -1;
	ds->grant_failures = RATELIMIT_INIT(GRANT_FAILURE_LOG_INTERVAL_USEC, GRANT_FAILURES_LOGGED);
	LIST_INIT(&ds->conns);
	ds->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ds->fd < 0) {
		r = -errno;
		goto fail;
	}
	r = open_dir(dn->socket_dir, &ds->dir_fd);
	if (r < 0)
		goto fail;
	r = bind_socket(ds);
	if (r < 0)
		goto fail;
	r = display_socket_set_owner(ds, owner->uid, owner->video_gid);
	if (r < 0)
		goto fail;
	if (listen(ds->fd, 16) < 0) {
		r = -errno;
		goto fail;
	}
	r = sd_event_add_io(dn->class->base.manager->event, &ds->source, ds->fd, EPOLLIN, on_connect, ds);
	if (r < 0)
		goto fail;
	*ret = ds;
	return 0;
fail:
	display_socket_free(ds);
	return r;
}

void display_socket_revoke(struct display_socket *ds) {
	struct conn *c;

	while ((c = LIST_FIRST(&ds->conns)))
		conn_free(c);
}

struct display_socket *display_socket_free(struct display_socket *ds) {
	_cleanup_(closep) int fd = -1;

	if (!ds)
		return NULL;
	display_socket_revoke(ds);
	sd_event_source_disable_unref(ds->source);
	sd_event_source_disable_unref(ds->resume);
	/* Only the socket devnsd bound is removed, not what may have replaced it. */
	if (ds->dir_fd >= 0 && ds->ino && open_socket_file(ds, &fd) == 0)
		(void)unlinkat(ds->dir_fd, SOCKET_NAME, 0);
	/* Connections not taken yet go with it, and what they hold (peer-socket.h). */
	if (ds->fd >= 0)
		fd_closer_close_for(ds->node->closer_quota, take_fd(&ds->fd));
	closep(&ds->dir_fd);
	free(ds);
	return NULL;
}

unsigned int display_socket_n_mappers(const struct display_socket *ds) {
	return ds ? ds->n_mappers : 0;
}

unsigned int display_socket_n_untracked(const struct display_socket *ds, bool now) {
	const struct conn *c;
	unsigned int n = 0;

	if (!ds)
		return 0;
	LIST_FOREACH(c, &ds->conns, link)
		n += c->mapping && !c->read_only &&
		     !(now ? display_track_armed(c->track) : display_track_live(c->track));
	return n;
}

int display_socket_written(struct display_socket *ds, uint64_t frame_offset, uint32_t line, uint32_t height,
			   struct fb_rows *ret_rows, size_t max, size_t *ret_n) {
	struct conn *c;
	size_t n = 0;
	bool any = false;
	int r = 0;

	if (!ds)
		return -EOPNOTSUPP;
	LIST_FOREACH(c, &ds->conns, link)
		if (c->mapping && !c->read_only) {
			if (!display_track_async(c->track))
				return -EOPNOTSUPP;
			any = true;
		}
	if (!any)
		return -EOPNOTSUPP;
	/* Every mapping is scanned, so that each has its written pages protected again. */
	LIST_FOREACH(c, &ds->conns, link) {
		size_t k = 0;
		int q;

		if (!display_track_async(c->track))
			continue;
		q = display_track_written(c->track, frame_offset, line, height, ret_rows + n, max - n, &k);
		if (q < 0)
			r = q;
		else
			n += k;
	}
	if (r < 0)
		return r;
	*ret_n = n;
	return 0;
}

void display_socket_park(struct display_socket *ds) {
	struct conn *c;

	LIST_FOREACH(c, &ds->conns, link)
		if (c->track)
			display_track_park(c->track);
}

void display_socket_arm(struct display_socket *ds, bool arm) {
	struct conn *c;

	LIST_FOREACH(c, &ds->conns, link)
		if (c->track)
			display_track_arm(c->track, arm);
}
