/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <systemd/sd-daemon.h>

#include "core/devnum.h"
#include "core/manager.h"
#include "cuse-device.h"
#include "log.h"
#include "loop.h"

static void persona_free(struct persona *p) {
	LIST_REMOVE(p, link);
	p->manager->n_personas--;
	pidns_close(&p->ns);
	closep(&p->conf_pidfd);
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
	p->serial = ++m->last_serial;
	p->ns = PIDNS_NULL;
	p->container_pidfd = -1;
	p->conf_pidfd = -1;
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
				for (size_t j = 0; j < p->n_maps; j++)
					free(p->maps[j].path);
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
	struct persona *p;
	const char *state_dir;
	int r;

	m = calloc(1, sizeof(*m));
	if (!m)
		return log_error_errno(ENOMEM, "out of memory");
	m->event = sd_event_ref(event);
	r = loop_new(&m->loop, event);
	if (r < 0)
		return log_error_errno(r, "Cannot create the event loop: %m");
	m->conf = conf;
	m->self_ns = PIDNS_NULL;
	LIST_INIT(&m->personas);
	LIST_INIT(&m->classes);
	LIST_INIT(&m->populates);
	signal_init(&m->events.active_changed);
	signal_init(&m->events.switch_done);
	signal_init(&m->events.persona_added);
	signal_init(&m->events.persona_removed);
	signal_init(&m->events.persona_ready);
	signal_init(&m->events.display_power);
	signal_init(&m->events.attached);
	signal_init(&m->events.leaving);
	signal_init(&m->events.detached);
	signal_init(&m->events.freeing);
	signal_init(&m->events.classes_freed);
	r = pidns_of_pid(getpid(), &m->self_ns);
	if (r < 0)
		return log_error_errno(r, "Cannot open devnsd's own pid namespace: %m");
	state_dir = getenv("DEVNS_STATE_DIR") ?: DEVNUM_STATE_DIR;
	r = devnum_new(&m->devnum, state_dir);
	if (r < 0)
		log_warning_errno(r, "%s: cannot keep device numbers across restarts: %m", state_dir);

	for (size_t i = 0; i < conf->n_personas; i++) {
		r = persona_new(m, conf->personas[i].name, &conf->personas[i], &p);
		if (r < 0)
			return log_error_errno(r, "out of memory");
		if (i == conf->active)
			m->active = p;
		if (conf->personas[i].pid > 0) {
			/* The one lookup by number: the attach once every node exists goes through this pidfd. */
			p->conf_pidfd = pidfd_open(conf->personas[i].pid, 0);
			r = p->conf_pidfd < 0 ? -errno : manager_attach(m, p, p->conf_pidfd);
			if (r < 0)
				return log_error_errno(r, "[Persona %s] Pid=%d: cannot bind to its pid namespace: %m",
						       p->name, (int)conf->personas[i].pid);
		}
	}
	*ret = TAKE_PTR(m);
	return 0;
}

struct manager *manager_free(struct manager *m) {
	struct device_class *dc;
	struct persona *p;

	if (!m)
		return NULL;
	signal_emit(&m->events.freeing, m);
	/* Classes let go of the switch under way as they are freed: it completes here. */
	while ((dc = LIST_FIRST(&m->classes))) {
		LIST_REMOVE(dc, link);
		dc->ops->free(dc);
	}
	/* Handles of devices that went got ENODEV while devnsd ran; as it stops, their connections end. */
	cuse_device_end_retired(NULL);
	while ((p = LIST_FIRST(&m->personas)))
		persona_free(p);
	pidns_close(&m->self_ns);
	devnum_free(m->devnum);
	signal_emit(&m->events.classes_freed, m);
	loop_free(m->loop);
	sd_event_unref(m->event);
	free(m);
	return NULL;
}

int manager_add_class(struct manager *m, struct device_class *dc) {
	struct persona *p;
	int r;

	dc->manager = m;
	dc->registered = true;
	LIST_INSERT_HEAD(&m->classes, dc, link);
	LIST_FOREACH(p, &m->personas, link) {
		r = dc->ops->add_persona(dc, p);
		if (r < 0)
			return r;
	}
	return 0;
}

static void on_switch_done(struct listener *l, void *data) {
	struct manager *m = container_of(l, struct manager, switch_done);
	struct switch_op *op = data;

	listener_remove(l);
	if (m->switch_op == op)
		m->switch_op = NULL;
	signal_emit(&m->events.switch_done, op);
}

int manager_switch(struct manager *m, struct persona *p, switch_done_fn done, void *userdata) {
	return manager_switch_by(m, p, SWITCH_BY_USER, done, userdata);
}

