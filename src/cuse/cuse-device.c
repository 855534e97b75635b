/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/fuse.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cuse-device.h"
#include "loop.h"
#include "util.h"

/* How often a node that is not in /dev yet is looked for. */
#define OWNER_POLL_USEC (20 * 1000ULL)

/* What a run leaves its successor about a connection, in a memory file kept beside it. */
#define JOURNAL_MAGIC 0x6a736e64u
#define JOURNAL_VERSION 3
/* Requests other than releases leave this many slots free: every open handle can always be released. */
#define REQUESTS_BUT_RELEASES (CUSE_DEVICE_MAX_REQUESTS - CUSE_DEVICE_MAX_FILES)
_Static_assert(REQUESTS_BUT_RELEASES > 0, "room for requests besides releases");

struct journal_request {
	uint64_t unique;
	/* A release's: the handle it ends. */
	uint64_t handle;
	uint32_t opcode;
	/* The owner of the handle it names (cuse_device_open_owner()); meaningful in this run only. */
	uint32_t owner;
};

struct journal_file {
	/* What the kernel holds as the file's fh: never the same in two runs. */
	uint64_t handle;
	/* What the device's open gave, meaningful in the run that opened it only. */
	uint64_t fh;
	/* The kernel's poll handle, once the file asked to be woken. */
	uint64_t kh;
	/* Opened by an earlier run: every request on it is refused. */
	uint32_t stale;
	/* Whose handle it is (cuse_device_open_owner()); meaningful in this run only. */
	uint32_t owner;
};

struct journal {
	uint32_t magic, version;
	/* The node it serves: a connection is taken over only by the node of the same name. */
	char devname[256];
	/* What the node's owner noted of it (cuse_device_set_note()). */
	char note[CUSE_DEVICE_NOTE_MAX + 1];
	/* CUSE_INIT was answered: the node exists. */
	uint32_t ready;
	uint32_t n_requests, n_files, unused;
	uint64_t next_handle;
	struct journal_request requests[CUSE_DEVICE_MAX_REQUESTS];
	struct journal_file files[CUSE_DEVICE_MAX_FILES];
};

struct cuse_device {
	struct fuse_session *se;
	int fd;
	/* The session's fd: on sd-event, or on a loop (cuse_device_new_on_loop()). */
	sd_event_source *source;
	struct loop_io *io;
	sd_event *event;
	/* On a loop: requests with these opcodes are answered straight from it; the rest are handed over. */
	uint64_t quiet;
	/* A request read on the loop, waiting for sd-event's turn (the session's fd is off meanwhile). */
	void *held;
	size_t held_size;
	sd_event_source *handover;
	char devname[256];
	unsigned int major, minor;
	/* The node's owner and mode, while waiting for it to appear. */
	uid_t uid;
	gid_t gid;
	mode_t mode;
	sd_event_source *owner_retry;
	uint64_t owner_deadline;
	/* Kept for the next run under these names ("" if not). */
	char keep_name[32], journal_name[32];
	struct journal *journal;
	/* A connection taken over: made ready from the loop. */
	sd_event_source *resume;
	/* Replies go nowhere (the made-up CUSE_INIT of a connection taken over). */
	bool swallow;
	/* A node that is no more, answering ENODEV until this ends it. */
	sd_event_source *end;
	/* Retired (cuse_device_retire()): answers ENODEV until its last handle is released, then ends. */
	bool retired;
	char group[CUSE_DEVICE_GROUP_MAX + 1];
	LIST_ENTRY(cuse_device) retired_link;
	/* Split among owners (cuse_device_set_shares()): each owner's limits; 0 when not. */
	unsigned int share_files, share_requests;
	/* The owner of the handle the open being answered makes. */
	uint32_t opening_owner;
};

/* One receive buffer serves every session: the loop handles one request at a time. */
static struct fuse_buf shared_buf;
static unsigned int shared_users;

static struct cuse_keeper keeper;
static bool have_keeper;
/* A kept connection was dropped: its number may still be registered until the keeper syncs. */
static bool forgot_since_sync;

/* Sessions by fd, for the write hook (libfuse passes it the session's userdata, the device's operations'). */
static struct cuse_device **by_fd;
static size_t n_by_fd;

/* Retired devices, newest first. */
static LIST_HEAD(, cuse_device) retired_devices = LIST_HEAD_INITIALIZER(retired_devices);
static unsigned int n_retired;

static int (*connector)(void *userdata);
static void *connector_userdata;

void cuse_device_set_connector(int (*connect)(void *userdata), void *userdata) {
	connector = connect;
	connector_userdata = userdata;
}

void cuse_device_set_keeper(const struct cuse_keeper *k) {
	have_keeper = k != NULL;
	keeper = k ? *k : (struct cuse_keeper){ 0 };
}

