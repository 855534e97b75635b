/* SPDX-License-Identifier: MIT */
/*
 * Who called: the bus's record of a connection, tied to a live process.
 *
 * dbus-daemon records a connection's pid, user and groups from
 * SO_PEERCRED and SO_PEERGROUPS when it connects. A pid is only a number:
 * if that process exits while another one keeps the connection (inherited
 * or passed on), the number may later name an unrelated process. The bus
 * closes that gap only when it hands over a pidfd of its own (ProcessFD,
 * which needs SO_PEERPIDFD, Linux 6.5). Otherwise the pid is pinned here
 * with pidfd_open() as soon as it is known, every /proc lookup is made
 * while it is pinned, and bus_peer_confirm() then checks that the process
 * was not reaped meanwhile and, at the connection's first call, that the
 * connection still reports that pid. What the bus said is kept for the
 * connection's later calls, with the pidfd, while that process lives.
 *
 * Without ProcessFD the pid may already name another process when devnsd
 * first hears from the connection: the process that connected handed the
 * connection on and exited, and its number went to a new process. That
 * new process started after the connection was made. The bus numbers its
 * unique names in order (":1.N"), and devnsd hears of each new one
 * (NameOwnerChanged): the time it heard of a name, or of any later one,
 * bounds when the connection was made. A process that started after that
 * bound is not the one that connected, and the call is refused (-ESTALE).
 * A number taken over before devnsd heard of the name is not caught.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>

#include "bus/bus-internal.h"
#include "util.h"

#define DBUS_NAME "org.freedesktop.DBus"
#define DBUS_PATH "/org/freedesktop/DBus"

struct cached_peer {
	char *sender; /* NULL: a free slot */
	pid_t pid;
	uid_t euid;
	int pidfd;
	bool from_bus;
	bool gids_from_proc;
	gid_t gids[BUS_PEER_MAX_GROUPS];
	size_t n_gids;
	uint64_t used;
};

/* A unique name the bus gave, and when devnsd had heard of it (CLOCK_BOOTTIME, µs). */
struct seen_name {
	uint64_t seq;
	uint64_t usec;
};

struct bus_peer_cache {
	struct cached_peer entries[BUS_PEER_CACHE_SIZE];
	uint64_t clock;
	/* Ascending by seq; the oldest go first, which leaves older names a later (still true) bound. */
	struct seen_name seen[BUS_PEER_SEEN];
	size_t n_seen;
};

int bus_peer_cache_new(struct bus_peer_cache **ret) {
	struct bus_peer_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	for (size_t i = 0; i < BUS_PEER_CACHE_SIZE; i++)
		c->entries[i].pidfd = -1;
	*ret = c;
	return 0;
}

static void cached_peer_clear(struct cached_peer *e) {
	free(e->sender);
	closep(&e->pidfd);
	*e = (struct cached_peer){ .pidfd = -1 };
}

struct bus_peer_cache *bus_peer_cache_free(struct bus_peer_cache *c) {
	if (!c)
		return NULL;
	for (size_t i = 0; i < BUS_PEER_CACHE_SIZE; i++)
		cached_peer_clear(&c->entries[i]);
	free(c);
	return NULL;
}

/* N of a unique name ":1.N"; false for a name of another form. */
static bool name_seq(const char *name, uint64_t *ret) {
	char *end;

	if (strncmp(name, ":1.", 3) != 0 || name[3] < '0' || name[3] > '9')
		return false;
	errno = 0;
	*ret = strtoull(name + 3, &end, 10);
	return errno == 0 && *end == '\0';
}

void bus_peer_cache_saw(struct bus_peer_cache *c, const char *name, uint64_t now_usec) {
	uint64_t seq;

	if (!c || !name_seq(name, &seq) || (c->n_seen > 0 && c->seen[c->n_seen - 1].seq >= seq))
		return;
	if (c->n_seen == BUS_PEER_SEEN)
		memmove(c->seen, c->seen + 1, --c->n_seen * sizeof(c->seen[0]));
	c->seen[c->n_seen++] = (struct seen_name){ .seq = seq, .usec = now_usec };
}

/* When connection sender was made at the latest (CLOCK_BOOTTIME, µs); 0 when not known. */
static uint64_t made_by(const struct bus_peer_cache *c, const char *sender) {
	uint64_t seq;

	if (!c || !name_seq(sender, &seq))
		return 0;
	for (size_t i = 0; i < c->n_seen; i++)
		if (c->seen[i].seq >= seq)
			return c->seen[i].usec;
	return 0;
}

/* -ESTALE when the process behind pidfd started after connection sender was made: it did not make it. */
static int check_started_before(const struct bus_peer_cache *c, const char *sender, int pidfd) {
	uint64_t bound = made_by(c, sender), ticks;
	long hz = sysconf(_SC_CLK_TCK);
	int r;

	if (bound == 0 || hz <= 0)
		return 0;
	r = pidfd_start_time(pidfd, &ticks);
	if (r < 0)
		return r;
	/* Ticks are whole: the process started at this time or after it. */
	return ticks / (uint64_t)hz * 1000000u + ticks % (uint64_t)hz * 1000000u / (uint64_t)hz > bound ? -ESTALE : 0;
}

