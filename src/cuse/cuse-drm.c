/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cuse-device.h"
#include "cuse-drm.h"
#include "drm-ioctl.h"
#include "fd-closer.h"
#include "fb-ticket.h"
#include "util.h"

/*
 * Ioctls of one file whose rounds are counted at once (threads sharing the
 * file); past them the least recent is forgotten, and its next round is
 * counted as its last.
 */
#define ROUND_SLOTS 8

_Static_assert(FB_TICKETS_MAX >= CUSE_DRM_MAX_OPEN * FB_TICKETS_PER_FILE, "room for every open file's tickets");

struct open_file;

/* A caller blocked in read() or in WAIT_VBLANK. */
struct waiter {
	struct open_file *file;
	fuse_req_t req;
	bool vblank;
	size_t size;  /* a read's count */
	uint64_t seq; /* the vblank a WAIT_VBLANK waits for */
	TAILQ_ENTRY(waiter) link;
	/* WAIT_VBLANK's reply (out_size bytes, room for union drm_wait_vblank at least). */
	size_t out_size;
	_Alignas(8) uint8_t out[];
};

TAILQ_HEAD(waiter_list, waiter);

/* An ioctl of the file between its rounds: the round it made last. */
struct round {
	unsigned int cmd;
	void *arg;
	unsigned int count; /* 0: a free slot */
	uint64_t stamp;
};

/* What a ticket stands for: a buffer of an open file, by its MAP_DUMB offset. */
struct ticket_binding {
	struct open_file *file;
	uint64_t offset;
};

/*
 * Per open file: the device it was opened on (which frees it), the card it
 * works on (that device's, or a persona's when routed; NULL once that card
 * is gone), its drm file (NULL once revoked: ENODEV from then on), who
 * opened it for what (the opener's uid in devnsd's user namespace, and
 * O_ACCMODE), what is blocked on it, and its ioctls between rounds.
 */
struct open_file {
	struct cuse_drm *dev;
	struct cuse_drm *cd;
	struct drm_file *drm;
	uid_t uid;
	int access_mode;
	struct waiter_list reads, waits;
	unsigned int n_waiters;
	struct fuse_pollhandle *ph;
	struct round rounds[ROUND_SLOTS];
	uint64_t round_stamp;
	/* One ticket each at most: a new ticket takes the oldest's place. */
	struct ticket_binding bindings[FB_TICKETS_PER_FILE];
	unsigned int next_binding;
	LIST_ENTRY(open_file) link;      /* on cd->files */
	LIST_ENTRY(open_file) open_link; /* on dev->opened */
};

struct cuse_drm {
	struct cuse_device *dev;
	struct drm_node *node; /* NULL: a routed device, whose files work on the card hooks->route() names */
	char *socket_path;
	const struct cuse_drm_hooks *hooks;
	void *userdata;
	/* Every handle working on this card until its release, revoked ones too. */
	LIST_HEAD(, open_file) files;
	/* Every handle opened on this device until its release. */
	LIST_HEAD(, open_file) opened;
	unsigned int n_open, n_waiting;
	struct listener on_readable;
	struct fb_tickets tickets;
	/* The callers' files taken to compare with the card's dma-bufs, closed on the closer thread. */
	struct fd_closer_quota *closer;
};

/* A read answers whole events, and never more than a file can have queued. */
static uint8_t read_buf[DRM_FILE_EVENT_SPACE];
static struct drm_ioctl_step step;

static struct open_file *file_of(struct fuse_file_info *fi) {
	return (struct open_file *)(uintptr_t)fi->fh;
}

/* --- blocked callers ------------------------------------------------------------ */

static void waiter_drop(struct waiter *w) {
	struct open_file *f = w->file;

	TAILQ_REMOVE(w->vblank ? &f->waits : &f->reads, w, link);
	f->n_waiters--;
	f->cd->n_waiting -= w->vblank;
	free(w);
}

/* Takes w off its file; the request is the caller's to answer. A WAIT_VBLANK ends as interrupted unless reply. */
static fuse_req_t waiter_take(struct waiter *w, union drm_wait_vblank *reply) {
	fuse_req_t req = w->req;

	if (w->vblank)
		drm_node_wait_end(w->file->cd->node, reply);
	fuse_req_interrupt_func(req, NULL, NULL);
	return req;
}

static void waiter_fail(struct waiter *w, int error) {
	fuse_req_t req = waiter_take(w, NULL);

	waiter_drop(w);
	fuse_reply_err(req, error);
}

