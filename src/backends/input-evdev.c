/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <libevdev/libevdev.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "input-backend.h"
#include "util.h"

#define INPUT_MAJOR 13
/* Events taken from the kernel in one read(). */
#define READ_EVENTS 64

/*
 * Events are read from the kernel here, a buffer at a time, and a read that
 * returns less than a full buffer ends the batch: the kernel's queue was
 * empty, so no read() is made that would only fail with EAGAIN. The fd is
 * watched level-triggered, so what comes after is read at the next wakeup.
 * libevdev's state follows what is read, for the day the kernel drops
 * events: then the SYN_DROPPED is passed on, so that readers learn of the
 * loss as from the kernel, followed by the differences libevdev finds when
 * it resynchronises (LIBEVDEV_READ_FLAG_FORCE_SYNC) and a SYN_REPORT that
 * ends the packet.
 */
struct input_evdev {
	struct input_backend base;
	bool syncing;
	/* A SYN_DROPPED was passed on: the differences and the SYN_REPORT come next. */
	bool dropped;
	/* Differences returned since the SYN_DROPPED. */
	size_t n_synced;
	struct timeval drop_time;
	/* The last read() was short: the batch ends when buf is used up. */
	bool short_read;
	size_t pos, n;
	struct input_event buf[READ_EVENTS];
};

static const struct input_backend_ops input_evdev_ops;

static struct input_evdev *to_evdev(struct input_backend *b) {
	return container_of(b, struct input_evdev, base);
}

static void evdev_destroy(struct input_backend *b) {
	struct input_evdev *e = to_evdev(b);

	closep(&b->fd);
	free(e);
}

/* After the kernel dropped events: the changes libevdev finds, until it has no more. */
static int evdev_next_sync(struct input_evdev *e, struct input_event *ret_ev) {
	for (;;) {
		unsigned int flags = e->syncing ? LIBEVDEV_READ_FLAG_SYNC : LIBEVDEV_READ_FLAG_FORCE_SYNC;
		int rc = libevdev_next_event(e->base.desc, flags, ret_ev);

		if (rc == LIBEVDEV_READ_STATUS_SYNC) {
			if (e->syncing)
				return 1;
			e->syncing = true;
			continue;
		}
		if (rc == -EAGAIN) {
			e->syncing = false;
			return 0;
		}
		if (rc == -EINTR)
			continue;
		/* LIBEVDEV_READ_STATUS_SUCCESS cannot come while syncing; take it as it is. */
		return rc < 0 ? rc : 1;
	}
}

static int evdev_fill(struct input_evdev *e) {
	ssize_t n;

	do
		n = read(e->base.fd, e->buf, sizeof(e->buf));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	e->pos = 0;
	e->n = (size_t)n / sizeof(e->buf[0]);
	e->short_read = e->n < READ_EVENTS;
	return e->n > 0;
}

static int evdev_next_event(struct input_backend *b, struct input_event *ret_ev) {
	struct input_evdev *e = to_evdev(b);
	const struct input_event *ev;
	int r;

	if (e->dropped) {
		r = evdev_next_sync(e, ret_ev);
		if (r > 0) {
			e->n_synced++;
			return r;
		}
		e->dropped = false;
		if (r < 0)
			return r;
		/* libevdev ends the differences with a SYN_REPORT; none, and the packet needs one. */
		if (e->n_synced == 0) {
			*ret_ev = (struct input_event){ .time = e->drop_time, .type = EV_SYN, .code = SYN_REPORT };
			return 1;
		}
	}
	if (e->pos == e->n) {
		if (e->short_read) {
			e->short_read = false;
			return 0;
		}
		r = evdev_fill(e);
		if (r <= 0)
			return r;
	}
	ev = &e->buf[e->pos++];
	if (ev->type == EV_SYN && ev->code == SYN_DROPPED) {
		/* What was read after it is older than the state libevdev reads next. */
		e->pos = e->n = 0;
		e->short_read = false;
		e->syncing = false;
		e->dropped = true;
		e->n_synced = 0;
		e->drop_time = ev->time;
		*ret_ev = *ev;
		return 1;
	}
	if (ev->type == EV_KEY || ev->type == EV_ABS || ev->type == EV_LED || ev->type == EV_SW)
		(void)libevdev_set_event_value(b->desc, ev->type, ev->code, ev->value);
	*ret_ev = *ev;
	return 1;
}

static int evdev_write_event(struct input_backend *b, const struct input_event *ev) {
	ssize_t n = write(b->fd, ev, sizeof(*ev));

	if (n < 0)
		return -errno;
	return n == sizeof(*ev) ? 0 : -EIO;
}

static int evdev_set_repeat(struct input_backend *b, int delay, int period) {
	unsigned int rep[2] = { (unsigned int)delay, (unsigned int)period };

	return ioctl(b->fd, EVIOCSREP, rep) < 0 ? -errno : 0;
}

static int evdev_get_keycode(struct input_backend *b, struct input_keymap_entry *ke) {
	return ioctl(b->fd, EVIOCGKEYCODE_V2, ke) < 0 ? -errno : 0;
}

static int evdev_ff_upload(struct input_backend *b, struct ff_effect *effect) {
	return ioctl(b->fd, EVIOCSFF, effect) < 0 ? -errno : 0;
}

static int evdev_ff_erase(struct input_backend *b, int id) {
	return ioctl(b->fd, EVIOCRMFF, id) < 0 ? -errno : 0;
}

static const struct input_backend_ops input_evdev_ops = {
	.destroy = evdev_destroy,
	.next_event = evdev_next_event,
	.write_event = evdev_write_event,
	.set_repeat = evdev_set_repeat,
	.get_keycode = evdev_get_keycode,
	.ff_upload = evdev_ff_upload,
	.ff_erase = evdev_ff_erase,
};

int input_evdev_open(const char *path, struct input_backend **ret) {
	_cleanup_(input_backend_freep) struct input_backend *b = NULL;
	_cleanup_(freep) char *real = NULL;
	struct input_evdev *e;
	const char *base;
	struct stat st;
	int r;

	real = realpath(path, NULL);
	if (!real)
		return -errno;
	base = strrchr(real, '/') + 1;
	if (strncmp(real, "/dev/input/event", 16) != 0)
		return -ENOTTY;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	b = &e->base;
	b->ops = &input_evdev_ops;
	b->fd = open(real, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
	if (b->fd < 0)
		return -errno;
	if (fstat(b->fd, &st) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != INPUT_MAJOR)
		return -ENOTTY;
	b->name = strdup(base);
	b->path = strdup(path);
	if (!b->name || !b->path)
		return -ENOMEM;

	r = libevdev_new_from_fd(b->fd, &b->desc);
	if (r < 0)
		return r;
	if (libevdev_has_event_type(b->desc, EV_FF)) {
		int effects = 0;
		if (ioctl(b->fd, EVIOCGEFFECTS, &effects) == 0 && effects > 0)
			b->ff_effects_max = (unsigned int)effects;
	}
	r = libevdev_set_clock_id(b->desc, CLOCK_MONOTONIC);
	if (r < 0)
		return r;
	r = libevdev_grab(b->desc, LIBEVDEV_GRAB);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(b);
	return 0;
}
