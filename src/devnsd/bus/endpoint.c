/* SPDX-License-Identifier: MIT */
/*
 * Every persona's endpoint (devns-endpoint.h): a SOCK_SEQPACKET socket in
 * a directory of its own below ENDPOINTS_DIR, which only root can enter on
 * the host, bound into the persona's container by populate. Whoever
 * connects is the persona: no pid is looked up. Each attachment gets a new
 * directory and socket, and the old ones are removed with every
 * connection they had, so a container the persona left keeps an empty
 * directory. The peer's uid (SO_PEERCRED, as the kernel recorded it at
 * connect()) is mapped through the uid map of the process the persona was
 * attached through, read by its pidfd, for RequestActiveUsers=.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "bus/bus-internal.h"
#include "bus/errors.h"
#include "devns-endpoint.h"
#include "idmap.h"
#include "log.h"
#include "peer-socket.h"
#include "util.h"

/* Where the endpoints' directories are made, unless $DEVNS_ENDPOINT_DIR (an absolute path) says otherwise. */
#define ENDPOINTS_DIR "/run/devnsd/endpoints"
/* Room for the directory's path in persona->endpoint_dir, with a persona's directory name after it. */
#define ENDPOINTS_DIR_MAX 64

/* Linux 6.16: a socket that refuses descriptors. */
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif

struct endpoint_conn {
	struct endpoint *endpoint;
	int fd;
	uid_t uid; /* the host's number */
	sd_event_source *io, *idle;
	LIST_ENTRY(endpoint_conn) link;
};

struct endpoint {
	struct bus_endpoints *server;
	struct persona *persona;
	int fd;
	/* The directory's name below ENDPOINTS_DIR ("" while there is none). */
	char dir_name[NAME_MAX_LEN + 20];
	sd_event_source *source, *resume;
	LIST_HEAD(, endpoint_conn) conns;
	unsigned int n_conns;
	/* Where a connection with descriptors queued is closed (peer-socket.h); made with the first. */
	struct fd_closer_quota *closer;
	LIST_ENTRY(endpoint) link;
};

struct bus_endpoints {
	struct bus *bus;
	char dir[ENDPOINTS_DIR_MAX + 1];
	int dir_fd;
	LIST_HEAD(, endpoint) endpoints;
	struct listener persona_added, persona_removed, attached, leaving;
	struct ratelimit refusal_log;
};

static void conn_free(struct endpoint_conn *c) {
	struct endpoint *ep = c->endpoint;

	if (!ep->closer)
		ep->closer = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	LIST_REMOVE(c, link);
	ep->n_conns--;
	sd_event_source_disable_unref(c->io);
	sd_event_source_disable_unref(c->idle);
	peer_close(c->fd, ep->closer);
	free(c);
}

static void log_refused(struct endpoint *ep, uid_t uid, const char *why) {
	if (ratelimit_take(&ep->server->refusal_log, bus_now_usec(ep->server->bus->manager)))
		log_notice("persona %s: endpoint refused host uid %u: %s", ep->persona->name, (unsigned int)uid, why);
}

/* uid as the persona's container numbers it: the map of the process it was attached through. */
static int container_uid(struct persona *p, uid_t host_uid, uint32_t *ret) {
	_cleanup_(closep) int proc = -1;
	struct idmap map;
	int r;

	if (p->container_pidfd < 0)
		return -ENOENT;
	r = pidfd_open_proc(p->container_pidfd, &proc, NULL);
	if (r >= 0)
		r = idmap_read(proc, "uid_map", &map);
	if (r < 0)
		return r;
	/* Unmapped: the kernel's invalid uid, which no list holds. */
	if (idmap_from_host(&map, (uint32_t)host_uid, ret) < 0)
		*ret = UINT32_MAX;
	return 0;
}

static int request_active(struct endpoint_conn *c, uint32_t *flags, char *message, size_t size) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	struct persona *p = c->endpoint->persona;
	bool granted = false;
	uint32_t uid;
	int r;

	r = container_uid(p, c->uid, &uid);
	if (r < 0) {
		snprintf(message, size, "persona %s's container is gone: attach it again", p->name);
		return -ESRCH;
	}
	r = bus_check_request_uid(c->endpoint->server->bus, p, uid, c->uid, &error);
	if (r >= 0)
		r = bus_request_active(c->endpoint->server->bus, p, &granted, &error);
	if (r < 0) {
		snprintf(message, size, "%s", error.message ?: strerror(-r));
		/* devnsd's own codes lie above every errno: a client sees the errno behind them. */
		return r > -_BUS_E_FIRST ? r : -EACCES;
	}
	if (granted)
		*flags |= DEVNS_ENDPOINT_GRANTED | DEVNS_ENDPOINT_ACTIVE;
	return 0;
}