static void on_interrupt(fuse_req_t req, void *data) {
	struct waiter *w = data;

	if (w->vblank)
		drm_node_wait_end(w->file->cd->node, NULL);
	waiter_drop(w);
	fuse_reply_err(req, EINTR);
}

/* Blocks req on f: a read of size, or a WAIT_VBLANK for seq with its reply. */
static void waiter_add(struct open_file *f, fuse_req_t req, size_t size, const struct drm_ioctl_step *s) {
	size_t room = s ? MAX(s->out_size, sizeof(union drm_wait_vblank)) : 0;
	struct waiter *w = NULL;
	int error = EBUSY;

	if (f->n_waiters < CUSE_DRM_MAX_WAITERS_PER_FILE) {
		w = calloc(1, sizeof(*w) + room);
		error = ENOMEM;
	}
	if (!w) {
		if (s)
			drm_node_wait_end(f->cd->node, NULL);
		fuse_reply_err(req, error);
		return;
	}
	w->file = f;
	w->req = req;
	w->size = size;
	if (s) {
		w->vblank = true;
		w->seq = s->wait_seq;
		w->out_size = s->out_size;
		memcpy(w->out, s->out, s->out_size);
		f->cd->n_waiting++;
	}
	TAILQ_INSERT_TAIL(w->vblank ? &f->waits : &f->reads, w, link);
	f->n_waiters++;
	/* Last: if the caller was interrupted already this answers it at once. */
	fuse_req_interrupt_func(req, on_interrupt, w);
}

/* Answers the WAIT_VBLANKs the node completed: their vblank came, or the CRTC went off. */
static void answer_waits(struct cuse_drm *cd) {
	struct open_file *f;
	struct waiter *w, *next;

	if (cd->n_waiting == 0)
		return;
	LIST_FOREACH(f, &cd->files, link)
		for (w = TAILQ_FIRST(&f->waits); w; w = next) {
			fuse_req_t req;

			next = TAILQ_NEXT(w, link);
			if (!drm_node_wait_done(cd->node, w->seq))
				continue;
			req = waiter_take(w, (union drm_wait_vblank *)(void *)w->out);
			fuse_reply_ioctl(req, 0, w->out_size ? w->out : NULL, w->out_size);
			waiter_drop(w);
		}
}

/* One read's answer: events, or false when none is queued. */
static bool answer_read(fuse_req_t req, struct drm_file *drm, size_t size) {
	ssize_t n = drm_file_read(drm, read_buf, MIN(size, sizeof(read_buf)));

	if (n == -EAGAIN)
		return false;
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, (const char *)read_buf, (size_t)n);
	return true;
}

static void on_readable(struct listener *l, void *data) {
	struct cuse_drm *cd = container_of(l, struct cuse_drm, on_readable);
	struct open_file *f;
	struct waiter *w;

	LIST_FOREACH(f, &cd->files, link)
		if (f->drm && f->drm == data)
			break;
	if (!f)
		return;
	while ((w = TAILQ_FIRST(&f->reads)) && drm_file_readable(f->drm)) {
		fuse_req_t req = waiter_take(w, NULL);
		size_t size = w->size;

		waiter_drop(w);
		if (!answer_read(req, f->drm, size))
			fuse_reply_err(req, EAGAIN);
	}
	/* One notification per poll request: whoever it wakes polls again. */
	if (f->ph && drm_file_readable(f->drm)) {
		fuse_lowlevel_notify_poll(f->ph);
		fuse_pollhandle_destroy(f->ph);
		f->ph = NULL;
	}
}

/* --- files ---------------------------------------------------------------------- */

/*
 * f stops working: what is blocked on it gets error, its pollers are
 * woken, its tickets are void and its drm file is closed. Closing it may
 * turn the CRTC off: the caller then answers the other files' waits.
 */
static void file_detach(struct open_file *f, int error) {
	struct waiter *w;

	if (!f->drm)
		return;
	while ((w = TAILQ_FIRST(&f->reads)) || (w = TAILQ_FIRST(&f->waits)))
		waiter_fail(w, error);
	if (f->ph) {
		fuse_lowlevel_notify_poll(f->ph);
		fuse_pollhandle_destroy(f->ph);
		f->ph = NULL;
	}
	for (size_t i = 0; i < ELEMENTSOF(f->bindings); i++)
		fb_tickets_drop_file(&f->cd->tickets, &f->bindings[i]);
	drm_file_close(TAKE_PTR(f->drm));
	f->cd->n_open--;
}