static int by_fd_set(int fd, struct cuse_device *d) {
	if ((size_t)fd >= n_by_fd) {
		size_t n = MAX((size_t)fd + 1, n_by_fd * 2);
		struct cuse_device **p;

		if (!d)
			return 0;
		p = realloc(by_fd, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + n_by_fd, 0, (n - n_by_fd) * sizeof(*p));
		by_fd = p;
		n_by_fd = n;
	}
	by_fd[fd] = d;
	return 0;
}

/* Drops what is kept under d's names; the names stay d's. */
static void forget_names(struct cuse_device *d) {
	keeper.forget(keeper.userdata, d->keep_name);
	keeper.forget(keeper.userdata, d->journal_name);
	forgot_since_sync = true;
}

/* Drops what is kept for the next run under d's names, and keeps nothing more. */
static void forget_kept(struct cuse_device *d) {
	if (!d->keep_name[0] || !have_keeper)
		return;
	forget_names(d);
	d->keep_name[0] = d->journal_name[0] = '\0';
}

/* --- the journal ------------------------------------------------------------ */

static struct journal_request *journal_request(struct journal *j, uint64_t unique) {
	for (uint32_t i = 0; i < j->n_requests; i++)
		if (j->requests[i].unique == unique)
			return &j->requests[i];
	return NULL;
}

/*
 * The count moves after the entry is written and before it is cleared: a
 * run killed in between leaves an entry twice (answered twice: the second
 * gets ENOENT), never a request lost.
 */
static void journal_request_drop(struct journal *j, struct journal_request *r) {
	uint32_t n = j->n_requests - 1;

	*r = j->requests[n];
	__atomic_store_n(&j->n_requests, n, __ATOMIC_RELEASE);
}

static struct journal_file *journal_file(struct journal *j, uint64_t handle) {
	for (uint32_t i = 0; i < j->n_files; i++)
		if (j->files[i].handle == handle)
			return &j->files[i];
	return NULL;
}

static void journal_file_drop(struct journal *j, struct journal_file *f) {
	uint32_t n = j->n_files - 1;

	*f = j->files[n];
	__atomic_store_n(&j->n_files, n, __ATOMIC_RELEASE);
}

static unsigned int journal_opens_in_flight(const struct journal *j) {
	unsigned int n = 0;

	for (uint32_t i = 0; i < j->n_requests; i++)
		n += j->requests[i].opcode == FUSE_OPEN;
	return n;
}

static unsigned int journal_owner_files(const struct journal *j, uint32_t owner) {
	unsigned int n = 0;

	for (uint32_t i = 0; i < j->n_files; i++)
		n += !j->files[i].stale && j->files[i].owner == owner;
	return n;
}

static unsigned int journal_owner_requests(const struct journal *j, uint32_t owner) {
	unsigned int n = 0;

	for (uint32_t i = 0; i < j->n_requests; i++)
		n += j->requests[i].opcode != FUSE_RELEASE && j->requests[i].owner == owner;
	return n;
}

