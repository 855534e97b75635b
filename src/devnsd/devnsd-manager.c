/* SPDX-License-Identifier: MIT */
#include <glob.h>
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "devnsd-manager.h"
#include "input-backend.h"
#include "log.h"

static int persona_new(struct manager *m, const char *name, struct persona **ret) {
	struct persona *p, *last = NULL, *it;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->manager = m;
	snprintf(p->name, sizeof(p->name), "%s", name);
	LIST_INIT(&p->inputs);
	/* Keep configuration order. */
	LIST_FOREACH(it, &m->personas, link)
		last = it;
	if (last)
		LIST_INSERT_AFTER(last, p, link);
	else
		LIST_INSERT_HEAD(&m->personas, p, link);
	m->n_personas++;
	*ret = p;
	return 0;
}

static void persona_free(struct persona *p) {
	LIST_REMOVE(p, link);
	p->manager->n_personas--;
	free(p);
}

struct persona *manager_find_persona(struct manager *m, const char *name) {
	struct persona *p;

	LIST_FOREACH(p, &m->personas, link)
		if (streq(p->name, name))
			return p;
	return NULL;
}

static bool device_known(struct manager *m, const char *path) {
	struct input_device *d;
	_cleanup_(freep) char *real = realpath(path, NULL);

	LIST_FOREACH(d, &m->inputs, link) {
		_cleanup_(freep) char *other = realpath(d->backend->path, NULL);
		if (real && other && streq(real, other))
			return true;
	}
	return false;
}

static int open_input(struct manager *m, const char *path) {
	struct input_backend *b;
	struct input_device *d;
	struct persona *p;
	int r;

	if (device_known(m, path))
		return 0;
	r = input_evdev_open(path, &b);
	if (r == -ENOTTY)
		return log_error_errno(r, "%s: not an evdev input device", path);
	if (r == -EBUSY)
		return log_error_errno(r, "%s: another program has grabbed the device", path);
	if (r < 0)
		return log_error_errno(r, "%s: cannot open: %m", path);
	r = input_device_new(m, b, &d);
	if (r < 0)
		return log_error_errno(r, "%s: cannot watch the device: %m", path);
	LIST_FOREACH(p, &m->personas, link) {
		r = input_device_add_persona(d, p);
		if (r < 0)
			return log_error_errno(r, "/dev/%s/%s/%s: cannot create the node: %m", DEVNS_DEV_DIR, p->name,
					       b->name);
	}
	log_info("%s (%s): a node for each of %u personas", path, libevdev_get_name(b->desc), m->n_personas);
	return 0;
}

static int open_inputs(struct manager *m, const struct conf *conf) {
	for (size_t i = 0; i < conf->n_input_patterns; i++) {
		const char *pattern = conf->input_patterns[i];
		glob_t g = { 0 };
		int r = glob(pattern, GLOB_NOSORT | GLOB_NOCHECK, NULL, &g);

		if (r != 0) {
			globfree(&g);
			return log_error_errno(ENOMEM, "%s: cannot expand the pattern", pattern);
		}
		for (size_t j = 0; j < g.gl_pathc; j++) {
			const char *path = g.gl_pathv[j];
			/* A pattern that matches nothing is fine; a plain path must exist. */
			if (streq(path, pattern) && strpbrk(pattern, "*?[") && access(path, F_OK) < 0) {
				log_warning("%s: matches no device", pattern);
				continue;
			}
			r = open_input(m, path);
			if (r < 0) {
				globfree(&g);
				return r;
			}
		}
		globfree(&g);
	}
	return 0;
}

int manager_new(struct manager **ret, sd_event *event, const struct conf *conf) {
	_cleanup_(manager_freep) struct manager *m = NULL;
	int r;

	m = calloc(1, sizeof(*m));
	if (!m)
		return log_error_errno(ENOMEM, "out of memory");
	m->event = sd_event_ref(event);
	LIST_INIT(&m->personas);
	LIST_INIT(&m->inputs);

	for (size_t i = 0; i < conf->n_personas; i++) {
		struct persona *p;
		r = persona_new(m, conf->personas[i].name, &p);
		if (r < 0)
			return log_error_errno(r, "out of memory");
		if (i == conf->active)
			m->active = p;
	}
	r = open_inputs(m, conf);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(m);
	return 0;
}

struct manager *manager_free(struct manager *m) {
	struct input_device *d;
	struct persona *p;

	if (!m)
		return NULL;
	while ((d = LIST_FIRST(&m->inputs))) {
		LIST_REMOVE(d, link);
		d->link.le_prev = NULL;
		input_device_free(d);
	}
	while ((p = LIST_FIRST(&m->personas)))
		persona_free(p);
	sd_bus_flush_close_unref(m->bus);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

int manager_switch(struct manager *m, struct persona *p) {
	struct input_device *d;
	struct persona *old = m->active;

	if (p == old)
		return 0;
	LIST_FOREACH(d, &m->inputs, link)
		input_device_switch(d, old, p);
	m->active = p;
	log_info("switched from %s to %s", old->name, p->name);
	bus_emit_active_changed(m);
	return 1;
}

void manager_node_ready(struct manager *m) {
	m->n_ready++;
	manager_check_ready(m);
}

void manager_check_ready(struct manager *m) {
	if (m->notified || m->n_ready < m->n_nodes)
		return;
	m->notified = true;
	log_info("ready: %u personas, %u nodes, %s active", m->n_personas, m->n_nodes, m->active->name);
	sd_notifyf(0, "READY=1\nSTATUS=%u personas, %s active", m->n_personas, m->active->name);
}
