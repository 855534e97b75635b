/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "devnsd-devnum.h"
#include "devnsd-leds.h"
#include "devnsd-manager.h"
#include "devnsd-populate.h"
#include "devnsd-state.h"
#include "log.h"

static void persona_free(struct persona *p) {
	LIST_REMOVE(p, link);
	p->manager->n_personas--;
	pidns_close(&p->ns);
	for (size_t i = 0; i < p->n_maps; i++)
		free(p->maps[i].path);
	free(p);
}

static int persona_new(struct manager *m, const char *name, const struct conf_persona *cp, struct persona **ret) {
	struct persona *p, *last = NULL, *it;

	if (m->n_personas >= CONF_MAX_PERSONAS)
		return -E2BIG;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->manager = m;
	p->ns = PIDNS_NULL;
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->input_group = (struct conf_group){ .name = "input", .gid = -1 };
	p->video_group = (struct conf_group){ .name = "video", .gid = -1 };
	p->request_users = (struct conf_uids){ .ranges = { { 0, 0 } }, .n = 1 };
	p->request_limit = RATELIMIT_INIT(REQUEST_ACTIVE_INTERVAL_USEC, REQUEST_ACTIVE_BURST);
	if (cp) {
		p->allow_request_active = cp->allow_request_active;
		p->request_users = cp->request_users;
		p->input_group = cp->input_group;
		p->video_group = cp->video_group;
		for (size_t i = 0; i < cp->n_maps; i++) {
			p->maps[i] = cp->maps[i];
			p->maps[i].path = strdup(cp->maps[i].path);
			if (!p->maps[i].path) {
				free(p);
				return -ENOMEM;
			}
			p->n_maps++;
		}
	}
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

struct persona *manager_find_persona(struct manager *m, const char *name) {
	struct persona *p;

	LIST_FOREACH(p, &m->personas, link)
		if (streq(p->name, name))
			return p;
	return NULL;
}

int manager_new(struct manager **ret, sd_event *event, const struct conf *conf) {
	_cleanup_(manager_freep) struct manager *m = NULL;
	struct device_class *dc;
	struct persona *p;
	const char *state_dir;
	int r;

	m = calloc(1, sizeof(*m));
	if (!m)
		return log_error_errno(ENOMEM, "out of memory");
	m->event = sd_event_ref(event);
	m->conf = conf;
	m->self_ns = PIDNS_NULL;
	m->self_userns = PIDNS_NULL;
	LIST_INIT(&m->personas);
	LIST_INIT(&m->classes);
	LIST_INIT(&m->populates);
	r = pidns_of_pid(getpid(), &m->self_ns);
	if (r < 0)
		return log_error_errno(r, "Cannot open devnsd's own pid namespace: %m");
	state_dir = getenv("DEVNS_STATE_DIR") ?: DEVNUM_STATE_DIR;
	r = devnum_new(&m->devnum, state_dir);
	if (r < 0)
		log_warning_errno(r, "%s: cannot keep device numbers across restarts: %m", state_dir);
	r = state_new(m, state_dir);
	if (r < 0)
		return r;

	for (size_t i = 0; i < conf->n_personas; i++) {
		r = persona_new(m, conf->personas[i].name, &conf->personas[i], &p);
		if (r < 0)
			return log_error_errno(r, "out of memory");
		if (i == conf->active)
			m->active = p;
		if (conf->personas[i].pid > 0) {
			r = manager_attach(m, p, conf->personas[i].pid);
			if (r < 0)
				return log_error_errno(r, "[Persona %s] Pid=%d: cannot bind to its pid namespace: %m",
						       p->name, (int)conf->personas[i].pid);
		}
	}
	state_restore_personas(m);
	r = input_class_new(m, conf, &dc);
	if (r < 0)
		return r;
	LIST_INSERT_HEAD(&m->classes, dc, link);
	/* After input: LEDs of owned input devices go through their nodes. NULL without lights. */
	r = leds_class_new(m, conf, &dc);
	if (r < 0)
		return r;
	if (dc)
		LIST_INSERT_HEAD(&m->classes, dc, link);
	if (conf->display != DISPLAY_NONE) {
		r = display_class_new(m, conf, &dc);
		if (r < 0)
			return r;
		LIST_INSERT_HEAD(&m->classes, dc, link);
	}

	LIST_FOREACH(p, &m->personas, link)
		LIST_FOREACH(dc, &m->classes, link) {
			r = dc->ops->add_persona(dc, p);
			if (r < 0)
				return r;
		}
	state_restore_items(m);

	*ret = TAKE_PTR(m);
	return 0;
}

struct manager *manager_free(struct manager *m) {
	struct device_class *dc;
	struct persona *p;

	if (!m)
		return NULL;
	populate_stop_all(m);
	while ((dc = LIST_FIRST(&m->classes))) {
		LIST_REMOVE(dc, link);
		dc->ops->free(dc);
	}
	bus_switch_shown(m);
	while ((p = LIST_FIRST(&m->personas)))
		persona_free(p);
	sd_bus_flush_close_unref(m->bus);
	pidns_close(&m->self_ns);
	pidns_close(&m->self_userns);
	devnum_free(m->devnum);
	state_free(m);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

void manager_switch_hold(struct manager *m) {
	m->switch_holds++;
}

void manager_switch_shown(struct manager *m) {
	if (m->switch_holds > 0 && --m->switch_holds == 0)
		bus_switch_shown(m);
}

bool manager_switch_showing(const struct manager *m) {
	return m->switch_holds > 0;
}

int manager_switch(struct manager *m, struct persona *p) {
	struct device_class *dc;
	struct persona *old = m->active;

	if (p == old)
		return 0;
	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->switch_to(dc, old, p);
	m->active = p;
	log_info("switched from %s to %s", old->name, p->name);
	bus_emit_active_changed(m);
	state_changed(m);
	return 1;
}

void manager_rebind(struct manager *m, struct persona *p, bool revoke) {
	struct device_class *dc;

	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->rebind(dc, p, revoke);
}

void manager_foreach_node(struct manager *m, struct persona *p, node_desc_fn fn, void *userdata) {
	struct device_class *dc;

	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->foreach_node(dc, p, fn, userdata);
}

void manager_node_numbers(struct manager *m, const char *devname, unsigned int *ret_major, unsigned int *ret_minor) {
	*ret_major = *ret_minor = 0;
	if (m->devnum && devnum_get(m->devnum, devname, ret_major, ret_minor) < 0)
		*ret_major = *ret_minor = 0;
}

void manager_node_added(struct manager *m) {
	m->n_nodes++;
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


int manager_create_persona(struct manager *m, const char *name, struct persona **ret) {
	struct device_class *dc;
	struct persona *p;
	int r;

	if (!name_is_valid(name))
		return -EINVAL;
	if (manager_find_persona(m, name))
		return -EEXIST;
	r = persona_new(m, name, NULL, &p);
	if (r < 0)
		return r;
	LIST_FOREACH(dc, &m->classes, link) {
		r = dc->ops->add_persona(dc, p);
		if (r < 0) {
			manager_remove_persona(m, p);
			return r;
		}
	}
	log_info("created persona %s", name);
	state_changed(m);
	*ret = p;
	return 0;
}

int manager_remove_persona(struct manager *m, struct persona *p) {
	struct device_class *dc;

	if (p == m->active)
		return -EBUSY;
	populate_cancel(p);
	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->remove_persona(dc, p);
	log_info("removed persona %s", p->name);
	persona_free(p);
	state_changed(m);
	return 0;
}
