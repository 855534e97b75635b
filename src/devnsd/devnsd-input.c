/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuse-evdev.h"
#include "devnsd-manager.h"
#include "evdev-node.h"
#include "input-backend.h"
#include "log.h"

/* Events handled per wakeup, so one busy device cannot starve the loop. */
#define DRAIN_MAX 4096
#define BATCH_MAX 256

static int node_forward(void *userdata, const struct input_event *ev) {
	struct input_node *in = userdata;
	int r = input_backend_write_event(in->device->backend, ev);

	if (r < 0)
		log_debug("%s: writing to %s failed: %s", in->path, in->device->backend->path, strerror(-r));
	return r;
}

static int node_set_repeat(void *userdata, int delay, int period) {
	struct input_node *in = userdata;

	return input_backend_set_repeat(in->device->backend, delay, period);
}

static int node_get_keycode(void *userdata, struct input_keymap_entry *ke) {
	struct input_node *in = userdata;

	return input_backend_get_keycode(in->device->backend, ke);
}

static void node_wakeup(void *userdata, struct evdev_client *c) {
	struct input_node *in = userdata;

	if (in->cuse)
		cuse_evdev_wakeup(in->cuse, c);
}

static const struct evdev_node_ops node_ops = {
	.forward = node_forward,
	.set_repeat = node_set_repeat,
	.get_keycode = node_get_keycode,
	.wakeup = node_wakeup,
};

static void node_ready(void *userdata) {
	struct input_node *in = userdata;

	if (in->ready)
		return;
	in->ready = true;
	log_debug("%s: ready", in->path);
	manager_node_ready(in->device->manager);
}

static const struct cuse_evdev_hooks node_hooks = {
	.ready = node_ready,
};

static struct input_node *input_node_free(struct input_node *in) {
	if (!in)
		return NULL;
	cuse_evdev_free(in->cuse);
	evdev_node_free(in->evdev);
	LIST_REMOVE(in, by_device);
	LIST_REMOVE(in, by_persona);
	free(in);
	return NULL;
}

unsigned int input_node_open_count(const struct input_node *n) {
	return n->evdev->n_clients;
}

static void deliver(struct input_device *d, const struct input_event *evs, size_t n) {
	if (n > 0 && d->active)
		evdev_node_deliver(d->active->evdev, evs, n);
}

static void device_gone(struct input_device *d) {
	struct input_node *in;

	log_warning("%s: device is gone; its persona nodes now answer ENODEV", d->backend->path);
	sd_event_source_set_enabled(d->source, SD_EVENT_OFF);
	LIST_FOREACH(in, &d->nodes, by_device)
		evdev_node_set_gone(in->evdev);
}

/* Reads what the hardware has queued and passes it on to the active persona. */
static void drain(struct input_device *d) {
	struct input_event batch[BATCH_MAX];
	size_t n = 0;

	for (int i = 0; i < DRAIN_MAX; i++) {
		struct input_event ev;
		int r = input_backend_next_event(d->backend, &ev);

		if (r == 0)
			break;
		if (r < 0) {
			deliver(d, batch, n);
			if (r == -ENODEV)
				device_gone(d);
			else
				log_warning_errno(r, "%s: read failed: %m", d->backend->path);
			return;
		}
		evdev_state_apply(&d->hw, &ev);
		batch[n++] = ev;
		if (n == BATCH_MAX || (ev.type == EV_SYN && ev.code == SYN_REPORT)) {
			deliver(d, batch, n);
			n = 0;
		}
	}
	deliver(d, batch, n);
}

static int on_input(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	(void)s;
	(void)fd;
	(void)revents;
	drain(userdata);
	return 0;
}

