/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "cuse-device.h"
#include "cuse-evdev.h"
#include "util.h"

/* CUSE hands reads over in chunks of at most 128 KiB. */
#define READ_EVENTS_MAX ((128 * 1024) / sizeof(struct input_event))
#define WRITE_CHUNK 256

struct open_file;

struct cuse_evdev {
	struct cuse_device *dev;
	struct evdev_node *node; /* NULL when routed */
	LIST_HEAD(, open_file) files;
	const struct cuse_evdev_hooks *hooks;
	void *userdata;
};

struct pending_read {
	fuse_req_t req;
	size_t size;
	struct open_file *file;
	TAILQ_ENTRY(pending_read) link;
};

_Static_assert(CUSE_EVDEV_MAX_PENDING_READS <= 32, "a slot per bit of slots_used");

/* Per open handle: the evdev client, plus what CUSE keeps waiting on it. */
struct open_file {
	struct cuse_evdev *ce;
	struct evdev_client *client;
	LIST_ENTRY(open_file) link;
	TAILQ_HEAD(, pending_read) reads; /* answered oldest first */
	unsigned int n_reads;
	struct fuse_pollhandle *ph;
	/* A parked read takes a slot here: nothing is allocated per read. */
	uint32_t slots_used;
	struct pending_read slots[CUSE_EVDEV_MAX_PENDING_READS];
};

static struct input_event read_buf[READ_EVENTS_MAX];

static struct open_file *file_of(struct fuse_file_info *fi) {
	return (struct open_file *)(uintptr_t)fi->fh;
}

static void pending_drop(struct pending_read *pr) {
	struct open_file *f = pr->file;

	TAILQ_REMOVE(&f->reads, pr, link);
	f->n_reads--;
	f->slots_used &= ~(UINT32_C(1) << (pr - f->slots));
}

/* Answers one read from the client's queue: events, an error, or nothing yet (returns false). */
static bool answer_read(fuse_req_t req, struct evdev_client *c, size_t size) {
	size_t max = MIN(size / sizeof(struct input_event), READ_EVENTS_MAX);
	int n = evdev_client_read(c, read_buf, max);

	if (n < 0)
		fuse_reply_err(req, -n);
	else if (n > 0)
		fuse_reply_buf(req, (const char *)read_buf, (size_t)n * sizeof(struct input_event));
	return n != 0;
}

static void on_interrupt(fuse_req_t req, void *data) {
	pending_drop(data);
	fuse_reply_err(req, EINTR);
}

void cuse_evdev_wakeup(struct cuse_evdev *ce, struct evdev_client *c) {
	struct open_file *f = c->data;
	struct pending_read *pr;

	(void)ce;
	if (!f)
		return;
	while ((pr = TAILQ_FIRST(&f->reads)) && evdev_client_ready(c)) {
		fuse_req_t req = pr->req;
		size_t size = pr->size;

		pending_drop(pr);
		/*
		 * The interrupt callback stays: libfuse clears it when the answer
		 * ends the request, and nothing runs in between (one thread).
		 */
		if (!answer_read(req, c, size))
			fuse_reply_err(req, EAGAIN);
	}
	/*
	 * One notification per poll request: whoever it wakes polls again, and
	 * the kernel then asks for the next one. A handle kept past its
	 * notification would cost a write to the kernel per batch delivered
	 * while nobody waits.
	 */
	if (f->ph && evdev_client_ready(c)) {
		fuse_lowlevel_notify_poll(f->ph);
		fuse_pollhandle_destroy(f->ph);
		f->ph = NULL;
	}
}

/* Answers what waits on the handle with ENODEV and lets go of its evdev client. */
static void file_detach(struct open_file *f) {
	struct pending_read *pr;

	while ((pr = TAILQ_FIRST(&f->reads))) {
		fuse_req_t req = pr->req;
		pending_drop(pr);
		fuse_req_interrupt_func(req, NULL, NULL);
		fuse_reply_err(req, ENODEV);
	}
	if (f->ph) {
		fuse_lowlevel_notify_poll(f->ph);
		fuse_pollhandle_destroy(f->ph);
		f->ph = NULL;
	}
	if (f->client) {
		evdev_node_close(f->client->node, f->client);
		f->client = NULL;
	}
}

