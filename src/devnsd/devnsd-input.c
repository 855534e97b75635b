/* SPDX-License-Identifier: MIT */
#include <glob.h>
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuse-evdev.h"
#include "devnsd-input.h"
#include "devnsd-state.h"
#include "evdev-node.h"
#include "evdev-udev.h"
#include "hotkey.h"
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

/* The persona's LEDs or sounds changed: worth keeping for a restart. */
static void node_feedback_changed(void *userdata) {
	struct input_node *in = userdata;

	state_changed(in->device->class->base.manager);
}

static const struct evdev_node_ops node_ops = {
	.feedback_changed = node_feedback_changed,
	.forward = node_forward,
	.set_repeat = node_set_repeat,
	.get_keycode = node_get_keycode,
	.wakeup = node_wakeup,
};

/* The host's node belongs to the persona's container: its root, and its input group. */
static void node_set_owner(struct input_node *in) {
	const struct persona_owner *o = &in->persona->owner;
	int r = cuse_evdev_set_owner(in->cuse, o->uid, o->input_gid, 0660);

	if (r < 0 && r != -ENOENT)
		log_warning_errno(r, "%s: cannot give the node to %u:%u: %m", in->path, (unsigned int)o->uid,
				  (unsigned int)o->input_gid);
}

static void node_ready(void *userdata) {
	struct input_node *in = userdata;

	if (in->ready)
		return;
	in->ready = true;
	log_debug("%s: ready", in->path);
	node_set_owner(in);
	manager_node_ready(in->device->class->base.manager);
}

static int node_may_open(void *userdata, pid_t pid) {
	struct input_node *in = userdata;

	return manager_check_access(in->device->class->base.manager, in->persona, pid);
}

static const struct cuse_evdev_hooks node_hooks = {
	.ready = node_ready,
	.may_open = node_may_open,
};

static struct input_node *input_node_free(struct input_node *in) {
	if (!in)
		return NULL;
	if (in->device->routed)
		cuse_evdev_close_node(in->device->routed, in->evdev);
	cuse_evdev_free(in->cuse);
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

	log_warning("%s: device is gone; its persona nodes now answer ENODEV", d->backend->path);
	sd_event_source_set_enabled(d->source, SD_EVENT_OFF);
	LIST_FOREACH(in, &d->nodes, by_device)
		evdev_node_set_gone(in->evdev);
}

/* Folds events into the hardware state and passes them on in packets. */
static void pass_on(struct input_device *d, struct input_event *batch, size_t *n, const struct input_event *evs,
		    size_t count) {
	for (size_t i = 0; i < count; i++) {
		evdev_state_apply(&d->hw, &evs[i]);
		batch[(*n)++] = evs[i];
		if (*n == BATCH_MAX || (evs[i].type == EV_SYN && evs[i].code == SYN_REPORT)) {
			deliver(d, batch, *n);
			*n = 0;
		}
	}
}

/*
 * Reads what the hardware has queued and passes it on to the active
 * persona, less any switch chord. Returns the persona a chord asked for.
 */
static const char *drain(struct input_device *d) {
	struct input_event batch[BATCH_MAX], out[HOTKEY_OUT_MAX];
	const char *target = NULL;
	size_t n = 0;

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
			return target;
		}
		if (d->hotkey)
			pass_on(d, batch, &n, out, hotkey_feed(d->hotkey, &ev, out, &chord));
		else
			pass_on(d, batch, &n, &ev, 1);
		if (chord >= 0)
			target = d->class->base.manager->conf->switch_keys[d->chord_conf[chord]].persona;
	}
	deliver(d, batch, n);
	return target;
}

