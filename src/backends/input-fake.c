/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>

#include "input-backend.h"
#include "util.h"

#define FAKE_QUEUE 1024
#define FAKE_LOG 1024

struct input_fake {
	struct input_backend base;
	struct input_event queue[FAKE_QUEUE];
	size_t q_head, q_len;
	struct input_event written[FAKE_LOG];
	size_t n_written;
	bool unplugged;
	unsigned int n_set_repeat;
	int rep_delay, rep_period;
	struct ff_effect ff[FF_MAX_EFFECTS];
	bool ff_used[FF_MAX_EFFECTS];
	unsigned int n_ff_uploads, n_ff_erases;
};

static struct input_fake *to_fake(struct input_backend *b) {
	return container_of(b, struct input_fake, base);
}

static void fake_destroy(struct input_backend *b) {
	closep(&b->fd);
	free(to_fake(b));
}

static int fake_next_event(struct input_backend *b, struct input_event *ret_ev) {
	struct input_fake *f = to_fake(b);
	uint64_t cnt;

	if (f->q_len == 0) {
		if (f->unplugged)
			return -ENODEV;
		/* Nothing left: make the eventfd quiet again. */
		(void)!read(b->fd, &cnt, sizeof(cnt));
		return 0;
	}
	*ret_ev = f->queue[f->q_head];
	f->q_head = (f->q_head + 1) % FAKE_QUEUE;
	f->q_len--;
	return 1;
}

static int fake_write_event(struct input_backend *b, const struct input_event *ev) {
	struct input_fake *f = to_fake(b);

	if (f->unplugged)
		return -ENODEV;
	if (f->n_written == FAKE_LOG) {
		memmove(f->written, f->written + 1, sizeof(f->written[0]) * (FAKE_LOG - 1));
		f->n_written--;
	}
	f->written[f->n_written++] = *ev;
	/* Like the input core, LED and sound changes come back as events. */
	if ((ev->type == EV_LED || ev->type == EV_SND || ev->type == EV_SYN) &&
	    libevdev_has_event_code(b->desc, ev->type, ev->code))
		return input_fake_push(b, ev->type, ev->code, ev->value);
	return 0;
}

static int fake_set_repeat(struct input_backend *b, int delay, int period) {
	struct input_fake *f = to_fake(b);

	f->n_set_repeat++;
	f->rep_delay = delay;
	f->rep_period = period;
	return 0;
}

static int fake_ff_upload(struct input_backend *b, struct ff_effect *effect) {
	struct input_fake *f = to_fake(b);
	int id = effect->id;

	if (f->unplugged)
		return -ENODEV;
	if (id == -1) {
		for (id = 0; (unsigned int)id < b->ff_effects_max && f->ff_used[id]; id++)
			;
		if ((unsigned int)id >= b->ff_effects_max)
			return -ENOSPC;
	} else if (id < 0 || (unsigned int)id >= b->ff_effects_max || !f->ff_used[id]) {
		return -EINVAL;
	}
	f->n_ff_uploads++;
	effect->id = (int16_t)id;
	f->ff[id] = *effect;
	f->ff_used[id] = true;
	return 0;
}

static int fake_ff_erase(struct input_backend *b, int id) {
	struct input_fake *f = to_fake(b);

	if (f->unplugged)
		return -ENODEV;
	if (id < 0 || (unsigned int)id >= b->ff_effects_max || !f->ff_used[id])
		return -EINVAL;
	f->n_ff_erases++;
	f->ff_used[id] = false;
	return 0;
}

static const struct input_backend_ops input_fake_ops = {
	.destroy = fake_destroy,
	.next_event = fake_next_event,
	.write_event = fake_write_event,
	.set_repeat = fake_set_repeat,
	.ff_upload = fake_ff_upload,
	.ff_erase = fake_ff_erase,
};

int input_fake_new(const char *name, struct libevdev *desc, struct input_backend **ret) {
	struct input_fake *f;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.ops = &input_fake_ops;
	f->base.desc = desc;
	f->base.fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	f->base.name = strdup(name);
	f->base.path = strdup(name);
	if (f->base.fd < 0 || !f->base.name || !f->base.path) {
		int r = f->base.fd < 0 ? -errno : -ENOMEM;
		input_backend_free(&f->base);
		return r;
	}
	*ret = &f->base;
	return 0;
}

int input_fake_push(struct input_backend *b, uint16_t type, uint16_t code, int32_t value) {
	struct input_fake *f = to_fake(b);
	struct timespec ts;
	uint64_t one = 1;

	if (f->q_len == FAKE_QUEUE)
		return -ENOBUFS;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	f->queue[(f->q_head + f->q_len) % FAKE_QUEUE] = (struct input_event){
		.time = { .tv_sec = ts.tv_sec, .tv_usec = ts.tv_nsec / 1000 },
		.type = type,
		.code = code,
		.value = value,
	};
	f->q_len++;
	return write(b->fd, &one, sizeof(one)) < 0 ? -errno : 0;
}

size_t input_fake_written(struct input_backend *b, const struct input_event **ret) {
	struct input_fake *f = to_fake(b);

	*ret = f->written;
	return f->n_written;
}

void input_fake_clear_written(struct input_backend *b) {
	to_fake(b)->n_written = 0;
}

void input_fake_unplug(struct input_backend *b) {
	uint64_t one = 1;

	to_fake(b)->unplugged = true;
	(void)!write(b->fd, &one, sizeof(one));
}

unsigned int input_fake_repeat(struct input_backend *b, int *ret_delay, int *ret_period) {
	struct input_fake *f = to_fake(b);

	*ret_delay = f->rep_delay;
	*ret_period = f->rep_period;
	return f->n_set_repeat;
}

void input_fake_set_ff_max(struct input_backend *b, unsigned int max) {
	b->ff_effects_max = MIN(max, (unsigned int)FF_MAX_EFFECTS);
}

const struct ff_effect *input_fake_ff_effect(struct input_backend *b, int id) {
	struct input_fake *f = to_fake(b);

	if (id < 0 || (unsigned int)id >= b->ff_effects_max || !f->ff_used[id])
		return NULL;
	return &f->ff[id];
}

void input_fake_ff_counts(struct input_backend *b, unsigned int *ret_uploads, unsigned int *ret_erases) {
	struct input_fake *f = to_fake(b);

	*ret_uploads = f->n_ff_uploads;
	*ret_erases = f->n_ff_erases;
}
