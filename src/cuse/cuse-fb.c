/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/queue.h>

#include "cuse-device.h"
#include "cuse-fb.h"
#include "util.h"

struct vsync_wait {
	struct cuse_fb *cf;  /* the node it waits on */
	struct cuse_fb *dev; /* the device whose connection req came on: cf, or a routed node */
	fuse_req_t req;
	LIST_ENTRY(vsync_wait) link;
};

struct cuse_fb {
	struct cuse_device *dev;
	struct fb_node *node; /* NULL when routed */
	char *socket_path;
	const struct cuse_fb_hooks *hooks;
	void *userdata;
	/* Files working on this node (opened on it, or routed to it), and waiting vsyncs. */
	unsigned int n_open, n_waiters;
	LIST_HEAD(, vsync_wait) waiters;
	/* Files opened on this device. */
	LIST_HEAD(, open_file) files;
	/* Files working on this node: target is this node. */
	LIST_HEAD(, open_file) targeting;
	struct fb_tickets tickets;
};

_Static_assert(FB_TICKETS_MAX >= CUSE_FB_MAX_OPEN * FB_TICKETS_PER_FILE, "room for every open file's tickets");

/*
 * Per open file: the stream position, the node it works on (itself, or a
 * persona's when routed), and who opened it for what, as the open request
 * said: the opener's uid, in devnsd's user namespace, and O_RDONLY,
 * O_WRONLY or O_RDWR.
 */
struct open_file {
	uint64_t pos;
	struct cuse_fb *target; /* NULL once that persona's node is gone or revoked */
	uid_t uid;
	int access_mode;
	LIST_ENTRY(open_file) link;
	LIST_ENTRY(open_file) target_link;
};

static struct open_file *file_of(struct fuse_file_info *fi) {
	return (struct open_file *)(uintptr_t)fi->fh;
}

static void wait_drop(struct vsync_wait *w) {
	LIST_REMOVE(w, link);
	w->cf->n_waiters--;
	free(w);
}

static void on_interrupt(fuse_req_t req, void *data) {
	wait_drop(data);
	fuse_reply_err(req, EINTR);
}

static void answer_waiter(struct vsync_wait *w, int error) {
	fuse_req_t req = w->req;

	wait_drop(w);
	fuse_req_interrupt_func(req, NULL, NULL);
	if (error)
		fuse_reply_err(req, error);
	else
		fuse_reply_ioctl(req, 0, NULL, 0);
}

static void answer_waiters(struct cuse_fb *cf, int error) {
	struct vsync_wait *w;

	while ((w = LIST_FIRST(&cf->waiters)))
		answer_waiter(w, error);
}

/* A routed node going: what waits through its connection on another node is answered while it still can be. */
static void answer_routed_waiters(struct cuse_fb *routed) {
	struct open_file *f;

	LIST_FOREACH(f, &routed->files, link) {
		struct vsync_wait *w, *next;

		if (!f->target)
			continue;
		for (w = LIST_FIRST(&f->target->waiters); w; w = next) {
			next = LIST_NEXT(w, link);
			if (w->dev == routed)
				answer_waiter(w, ENODEV);
		}
	}
}

void cuse_fb_vsync(struct cuse_fb *cf) {
	answer_waiters(cf, 0);
}

unsigned int cuse_fb_vsync_waiters(const struct cuse_fb *cf) {
	return cf->n_waiters;
}

int cuse_fb_set_shares(struct cuse_fb *cf, unsigned int n) {
	return cuse_device_set_shares(cf->dev, n);
}

int cuse_fb_set_owner(struct cuse_fb *cf, uid_t uid, gid_t gid, mode_t mode) {
	return cuse_device_set_owner(cf->dev, uid, gid, mode);
}

unsigned int cuse_fb_n_open(const struct cuse_fb *cf) {
	return cf->n_open;
}

/* f stops working on its node: it answers ENODEV from now on, and its tickets are void. */
static void file_detach(struct open_file *f) {
	struct cuse_fb *t = f->target;

	if (!t)
		return;
	LIST_REMOVE(f, target_link);
	t->n_open--;
	fb_tickets_drop_file(&t->tickets, f);
	f->target = NULL;
}