static int on_input(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct input_device *d = userdata;
	struct manager *m = d->class->base.manager;
	const char *target;
	struct persona *p;

	(void)s;
	(void)fd;
	(void)revents;
	target = drain(d);
	if (!target)
		return 0;
	p = manager_find_persona(m, target);
	if (!p)
		log_warning("switch key for persona %s, which no longer exists", target);
	else
		manager_switch(m, p);
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

static struct input_device *input_device_free(struct input_device *d) {
	struct input_node *in;

	if (!d)
		return NULL;
	while ((in = LIST_FIRST(&d->nodes)))
		input_node_free(in);
	cuse_evdev_free(d->routed);
	free(d->hotkey);
	sd_event_source_disable_unref(d->source);
	input_backend_free(d->backend);
	free(d);
	return NULL;
}

static int input_device_new(struct input_class *ic, struct input_backend *backend, struct input_device **ret) {
	struct input_device *d;
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
	if (r < 0) {
		input_device_free(d);
		return r;
	}
	if (evdev_udev_properties(backend->desc, d->udev, sizeof(d->udev)) < 0)
		d->udev[0] = '\0';
	if (backend->fd >= 0) {
		r = sd_event_add_io(ic->base.manager->event, &d->source, backend->fd, EPOLLIN, on_input, d);
		if (r < 0) {
			input_device_free(d);
			return r;
		}
	}
	LIST_INSERT_HEAD(&ic->devices, d, link);
	*ret = d;
	return 0;
}

static int input_device_add_persona(struct input_device *d, struct persona *p) {
	struct manager *m = d->class->base.manager;
	unsigned int major, minor;
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
	if (r < 0)
		goto fail;
	manager_node_numbers(m, in->path + strlen("/dev/"), &major, &minor);
	r = cuse_evdev_new(&in->cuse, m->event, in->path + strlen("/dev/"), major, minor, in->evdev, &node_hooks, in);
	if (r < 0)
		goto fail;
	manager_node_added(m);
	if (p == m->active) {
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

static void input_device_switch(struct input_device *d, struct persona *from, struct persona *to) {
	struct input_node *old = node_of(d, from), *new = node_of(d, to);

	/* What was pressed before the switch belongs to the old persona. */
	if (d->source)
		(void)drain(d);
	if (old)
		evdev_node_deactivate(old->evdev);
	d->active = new;
	if (new)
		evdev_node_activate(new->evdev, &d->hw);
}

static void routed_ready(void *userdata) {
	struct input_device *d = userdata;

	if (d->routed_ready)
		return;
	d->routed_ready = true;
	manager_node_ready(d->class->base.manager);
}

/* The persona of the opener's container; host processes get the active persona's node. */
static int routed_route(void *userdata, pid_t pid, struct evdev_node **ret) {
	struct input_device *d = userdata;
	struct manager *m = d->class->base.manager;
	struct persona *p;
	struct input_node *in;
	int r;

	r = manager_route(m, d->routed_path, pid, &p);
	if (r < 0)
		return r;
	in = node_of(d, p);
	if (!in)
		return -ENODEV;
	*ret = in->evdev;
	return 0;
}

static const struct cuse_evdev_hooks routed_hooks = {
	.ready = routed_ready,
	.route = routed_route,
};

static int input_device_add_routed(struct input_device *d) {
	struct manager *m = d->class->base.manager;
	unsigned int major, minor;
	int r;

	snprintf(d->routed_path, sizeof(d->routed_path), "/dev/%s/%s", DEVNS_DEV_DIR, d->backend->name);
	manager_node_numbers(m, d->routed_path + strlen("/dev/"), &major, &minor);
	r = cuse_evdev_new(&d->routed, m->event, d->routed_path + strlen("/dev/"), major, minor, NULL,
			   &routed_hooks, d);
	if (r < 0)
		return log_error_errno(r, "%s: cannot create the routed node: %m", d->routed_path);
	manager_node_added(m);
	return 0;
}

static struct input_class *to_input(struct device_class *dc) {
	return container_of(dc, struct input_class, base);
}

static int input_add_persona(struct device_class *dc, struct persona *p) {
	struct input_device *d;
	int r;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		r = input_device_add_persona(d, p);
		if (r < 0)
			return log_error_errno(r, "/dev/%s/%s/%s: cannot create the node: %m", DEVNS_DEV_DIR, p->name,
					       d->backend->name);
	}
	return 0;
}

static void input_remove_persona(struct device_class *dc, struct persona *p) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		struct input_node *in = node_of(d, p);
		if (in)
			input_node_free(in);
	}
}

static void input_switch_to(struct device_class *dc, struct persona *from, struct persona *to) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link)
		input_device_switch(d, from, to);
}

static void input_foreach_node(struct device_class *dc, struct persona *p, node_desc_fn fn, void *userdata) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		struct input_node *in = node_of(d, p);
		if (in)
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

	while ((d = LIST_FIRST(&ic->devices))) {
		LIST_REMOVE(d, link);
		input_device_free(d);
	}
	free(ic);
}

static void input_rebind(struct device_class *dc, struct persona *p, bool revoke) {
	struct input_device *d;

	LIST_FOREACH(d, &to_input(dc)->devices, link) {
		struct input_node *in = node_of(d, p);

		if (!in)
			continue;
		if (in->ready)
			node_set_owner(in);
		if (!revoke)
			continue;
		/* Every handle on p's node, also those opened through the routed node, and what they held. */
		cuse_evdev_close_node(in->cuse, in->evdev);
		if (d->routed)
			cuse_evdev_close_node(d->routed, in->evdev);
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

static bool device_known(struct input_class *ic, const char *path) {
	_cleanup_(freep) char *real = realpath(path, NULL);
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link) {
		_cleanup_(freep) char *other = realpath(d->backend->path, NULL);
		if (real && other && streq(real, other))
			return true;
	}
	return false;
}

static int open_input(struct input_class *ic, const char *path) {
	struct input_backend *b;
	struct input_device *d;
	int r;

	if (device_known(ic, path))
		return 0;
	r = input_evdev_open(path, &b);
	if (r == -ENOTTY)
		return log_error_errno(r, "%s: not an evdev input device", path);
	if (r == -EBUSY)
		return log_error_errno(r, "%s: another program has grabbed the device", path);
	if (r < 0)
		return log_error_errno(r, "%s: cannot open: %m", path);
	r = input_device_new(ic, b, &d);
	if (r < 0)
		return log_error_errno(r, "%s: cannot watch the device: %m", path);
	if (ic->base.manager->conf->routed) {
		r = input_device_add_routed(d);
		if (r < 0)
			return r;
	}
	log_info("%s: %s", path, libevdev_get_name(b->desc));
	return 0;
}

/* --- restart: each persona's LEDs, by device ----------------------------------- */

static void input_state_save(void *userdata, struct persona *p, struct state_record *rec) {
	struct input_class *ic = userdata;
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link) {
		struct input_node *in = node_of(d, p);
		unsigned long leds = 0;
		char value[32];

		if (!in || !bit_test(in->evdev->caps.ev, EV_LED))
			continue;
		for (unsigned int code = 0; code <= LED_MAX; code++)
			if (evdev_state_value(&in->evdev->view, EV_LED, code))
				leds |= 1ul << code;
		snprintf(value, sizeof(value), "leds %#lx", leds);
		(void)state_record_add_item(rec, p->name, "input", d->backend->name, value);
	}
}