static void file_free(struct open_file *f) {
	file_detach(f);
	LIST_REMOVE(f, link);
	free(f);
}


static void ce_init_done(void *userdata) {
	struct cuse_evdev *ce = userdata;

	if (ce->hooks && ce->hooks->ready)
		ce->hooks->ready(ce->userdata);
}

static void ce_open(fuse_req_t req, struct fuse_file_info *fi) {
	struct cuse_evdev *ce = fuse_req_userdata(req);
	struct evdev_node *node = ce->node;
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	pid_t pid = ctx->pid;
	struct open_file *f;
	uint32_t owner = 0;
	int r = 0;

	if (!node) {
		r = ce->hooks->route(ce->userdata, pid, &node, &owner);
		if (r >= 0)
			r = cuse_device_open_owner(ce->dev, owner);
	} else if (ce->hooks && ce->hooks->may_open)
		r = ce->hooks->may_open(ce->userdata, pid);
	if (r < 0) {
		fuse_reply_err(req, -r);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r = evdev_node_open_as(node, ctx->uid, &f->client);
	if (r < 0) {
		free(f);
		fuse_reply_err(req, -r);
		return;
	}
	f->ce = ce;
	f->client->data = f;
	TAILQ_INIT(&f->reads);
	LIST_INSERT_HEAD(&ce->files, f, link);
	fi->fh = (uintptr_t)f;
	fi->nonseekable = 1;
	fi->direct_io = 1;
	if (fuse_reply_open(req, fi) < 0)
		file_free(f);
}

static void ce_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	struct open_file *f = file_of(fi);
	struct pending_read *pr;

	(void)off;
	if (!f->client) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (size != 0 && size < sizeof(struct input_event)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (evdev_client_ready(f->client) && size != 0) {
		answer_read(req, f->client, size);
		return;
	}
	if (f->client->revoked || f->client->node->gone) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if ((fi->flags & O_NONBLOCK) && !evdev_client_ready(f->client)) {
		fuse_reply_err(req, EAGAIN);
		return;
	}
	/* A zero-length read only reports errors. */
	if (size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (f->n_reads >= CUSE_EVDEV_MAX_PENDING_READS) {
		fuse_reply_err(req, EBUSY);
		return;
	}
	/* Fewer than CUSE_EVDEV_MAX_PENDING_READS are parked: a slot is free. */
	pr = &f->slots[__builtin_ctz(~f->slots_used)];
	f->slots_used |= UINT32_C(1) << (pr - f->slots);
	*pr = (struct pending_read){ .req = req, .size = size, .file = f };
	TAILQ_INSERT_TAIL(&f->reads, pr, link);
	f->n_reads++;
	/* Last: if the reader was already interrupted this answers it at once. */
	fuse_req_interrupt_func(req, on_interrupt, pr);
}

static void ce_write(fuse_req_t req, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
	struct open_file *f = file_of(fi);
	struct input_event evs[WRITE_CHUNK];
	size_t count = size / sizeof(struct input_event);

	(void)off;
	if (!f->client) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (size != 0 && size < sizeof(struct input_event)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	for (size_t done = 0; done < count;) {
		size_t n = MIN(count - done, (size_t)WRITE_CHUNK);
		int r;

		memcpy(evs, buf + done * sizeof(evs[0]), n * sizeof(evs[0]));
		r = evdev_node_write(f->client->node, f->client, evs, n);
		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
		done += n;
	}
	fuse_reply_write(req, count * sizeof(struct input_event));
}

static void ce_ioctl(fuse_req_t req, int cmd, void *arg, struct fuse_file_info *fi, unsigned int flags,
		     const void *in, size_t in_size, size_t out_size) {
	static struct evdev_ioctl_step step;
	struct open_file *f = file_of(fi);

	(void)flags;
	if (!f->client) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	evdev_node_ioctl(f->client->node, f->client, (unsigned int)cmd, arg, in, in_size, out_size, &step);
	if (step.retry)
		fuse_reply_ioctl_retry(req, step.in_iov, step.n_in, step.out_iov, step.n_out);
	else if (step.result < 0)
		fuse_reply_err(req, -step.result);
	else
		fuse_reply_ioctl(req, step.result, step.out_size ? step.out : NULL, step.out_size);
}

static void ce_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph) {
	struct open_file *f = file_of(fi);
	struct evdev_client *c = f->client;
	unsigned int revents;

	if (!c) {
		if (ph)
			fuse_pollhandle_destroy(ph);
		fuse_reply_poll(req, POLLHUP | POLLERR);
		return;
	}
	if (ph) {
		if (f->ph)
			fuse_pollhandle_destroy(f->ph);
		f->ph = ph;
	}
	if (c->revoked || c->node->gone)
		revents = POLLHUP | POLLERR;
	else
		revents = POLLOUT | POLLWRNORM;
	if (evdev_queue_readable(&c->queue))
		revents |= POLLIN | POLLRDNORM;
	fuse_reply_poll(req, revents);
}

static void ce_release(fuse_req_t req, struct fuse_file_info *fi) {
	file_free(file_of(fi));
	fuse_reply_err(req, 0);
}

static const struct cuse_lowlevel_ops cuse_evdev_ops = {
	.init_done = ce_init_done,
	.open = ce_open,
	.read = ce_read,
	.write = ce_write,
	.release = ce_release,
	.ioctl = ce_ioctl,
	.poll = ce_poll,
};

int cuse_evdev_new(struct cuse_evdev **ret, struct loop *loop, const char *devname, unsigned int major,
		   unsigned int minor, struct evdev_node *node, const struct cuse_evdev_hooks *hooks, void *userdata) {
	struct cuse_evdev *ce;
	int r;

	ce = calloc(1, sizeof(*ce));
	if (!ce)
		return -ENOMEM;
	ce->node = node;
	ce->hooks = hooks;
	ce->userdata = userdata;
	LIST_INIT(&ce->files);
	/* Reads, polls and their interrupts touch the evdev clients' queues and the session only. */
	r = cuse_device_new_on_loop(&ce->dev, loop, CUSE_QUIET(FUSE_READ) | CUSE_QUIET(FUSE_POLL) | CUSE_QUIET(FUSE_INTERRUPT),
				    devname, major, minor, &cuse_evdev_ops, ce);
	if (r < 0) {
		free(ce);
		return r;
	}
	*ret = ce;
	return 0;
}

int cuse_evdev_set_shares(struct cuse_evdev *ce, unsigned int n) {
	return cuse_device_set_shares(ce->dev, n);
}

int cuse_evdev_set_owner(struct cuse_evdev *ce, uid_t uid, gid_t gid, mode_t mode) {
	return cuse_device_set_owner(ce->dev, uid, gid, mode);
}

void cuse_evdev_set_note(struct cuse_evdev *ce, const char *note) {
	cuse_device_set_note(ce->dev, note);
}

void cuse_evdev_close_node(struct cuse_evdev *ce, struct evdev_node *n) {
	struct open_file *f, *next;

	for (f = LIST_FIRST(&ce->files); f; f = next) {
		next = LIST_NEXT(f, link);
		/* Handles ended before (client NULL) stay listed until their release. */
		if (f->client && f->client->node == n) {
			/* The handle stays open for the client but answers ENODEV. */
			file_detach(f);
		}
	}
}

struct cuse_evdev *cuse_evdev_free(struct cuse_evdev *ce) {
	struct open_file *f;

	if (!ce)
		return NULL;
	while ((f = LIST_FIRST(&ce->files)))
		file_free(f);
	cuse_device_free(ce->dev);
	free(ce);
	return NULL;
}

struct cuse_evdev *cuse_evdev_retire(struct cuse_evdev *ce, const char *group) {
	struct cuse_device *dev;

	if (!ce)
		return NULL;
	/* Its handles' waiters are answered first, through the device, which then lingers on its own. */
	dev = ce->dev;
	ce->dev = NULL;
	cuse_evdev_free(ce);
	cuse_device_retire(dev, group);
	return NULL;
}