/* f no longer works on its card (which is going): ENODEV from now on, until its release. */
static void file_leave(struct open_file *f) {
	file_detach(f, ENODEV);
	LIST_REMOVE(f, link);
	f->cd = NULL;
}

/* f is released: it stops working, and the card answers the waits its close completed. */
static void file_free(struct open_file *f, int error) {
	struct cuse_drm *cd = f->cd;

	if (cd) {
		file_detach(f, error);
		LIST_REMOVE(f, link);
	}
	LIST_REMOVE(f, open_link);
	free(f);
	if (cd)
		answer_waits(cd);
}

static unsigned int files_of_uid(const struct cuse_drm *cd, uid_t uid) {
	const struct open_file *f;
	unsigned int n = 0;

	LIST_FOREACH(f, &cd->files, link)
		n += f->drm && f->uid == uid;
	return n;
}

/* The drm file of an open file; answers ENODEV when it was revoked. */
static struct drm_file *drm_of(fuse_req_t req, struct fuse_file_info *fi) {
	struct drm_file *drm = file_of(fi)->drm;

	if (!drm)
		fuse_reply_err(req, ENODEV);
	return drm;
}

static void cd_init_done(void *userdata) {
	struct cuse_drm *cd = userdata;

	if (cd->hooks && cd->hooks->ready)
		cd->hooks->ready(cd->userdata);
}

static void cd_open(fuse_req_t req, struct fuse_file_info *fi) {
	struct cuse_drm *dev = fuse_req_userdata(req), *cd = dev;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct open_file *f;
	uint32_t owner = 0;
	int r = 0;

	if (!dev->node) {
		r = dev->hooks->route(dev->userdata, ctx->pid, &cd, &owner);
		if (r >= 0)
			r = cuse_device_open_owner(dev->dev, owner);
	} else if (dev->hooks && dev->hooks->may_open)
		r = dev->hooks->may_open(dev->userdata, ctx->pid);
	if (r >= 0 && (cd->n_open >= CUSE_DRM_MAX_OPEN || files_of_uid(cd, ctx->uid) >= CUSE_DRM_MAX_OPEN_PER_UID))
		r = -EMFILE;
	f = r >= 0 ? calloc(1, sizeof(*f)) : NULL;
	if (r >= 0 && !f)
		r = -ENOMEM;
	if (r >= 0)
		r = drm_file_open(cd->node, ctx->pid, &f->drm);
	if (r < 0) {
		free(f);
		fuse_reply_err(req, -r);
		return;
	}
	f->dev = dev;
	f->cd = cd;
	f->uid = ctx->uid;
	f->access_mode = fi->flags & O_ACCMODE;
	TAILQ_INIT(&f->reads);
	TAILQ_INIT(&f->waits);
	fi->fh = (uintptr_t)f;
	fi->nonseekable = 1;
	fi->direct_io = 1;
	LIST_INSERT_HEAD(&cd->files, f, link);
	LIST_INSERT_HEAD(&dev->opened, f, open_link);
	cd->n_open++;
	if (fuse_reply_open(req, fi) < 0)
		file_free(f, ENODEV);
}

static void cd_release(fuse_req_t req, struct fuse_file_info *fi) {
	file_free(file_of(fi), EINTR);
	fuse_reply_err(req, 0);
}

static void cd_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	struct drm_file *drm = drm_of(req, fi);

	(void)off;
	if (!drm || answer_read(req, drm, size))
		return;
	if (fi->flags & O_NONBLOCK)
		fuse_reply_err(req, EAGAIN);
	else
		waiter_add(file_of(fi), req, size, NULL);
}

static void cd_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph) {
	struct open_file *f = file_of(fi);

	if (!f->drm) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(req, POLLERR | POLLHUP);
		return;
	}
	if (ph) {
		if (f->ph)
			fuse_pollhandle_destroy(f->ph);
		f->ph = ph;
	}
	fuse_reply_poll(req, drm_file_readable(f->drm) ? POLLIN | POLLRDNORM : 0);
}

/* --- ioctls --------------------------------------------------------------------- */

static struct round *round_find(struct open_file *f, unsigned int cmd, void *arg) {
	for (size_t i = 0; i < ROUND_SLOTS; i++)
		if (f->rounds[i].count && f->rounds[i].cmd == cmd && f->rounds[i].arg == arg)
			return &f->rounds[i];
	return NULL;
}

/*
 * Which round of cmd at arg this call is: the first when CUSE brings no
 * data, otherwise the one after the last counted (the last allowed when
 * that was forgotten).
 */