static struct cached_peer *cache_find(struct bus_peer_cache *c, const char *sender) {
	if (!c)
		return NULL;
	for (size_t i = 0; i < BUS_PEER_CACHE_SIZE; i++)
		if (c->entries[i].sender && streq(c->entries[i].sender, sender))
			return &c->entries[i];
	return NULL;
}

void bus_peer_cache_forget(struct bus_peer_cache *c, const char *sender) {
	struct cached_peer *e = cache_find(c, sender);

	if (e)
		cached_peer_clear(e);
}

/* Keeps a confirmed peer, in a free slot or in place of the least recently used. */
static void cache_store(struct bus_peer_cache *c, const struct bus_peer *peer) {
	struct cached_peer *e = cache_find(c, peer->sender);
	char *sender;
	int pidfd;

	if (!c)
		return;
	if (e) {
		e->used = ++c->clock;
		return;
	}
	sender = strdup(peer->sender);
	pidfd = fcntl(peer->pidfd, F_DUPFD_CLOEXEC, 3);
	if (!sender || pidfd < 0) {
		free(sender);
		closep(&pidfd);
		return;
	}
	e = &c->entries[0];
	for (size_t i = 0; i < BUS_PEER_CACHE_SIZE && e->sender; i++)
		if (!c->entries[i].sender || c->entries[i].used < e->used)
			e = &c->entries[i];
	cached_peer_clear(e);
	*e = (struct cached_peer){
		.sender = sender,
		.pid = peer->pid,
		.euid = peer->euid,
		.pidfd = pidfd,
		.from_bus = peer->from_bus,
		.gids_from_proc = peer->gids_from_proc,
		.n_gids = peer->gids_from_proc ? 0 : peer->n_gids,
		.used = ++c->clock,
	};
	memcpy(e->gids, peer->gids, e->n_gids * sizeof(gid_t));
}

static int read_gids(sd_bus_message *reply, struct bus_peer *peer) {
	uint32_t gid;
	int r;

	r = sd_bus_message_enter_container(reply, 'v', "au");
	if (r < 0)
		return r;
	r = sd_bus_message_enter_container(reply, 'a', "u");
	if (r < 0)
		return r;
	while ((r = sd_bus_message_read(reply, "u", &gid)) > 0)
		if (peer->n_gids < BUS_PEER_MAX_GROUPS)
			peer->gids[peer->n_gids++] = (gid_t)gid;
	if (r < 0)
		return r;
	r = sd_bus_message_exit_container(reply);
	if (r < 0)
		return r;
	return sd_bus_message_exit_container(reply);
}

/* GetConnectionCredentials' a{sv}: the keys devnsd uses; the rest is skipped. */
static int read_credentials(sd_bus_message *reply, struct bus_peer *peer, bool *ret_uid, uint32_t *ret_pid) {
	int r;

	r = sd_bus_message_enter_container(reply, 'a', "{sv}");
	if (r < 0)
		return r;
	while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
		const char *key;
		uint32_t u;
		int fd;

		r = sd_bus_message_read(reply, "s", &key);
		if (r < 0)
			return r;
		if (streq(key, "UnixUserID")) {
			r = sd_bus_message_read(reply, "v", "u", &u);
			peer->euid = (uid_t)u;
			*ret_uid = r >= 0;
		} else if (streq(key, "ProcessID")) {
			r = sd_bus_message_read(reply, "v", "u", ret_pid);
		} else if (streq(key, "UnixGroupIDs")) {
			r = read_gids(reply, peer);
		} else if (streq(key, "ProcessFD") && peer->pidfd < 0) {
			r = sd_bus_message_read(reply, "v", "h", &fd);
			if (r >= 0) {
				peer->pidfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
				peer->pinned = peer->from_bus = peer->pidfd >= 0;
			}
		} else
			r = sd_bus_message_skip(reply, "v");
		if (r < 0)
			return r;
		r = sd_bus_message_exit_container(reply);
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	return sd_bus_message_exit_container(reply);
}

/* The effective and supplementary groups from /proc/PID/status, for buses that do not report groups. */
static int read_proc_gids(struct bus_peer *peer) {
	_cleanup_(closep) int proc = -1;
	_cleanup_(freep) char *line = NULL;
	size_t len = 0;
	FILE *f;
	int fd, r;

	r = bus_peer_proc(peer, &proc);
	if (r < 0)
		return r;
	fd = openat(proc, "status", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "re");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (getline(&line, &len, f) > 0) {
		unsigned int real, effective;
		char *s, *end;

		if (sscanf(line, "Gid: %u %u", &real, &effective) == 2 && peer->n_gids < BUS_PEER_MAX_GROUPS)
			peer->gids[peer->n_gids++] = (gid_t)effective;
		if (strncmp(line, "Groups:", 7) != 0)
			continue;
		for (s = line + 7; peer->n_gids < BUS_PEER_MAX_GROUPS; s = end) {
			unsigned long gid = strtoul(s, &end, 10);
			if (end == s)
				break;
			peer->gids[peer->n_gids++] = (gid_t)gid;
		}
		break;
	}
	fclose(f);
	return 0;
}

