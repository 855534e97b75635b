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

struct input_evdev {
	struct input_backend base;
	bool syncing;
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

static int evdev_next_event(struct input_backend *b, struct input_event *ret_ev) {
	struct input_evdev *e = to_evdev(b);

	for (;;) {
		unsigned int flags = e->syncing ? LIBEVDEV_READ_FLAG_SYNC : LIBEVDEV_READ_FLAG_NORMAL;
		int rc = libevdev_next_event(b->desc, flags, ret_ev);

		if (rc == LIBEVDEV_READ_STATUS_SUCCESS)
			return 1;
		if (rc == LIBEVDEV_READ_STATUS_SYNC) {
			if (e->syncing)
				return 1;
			/* The kernel dropped events: what follows are the differences. */
			e->syncing = true;
			continue;
		}
		if (rc == -EAGAIN) {
			if (!e->syncing)
				return 0;
			e->syncing = false;
			continue;
		}
		if (rc == -EINTR)
			continue;
		return rc;
	}
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