static unsigned int round_of(struct open_file *f, unsigned int cmd, void *arg, size_t in_size, size_t out_size) {
	struct round *r;

	if (in_size == 0 && out_size == 0)
		return 1;
	r = round_find(f, cmd, arg);
	return r ? r->count + 1 : DRM_IOCTL_ROUNDS;
}

/* Counts round n of cmd at arg (0: it ended). */
static void round_set(struct open_file *f, unsigned int cmd, void *arg, unsigned int n) {
	struct round *r = round_find(f, cmd, arg);

	if (!r && n == 0)
		return;
	for (size_t i = 0; !r && i < ROUND_SLOTS; i++)
		if (!f->rounds[i].count)
			r = &f->rounds[i];
	if (!r) {
		r = &f->rounds[0];
		for (size_t i = 1; i < ROUND_SLOTS; i++)
			if (f->rounds[i].stamp < r->stamp)
				r = &f->rounds[i];
	}
	*r = (struct round){ .cmd = cmd, .arg = arg, .count = n, .stamp = ++f->round_stamp };
}

/*
 * The first round of a private ioctl names its struct; the second brings
 * it. True when req was answered here: with that retry, or EIO when the
 * data is not what was named.
 */
static bool private_round(fuse_req_t req, void *arg, size_t in_len, size_t out_len, size_t in_size,
			  size_t out_size) {
	struct iovec in_iov = { .iov_base = arg, .iov_len = in_len }, out_iov = { .iov_base = arg, .iov_len = out_len };

	if (in_size == 0 && out_size == 0) {
		fuse_reply_ioctl_retry(req, &in_iov, in_len ? 1 : 0, &out_iov, 1);
		return true;
	}
	if (in_size != in_len || out_size != out_len) {
		fuse_reply_err(req, EIO);
		return true;
	}
	return false;
}

static void get_socket(fuse_req_t req, struct cuse_drm *cd, void *arg, size_t in_size, size_t out_size) {
	struct devns_fb_socket sock = { 0 };

	if (!cd->socket_path) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (private_round(req, arg, 0, sizeof(sock), in_size, out_size))
		return;
	if (strlen(cd->socket_path) >= sizeof(sock.path)) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	memcpy(sock.path, cd->socket_path, strlen(cd->socket_path));
	fuse_reply_ioctl(req, 0, &sock, sizeof(sock));
}

/* A ticket for the buffer at the MAP_DUMB offset, bound to f and that offset; it replaces f's oldest. */
static void get_ticket(fuse_req_t req, struct open_file *f, void *arg, const void *in, size_t in_size,
		       size_t out_size) {
	struct cuse_drm *cd = f->cd;
	struct devns_drm_ticket t;
	struct ticket_binding *b;
	struct drm_dumb_map map;
	int r;

	if (!cd->socket_path) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (private_round(req, arg, sizeof(t), sizeof(t), in_size, out_size))
		return;
	memcpy(&t, in, sizeof(t));
	r = drm_node_map_find(cd->node, f->drm, t.offset, &map);
	if (r >= 0) {
		b = &f->bindings[f->next_binding++ % ELEMENTSOF(f->bindings)];
		fb_tickets_drop_file(&cd->tickets, b);
		*b = (struct ticket_binding){ .file = f, .offset = t.offset };
		r = fb_tickets_issue(&cd->tickets, b, monotonic_usec(), &t.ticket);
	}
	if (r < 0)
		fuse_reply_err(req, -r);
	else
		fuse_reply_ioctl(req, 0, &t, sizeof(t));
}

/* One ioctl's look at a caller's file (PRIME_FD_TO_HANDLE). */
struct caller_file {
	struct cuse_drm *cd;
	int fd;  /* the caller's fd number */
	int got; /* devnsd's own reference to that file, or -1 */
};

/* The thread group of thread tid, from /proc/TID/status, which reads nothing of its files. */
static int thread_group_of(pid_t tid, pid_t *ret) {
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	return proc_read_pid(path, "Tgid", ret);
}

/*
 * devnsd's own reference to the caller's file (pidfd_getfd()). Its close
 * goes to the closer thread: the caller may close its own meanwhile, and
 * the last close of some files (a FUSE file's flush, a socket that
 * lingers) waits on whoever serves them. -EBADF for no such fd, -EBUSY
 * while the closer holds as many of this card's as it takes.
 */