static int input_state_load(void *userdata, struct persona *p, const char *key, const char *value) {
	struct input_class *ic = userdata;
	struct input_device *d;
	struct input_node *in = NULL;
	unsigned long leds;
	char tail;
	int r = 0;

	LIST_FOREACH(d, &ic->devices, link)
		if (streq(d->backend->name, key))
			break;
	if (d)
		in = node_of(d, p);
	if (!in)
		return -ENOENT;
	if (sscanf(value, "leds %lx%c", &leds, &tail) != 1 || leds >> (LED_MAX + 1))
		return -EINVAL;
	/* As a client's EV_LED writes: the view takes them, and the hardware while the persona is active. */
	for (unsigned int code = 0; code <= LED_MAX && r >= 0; code++)
		if (evdev_caps_has(&in->evdev->caps, EV_LED, code))
			r = evdev_node_set_feedback(in->evdev, EV_LED, (uint16_t)code, (leds >> code) & 1);
	return r;
}

static int input_state_register(struct input_class *ic) {
	return state_register_part(ic->base.manager, &(struct state_part){ .name = "input",
									   .save = input_state_save,
									   .load = input_state_load,
									   .userdata = ic });
}

int input_class_new(struct manager *m, const struct conf *conf, struct device_class **ret) {
	struct input_class *ic;
	int r = 0;

	ic = calloc(1, sizeof(*ic));
	if (!ic)
		return log_error_errno(ENOMEM, "out of memory");
	ic->base.ops = &input_class_ops;
	ic->base.manager = m;
	LIST_INIT(&ic->devices);

	for (size_t i = 0; i < conf->input.n_patterns && r >= 0; i++) {
		const char *pattern = conf->input.patterns[i];
		glob_t g = { 0 };

		if (glob(pattern, GLOB_NOCHECK, NULL, &g) != 0) {
			r = log_error_errno(ENOMEM, "%s: cannot expand the pattern", pattern);
			globfree(&g);
			break;
		}
		for (size_t j = 0; j < g.gl_pathc && r >= 0; j++) {
			const char *path = g.gl_pathv[j];
			/* A pattern that matches nothing is fine; a plain path must exist. */
			if (streq(path, pattern) && strpbrk(pattern, "*?[") && access(path, F_OK) < 0) {
				log_warning("%s: matches no device", pattern);
				continue;
			}
			r = open_input(ic, path);
		}
		globfree(&g);
	}
	if (r >= 0)
		r = input_state_register(ic);
	if (r < 0) {
		input_class_free(&ic->base);
		return r;
	}
	*ret = &ic->base;
	return 0;
}

struct input_device *input_find_by_sysfs(struct manager *m, const char *sysfs_dir) {
	_cleanup_(freep) char *want = realpath(sysfs_dir, NULL);
	struct device_class *dc;

	if (!want)
		return NULL;
	LIST_FOREACH(dc, &m->classes, link) {
		struct input_device *d;

		if (dc->ops != &input_class_ops)
			continue;
		LIST_FOREACH(d, &to_input(dc)->devices, link) {
			char path[256];
			_cleanup_(freep) char *real = NULL;

			snprintf(path, sizeof(path), "/sys/class/input/%s/device", d->backend->name);
			real = realpath(path, NULL);
			if (real && streq(real, want))
				return d;
		}
	}
	return NULL;
}

int input_led_get(struct input_device *d, struct persona *p, unsigned int code) {
	struct input_node *in = node_of(d, p);

	if (!in)
		return -ENOENT;
	if (code > LED_MAX || !evdev_caps_has(&in->evdev->caps, EV_LED, code))
		return -EINVAL;
	return evdev_state_value(&in->evdev->view, EV_LED, code) != 0;
}

int input_led_set(struct input_device *d, struct persona *p, unsigned int code, bool on) {
	struct input_node *in = node_of(d, p);

	if (!in)
		return -ENOENT;
	if (code > LED_MAX)
		return -EINVAL;
	return evdev_node_set_feedback(in->evdev, EV_LED, (uint16_t)code, on);
}