/* One request, answered; false when the connection is to end. */
static bool handle_one(struct endpoint_conn *c) {
	struct endpoint *ep = c->endpoint;
	struct persona *p = ep->persona;
	struct devns_endpoint_request req;
	struct devns_endpoint_reply reply;
	uint8_t buf[sizeof(req)];
	char message[DEVNS_ENDPOINT_MESSAGE_SIZE] = "";
	uint32_t flags = 0;
	ssize_t n;
	int r;

	/* A request carries no descriptor: one that does ends the connection, unread. */
	n = peer_recv(c->fd, buf, sizeof(buf), MSG_TRUNC);
	if (n == -EAGAIN)
		return true;
	if (n == -EBADMSG)
		log_refused(ep, c->uid, "descriptors sent along with a request");
	if (n <= 0)
		return false;
	/* MSG_TRUNC: n is the packet's size, also past the buffer. */
	r = devns_endpoint_parse_request(buf, (size_t)n, &req);
	if (r < 0) {
		snprintf(message, sizeof(message), "%s",
			 r == -EBADMSG	       ? "a request is one packet of 16 bytes" :
			 r == -EPROTO	       ? "not a devns endpoint request (magic)" :
			 r == -EPROTONOSUPPORT ? "devnsd speaks version 1 of the endpoint protocol" :
						 "unknown operation or flags");
		log_refused(ep, c->uid, message);
	} else if (req.op == DEVNS_ENDPOINT_OP_REQUEST_ACTIVE)
		r = request_active(c, &flags, message, sizeof(message));
	if (p == p->manager->active)
		flags |= DEVNS_ENDPOINT_ACTIVE;
	devns_endpoint_reply_init(&reply, &req, r < 0 ? r : 0, flags, p->name, message);
	/* A client that leaves its replies unread loses the connection, not devnsd its time. */
	return send(c->fd, &reply, sizeof(reply), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(reply);
}

static int on_conn(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct endpoint_conn *c = userdata;

	(void)s;
	(void)fd;
	for (int i = 0; i < DEVNS_ENDPOINT_MAX_PENDING; i++) {
		int queued = 0;

		if (!handle_one(c)) {
			conn_free(c);
			return 0;
		}
		if (ioctl(c->fd, FIONREAD, &queued) < 0 || queued <= 0)
			break;
	}
	if (revents & (EPOLLHUP | EPOLLERR) && !(revents & EPOLLIN)) {
		conn_free(c);
		return 0;
	}
	(void)sd_event_source_set_time_relative(c->idle, (uint64_t)DEVNS_ENDPOINT_IDLE_SECONDS * 1000000u);
	return 0;
}

static int on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)s;
	(void)usec;
	conn_free(userdata);
	return 0;
}

static unsigned int conns_of_uid(const struct endpoint *ep, uid_t uid) {
	const struct endpoint_conn *c;
	unsigned int n = 0;

	LIST_FOREACH(c, &ep->conns, link)
		n += c->uid == uid;
	return n;
}

static int conn_new(struct endpoint *ep, int fd, uid_t uid) {
	sd_event *event = ep->server->bus->manager->event;
	struct endpoint_conn *c;
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct endpoint_conn){ .endpoint = ep, .fd = -1, .uid = uid };
	LIST_INSERT_HEAD(&ep->conns, c, link);
	ep->n_conns++;
	r = sd_event_add_io(event, &c->io, fd, EPOLLIN, on_conn, c);
	if (r >= 0)
		r = sd_event_add_time_relative(event, &c->idle, CLOCK_MONOTONIC,
					       (uint64_t)DEVNS_ENDPOINT_IDLE_SECONDS * 1000000u, 0, on_idle, c);
	if (r < 0) {
		conn_free(c);
		return r;
	}
	c->fd = fd;
	return 0;
}