static int caller_file_get(struct caller_file *cf, pid_t tid, int fd) {
	pid_t tgid = 0;
	int pidfd, got, r;

	if (!fd_closer_has_room(cf->cd->closer, 1))
		return -EBUSY;
	r = thread_group_of(tid, &tgid);
	if (r < 0)
		return -EBADF;
	pidfd = (int)syscall(SYS_pidfd_open, tgid, 0);
	if (pidfd < 0)
		return errno == ESRCH ? -EBADF : -errno;
	got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	r = got < 0 ? -errno : 0;
	close(pidfd);
	if (r < 0)
		return r == -EBADF || r == -ESRCH ? -EBADF : r;
	cf->fd = fd;
	cf->got = got;
	return 0;
}

static void caller_file_put(struct caller_file *cf) {
	if (cf->got >= 0)
		fd_closer_close_for(cf->cd->closer, cf->got);
	cf->got = -1;
}

/*
 * PRIME_FD_TO_HANDLE: whether the caller's fd is the same open file as own,
 * one of the node's dma-bufs. Both are compared in devnsd's own file table
 * (kcmp()), where nothing closes them meanwhile; nothing of the caller's
 * file is called. The caller (ctx->pid, the thread blocked in this ioctl)
 * is looked up by number, in devnsd's pid namespace.
 */
static int caller_same_file(const struct drm_ioctl_ctx *ctx, int fd, int own) {
	struct caller_file *cf = ctx->userdata;
	pid_t self = getpid();
	int r;

	if (ctx->pid <= 0)
		return -EBADF;
	if (cf->got < 0 || cf->fd != fd) {
		caller_file_put(cf);
		r = caller_file_get(cf, ctx->pid, fd);
		if (r < 0)
			return r;
	}
	if (own < 0)
		return 0;
	r = (int)syscall(SYS_kcmp, self, self, KCMP_FILE, own, cf->got);
	if (r < 0)
		return -errno;
	return r == 0;
}

static void cd_ioctl(fuse_req_t req, int cmd, void *arg, struct fuse_file_info *fi, unsigned int flags,
		     const void *in, size_t in_size, size_t out_size) {
	struct open_file *f = file_of(fi);
	struct cuse_drm *cd = f->cd; /* NULL only when f->drm is: drm_of() answers first */
	const struct fuse_ctx *fctx = fuse_req_ctx(req);
	struct caller_file cf = { .cd = cd, .fd = -1, .got = -1 };
	struct drm_ioctl_ctx ctx = {
		.now_usec = monotonic_usec(),
		.pid = fctx->pid,
		.privileged = fctx->uid == 0,
		.same_file = caller_same_file,
		.userdata = &cf,
	};
	unsigned int c = (unsigned int)cmd, round;

	(void)flags;
	if (!drm_of(req, fi))
		return;
	if (c == DEVNS_DRM_IOCTL_GET_SOCKET)
		return get_socket(req, cd, arg, in_size, out_size);
	if (c == DEVNS_DRM_IOCTL_GET_TICKET)
		return get_ticket(req, f, arg, in, in_size, out_size);
	round = round_of(f, c, arg, in_size, out_size);
	drm_ioctl(f->drm, &ctx, c, arg, in, in_size, out_size, &step);
	caller_file_put(&cf);
	if (step.retry) {
		/* A caller racing its own memory: its ioctl never settles. */
		if (round >= DRM_IOCTL_ROUNDS) {
			round_set(f, c, arg, 0);
			fuse_reply_err(req, EIO);
			return;
		}
		round_set(f, c, arg, round);
		fuse_reply_ioctl_retry(req, step.in_iov, step.n_in, step.out_iov, step.n_out);
		return;
	}
	round_set(f, c, arg, 0);
	if (step.result < 0)
		fuse_reply_err(req, -step.result);
	else if (step.wait)
		waiter_add(f, req, 0, &step);
	else
		fuse_reply_ioctl(req, step.result, step.out_size ? step.out : NULL, step.out_size);
	/* It may have turned the CRTC off: the waits end then. */
	answer_waits(cd);
}

static const struct cuse_lowlevel_ops cuse_drm_ops = {
	.init_done = cd_init_done,
	.open = cd_open,
	.read = cd_read,
	.release = cd_release,
	.ioctl = cd_ioctl,
	.poll = cd_poll,
};

/* --- the device ----------------------------------------------------------------- */