static unsigned int files_of_uid(const struct cuse_fb *cf, uid_t uid) {
	const struct open_file *f;
	unsigned int n = 0;

	LIST_FOREACH(f, &cf->targeting, target_link)
		n += f->uid == uid;
	return n;
}

static void fb_init_done(void *userdata) {
	struct cuse_fb *cf = userdata;

	cf->hooks->ready(cf->userdata);
}

/* The node an open file works on; answers ENODEV when it is gone. */
static struct cuse_fb *target_of(fuse_req_t req, struct fuse_file_info *fi) {
	struct cuse_fb *t = file_of(fi)->target;

	if (!t)
		fuse_reply_err(req, ENODEV);
	return t;
}

static void fb_open(fuse_req_t req, struct fuse_file_info *fi) {
	struct cuse_fb *cf = fuse_req_userdata(req), *target = cf;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct open_file *f;
	uint32_t owner = 0;
	int r;

	if (cf->node)
		r = cf->hooks->may_open(cf->userdata, ctx->pid);
	else {
		r = cf->hooks->route(cf->userdata, ctx->pid, &target, &owner);
		if (r >= 0)
			r = cuse_device_open_owner(cf->dev, owner);
	}
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	if (target->n_open >= CUSE_FB_MAX_OPEN || files_of_uid(target, ctx->uid) >= CUSE_FB_MAX_OPEN_PER_UID) {
		fuse_reply_err(req, EMFILE);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	f->target = target;
	f->uid = ctx->uid;
	f->access_mode = fi->flags & O_ACCMODE;
	fi->fh = (uintptr_t)f;
	fi->nonseekable = 1;
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) < 0) {
		free(f);
		return;
	}
	LIST_INSERT_HEAD(&cf->files, f, link);
	LIST_INSERT_HEAD(&target->targeting, f, target_link);
	target->n_open++;
}

static void fb_release(fuse_req_t req, struct fuse_file_info *fi) {
	struct open_file *f = file_of(fi);

	file_detach(f);
	LIST_REMOVE(f, link);
	free(f);
	fuse_reply_err(req, 0);
}

static void fb_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	struct cuse_fb *cf = target_of(req, fi);
	const void *data;
	ssize_t n;

	(void)off;
	if (!cf)
		return;
	n = fb_node_read(cf->node, &file_of(fi)->pos, size, &data);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, data, (size_t)n);
}

static void fb_write(fuse_req_t req, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
	struct cuse_fb *cf = target_of(req, fi);
	struct fb_rows rows;
	ssize_t n;

	(void)off;
	if (!cf)
		return;
	n = fb_node_write(cf->node, &file_of(fi)->pos, buf, size, &rows);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	fuse_reply_write(req, (size_t)n);
	if (rows.y1 > rows.y0)
		cf->hooks->written(cf->userdata, &rows);
}

static void wait_vsync(struct cuse_fb *cf, fuse_req_t req) {
	struct cuse_fb *dev = fuse_req_userdata(req);
	struct vsync_wait *w;

	if (cf->n_waiters >= CUSE_FB_MAX_VSYNC_WAITERS) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	w->cf = cf;
	w->dev = dev;
	w->req = req;
	LIST_INSERT_HEAD(&cf->waiters, w, link);
	cf->n_waiters++;
	cf->hooks->effect(cf->userdata, FB_EFFECT_VSYNC);
	/* Last: if the caller was interrupted already this answers it at once. */
	fuse_req_interrupt_func(req, on_interrupt, w);
}

/* DEVNS_FBIOGET_TICKET: a ticket for the memory, bound to this open file. */
static int issue_ticket(void *userdata, struct devns_fb_ticket *ret) {
	struct open_file *f = userdata;

	return fb_tickets_issue(&f->target->tickets, f, monotonic_usec(), ret);
}

