/* SPDX-License-Identifier: MIT */
/*
 * The input class's state and switching, without a transport: devices,
 * their persona nodes, draining, switch chords. input/serve.c serves the
 * nodes over CUSE; unit tests drive this with the fake backend.
 */
#include <libevdev/libevdev.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input/input.h"
#include "restart/state.h"
#include "evdev-node.h"
#include "evdev-udev.h"
#include "hotkey.h"
#include "input-backend.h"
#include "log.h"
#include "loop.h"

/* Events handled per wakeup, so one busy device cannot starve the loop. */
#define DRAIN_MAX 4096
#define BATCH_MAX 256
/*
 * Events are passed on, and waiting readers answered, once per batch: what
 * one wakeup read, or sooner at the end of a packet once this many wait
 * (half the smallest client queue, so a waiting reader takes them before
 * the queue can fill).
 */
#define BATCH_FLUSH 32

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

static int node_ff_upload(void *userdata, struct ff_effect *effect) {
	struct input_node *in = userdata;

	return input_backend_ff_upload(in->device->backend, effect);
}

static int node_ff_erase(void *userdata, int hw_id) {
	struct input_node *in = userdata;

	return input_backend_ff_erase(in->device->backend, hw_id);
}

static void node_wakeup(void *userdata, struct evdev_client *c) {
	struct input_node *in = userdata;
	const struct input_transport_ops *t = in->device->class->transport;

	if (t && t->wakeup)
		t->wakeup(in, c);
}

/* The persona's LEDs or sounds changed: worth keeping for a restart. */
static void node_feedback_changed(void *userdata) {
	struct input_node *in = userdata;

	in->device->class->loop_touched = true;
	state_changed(in->device->class->base.manager);
}

/* The loop's time of this wakeup: event times are converted with a clock read once a wakeup. */
static int node_batch_time(void *userdata, clockid_t clock, uint64_t *ret_usec) {
	struct input_node *in = userdata;

	return loop_now(in->device->class->base.manager->loop, clock, ret_usec);
}

static const struct evdev_node_ops node_ops = {
	.batch_time = node_batch_time,
	.feedback_changed = node_feedback_changed,
	.forward = node_forward,
	.set_repeat = node_set_repeat,
	.get_keycode = node_get_keycode,
	.ff_upload = node_ff_upload,
	.ff_erase = node_ff_erase,
	.wakeup = node_wakeup,
};

static struct input_node *input_node_free(struct input_node *in) {
	const struct input_transport_ops *t;

	if (!in)
		return NULL;
	t = in->device->class->transport;
	if (t && t->node_removed)
		t->node_removed(in);
	if (in->device->active == in)
		in->device->active = NULL;
	if (in->device->held_for == in)
		in->device->held_for = NULL;
	evdev_node_free(in->evdev);
	LIST_REMOVE(in, by_device);
	free(in);
	return NULL;
}

static void deliver(struct input_device *d, const struct input_event *evs, size_t n) {
	if (n > 0 && d->active)
		evdev_node_deliver(d->active->evdev, evs, n);
}

static void device_gone(struct input_device *d) {
	struct input_node *in;

	if (d->gone)
		return;
	log_info("%s: device is gone; its persona nodes now answer ENODEV", d->backend->path);
	d->gone = true;
	d->class->loop_touched = true;
	if (d->io)
		(void)loop_io_set_enabled(d->io, false);
	/* As the kernel does when a device goes: what the active persona held is released first. */
	if (d->active)
		evdev_node_deactivate(d->active->evdev);
	d->active = d->held_for = NULL;
	LIST_FOREACH(in, &d->nodes, by_device)
		evdev_node_set_gone(in->evdev);
}

static bool keys_down(const struct evdev_state *s) {
	for (size_t i = 0; i < ELEMENTSOF(s->key); i++)
		if (s->key[i])
			return true;
	return false;
}

/*
 * Input held back after a switch the user did not start goes to the
 * active persona once its frame is shown and no key of any device is down:
 * nothing typed before reaches it, and it sees nothing held.
 */
static void gate_try(struct input_class *ic) {
	struct input_device *d;

	if (!ic->input_held || !ic->switch_shown)
		return;
	LIST_FOREACH(d, &ic->devices, link)
		if (!d->gone && keys_down(&d->hw))
			return;
	ic->input_held = false;
	ic->loop_touched = true;
	LIST_FOREACH(d, &ic->devices, link) {
		if (!d->held_for)
			continue;
		d->active = d->held_for;
		d->held_for = NULL;
		evdev_node_activate(d->active->evdev, &d->hw);
	}
	log_info("input goes to persona %s: every key is up and its frame is shown", ic->base.manager->active->name);
}

