/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "devns-fb.h"
#include "devnsd-display.h"
#include "log.h"

/* Programs of one persona that may hold the memfd through this socket at once. */
#define DISPLAY_SOCKET_MAX_MAPPERS 64

/*
 * A connection gets the memfd at once. Its first byte says what the
 * program does with it: with DEVNS_FB_INTENT_MAP the connection stands for
 * a mapping until it closes; anything else (a writer) is not watched.
 */
struct mapper {
	struct display_socket *socket;
	int fd;
	bool mapping;
	sd_event_source *source;
	LIST_ENTRY(mapper) link;
};

struct display_socket {
	struct display_node *node;
	int fd;
	sd_event_source *source;
	LIST_HEAD(, mapper) mappers;
	unsigned int n_conns, n_mappers;
};

static void mapper_free(struct mapper *mp) {
	LIST_REMOVE(mp, link);
	mp->socket->n_conns--;
	if (mp->mapping)
		mp->socket->n_mappers--;
	sd_event_source_disable_unref(mp->source);
	close(mp->fd);
	free(mp);
}

static int on_mapper(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct mapper *mp = userdata;
	struct display_node *dn = mp->socket->node;
	char buf[64];
	bool mapping;
	ssize_t n;

	(void)s;
	(void)revents;
	/* Read even after a hangup: the intent may have come just before it. */
	n = read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n > 0 && !mp->mapping && buf[0] == DEVNS_FB_INTENT_MAP) {
		mp->mapping = true;
		mp->socket->n_mappers++;
		log_debug("%s: a program maps the framebuffer", dn->socket_path);
		display_node_mappers_changed(dn);
	}
	/* Anything after the first byte is dropped; a writer's connection ends when it hangs up. */
	if (n > 0)
		return 0;
	mapping = mp->mapping;
	mapper_free(mp);
	if (mapping)
		display_node_mappers_changed(dn);
	return 0;
}

static int send_memfd(int fd, const struct fb_node *fb) {
	struct devns_fb_grant grant = { .magic = DEVNS_FB_GRANT_MAGIC, .size = fb->size };
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
	memcpy(CMSG_DATA(cmsg), &fb->memfd, sizeof(int));
	if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(grant))
		return -errno ? -errno : -EIO;
	return 0;
}

static int grant(struct display_socket *ds, int fd) {
	struct display_node *dn = ds->node;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct mapper *mp;
	int r;

	if (ds->n_conns >= DISPLAY_SOCKET_MAX_MAPPERS)
		return log_warning_errno(EMFILE, "%s: too many programs map the framebuffer", dn->socket_path);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return log_warning_errno(errno, "%s: cannot identify the peer: %m", dn->socket_path);
	/* The peer must live in this persona; the check logs refusals itself. */
	r = manager_check_access(dn->class->base.manager, dn->persona, cred.pid);
	if (r < 0)
		return r;
	r = send_memfd(fd, dn->fb);
	if (r < 0)
		return log_warning_errno(r, "%s: cannot send the framebuffer to pid %d: %m", dn->socket_path,
					 (int)cred.pid);
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return log_error_errno(ENOMEM, "out of memory");
	r = sd_event_add_io(dn->class->base.manager->event, &mp->source, fd, EPOLLIN, on_mapper, mp);
	if (r < 0) {
		free(mp);
		return log_warning_errno(r, "%s: cannot watch the peer: %m", dn->socket_path);
	}
	mp->socket = ds;
	mp->fd = fd;
	LIST_INSERT_HEAD(&ds->mappers, mp, link);
	ds->n_conns++;
	log_debug("%s: pid %d got the framebuffer", dn->socket_path, (int)cred.pid);
	return 0;
}

static int on_connect(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct display_socket *ds = userdata;
	int conn;

	(void)s;
	(void)revents;
	conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (conn < 0)
		return 0;
	if (grant(ds, conn) < 0)
		close(conn);
	return 0;
}

static int make_dirs(const char *path) {
	char dir[sizeof(((struct sockaddr_un *)NULL)->sun_path)];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	for (slash = strchr(dir + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return -errno;
		*slash = '/';
	}
	return 0;
}

int display_socket_new(struct display_socket **ret, struct display_node *dn) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct display_socket *ds;
	int r;

	if (strlen(dn->socket_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, dn->socket_path);
	ds = calloc(1, sizeof(*ds));
	if (!ds)
		return -ENOMEM;
	ds->node = dn;
	LIST_INIT(&ds->mappers);
	ds->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ds->fd < 0) {
		r = -errno;
		goto fail;
	}
	r = make_dirs(dn->socket_path);
	if (r < 0)
		goto fail;
	(void)unlink(dn->socket_path);
	if (bind(ds->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(dn->socket_path, 0666) < 0 ||
	    listen(ds->fd, 16) < 0) {
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

struct display_socket *display_socket_free(struct display_socket *ds) {
	struct mapper *mp;

	if (!ds)
		return NULL;
	while ((mp = LIST_FIRST(&ds->mappers)))
		mapper_free(mp);
	sd_event_source_disable_unref(ds->source);
	if (ds->fd >= 0) {
		close(ds->fd);
		(void)unlink(ds->node->socket_path);
	}
	free(ds);
	return NULL;
}

unsigned int display_socket_n_mappers(const struct display_socket *ds) {
	return ds ? ds->n_mappers : 0;
}