static int on_connect(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct endpoint *ep = userdata;
	struct ucred cred;
	int conn, off = 0, r;

	(void)fd;
	(void)revents;
	if (!ep->closer)
		ep->closer = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
	/* cred.uid, recorded at connect(): which of the persona's users speaks. */
	if (peer_accept_next(s, &ep->resume, ep->closer, &conn, &cred) < 0)
		return 0;
	if (ep->n_conns >= DEVNS_ENDPOINT_MAX_CONNECTIONS ||
	    conns_of_uid(ep, cred.uid) >= DEVNS_ENDPOINT_MAX_CONNECTIONS / 4) {
		log_refused(ep, cred.uid, "too many connections");
		peer_close(conn, ep->closer);
		return 0;
	}
	(void)setsockopt(conn, SOL_SOCKET, SO_PASSRIGHTS, &off, sizeof(off));
	r = conn_new(ep, conn, cred.uid);
	if (r < 0) {
		log_warning_errno(r, "persona %s: cannot take a connection on its endpoint: %m", ep->persona->name);
		peer_close(conn, ep->closer);
	}
	return 0;
}

/* Removes ep's socket, its directory and every connection: whoever held them speaks for nobody now. */
static void endpoint_close(struct endpoint *ep) {
	struct endpoint_conn *c;
	int dir;

	while ((c = LIST_FIRST(&ep->conns)))
		conn_free(c);
	ep->source = sd_event_source_disable_unref(ep->source);
	ep->resume = sd_event_source_disable_unref(ep->resume);
	/* Connections not taken yet go with it, and what they hold (peer-socket.h). */
	if (ep->fd >= 0) {
		if (!ep->closer)
			ep->closer = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
		fd_closer_close_for(ep->closer, take_fd(&ep->fd));
	}
	if (ep->dir_name[0]) {
		dir = openat(ep->server->dir_fd, ep->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dir >= 0) {
			(void)unlinkat(dir, DEVNS_ENDPOINT_NAME, 0);
			close(dir);
		}
		(void)unlinkat(ep->server->dir_fd, ep->dir_name, AT_REMOVEDIR);
	}
	ep->dir_name[0] = '\0';
	ep->persona->endpoint_dir[0] = '\0';
}

/* A new directory, with a name no earlier one had, and a new socket in it, mode 0666. */
static int endpoint_open(struct endpoint *ep) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct persona *p = ep->persona;
	_cleanup_(closep) int dir = -1;
	uint64_t nonce;
	mode_t mask;
	int r;

	endpoint_close(ep);
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		return -errno;
	snprintf(ep->dir_name, sizeof(ep->dir_name), "%s.%016" PRIx64, p->name, nonce);
	if (mkdirat(ep->server->dir_fd, ep->dir_name, 0755) < 0) {
		ep->dir_name[0] = '\0';
		return -errno;
	}
	dir = openat(ep->server->dir_fd, ep->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || fchmod(dir, 0755) < 0)
		return -errno;
	ep->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (ep->fd < 0)
		return -errno;
	/* Linux 6.16: no descriptor comes on its connections, from before they are taken too. */
	(void)setsockopt(ep->fd, SOL_SOCKET, SO_PASSRIGHTS, &(int){ 0 }, sizeof(int));
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/" DEVNS_ENDPOINT_NAME, dir);
	mask = umask(0111);
	r = bind(ep->fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(mask);
	if (r < 0 || listen(ep->fd, DEVNS_ENDPOINT_MAX_CONNECTIONS) < 0)
		return -errno;
	r = sd_event_add_io(ep->server->bus->manager->event, &ep->source, ep->fd, EPOLLIN, on_connect, ep);
	if (r < 0)
		return r;
	snprintf(p->endpoint_dir, sizeof(p->endpoint_dir), "%s/%s", ep->server->dir, ep->dir_name);
	return 0;
}

static struct endpoint *endpoint_of(struct bus_endpoints *e, struct persona *p) {
	struct endpoint *ep;

	LIST_FOREACH(ep, &e->endpoints, link)
		if (ep->persona == p)
			return ep;
	return NULL;
}

static void endpoint_free(struct endpoint *ep) {
	endpoint_close(ep);
	fd_closer_quota_unref(ep->closer);
	LIST_REMOVE(ep, link);
	free(ep);
}

/*
 * Opens a new endpoint for p (a new persona, or one attached anew), in
 * place of the one it had; with create false, only if it had one (a
 * persona being removed has none left). Logs what fails.
 */