int bus_peer_get(sd_bus_message *msg, struct bus_peer_cache *cache, struct bus_peer *ret) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(bus_peer_done) struct bus_peer peer = BUS_PEER_NULL;
	const char *sender = sd_bus_message_get_sender(msg);
	struct cached_peer *e;
	bool have_uid = false;
	uint32_t pid = 0;
	int r;

	if (!sender)
		return -EPERM;
	e = cache_find(cache, sender);
	if (e && pidfd_exited(e->pidfd)) {
		/* The process that connected is gone: whoever holds the connection now is asked about anew. */
		cached_peer_clear(e);
		e = NULL;
	}
	if (e) {
		peer.pidfd = fcntl(e->pidfd, F_DUPFD_CLOEXEC, 3);
		if (peer.pidfd < 0)
			return -errno;
		peer.pinned = true;
		peer.from_bus = e->from_bus;
		peer.pid = e->pid;
		peer.euid = e->euid;
		peer.gids_from_proc = e->gids_from_proc;
		peer.n_gids = e->n_gids;
		memcpy(peer.gids, e->gids, e->n_gids * sizeof(gid_t));
		e->used = ++cache->clock;
		goto found;
	}
	r = sd_bus_call_method(sd_bus_message_get_bus(msg), DBUS_NAME, DBUS_PATH, DBUS_NAME,
			       "GetConnectionCredentials", &error, &reply, "s", sender);
	if (r < 0)
		return sd_bus_error_has_name(&error, SD_BUS_ERROR_NAME_HAS_NO_OWNER) ? -ESRCH : r;
	r = read_credentials(reply, &peer, &have_uid, &pid);
	if (r < 0)
		return r;
	if (!have_uid)
		return -EPERM;
	if (peer.pidfd >= 0) {
		r = pidfd_get_pid(peer.pidfd, &peer.pid);
		if (r < 0)
			return r;
	} else {
		if (pid == 0 || pid > INT32_MAX)
			return -EPERM;
		peer.pid = (pid_t)pid;
		peer.pidfd = pidfd_open(peer.pid, 0);
		if (peer.pidfd < 0)
			return -errno;
		r = check_started_before(cache, sender, peer.pidfd);
		if (r < 0)
			return r;
	}
	peer.gids_from_proc = peer.n_gids == 0;
found:
	peer.sender = sender;
	if (peer.gids_from_proc) {
		r = read_proc_gids(&peer);
		if (r < 0)
			return r;
	}
	*ret = peer;
	peer = BUS_PEER_NULL;
	return 0;
}

void bus_peer_done(struct bus_peer *peer) {
	closep(&peer->pidfd);
	*peer = BUS_PEER_NULL;
}

int bus_peer_confirm(sd_bus_message *msg, struct bus_peer_cache *cache, const struct bus_peer *peer) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	uint32_t pid;
	int r;

	/* EPERM: it exists, devnsd just may not signal it. */
	if (pidfd_send_signal(peer->pidfd, 0, NULL, 0) < 0 && errno != EPERM) {
		bus_peer_cache_forget(cache, peer->sender);
		return -ESRCH;
	}
	if (!peer->pinned) {
		r = sd_bus_call_method(sd_bus_message_get_bus(msg), DBUS_NAME, DBUS_PATH, DBUS_NAME,
				       "GetConnectionUnixProcessID", NULL, &reply, "s", peer->sender);
		if (r < 0)
			return -ESRCH;
		r = sd_bus_message_read(reply, "u", &pid);
		if (r < 0)
			return r;
		if (pid != (uint32_t)peer->pid)
			return -ESRCH;
	}
	cache_store(cache, peer);
	return 0;
}

int bus_peer_proc(const struct bus_peer *peer, int *ret_fd) {
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d", (int)peer->pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	*ret_fd = fd;
	return 0;
}

int ns_open_at(int proc_fd, const char *which, struct pidns *ret) {
	char path[32];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "ns/%s", which);
	fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	if (fstat(fd, &st) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	*ret = (struct pidns){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
	return 0;
}

int bus_peer_in_namespaces(const struct bus_peer *peer, const struct pidns *userns, const struct pidns *pidns) {
	_cleanup_(pidns_close) struct pidns user = PIDNS_NULL, pid = PIDNS_NULL;
	_cleanup_(closep) int proc = -1;
	int r;

	r = bus_peer_proc(peer, &proc);
	if (r < 0)
		return r;
	r = ns_open_at(proc, "user", &user);
	if (r < 0)
		return r;
	r = ns_open_at(proc, "pid", &pid);
	if (r < 0)
		return r;
	return pidns_equal(&user, userns) && pidns_equal(&pid, pidns);
}

bool bus_peer_in_group(const struct bus_peer *peer, gid_t gid) {
	for (size_t i = 0; i < peer->n_gids; i++)
		if (peer->gids[i] == gid)
			return true;
	return false;
}