int cuse_drm_new(struct cuse_drm **ret, sd_event *event, const char *devname, unsigned int major,
		 unsigned int minor, struct drm_node *node, const char *socket_path, const struct cuse_drm_hooks *hooks,
		 void *userdata) {
	_cleanup_(cuse_drm_freep) struct cuse_drm *cd = NULL;
	int r;

	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return -ENOMEM;
	cd->node = node;
	cd->hooks = hooks;
	cd->userdata = userdata;
	LIST_INIT(&cd->files);
	LIST_INIT(&cd->opened);
	if (socket_path) {
		cd->socket_path = strdup(socket_path);
		if (!cd->socket_path)
			return -ENOMEM;
	}
	if (node) {
		cd->closer = fd_closer_quota_new(FD_CLOSER_PER_OWNER);
		if (!cd->closer)
			return -ENOMEM;
		cd->on_readable.notify = on_readable;
		signal_add(&drm_node_events(node)->readable, &cd->on_readable);
	} else if (!hooks || !hooks->route)
		return -EINVAL;
	r = cuse_device_new(&cd->dev, event, devname, major, minor, &cuse_drm_ops, cd);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(cd);
	return 0;
}

void cuse_drm_revoke(struct cuse_drm *cd) {
	struct open_file *f;

	if (!cd->node)
		return;
	/* Each file's tickets go with it. */
	LIST_FOREACH(f, &cd->files, link)
		file_detach(f, ENODEV);
	/* What the revoked container still holds of the card is its own now, not the persona's. */
	drm_node_drop_held(cd->node);
}

struct cuse_drm *cuse_drm_free(struct cuse_drm *cd) {
	struct open_file *f;

	if (!cd)
		return NULL;
	cuse_drm_revoke(cd);
	/*
	 * Files opened on a routed device may still work on another card: they
	 * stop while this device's connection can still answer what waits on
	 * them, and the card answers the waits their closes completed.
	 */
	LIST_FOREACH(f, &cd->opened, open_link)
		if (f->cd && f->cd != cd) {
			file_detach(f, ENODEV);
			answer_waits(f->cd);
		}
	if (cd->node)
		listener_remove(&cd->on_readable);
	cuse_device_free(cd->dev);
	while ((f = LIST_FIRST(&cd->opened)))
		file_free(f, ENODEV);
	/* Files routed here from another device stay that device's, answering ENODEV. */
	while ((f = LIST_FIRST(&cd->files)))
		file_leave(f);
	fd_closer_quota_unref(cd->closer);
	free(cd->socket_path);
	free(cd);
	return NULL;
}

struct cuse_drm *cuse_drm_retire(struct cuse_drm *cd, const char *group) {
	struct cuse_device *dev;

	if (!cd)
		return NULL;
	/* Its handles' callers are answered first, through the device, which then lingers on its own. */
	dev = TAKE_PTR(cd->dev);
	cuse_drm_free(cd);
	cuse_device_retire(dev, group);
	return NULL;
}

void cuse_drm_vblank(struct cuse_drm *cd) {
	answer_waits(cd);
}

unsigned int cuse_drm_n_open(const struct cuse_drm *cd) {
	return cd->n_open;
}

unsigned int cuse_drm_n_waiting(const struct cuse_drm *cd) {
	return cd->n_waiting;
}

int cuse_drm_set_owner(struct cuse_drm *cd, uid_t uid, gid_t gid, mode_t mode) {
	return cuse_device_set_owner(cd->dev, uid, gid, mode);
}

int cuse_drm_set_shares(struct cuse_drm *cd, unsigned int n) {
	return cuse_device_set_shares(cd->dev, n);
}

int cuse_drm_redeem(struct cuse_drm *cd, const struct devns_fb_ticket *ticket, bool dmabuf,
		    struct cuse_drm_grant *ret) {
	const struct ticket_binding *b;
	const void *bound;
	struct drm_dumb_map map;
	int r;

	r = fb_tickets_redeem(&cd->tickets, ticket, monotonic_usec(), &bound);
	if (r < 0)
		return r;
	b = bound;
	/* The buffer again: the file may have let go of it since. */
	if (!b->file->drm)
		return -ENOENT;
	r = drm_node_map_find(cd->node, b->file->drm, b->offset, &map);
	if (r < 0)
		return r;
	if (dmabuf) {
		if (b->file->access_mode != O_RDWR)
			return -EACCES;
		r = drm_node_export(cd->node, b->file->drm, b->offset, &map.fd);
		if (r < 0)
			return r;
	}
	*ret = (struct cuse_drm_grant){
		.memfd = map.fd,
		.size = map.size,
		.serial = map.serial,
		.uid = b->file->uid,
		.access_mode = b->file->access_mode,
	};
	return 0;
}