void input_device_set_gone(struct input_device *d) {
	device_gone(d);
}

/* Folds events into the hardware state and passes them on in packets. */
static void pass_on(struct input_device *d, struct input_event *batch, size_t *n, const struct input_event *evs,
		    size_t count) {
	for (size_t i = 0; i < count; i++) {
		evdev_state_apply(&d->hw, &evs[i]);
		batch[(*n)++] = evs[i];
		if (*n == BATCH_MAX || (*n >= BATCH_FLUSH && evs[i].type == EV_SYN && evs[i].code == SYN_REPORT)) {
			deliver(d, batch, *n);
			*n = 0;
		}
	}
}

/* A chord asked for the persona of SwitchKeys= entry i: switched once the handler returns, the last chord winning. */
static void queue_hotkey(struct input_class *ic, size_t i) {
	ic->hotkey_target = i;
	ic->loop_touched = true;
	/* Cannot fail while the loop runs: turning a defer source on makes no system call. */
	(void)sd_event_source_set_enabled(ic->hotkey_defer, SD_EVENT_ONESHOT);
}

/* Reads what the hardware has queued and passes it on to the active persona, less any switch chord. */
static void drain(struct input_device *d) {
	struct input_event batch[BATCH_MAX], out[HOTKEY_OUT_MAX];
	size_t n = 0;

	/* What comes after a chord waits for the chord's switch (on_hotkey()). */
	if (d->gone || d->after_chord)
		return;
	for (int i = 0; i < DRAIN_MAX; i++) {
		struct input_event ev;
		int chord = -1, r = input_backend_next_event(d->backend, &ev);

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
		if (d->hotkey)
			pass_on(d, batch, &n, out, hotkey_feed(d->hotkey, &ev, out, &chord));
		else
			pass_on(d, batch, &n, &ev, 1);
		if (chord >= 0) {
			queue_hotkey(d->class, d->chord_conf[chord]);
			d->after_chord = true;
			break;
		}
		/* Held back: the packet that lets the last key up opens the gate for the ones after it. */
		if (d->class->input_held && ev.type == EV_SYN && ev.code == SYN_REPORT) {
			deliver(d, batch, n);
			n = 0;
			gate_try(d->class);
		}
	}
	deliver(d, batch, n);
	gate_try(d->class);
}

void input_device_dispatch(struct input_device *d) {
	drain(d);
}

/* Quiet (loop.h) unless a packet did more than reach the active persona's readers. */
static int on_input(struct loop_io *io, uint32_t revents, void *userdata) {
	struct input_device *d = userdata;

	(void)io;
	(void)revents;
	d->class->loop_touched = false;
	drain(d);
	return d->class->loop_touched ? 0 : LOOP_QUIET;
}

static int on_hotkey(sd_event_source *s, void *userdata) {
	struct input_class *ic = userdata;
	struct manager *m = ic->base.manager;
	const struct conf_switch_key *sk = &m->conf->switch_keys[ic->hotkey_target];
	struct persona *p = manager_find_persona(m, sk->persona);

	struct input_device *d;

	(void)s;
	if (!p)
		log_warning("switch key for persona %s, which no longer exists", sk->persona);
	else if (sk->secure) {
		log_info("secure attention key: persona %s comes forward, and stays until the user switches",
			 p->name);
		(void)manager_switch_by(m, p, SWITCH_BY_ATTENTION, NULL, NULL);
	} else
		(void)manager_switch(m, p, NULL, NULL);
	/* What was typed after the chord is the persona's it brought forward. */
	LIST_FOREACH(d, &ic->devices, link)
		if (d->after_chord) {
			d->after_chord = false;
			drain(d);
		}
	return 0;
}