static void endpoint_renew(struct bus_endpoints *e, struct persona *p, bool create) {
	struct endpoint *ep = endpoint_of(e, p);
	int r;

	if (!ep && !create)
		return;
	if (!ep) {
		ep = calloc(1, sizeof(*ep));
		if (!ep) {
			log_warning("persona %s: no endpoint: out of memory", p->name);
			return;
		}
		*ep = (struct endpoint){ .server = e, .persona = p, .fd = -1 };
		LIST_INIT(&ep->conns);
		LIST_INSERT_HEAD(&e->endpoints, ep, link);
	}
	r = endpoint_open(ep);
	if (r < 0) {
		log_warning_errno(r, "persona %s: cannot make its endpoint in %s: %m", p->name, e->dir);
		endpoint_close(ep);
	}
}

static void on_persona_added(struct listener *l, void *data) {
	endpoint_renew(container_of(l, struct bus_endpoints, persona_added), data, true);
}

static void on_persona_removed(struct listener *l, void *data) {
	struct endpoint *ep = endpoint_of(container_of(l, struct bus_endpoints, persona_removed), data);

	if (ep)
		endpoint_free(ep);
}

/* A new container, or the same one again: connections made before are not this attachment's. */
static void on_attached(struct listener *l, void *data) {
	const struct persona_attached *a = data;

	endpoint_renew(container_of(l, struct bus_endpoints, attached), a->persona, true);
}

/* Leaving its container: the container keeps an empty directory. Removed (persona_removed came first): nothing. */
static void on_leaving(struct listener *l, void *data) {
	endpoint_renew(container_of(l, struct bus_endpoints, leaving), data, false);
}

/* What a devnsd before this one left: sockets nobody listens on, and their directories. */
static void remove_left_over(int dir_fd) {
	_cleanup_(closep) int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d)
		return;
	take_fd(&fd);
	while ((de = readdir(d))) {
		int sub;

		if (de->d_name[0] == '.')
			continue;
		sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0) {
			(void)unlinkat(sub, DEVNS_ENDPOINT_NAME, 0);
			close(sub);
		}
		(void)unlinkat(dir_fd, de->d_name, AT_REMOVEDIR);
	}
	closedir(d);
}

/* dir, root's alone (0700), made if missing (and its parent, 0755). */
static int open_endpoints_dir(const char *dir, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	char parent[ENDPOINTS_DIR_MAX + 1];
	struct stat st;

	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	if (parent[0] && mkdir(parent, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_uid != geteuid())
		return -EPERM;
	if (fchmod(fd, 0700) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	return 0;
}

int bus_endpoints_new(struct bus *b, struct bus_endpoints **ret) {
	const char *dir = getenv("DEVNS_ENDPOINT_DIR");
	struct manager *m = b->manager;
	struct bus_endpoints *e;
	struct persona *p;
	int r;

	if (!dir || dir[0] != '/')
		dir = ENDPOINTS_DIR;
	if (strlen(dir) > ENDPOINTS_DIR_MAX || !strrchr(dir, '/')[1]) {
		log_warning("%s: not a directory for the personas' endpoints (an absolute path of at most %d "
			    "characters); no persona has an endpoint", dir, ENDPOINTS_DIR_MAX);
		return -EINVAL;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return log_error_errno(ENOMEM, "out of memory");
	e->bus = b;
	snprintf(e->dir, sizeof(e->dir), "%s", dir);
	e->refusal_log = RATELIMIT_INIT(10 * 1000000ull, 20);
	LIST_INIT(&e->endpoints);
	r = open_endpoints_dir(e->dir, &e->dir_fd);
	if (r < 0) {
		free(e);
		return log_warning_errno(r, "Cannot open %s: %m; no persona has an endpoint", dir);
	}
	remove_left_over(e->dir_fd);
	LIST_FOREACH(p, &m->personas, link)
		endpoint_renew(e, p, true);
	e->persona_added.notify = on_persona_added;
	signal_add(&m->events.persona_added, &e->persona_added);
	e->persona_removed.notify = on_persona_removed;
	signal_add(&m->events.persona_removed, &e->persona_removed);
	e->attached.notify = on_attached;
	signal_add(&m->events.attached, &e->attached);
	e->leaving.notify = on_leaving;
	signal_add(&m->events.leaving, &e->leaving);
	*ret = e;
	return 0;
}

struct bus_endpoints *bus_endpoints_free(struct bus_endpoints *e) {
	struct endpoint *ep;

	if (!e)
		return NULL;
	listener_remove(&e->persona_added);
	listener_remove(&e->persona_removed);
	listener_remove(&e->attached);
	listener_remove(&e->leaving);
	while ((ep = LIST_FIRST(&e->endpoints)))
		endpoint_free(ep);
	closep(&e->dir_fd);
	free(e);
	return NULL;
}