static int journal_map(int fd, bool fresh, const char *devname, struct journal **ret) {
	struct journal *j;
	struct stat st;

	if (fresh && ftruncate(fd, sizeof(struct journal)) < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size != sizeof(struct journal))
		return -EBADMSG;
	j = mmap(NULL, sizeof(*j), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (j == MAP_FAILED)
		return -errno;
	if (fresh) {
		j->magic = JOURNAL_MAGIC;
		j->version = JOURNAL_VERSION;
		j->next_handle = 1;
		snprintf(j->devname, sizeof(j->devname), "%s", devname);
	} else if (j->magic != JOURNAL_MAGIC || j->version != JOURNAL_VERSION || !j->ready ||
		   j->n_requests > CUSE_DEVICE_MAX_REQUESTS || j->n_files > CUSE_DEVICE_MAX_FILES ||
		   j->next_handle == 0 || (devname[0] && strncmp(j->devname, devname, sizeof(j->devname)) != 0)) {
		munmap(j, sizeof(*j));
		return -EBADMSG;
	}
	*ret = j;
	return 0;
}

/* --- the wire ---------------------------------------------------------------- */

static void reply_raw(struct cuse_device *d, uint64_t unique, int error) {
	struct fuse_out_header out = { .len = sizeof(out), .error = -error, .unique = unique };

	/* ENOENT: the request is gone (its caller was interrupted or killed). */
	(void)!write(d->fd, &out, sizeof(out));
}

static void notify_poll_raw(struct cuse_device *d, uint64_t kh) {
	struct {
		struct fuse_out_header h;
		struct fuse_notify_poll_wakeup_out w;
	} msg = { .h = { .len = sizeof(msg), .error = FUSE_NOTIFY_POLL }, .w = { .kh = kh } };

	(void)!write(d->fd, &msg, sizeof(msg));
}

/* The handle a request names, or NULL for one that names none. Every CUSE request that does starts with it. */
static uint64_t *request_handle(struct fuse_in_header *in, size_t size) {
	size_t need;

	switch (in->opcode) {
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_RELEASE:
	case FUSE_FLUSH:
	case FUSE_FSYNC:
	case FUSE_IOCTL:
		need = sizeof(uint64_t);
		break;
	case FUSE_POLL:
		need = sizeof(struct fuse_poll_in);
		break;
	default:
		return NULL;
	}
	if (size < sizeof(*in) + need)
		return NULL;
	return (uint64_t *)(void *)(in + 1);
}

static void reply_poll_gone(struct cuse_device *d, uint64_t unique) {
	struct {
		struct fuse_out_header h;
		struct fuse_poll_out p;
	} msg = { .h = { .len = sizeof(msg), .unique = unique }, .p = { .revents = POLLERR | POLLHUP } };

	(void)!write(d->fd, &msg, sizeof(msg));
}

static void retired_end_soon(struct cuse_device *d);

/*
 * Every request to a retired device, answered as the kernel's drivers
 * answer a file whose device went: ENODEV, a poll POLLERR|POLLHUP, and 0
 * to a flush and a release. The device's operations are never called: their
 * owner is gone. The last release ends the connection.
 */
static bool retired_request(struct cuse_device *d, struct fuse_buf *buf) {
	struct fuse_in_header *in = buf->mem;
	struct journal *j = d->journal;
	struct journal_file *f;
	uint64_t *handle;

	/* An interrupt has no answer; nothing here waits to be interrupted. */
	if (buf->size < sizeof(*in) || in->opcode == FUSE_INTERRUPT)
		return true;
	handle = request_handle(in, buf->size);
	f = handle ? journal_file(j, *handle) : NULL;
	switch (in->opcode) {
	case FUSE_RELEASE:
		if (f)
			journal_file_drop(j, f);
		reply_raw(d, in->unique, 0);
		if (j->n_files == 0)
			retired_end_soon(d);
		break;
	case FUSE_FLUSH:
		reply_raw(d, in->unique, 0);
		break;
	case FUSE_POLL:
		reply_poll_gone(d, in->unique);
		break;
	default:
		reply_raw(d, in->unique, ENODEV);
	}
	return true;
}

/*
 * Before the device's operations see a request: records it, and puts the
 * device's own fh in place of the handle the kernel holds. Returns true
 * when the request was answered here: a handle of an earlier run (ENODEV;
 * its release 0), an unknown one, or one past the limits.
 */
static bool request_filter(struct cuse_device *d, struct fuse_buf *buf) {
	struct fuse_in_header *in = buf->mem;
	struct journal *j = d->journal;
	struct journal_file *f = NULL;
	uint64_t *handle, ended = 0;
	uint32_t owner = 0;

	if (d->retired)
		return retired_request(d, buf);
	if (buf->size < sizeof(*in) || in->opcode == FUSE_INTERRUPT)
		return false;
	handle = request_handle(in, buf->size);
	if (handle) {
		f = journal_file(j, *handle);
		if (!f || f->stale) {
			bool release = in->opcode == FUSE_RELEASE;

			if (release && f)
				journal_file_drop(j, f);
			reply_raw(d, in->unique, release || in->opcode == FUSE_FLUSH ? 0 : ENODEV);
			return true;
		}
		if (in->opcode == FUSE_POLL) {
			const struct fuse_poll_in *p = (const void *)handle;

			if (p->flags & FUSE_POLL_SCHEDULE_NOTIFY)
				f->kh = p->kh;
		}
		if (in->opcode == FUSE_RELEASE)
			ended = f->handle;
		*handle = f->fh;
		owner = f->owner;
	}
	if (in->opcode == FUSE_OPEN && j->n_files + journal_opens_in_flight(j) >= CUSE_DEVICE_MAX_FILES) {
		reply_raw(d, in->unique, EMFILE);
		return true;
	}
	/* The kernel waits for a release's answer, unkillably: it always finds a slot. */
	if (in->opcode != FUSE_RELEASE && j->n_requests >= REQUESTS_BUT_RELEASES) {
		reply_raw(d, in->unique, EBUSY);
		return true;
	}
	/* One owner's requests leave the others their shares. */
	if (d->share_requests && f && in->opcode != FUSE_RELEASE &&
	    journal_owner_requests(j, owner) >= d->share_requests) {
		reply_raw(d, in->unique, EBUSY);
		return true;
	}
	if (j->n_requests == CUSE_DEVICE_MAX_REQUESTS)
		return false;
	j->requests[j->n_requests] =
		(struct journal_request){ .unique = in->unique, .handle = ended, .opcode = in->opcode, .owner = owner };
	__atomic_store_n(&j->n_requests, j->n_requests + 1, __ATOMIC_RELEASE);
	return false;
}

/*
 * Every reply and notification of a session goes out here. An open's
 * reply carries a handle of this run in place of the device's fh; the
 * request is forgotten once its answer is written.
 */
static ssize_t session_writev(int fd, struct iovec *iov, int count, void *userdata) {
	struct cuse_device *d = (size_t)fd < n_by_fd ? by_fd[fd] : NULL;
	struct journal_request *jr = NULL;
	struct fuse_open_out open_out;
	uint64_t opened = 0, fh = 0;
	uint32_t owner = 0;
	struct iovec v[8];
	struct journal *j;
	ssize_t n;

	(void)userdata;
	if (!d || count < 1 || count > (int)ELEMENTSOF(v) || iov[0].iov_len < sizeof(struct fuse_out_header))
		return writev(fd, iov, count);
	if (d->swallow) {
		size_t len = 0;

		for (int i = 0; i < count; i++)
			len += iov[i].iov_len;
		return (ssize_t)len;
	}
	j = d->journal;
	memcpy(v, iov, count * sizeof(*iov));
	{
		const struct fuse_out_header *out = iov[0].iov_base;

		if (out->unique)
			jr = journal_request(j, out->unique);
		if (jr && jr->opcode == FUSE_OPEN) {
			/* Whatever the answer, the owner named for this open is used up. */
			owner = d->opening_owner;
			d->opening_owner = 0;
		}
		if (jr && jr->opcode == FUSE_OPEN && out->error == 0 && count >= 2 &&
		    iov[1].iov_len == sizeof(open_out) && j->n_files < CUSE_DEVICE_MAX_FILES) {
			memcpy(&open_out, iov[1].iov_base, sizeof(open_out));
			fh = open_out.fh;
			/* Numbered before the kernel holds the number: no later open gets it again. */
			opened = j->next_handle;
			__atomic_store_n(&j->next_handle, opened + 1, __ATOMIC_RELEASE);
			open_out.fh = opened;
			v[1].iov_base = &open_out;
		}
		if (jr && jr->opcode == FUSE_RELEASE && jr->handle) {
			/* Forgotten before it is answered: a handle released is never answered for again. */
			struct journal_file *f = journal_file(j, jr->handle);

			if (f)
				journal_file_drop(j, f);
		}
	}
	n = writev(fd, v, count);
	if (opened && n >= 0) {
		/* Recorded once the kernel holds it (one it does not hold is refused as unknown anyway). */
		j->files[j->n_files] = (struct journal_file){ .handle = opened, .fh = fh, .owner = owner };
		__atomic_store_n(&j->n_files, j->n_files + 1, __ATOMIC_RELEASE);
	}
	if (jr) {
		if (jr->opcode == CUSE_INIT && n >= 0)
			j->ready = 1;
		journal_request_drop(j, jr);
	}
	return n;
}

/* Cannot fail for a device set up: turning a source on or off makes no system call that can. */
static void listen_set(struct cuse_device *d, bool on) {
	if (d->io)
		(void)loop_io_set_enabled(d->io, on);
	else
		(void)sd_event_source_set_enabled(d->source, on ? SD_EVENT_ON : SD_EVENT_OFF);
}

static ssize_t session_read(int fd, void *buf, size_t len, void *userdata) {
	(void)userdata;
	return read(fd, buf, len);
}

static const struct fuse_custom_io session_io = {
	.writev = session_writev,
	.read = session_read,
};

/* The kernel ended the connection: stop listening, and keep nothing of it. */
static void connection_ended(struct cuse_device *d) {
	listen_set(d, false);
	forget_kept(d);
	if (d->retired)
		retired_end_soon(d);
}

/*
 * One request per wakeup: the kernel queues one per read(), and a read
 * past the last would only fail with EAGAIN. The fd is watched
 * level-triggered, so a second queued request wakes the loop again.
 */
static int on_request(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct cuse_device *d = userdata;
	int r;

	(void)s;
	(void)fd;
	(void)revents;
	r = fuse_session_receive_buf(d->se, &shared_buf);
	if (r == -EAGAIN || r == -EINTR)
		return 0;
	if (r <= 0 || fuse_session_exited(d->se)) {
		connection_ended(d);
		return 0;
	}
	if (request_filter(d, &shared_buf))
		return 0;
	fuse_session_process_buf(d->se, &shared_buf);
	return 0;
}

static bool request_quiet(const struct cuse_device *d, const struct fuse_buf *buf) {
	const struct fuse_in_header *in = buf->mem;

	return buf->size >= sizeof(*in) && in->opcode < 64 && (d->quiet & (UINT64_C(1) << in->opcode));
}

/*
 * A request the loop read that is not quiet, from sd-event's loop, as
 * on_request() would have handled it: its time is sd-event's, and what
 * it changes there is seen.
 */
static int on_handover(sd_event_source *s, void *userdata) {
	struct cuse_device *d = userdata;
	_cleanup_(freep) void *mem = TAKE_PTR(d->held);
	struct fuse_buf buf = { .size = d->held_size, .mem = mem };

	(void)s;
	if (!mem)
		return 0;
	/* First: the request may end the device's use (never its memory: see retired_end_soon()). */
	listen_set(d, true);
	fuse_session_process_buf(d->se, &buf);
	return 0;
}

/*
 * On a loop: quiet requests (an input node's reads and polls) are
 * answered here; every other is recorded here, as every request is
 * before the device sees it, and handed to sd-event's loop, the session
 * not read meanwhile, so that requests keep their order.
 */
static int on_loop_request(struct loop_io *io, uint32_t revents, void *userdata) {
	struct cuse_device *d = userdata;
	int r;

	(void)io;
	(void)revents;
	r = fuse_session_receive_buf(d->se, &shared_buf);
	if (r == -EAGAIN || r == -EINTR)
		return LOOP_QUIET;
	if (r <= 0 || fuse_session_exited(d->se)) {
		connection_ended(d);
		return 0;
	}
	if (request_quiet(d, &shared_buf)) {
		if (!request_filter(d, &shared_buf))
			fuse_session_process_buf(d->se, &shared_buf);
		return LOOP_QUIET;
	}
	if (request_filter(d, &shared_buf))
		return 0;
	if (!d->handover && sd_event_add_defer(d->event, &d->handover, on_handover, d) < 0)
		d->handover = NULL;
	d->held = d->handover ? malloc(shared_buf.size) : NULL;
	if (!d->held) {
		/* Out of memory: answered here, where sd-event's time is that of its last wakeup. */
		fuse_session_process_buf(d->se, &shared_buf);
		return 0;
	}
	memcpy(d->held, shared_buf.mem, shared_buf.size);
	d->held_size = shared_buf.size;
	listen_set(d, false);
	/* Cannot fail while the loop runs: turning a defer source on makes no system call. */
	(void)sd_event_source_set_enabled(d->handover, SD_EVENT_ONESHOT);
	return 0;
}

/*
 * A connection the last run kept: libfuse is told the CUSE_INIT it never
 * saw (its reply goes nowhere), what the last run left unanswered gets
 * ENODEV, and its pollers are woken to find their handles dead.
 */
static int on_resume(sd_event_source *s, void *userdata) {
	struct cuse_device *d = userdata;
	struct journal *j = d->journal;
	struct {
		struct fuse_in_header h;
		struct fuse_init_in init;
	} msg = {
		.h = { .len = sizeof(msg), .opcode = CUSE_INIT },
		.init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION },
	};
	struct fuse_buf buf = { .size = sizeof(msg), .mem = &msg };

	(void)s;
	for (uint32_t i = 0; i < j->n_requests; i++)
		reply_raw(d, j->requests[i].unique, ENODEV);
	__atomic_store_n(&j->n_requests, 0, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < j->n_files; i++) {
		j->files[i].stale = 1;
		if (j->files[i].kh)
			notify_poll_raw(d, j->files[i].kh);
	}
	d->swallow = true;
	fuse_session_process_buf(d->se, &buf);
	d->swallow = false;
	d->resume = sd_event_source_disable_unref(d->resume);
	listen_set(d, true);
	return 0;
}