/* Watches for the configured switch chords whose keys this device has. */
static int setup_hotkeys(struct input_device *d) {
	const struct conf *conf = d->class->base.manager->conf;

	for (size_t i = 0; i < conf->n_switch_keys; i++) {
		const struct conf_switch_key *sk = &conf->switch_keys[i];
		bool has_all = true;
		int idx;

		for (size_t k = 0; k < sk->n_keys; k++)
			has_all = has_all && libevdev_has_event_code(d->backend->desc, EV_KEY, sk->keys[k]);
		if (!has_all)
			continue;
		if (!d->hotkey) {
			d->hotkey = malloc(sizeof(*d->hotkey));
			if (!d->hotkey)
				return -ENOMEM;
			hotkey_init(d->hotkey);
		}
		idx = hotkey_add(d->hotkey, sk->keys, sk->n_keys);
		if (idx < 0)
			return idx;
		d->chord_conf[idx] = i;
	}
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

/* Frees a device that is not, or no longer, on the class's list. */
static struct input_device *input_device_free(struct input_device *d) {
	const struct input_transport_ops *t;
	struct input_node *in;

	if (!d)
		return NULL;
	t = d->class->transport;
	while ((in = LIST_FIRST(&d->nodes)))
		input_node_free(in);
	if (t && t->device_removed)
		t->device_removed(d);
	free(d->hotkey);
	sd_event_source_disable_unref(d->reap);
	loop_io_free(d->io);
	input_backend_free(d->backend);
	free(d);
	return NULL;
}

static int input_device_add_persona(struct input_device *d, struct persona *p) {
	const struct input_transport_ops *t = d->class->transport;
	struct manager *m = d->class->base.manager;
	struct input_node *in;
	struct evdev_state view = d->hw;
	int r;

	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->device = d;
	in->persona = p;
	LIST_INSERT_HEAD(&d->nodes, in, by_device);
	snprintf(in->path, sizeof(in->path), "/dev/%s/%s/%s", DEVNS_DEV_DIR, p->name, d->backend->name);

	/* A background persona starts with nothing held. */
	if (p != m->active)
		evdev_state_release_all(&view);
	r = evdev_node_new(&in->evdev, d->backend->desc, &view, &node_ops, in);
	if (r >= 0)
		r = evdev_node_set_ff_max(in->evdev, d->backend->ff_effects_max);
	if (r >= 0 && t && t->node_added)
		r = t->node_added(in);
	if (r < 0) {
		input_node_free(in);
		return r;
	}
	if (p == m->active && d->class->input_held)
		d->held_for = in;
	else if (p == m->active) {
		d->active = in;
		in->evdev->active = true;
	}
	return 0;
}

int input_class_add_device(struct input_class *ic, struct input_backend *backend, struct input_device **ret) {
	struct manager *m = ic->base.manager;
	struct input_device *d;
	struct persona *p;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d) {
		input_backend_free(backend);
		return -ENOMEM;
	}
	d->class = ic;
	d->backend = backend;
	LIST_INIT(&d->nodes);
	state_from_libevdev(&d->hw, backend->desc);
	r = setup_hotkeys(d);
	if (r < 0)
		goto fail;
	if (evdev_udev_properties(backend->desc, d->udev, sizeof(d->udev)) < 0)
		d->udev[0] = '\0';
	if (backend->fd >= 0) {
		char link[PATH_MAX];
		_cleanup_(freep) char *kdev = NULL;

		snprintf(link, sizeof(link), "/sys/class/input/%s/device", backend->name);
		kdev = realpath(link, NULL);
		if (kdev && strlen(kdev) < sizeof(d->kdev))
			strcpy(d->kdev, kdev);
		r = loop_add_io(m->loop, &d->io, backend->fd, EPOLLIN, on_input, d);
		if (r < 0)
			goto fail;
	}
	if (ic->transport && ic->transport->device_added) {
		r = ic->transport->device_added(d);
		if (r < 0)
			goto fail;
	}
	if (ic->base.registered)
		LIST_FOREACH(p, &m->personas, link) {
			r = input_device_add_persona(d, p);
			if (r < 0)
				goto fail;
		}
	LIST_INSERT_HEAD(&ic->devices, d, link);
	if (ret)
		*ret = d;
	return 0;
fail:
	input_device_free(d);
	return r;
}

void input_class_remove_device(struct input_class *ic, struct input_device *d) {
	LIST_REMOVE(d, link);
	input_device_free(d);
	/* A key it held is up now. */
	gate_try(ic);
}

struct input_node *input_node_of(struct input_device *d, struct persona *p) {
	struct input_node *in;

	LIST_FOREACH(in, &d->nodes, by_device)
		if (in->persona == p)
			return in;
	return NULL;
}

static void input_device_switch(struct input_device *d, struct persona *from, struct persona *to, bool hold) {
	struct input_node *old = input_node_of(d, from), *new = input_node_of(d, to);

	/* What was pressed before the switch belongs to the old persona. */
	drain(d);
	if (d->gone)
		return;
	if (old && old->evdev->active)
		evdev_node_deactivate(old->evdev);
	d->held_for = NULL;
	if (hold) {
		/* Nobody gets input until gate_try() lets the new persona have it. */
		d->active = NULL;
		d->held_for = new;
		return;
	}
	d->active = new;
	if (new)
		evdev_node_activate(new->evdev, &d->hw);
}

static struct input_class *to_input(struct device_class *dc) {
	return container_of(dc, struct input_class, base);
}