int manager_switch_by(struct manager *m, struct persona *p, enum switch_origin origin, switch_done_fn done,
		      void *userdata) {
	_cleanup_(switch_op_unrefp) struct switch_op *op = NULL;
	struct persona *old = m->active;
	struct device_class *dc;
	bool waits = false;
	int r;

	if (origin == SWITCH_BY_PERSONA && m->attention_held && p != old)
		return -EPERM;
	if (origin != SWITCH_BY_PERSONA)
		m->attention_held = origin == SWITCH_BY_ATTENTION;
	if (m->switch_op)
		op = switch_op_ref(m->switch_op);
	else {
		r = switch_op_new(p, &op);
		if (r < 0)
			return r;
		m->switch_op = op;
		m->switch_done.notify = on_switch_done;
		signal_add(&op->done, &m->switch_done);
	}
	if (done)
		waits = switch_op_add_waiter(op, done, userdata) >= 0;
	if (p != old) {
		/* Joining a switch under way: the classes move on from the target before to this one. */
		op->target = p;
		op->input_held = origin == SWITCH_BY_PERSONA;
		LIST_FOREACH(dc, &m->classes, link)
			dc->ops->switch_to(dc, old, p, op);
		m->active = p;
		log_info("switched from %s to %s", old->name, p->name);
		signal_emit(&m->events.active_changed, p);
	}
	/* Too many waiting: told at once. */
	if (done && !waits)
		done(userdata, p);
	return p != old;
}

void manager_rebind(struct manager *m, struct persona *p, bool revoke) {
	struct device_class *dc;

	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->rebind(dc, p, revoke);
}

int manager_attach(struct manager *m, struct persona *p, int pidfd) {
	struct pidns ns = PIDNS_NULL;
	struct persona *other;
	pid_t pid;
	int r;

	r = pidfd_get_pid(pidfd, &pid);
	if (r >= 0)
		r = pidns_of_pidfd(pidfd, &ns);
	if (r < 0)
		return r;
	if (pidns_equal(&ns, &m->self_ns)) {
		pidns_close(&ns);
		return -EINVAL;
	}
	LIST_FOREACH(other, &m->personas, link)
		if (other != p && pidns_equal(&other->ns, &ns)) {
			pidns_close(&ns);
			return -EBUSY;
		}
	if (p->ns.fd >= 0 && !pidns_equal(&p->ns, &ns)) {
		pidns_close(&p->ns);
		manager_rebind(m, p, true);
	}
	pidns_close(&p->ns);
	p->ns = ns;
	signal_emit(&m->events.attached, &(struct persona_attached){ .persona = p, .pid = pid, .pidfd = pidfd });
	return 0;
}

int manager_detach(struct manager *m, struct persona *p) {
	if (p->ns.fd < 0)
		return -ENOENT;
	signal_emit(&m->events.leaving, p);
	pidns_close(&p->ns);
	p->owner = (struct persona_owner){ 0 };
	manager_rebind(m, p, true);
	signal_emit(&m->events.detached, p);
	log_info("persona %s detached from its container", p->name);
	return 0;
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

static bool persona_alive(void *userdata, const char *name) {
	return manager_find_persona(userdata, name) != NULL;
}

void manager_numbers_begin(struct manager *m) {
	if (m->devnum)
		devnum_release_gone(m->devnum, persona_alive, m);
}

void manager_numbers_settled(struct manager *m) {
	if (m->devnum)
		devnum_settle(m->devnum);
}

void manager_node_added(struct manager *m, struct persona *p) {
	m->n_nodes++;
	if (p)
		p->nodes_waited++;
}

void manager_node_ready(struct manager *m, struct persona *p) {
	m->n_ready++;
	if (p && p->nodes_waited > 0 && --p->nodes_waited == 0)
		signal_emit(&m->events.persona_ready, p);
	manager_check_ready(m);
}

bool manager_persona_ready(const struct persona *p) {
	return p->nodes_waited == 0;
}

void manager_check_ready(struct manager *m) {
	if (m->notified || m->n_ready < m->n_nodes)
		return;
	m->notified = true;
	log_info("ready: %u personas, %u nodes, %s active", m->n_personas, m->n_nodes, m->active->name);
	sd_notifyf(0, "READY=1\nSTATUS=%u personas, %s active", m->n_personas, m->active->name);
}


static void remove_persona(struct manager *m, struct persona *p) {
	struct device_class *dc;

	signal_emit(&m->events.leaving, p);
	/* Its nodes go with it: their numbers may go to cards made later. */
	if (m->devnum)
		devnum_release_persona(m->devnum, p->name);
	LIST_FOREACH(dc, &m->classes, link)
		dc->ops->remove_persona(dc, p);
	persona_free(p);
}

int manager_create_persona(struct manager *m, const char *name, struct persona **ret) {
	struct device_class *dc;
	struct persona *p;
	int r;

	if (!name_is_valid(name) || (m->conf->routed && conf_name_is_routed_node(name)))
		return -EINVAL;
	if (manager_find_persona(m, name))
		return -EEXIST;
	r = persona_new(m, name, NULL, &p);
	if (r < 0)
		return r;
	LIST_FOREACH(dc, &m->classes, link) {
		r = dc->ops->add_persona(dc, p);
		if (r < 0) {
			remove_persona(m, p);
			return r;
		}
	}
	log_info("created persona %s", name);
	signal_emit(&m->events.persona_added, p);
	*ret = p;
	return 0;
}

int manager_remove_persona(struct manager *m, struct persona *p) {
	if (p == m->active)
		return -EBUSY;
	log_info("removed persona %s", p->name);
	signal_emit(&m->events.persona_removed, p);
	remove_persona(m, p);
	return 0;
}