/*
 * Takes over the connection the last run kept for this number, if it is
 * this node's and alive. Both names are taken either way: what is not
 * taken over is dropped, and kept anew by this run.
 */
static int take_kept(struct cuse_device *d, int *ret_fd) {
	_cleanup_(closep) int fd = -1, jfd = -1;
	struct pollfd p;
	int r;

	r = keeper.take(keeper.userdata, d->keep_name, &fd);
	(void)keeper.take(keeper.userdata, d->journal_name, &jfd);
	if (r < 0 && jfd < 0)
		return -ENOENT;
	if (r >= 0 && jfd >= 0)
		r = journal_map(jfd, false, d->devname, &d->journal);
	else
		r = -ENOENT;
	/* A connection the kernel ended (its number refused, say) polls as an error. */
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (r >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)))
		r = -ENOTCONN;
	if (r < 0) {
		if (d->journal) {
			munmap(d->journal, sizeof(*d->journal));
			d->journal = NULL;
		}
		/* It cannot be answered for: it goes, and this run keeps its own. */
		forget_names(d);
		return r;
	}
	*ret_fd = take_fd(&fd);
	return 0;
}

static int open_fresh(struct cuse_device *d, int *ret_fd) {
	_cleanup_(closep) int fd = -1, jfd = -1;
	int r;

	if (forgot_since_sync && have_keeper) {
		keeper.sync(keeper.userdata);
		forgot_since_sync = false;
	}
	fd = connector ? connector(connector_userdata) : open("/dev/cuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return connector ? fd : -errno;
	jfd = memfd_create("devns-cuse-journal", MFD_CLOEXEC);
	if (jfd < 0)
		return -errno;
	r = journal_map(jfd, true, d->devname, &d->journal);
	if (r < 0)
		return r;
	if (d->keep_name[0] && (keeper.keep(keeper.userdata, d->keep_name, fd) < 0 ||
				keeper.keep(keeper.userdata, d->journal_name, jfd) < 0))
		/* Half kept is not kept. */
		forget_kept(d);
	*ret_fd = take_fd(&fd);
	return 0;
}

/* Ends the retired devices that hold node devname or number major:minor. */
static void end_retired_holding(const char *devname, unsigned int major, unsigned int minor) {
	struct cuse_device *r, *next;

	for (r = LIST_FIRST(&retired_devices); r; r = next) {
		next = LIST_NEXT(r, retired_link);
		if (streq(r->devname, devname) || (major && r->major == major && r->minor == minor))
			cuse_device_free(r);
	}
}

/*
 * A device for node devname, or (devname "") for whatever node the
 * connection kept under keep serves; keep "" keeps nothing, and with
 * only_kept nothing new is made.
 */
static int device_new(struct cuse_device **ret, sd_event *event, struct loop *loop, uint64_t quiet,
		      const char *devname, const char *keep, bool only_kept, unsigned int major, unsigned int minor,
		      const struct cuse_lowlevel_ops *ops, void *userdata) {
	_cleanup_(cuse_device_freep) struct cuse_device *d = NULL;
	_cleanup_(closep) int fd = -1;
	char *argv[] = { (char *)"devnsd", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	char info[64 + 256];
	const char *dev_info[] = { info };
	struct cuse_info ci = {
		.dev_major = major,
		.dev_minor = minor,
		.dev_info_argc = 1,
		.dev_info_argv = dev_info,
		.flags = CUSE_UNRESTRICTED_IOCTL,
	};
	bool resumed;
	int r;

	if (snprintf(info, sizeof(info), "DEVNAME=%s", devname) >= (int)sizeof(info))
		return -ENAMETOOLONG;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	shared_users++;
	d->fd = -1;
	d->event = event;
	d->quiet = quiet;
	d->major = major;
	d->minor = minor;
	snprintf(d->devname, sizeof(d->devname), "%s", devname);
	if (have_keeper && keep[0] &&
	    ((size_t)snprintf(d->keep_name, sizeof(d->keep_name), "%s", keep) >= sizeof(d->keep_name) ||
	     (size_t)snprintf(d->journal_name, sizeof(d->journal_name), "%s.j", keep) >= sizeof(d->journal_name)))
		return -ENAMETOOLONG;

	/* The kernel gives a name and a number to one connection at a time. */
	if (devname[0])
		end_retired_holding(devname, major, minor);
	resumed = d->keep_name[0] && take_kept(d, &fd) >= 0;
	if (!resumed && only_kept) {
		d->keep_name[0] = d->journal_name[0] = '\0';
		return -ENOENT;
	}
	if (!resumed) {
		r = open_fresh(d, &fd);
		if (r < 0)
			return r;
	}
	d->se = cuse_lowlevel_new(&args, &ci, ops, userdata);
	/* Option parsing may have copied the arguments. */
	fuse_opt_free_args(&args);
	if (!d->se)
		return -ENOMEM;
	r = fuse_session_custom_io(d->se, &session_io, fd);
	if (r < 0)
		return r;
	/* The session owns the fd from here on. */
	d->fd = take_fd(&fd);
	r = by_fd_set(d->fd, d);
	if (r < 0)
		return r;
	if (loop)
		r = loop_add_io(loop, &d->io, d->fd, EPOLLIN, on_loop_request, d);
	else
		r = sd_event_add_io(event, &d->source, d->fd, EPOLLIN, on_request, d);
	if (r < 0)
		return r;
	if (resumed) {
		listen_set(d, false);
		r = sd_event_add_defer(event, &d->resume, on_resume, d);
		if (r < 0)
			return r;
	}

	*ret = TAKE_PTR(d);
	return 0;
}

int cuse_device_new(struct cuse_device **ret, sd_event *event, const char *devname, unsigned int major,
		    unsigned int minor, const struct cuse_lowlevel_ops *ops, void *userdata) {
	char keep[32] = "";

	if (major)
		snprintf(keep, sizeof(keep), CUSE_KEEP_PREFIX "%u.%u", major, minor);
	return device_new(ret, event, NULL, 0, devname, keep, false, major, minor, ops, userdata);
}

int cuse_device_new_on_loop(struct cuse_device **ret, struct loop *loop, uint64_t quiet, const char *devname,
			    unsigned int major, unsigned int minor, const struct cuse_lowlevel_ops *ops,
			    void *userdata) {
	char keep[32] = "";

	if (major)
		snprintf(keep, sizeof(keep), CUSE_KEEP_PREFIX "%u.%u", major, minor);
	return device_new(ret, loop_event(loop), loop, quiet, devname, keep, false, major, minor, ops, userdata);
}

int cuse_device_set_shares(struct cuse_device *d, unsigned int n) {
	if (n > CUSE_DEVICE_MAX_FILES)
		return -EINVAL;
	d->share_files = n ? CUSE_DEVICE_MAX_FILES / n : 0;
	d->share_requests = n ? REQUESTS_BUT_RELEASES / n : 0;
	return 0;
}

int cuse_device_open_owner(struct cuse_device *d, uint32_t owner) {
	if (!d->share_files || !d->journal)
		return 0;
	if (journal_owner_files(d->journal, owner) >= d->share_files)
		return -EMFILE;
	d->opening_owner = owner;
	return 0;
}

unsigned int cuse_device_owner_files(const struct cuse_device *d, uint32_t owner) {
	return d->journal ? journal_owner_files(d->journal, owner) : 0;
}

unsigned int cuse_device_owner_requests(const struct cuse_device *d, uint32_t owner) {
	return d->journal ? journal_owner_requests(d->journal, owner) : 0;
}

/* A node that is no more: every open is refused as the handles of the last run are. */
static void gone_open(fuse_req_t req, struct fuse_file_info *fi) {
	(void)fi;
	fuse_reply_err(req, ENODEV);
}

static const struct cuse_lowlevel_ops gone_ops = {
	.open = gone_open,
};

static int on_end(sd_event_source *s, uint64_t usec, void *userdata) {
	struct cuse_device *d = userdata;

	(void)s;
	(void)usec;
	cuse_device_free(d);
	return 0;
}

void cuse_device_set_note(struct cuse_device *d, const char *note) {
	if (d->journal)
		snprintf(d->journal->note, sizeof(d->journal->note), "%s", note);
}

int cuse_device_end_kept(sd_event *event, const char *keep, struct cuse_kept_node *ret_node) {
	struct cuse_kept_node node = { 0 };
	size_t len = strlen(keep);
	struct cuse_device *d;
	int r;

	/* A connection's name, not its record's (NAME.j). */
	if (!have_keeper || strncmp(keep, CUSE_KEEP_PREFIX, strlen(CUSE_KEEP_PREFIX)) != 0 ||
	    (len > 2 && streq(keep + len - 2, ".j")))
		return -EINVAL;
	r = device_new(&d, event, NULL, 0, "", keep, true, 0, 0, &gone_ops, NULL);
	if (r < 0)
		return r;
	/* The record is the last run's: bounded here, whatever it holds. */
	memcpy(node.devname, d->journal->devname, sizeof(node.devname) - 1);
	memcpy(node.note, d->journal->note, sizeof(node.note) - 1);
	r = sd_event_add_time_relative(event, &d->end, CLOCK_MONOTONIC, CUSE_DEVICE_GONE_USEC, 0, on_end, d);
	if (r < 0) {
		cuse_device_free(d);
		return r;
	}
	*ret_node = node;
	return 0;
}

/* The node below /dev, never through a symlink; checked to be this device's. */
static int apply_owner(struct cuse_device *d) {
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	_cleanup_(closep) int dev = -1, fd = -1;
	struct stat st;

	dev = open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dev, d->devname, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* With a number the kernel chose (major 0), any character device there is taken for ours. */
	if (!S_ISCHR(st.st_mode) || (d->major && st.st_rdev != makedev(d->major, d->minor)))
		return -ENODEV;
	return fd_set_owner(fd, d->uid, d->gid, d->mode);
}

static int on_owner_retry(sd_event_source *s, uint64_t usec, void *userdata) {
	struct cuse_device *d = userdata;

	if (apply_owner(d) != -ENOENT || usec >= d->owner_deadline)
		return 0;
	(void)sd_event_source_set_time_relative(s, OWNER_POLL_USEC);
	return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

int cuse_device_set_owner(struct cuse_device *d, uid_t uid, gid_t gid, mode_t mode) {
	uint64_t now;
	int r;

	d->uid = uid;
	d->gid = gid;
	d->mode = mode & 07777;
	/* Cannot fail: sd-event reports no failure turning a source off. */
	if (d->owner_retry)
		(void)sd_event_source_set_enabled(d->owner_retry, SD_EVENT_OFF);
	r = apply_owner(d);
	if (r != -ENOENT)
		return r;
	if (sd_event_now(d->event, CLOCK_MONOTONIC, &now) < 0)
		now = 0;
	d->owner_deadline = now + CUSE_OWNER_RETRY_USEC;
	if (!d->owner_retry) {
		int q = sd_event_add_time_relative(d->event, &d->owner_retry, CLOCK_MONOTONIC, OWNER_POLL_USEC, 0,
						   on_owner_retry, d);
		return q < 0 ? q : r;
	}
	(void)sd_event_source_set_time_relative(d->owner_retry, OWNER_POLL_USEC);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(d->owner_retry, SD_EVENT_ONESHOT);
	return r;
}

struct cuse_device *cuse_device_free(struct cuse_device *d) {
	if (!d)
		return NULL;
	if (d->retired) {
		LIST_REMOVE(d, retired_link);
		n_retired--;
	}
	sd_event_source_disable_unref(d->owner_retry);
	sd_event_source_disable_unref(d->resume);
	sd_event_source_disable_unref(d->end);
	sd_event_source_disable_unref(d->handover);
	free(d->held);
	sd_event_source_disable_unref(d->source);
	loop_io_free(d->io);
	/* The node goes: the kept duplicate must not hold it. */
	forget_kept(d);
	if (d->fd >= 0)
		(void)by_fd_set(d->fd, NULL);
	if (d->se)
		fuse_session_destroy(d->se);
	if (d->journal)
		munmap(d->journal, sizeof(*d->journal));
	free(d);
	if (--shared_users == 0) {
		free(shared_buf.mem);
		shared_buf = (struct fuse_buf){ 0 };
		free(by_fd);
		by_fd = NULL;
		n_by_fd = 0;
	}
	return NULL;
}

/* --- retired devices ----------------------------------------------------------- */

static int on_retired_end(sd_event_source *s, void *userdata) {
	(void)s;
	cuse_device_free(userdata);
	return 0;
}

static void retired_end_soon(struct cuse_device *d) {
	if (d->end)
		return;
	/* From the loop: the request being handled may still use the device. */
	if (sd_event_add_defer(d->event, &d->end, on_retired_end, d) < 0)
		d->end = NULL;
}

/* Removes the node from /dev (devtmpfs would only when the connection ends), and its folders once empty. */
static void unlink_node(struct cuse_device *d) {
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	char parent[sizeof(d->devname)], *slash;
	_cleanup_(closep) int dev = -1, dir = -1;
	const char *base = d->devname;
	struct stat st;

	dev = open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dev < 0)
		return;
	snprintf(parent, sizeof(parent), "%s", d->devname);
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		base = slash + 1;
		dir = (int)syscall(SYS_openat2, dev, parent, &how, sizeof(how));
	} else
		dir = fcntl(dev, F_DUPFD_CLOEXEC, 0);
	if (dir < 0 || fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
	    (d->major && st.st_rdev != makedev(d->major, d->minor)) || unlinkat(dir, base, 0) < 0)
		return;
	while ((slash = strrchr(parent, '/')) || parent[0]) {
		if (unlinkat(dev, parent, AT_REMOVEDIR) < 0)
			break;
		if (!slash)
			break;
		*slash = '\0';
	}
}

void cuse_device_retire(struct cuse_device *d, const char *group) {
	struct journal *j;
	struct cuse_device *r, *oldest = NULL;
	unsigned int in_group = 0;

	if (!d)
		return;
	j = d->journal;
	/* A node that never came, or one taken over and not resumed yet, has nobody to answer. */
	if (d->retired || !j || !j->ready || d->resume || d->swallow || (!d->source && !d->io)) {
		cuse_device_free(d);
		return;
	}
	d->owner_retry = sd_event_source_disable_unref(d->owner_retry);
	d->end = sd_event_source_disable_unref(d->end);
	/* A run started after this one must not take it for a node that lives. */
	forget_kept(d);
	for (uint32_t i = 0; i < j->n_requests; i++)
		reply_raw(d, j->requests[i].unique, j->requests[i].opcode == FUSE_RELEASE ? 0 : ENODEV);
	for (uint32_t i = 0; i < j->n_requests; i++)
		if (j->requests[i].opcode == FUSE_RELEASE && j->requests[i].handle) {
			struct journal_file *f = journal_file(j, j->requests[i].handle);

			if (f)
				journal_file_drop(j, f);
		}
	__atomic_store_n(&j->n_requests, 0, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < j->n_files; i++) {
		j->files[i].stale = 1;
		if (j->files[i].kh)
			notify_poll_raw(d, j->files[i].kh);
	}
	unlink_node(d);
	d->retired = true;
	snprintf(d->group, sizeof(d->group), "%s", group ?: "");
	/* A request handed over was in the journal: answered above. */
	d->held = mfree(d->held);
	if (d->handover)
		(void)sd_event_source_set_enabled(d->handover, SD_EVENT_OFF);
	listen_set(d, true);
	if (j->n_files == 0) {
		LIST_INSERT_HEAD(&retired_devices, d, retired_link);
		n_retired++;
		cuse_device_free(d);
		return;
	}
	/* Bounded: past the limits, the oldest of the group (or of all) ends, its handles then ENOTCONN. */
	LIST_FOREACH(r, &retired_devices, retired_link)
		if (streq(r->group, d->group)) {
			in_group++;
			oldest = r;
		}
	if (in_group >= CUSE_DEVICE_MAX_RETIRED_PER_GROUP)
		cuse_device_free(oldest);
	else if (n_retired >= CUSE_DEVICE_MAX_RETIRED)
		for (oldest = LIST_FIRST(&retired_devices); oldest; oldest = r)
			if (!(r = LIST_NEXT(oldest, retired_link))) {
				cuse_device_free(oldest);
				break;
			}
	LIST_INSERT_HEAD(&retired_devices, d, retired_link);
	n_retired++;
}

void cuse_device_end_retired(const char *group) {
	struct cuse_device *r, *next;

	for (r = LIST_FIRST(&retired_devices); r; r = next) {
		next = LIST_NEXT(r, retired_link);
		if (!group || streq(r->group, group))
			cuse_device_free(r);
	}
}

unsigned int cuse_device_n_retired(const char *group) {
	const struct cuse_device *r;
	unsigned int n = 0;

	LIST_FOREACH(r, &retired_devices, retired_link)
		n += !group || streq(r->group, group);
	return n;
}