static int input_add_persona(struct device_class *dc, struct persona *p) {
	struct input_device *d;
	int r;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		if (d->gone)
			continue;
		r = input_device_add_persona(d, p);
		if (r < 0)
			return log_error_errno(r, "/dev/%s/%s/%s: cannot create the node: %m", DEVNS_DEV_DIR, p->name,
					       d->backend->name);
	}
	return 0;
}

static void input_remove_persona(struct device_class *dc, struct persona *p) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link)
		input_node_free(input_node_of(d, p));
}

static void input_switch_to(struct device_class *dc, struct persona *from, struct persona *to, struct switch_op *op) {
	struct input_class *ic = to_input(dc);
	struct input_device *d;

	/* The drain of each device, first thing in its switch, must still see the gate as it was. */
	LIST_FOREACH(d, &ic->devices, link)
		input_device_switch(d, from, to, op->input_held);
	ic->input_held = op->input_held;
	ic->switch_shown = false;
	if (op->input_held)
		log_info("persona %s asked to come forward: its input waits until every key is up and its frame is "
			 "shown", to->name);
}

/* A switch is complete: its persona's frame is on screen. */
static void on_switch_done(struct listener *l, void *data) {
	struct input_class *ic = container_of(l, struct input_class, switch_done);

	(void)data;
	ic->switch_shown = true;
	gate_try(ic);
}

static void input_foreach_node(struct device_class *dc, struct persona *p, node_desc_fn fn, void *userdata) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		struct input_node *in = input_node_of(d, p);
		if (in && !d->gone)
			fn(userdata, &(struct node_desc){
				.path = in->path,
				.kind = "input",
				.source = d->backend->path,
				.opened = in->evdev->n_clients,
				.udev = d->udev,
			});
	}
}

static void input_class_free(struct device_class *dc) {
	struct input_class *ic = to_input(dc);
	struct input_device *d;

	while ((d = LIST_FIRST(&ic->devices)))
		input_class_remove_device(ic, d);
	sd_event_source_disable_unref(ic->hotkey_defer);
	listener_remove(&ic->switch_done);
	free(ic);
}

static void input_rebind(struct device_class *dc, struct persona *p, bool revoke) {
	struct input_class *ic = to_input(dc);
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link) {
		struct input_node *in = input_node_of(d, p);

		if (!in)
			continue;
		if (ic->transport && ic->transport->rebind)
			ic->transport->rebind(in, revoke);
		/* What the handles held is let go. */
		if (revoke)
			evdev_node_revoke(in->evdev, &d->hw);
	}
	if (revoke)
		log_info("persona %s: every handle on its input nodes revoked", p->name);
}

static const struct device_class_ops input_class_ops = {
	.add_persona = input_add_persona,
	.remove_persona = input_remove_persona,
	.switch_to = input_switch_to,
	.foreach_node = input_foreach_node,
	.rebind = input_rebind,
	.free = input_class_free,
};

int input_class_new_core(struct manager *m, const struct input_transport_ops *transport, struct input_class **ret) {
	struct input_class *ic;
	int r;

	ic = calloc(1, sizeof(*ic));
	if (!ic)
		return -ENOMEM;
	ic->base.ops = &input_class_ops;
	ic->base.manager = m;
	ic->transport = transport;
	LIST_INIT(&ic->devices);
	r = sd_event_add_defer(m->event, &ic->hotkey_defer, on_hotkey, ic);
	if (r < 0) {
		free(ic);
		return r;
	}
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(ic->hotkey_defer, SD_EVENT_OFF);
	ic->switch_done.notify = on_switch_done;
	signal_add(&m->events.switch_done, &ic->switch_done);
	*ret = ic;
	return 0;
}

int input_led_get(struct input_device *d, struct persona *p, unsigned int code) {
	struct input_node *in = input_node_of(d, p);

	if (!in)
		return -ENOENT;
	if (code > LED_MAX || !evdev_caps_has(&in->evdev->caps, EV_LED, code))
		return -EINVAL;
	return evdev_state_value(&in->evdev->view, EV_LED, code) != 0;
}

int input_led_set(struct input_device *d, struct persona *p, unsigned int code, bool on) {
	struct input_node *in = input_node_of(d, p);

	if (!in)
		return -ENOENT;
	if (code > LED_MAX)
		return -EINVAL;
	return evdev_node_set_feedback(in->evdev, EV_LED, (uint16_t)code, on);
}

bool input_conf_wants(const struct conf *conf, const char *devnode) {
	for (size_t i = 0; i < conf->input.n_patterns; i++)
		if (pattern_names(conf->input.patterns[i], devnode, devnode))
			return true;
	return false;
}