/* The device's state as libevdev read it when the device was opened. */
static void state_from_libevdev(struct evdev_state *s, const struct libevdev *desc) {
	int n_slots = libevdev_get_num_slots(desc);

	evdev_state_init(s, n_slots > 0 ? (unsigned int)n_slots : 0);
	for (unsigned int code = 0; code <= KEY_MAX; code++)
		bit_assign(s->key, code, libevdev_get_event_value(desc, EV_KEY, code));
	for (unsigned int code = 0; code <= LED_MAX; code++)
		bit_assign(s->led, code, libevdev_get_event_value(desc, EV_LED, code));
	for (unsigned int code = 0; code <= SND_MAX; code++)
		bit_assign(s->snd, code, libevdev_get_event_value(desc, EV_SND, code));
	for (unsigned int code = 0; code <= SW_MAX; code++)
		bit_assign(s->sw, code, libevdev_get_event_value(desc, EV_SW, code));
	for (unsigned int code = 0; code <= ABS_MAX; code++)
		s->abs[code] = libevdev_get_event_value(desc, EV_ABS, code);
	if (s->n_slots > 0)
		s->slot = libevdev_get_current_slot(desc);
	for (unsigned int slot = 0; slot < s->n_slots; slot++)
		for (unsigned int code = EVDEV_MT_FIRST; code <= EVDEV_MT_LAST; code++)
			if (libevdev_has_event_code(desc, EV_ABS, code))
				s->mt[slot][code - EVDEV_MT_FIRST] = libevdev_get_slot_value(desc, slot, code);
}

int input_device_new(struct manager *m, struct input_backend *backend, struct input_device **ret) {
	struct input_device *d;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d) {
		input_backend_free(backend);
		return -ENOMEM;
	}
	d->manager = m;
	d->backend = backend;
	LIST_INIT(&d->nodes);
	state_from_libevdev(&d->hw, backend->desc);
	if (backend->fd >= 0) {
		r = sd_event_add_io(m->event, &d->source, backend->fd, EPOLLIN, on_input, d);
		if (r < 0) {
			input_device_free(d);
			return r;
		}
	}
	LIST_INSERT_HEAD(&m->inputs, d, link);
	*ret = d;
	return 0;
}

struct input_device *input_device_free(struct input_device *d) {
	struct input_node *in;

	if (!d)
		return NULL;
	while ((in = LIST_FIRST(&d->nodes)))
		input_node_free(in);
	sd_event_source_disable_unref(d->source);
	input_backend_free(d->backend);
	if (d->manager && (d->link.le_prev))
		LIST_REMOVE(d, link);
	free(d);
	return NULL;
}

int input_device_add_persona(struct input_device *d, struct persona *p) {
	struct input_node *in;
	struct evdev_state view = d->hw;
	int r;

	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->device = d;
	in->persona = p;
	LIST_INSERT_HEAD(&d->nodes, in, by_device);
	LIST_INSERT_HEAD(&p->inputs, in, by_persona);
	snprintf(in->path, sizeof(in->path), "/dev/%s/%s/%s", DEVNS_DEV_DIR, p->name, d->backend->name);

	/* A background persona starts with nothing held. */
	if (p != d->manager->active) {
		struct input_event evs[EVDEV_RELEASE_MAX];
		size_t n = evdev_state_release(&view, evs);

		for (size_t i = 0; i < n; i++)
			evdev_state_apply(&view, &evs[i]);
	}
	r = evdev_node_new(&in->evdev, d->backend->desc, &view, &node_ops, in);
	if (r < 0)
		goto fail;
	r = cuse_evdev_new(&in->cuse, d->manager->event, in->path + strlen("/dev/"), in->evdev, &node_hooks, in);
	if (r < 0)
		goto fail;
	d->manager->n_nodes++;
	if (p == d->manager->active) {
		d->active = in;
		in->evdev->active = true;
	}
	return 0;
fail:
	input_node_free(in);
	return r;
}

static struct input_node *node_of(struct input_device *d, struct persona *p) {
	struct input_node *in;

	LIST_FOREACH(in, &d->nodes, by_device)
		if (in->persona == p)
			return in;
	return NULL;
}

void input_device_switch(struct input_device *d, struct persona *from, struct persona *to) {
	struct input_node *old = node_of(d, from), *new = node_of(d, to);

	/* What was pressed before the switch belongs to the old persona. */
	if (d->source)
		drain(d);
	if (old)
		evdev_node_deactivate(old->evdev);
	d->active = new;
	if (new)
		evdev_node_activate(new->evdev, &d->hw);
}