static void fb_ioctl_req(fuse_req_t req, int cmd, void *arg, struct fuse_file_info *fi, unsigned int flags,
			 const void *in, size_t in_size, size_t out_size) {
	static struct fb_ioctl_step step;
	struct cuse_fb *cf = target_of(req, fi);
	struct fb_ioctl_file file;

	(void)flags;
	if (!cf)
		return;
	file = (struct fb_ioctl_file){
		.pos = &file_of(fi)->pos,
		.socket_path = cf->socket_path,
		.serial = cf->node->serial,
		.read_only = file_of(fi)->access_mode == O_RDONLY,
		.ticket = cf->socket_path ? issue_ticket : NULL,
		.userdata = file_of(fi),
	};
	fb_ioctl(&cf->node->state, &file, (unsigned int)cmd, arg, in, in_size, out_size, &step);
	/* Before the answer: the caller may only go on once the display took note (a pan away from a frame). */
	if (!step.retry && step.result >= 0 && step.effect == FB_EFFECT_WROTE)
		cf->hooks->written(cf->userdata, &step.rows);
	else if (!step.retry && step.result >= 0 && step.effect != FB_EFFECT_NONE && step.effect != FB_EFFECT_VSYNC)
		cf->hooks->effect(cf->userdata, step.effect);
	if (step.retry)
		fuse_reply_ioctl_retry(req, step.in_iov, step.n_in, step.out_iov, step.n_out);
	else if (step.result < 0)
		fuse_reply_err(req, -step.result);
	else if (step.effect == FB_EFFECT_VSYNC)
		wait_vsync(cf, req);
	else
		fuse_reply_ioctl(req, step.result, step.out_size ? step.out : NULL, step.out_size);
}

static const struct cuse_lowlevel_ops cuse_fb_ops = {
	.init_done = fb_init_done,
	.open = fb_open,
	.read = fb_read,
	.write = fb_write,
	.release = fb_release,
	.ioctl = fb_ioctl_req,
};

int cuse_fb_new(struct cuse_fb **ret, sd_event *event, const char *devname, unsigned int major,
		unsigned int minor, struct fb_node *node, const char *socket_path, const struct cuse_fb_hooks *hooks, void *userdata) {
	_cleanup_(cuse_fb_freep) struct cuse_fb *cf = NULL;
	int r;

	cf = calloc(1, sizeof(*cf));
	if (!cf)
		return -ENOMEM;
	cf->node = node;
	cf->hooks = hooks;
	cf->userdata = userdata;
	LIST_INIT(&cf->waiters);
	LIST_INIT(&cf->files);
	LIST_INIT(&cf->targeting);
	if (socket_path) {
		cf->socket_path = strdup(socket_path);
		if (!cf->socket_path)
			return -ENOMEM;
	}
	r = cuse_device_new(&cf->dev, event, devname, major, minor, &cuse_fb_ops, cf);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(cf);
	return 0;
}

int cuse_fb_redeem(struct cuse_fb *cf, const struct devns_fb_ticket *ticket, struct cuse_fb_grant *ret) {
	const void *file;
	const struct open_file *f;
	int r;

	r = fb_tickets_redeem(&cf->tickets, ticket, monotonic_usec(), &file);
	if (r < 0)
		return r;
	f = file;
	*ret = (struct cuse_fb_grant){ .uid = f->uid, .access_mode = f->access_mode };
	return 0;
}

void cuse_fb_revoke(struct cuse_fb *cf) {
	struct open_file *f;

	answer_waiters(cf, ENODEV);
	while ((f = LIST_FIRST(&cf->targeting)))
		file_detach(f);
	fb_tickets_clear(&cf->tickets);
}

struct cuse_fb *cuse_fb_free(struct cuse_fb *cf) {
	struct open_file *f;

	if (!cf)
		return NULL;
	cuse_fb_revoke(cf);
	if (!cf->node)
		answer_routed_waiters(cf);
	cuse_device_free(cf->dev);
	while ((f = LIST_FIRST(&cf->files))) {
		/* A routed file may work on another persona's node. */
		file_detach(f);
		LIST_REMOVE(f, link);
		free(f);
	}
	free(cf->socket_path);
	free(cf);
	return NULL;
}

struct cuse_fb *cuse_fb_retire(struct cuse_fb *cf, const char *group) {
	struct cuse_device *dev;

	if (!cf)
		return NULL;
	/* Its handles' waiters are answered first, through the device, which then lingers on its own. */
	dev = cf->dev;
	cf->dev = NULL;
	cuse_fb_free(cf);
	cuse_device_retire(dev, group);
	return NULL;
}
