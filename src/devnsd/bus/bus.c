/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>

#include "bus/bus-internal.h"
#include "bus/bus.h"
#include "bus/errors.h"
#include "display/display.h"
#include "leds/leds.h"
#include "core/manager.h"
#include "restart/state.h"
#include "populate/populate.h"
#include "devns-endpoint.h"
#include "display-backend.h"
#include "idmap.h"
#include "log.h"

#define BUS_NAME "org.devns1"
#define BUS_PATH "/org/devns1"
#define BUS_INTERFACE "org.devns1.Manager"

static void log_refusal(struct bus *b, const char *what, const struct bus_peer *peer, const char *why) {
	if (ratelimit_take(&b->refusal_log, bus_now_usec(b->manager)))
		log_notice("refused %s to pid %d: %s", what, (int)peer->pid, why);
}

/*
 * Privileged calls: the caller must be root, or with group a member of
 * SwitchGroup=, and live in devnsd's own user and pid namespaces. Root of
 * another pid namespace (a container without a user namespace) is uid 0
 * to the bus as well; the namespaces tell it apart.
 */
static int check_caller(sd_bus_message *msg, bool group, const char *what, struct bus *b, sd_bus_error *error) {
	_cleanup_(bus_peer_done) struct bus_peer peer = BUS_PEER_NULL;
	struct manager *m = b->manager;
	bool member = group && b->switch_gid != (gid_t)-1;
	int r;

	r = bus_peer_get(msg, b->peers, &peer);
	if (r == -ESTALE && ratelimit_take(&b->refusal_log, bus_now_usec(b->manager)))
		log_notice("refused %s to %s: the process that made the connection is gone, and its pid names a "
			   "process started since", what, sd_bus_message_get_sender(msg));
	if (r >= 0 && (peer.euid == 0 || (member && bus_peer_in_group(&peer, b->switch_gid)))) {
		r = bus_peer_in_namespaces(&peer, &b->self_userns, &m->self_ns);
		if (r > 0 && bus_peer_confirm(msg, b->peers, &peer) == 0)
			return 0;
		log_refusal(b, what, &peer, "not root in devnsd's namespaces");
	}
	if (member)
		return bus_error_set(error, -EACCES,
				     "%s needs root or membership of group %s, in devnsd's own user and pid namespaces",
				     what, m->conf->switch_group);
	return bus_error_set(error, -EACCES, "%s needs root in devnsd's own user and pid namespaces", what);
}

/*
 * What a caller may list: every persona for callers in devnsd's own pid
 * namespace; its own persona for a process in a persona's container, known
 * by the bus's pidfd (ProcessFD); nothing for anyone else. The lists give
 * node paths, open handles and LED states, which are one persona's
 * business. Without ProcessFD the pid may name a process of another
 * persona's container by now: a container's callers get nothing there, and
 * ask for their own persona through its endpoint.
 */
struct scope {
	bool all;
	struct persona *own;
};

static struct scope caller_scope(sd_bus_message *msg, struct bus *b) {
	_cleanup_(bus_peer_done) struct bus_peer peer = BUS_PEER_NULL;
	struct persona *p = NULL;

	if (bus_peer_get(msg, b->peers, &peer) < 0 || manager_persona_of_pid(b->manager, peer.pid, &p) < 0 ||
	    (p && !peer.from_bus) || bus_peer_confirm(msg, b->peers, &peer) < 0)
		return (struct scope){ 0 };
	return (struct scope){ .all = !p, .own = p };
}

static bool in_scope(const struct scope *sc, const struct persona *p) {
	return sc->all || sc->own == p;
}

static int find_persona(struct manager *m, const char *name, struct persona **ret, sd_bus_error *error) {
	*ret = manager_find_persona(m, name);
	if (!*ret)
		return bus_error_set(error, -BUS_E_NO_SUCH_PERSONA, "No persona named '%s'", name);
	return 0;
}

/* The start of most calls: the persona named by the first argument, for a caller allowed to act on it. */
static int read_persona(sd_bus_message *msg, struct bus *b, bool group, const char *what, struct persona **ret,
			const char **ret_name, sd_bus_error *error) {
	const char *name;
	int r;

	r = sd_bus_message_read(msg, "s", &name);
	if (r < 0)
		return r;
	r = check_caller(msg, group, what, b, error);
	if (r < 0)
		return r;
	r = find_persona(b->manager, name, ret, error);
	if (r < 0)
		return r;
	*ret_name = name;
	return 0;
}

/* A SwitchTo caller is answered once the switch is on screen. */
static void switch_answer(void *userdata, struct persona *shown) {
	sd_bus_message *msg = userdata;
	int r;

	(void)shown;
	r = sd_bus_reply_method_return(msg, NULL);
	if (r < 0)
		log_debug_errno(r, "Cannot answer SwitchTo: %m");
	sd_bus_message_unref(msg);
}

static int method_switch_to(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct persona *p;
	const char *name;
	int r;

	r = read_persona(msg, b, true, "Switching personas", &p, &name, error);
	if (r < 0)
		return r;
	r = manager_switch(b->manager, p, switch_answer, sd_bus_message_ref(msg));
	if (r < 0) {
		sd_bus_message_unref(msg);
		return bus_error_set(error, r, "Switching to '%s' failed: %m", name);
	}
	return 1;
}

/* Appends node rows to a reply; the first error sticks. */
struct node_writer {
	sd_bus_message *reply;
	const char *persona;
	bool detailed;
	int r;
};

static void write_node(void *userdata, const struct node_desc *nd) {
	struct node_writer *w = userdata;

	if (w->r < 0)
		return;
	if (w->detailed)
		w->r = sd_bus_message_append(w->reply, "(ssssu)", w->persona, nd->path, nd->kind, nd->source,
					     nd->opened);
	else
		w->r = sd_bus_message_append(w->reply, "s", nd->path);
}

static int method_list_personas(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p;
	struct node_writer w = { 0 };
	struct scope sc = caller_scope(msg, b);
	int r;

	(void)error;
	r = sd_bus_message_new_method_return(msg, &reply);
	if (r < 0)
		return r;
	w.reply = reply;
	r = sd_bus_message_open_container(reply, 'a', "(sbas)");
	if (r < 0)
		return r;
	LIST_FOREACH(p, &m->personas, link) {
		if (!in_scope(&sc, p))
			continue;
		r = sd_bus_message_open_container(reply, 'r', "sbas");
		if (r < 0)
			return r;
		r = sd_bus_message_append(reply, "sb", p->name, p == m->active);
		if (r < 0)
			return r;
		r = sd_bus_message_open_container(reply, 'a', "s");
		if (r < 0)
			return r;
		manager_foreach_node(m, p, write_node, &w);
		if (w.r < 0)
			return w.r;
		r = sd_bus_message_close_container(reply);
		if (r < 0)
			return r;
		r = sd_bus_message_close_container(reply);
		if (r < 0)
			return r;
	}
	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;
	return sd_bus_send(NULL, reply, NULL);
}

static int method_list_nodes(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p;
	struct node_writer w = { .detailed = true };
	struct scope sc = caller_scope(msg, b);
	int r;

	(void)error;
	r = sd_bus_message_new_method_return(msg, &reply);
	if (r < 0)
		return r;
	w.reply = reply;
	r = sd_bus_message_open_container(reply, 'a', "(ssssu)");
	if (r < 0)
		return r;
	LIST_FOREACH(p, &m->personas, link) {
		if (!in_scope(&sc, p))
			continue;
		w.persona = p->name;
		manager_foreach_node(m, p, write_node, &w);
		if (w.r < 0)
			return w.r;
	}
	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;
	return sd_bus_send(NULL, reply, NULL);
}

/* Appends one persona's lights to a ListLights reply; the first error sticks. */
struct light_writer {
	sd_bus_message *reply;
	const char *persona;
	int r;
};

static void write_light(void *userdata, const struct light_desc *ld) {
	struct light_writer *w = userdata;

	if (w->r >= 0)
		w->r = sd_bus_message_append(w->reply, "(sssssuusub)", w->persona, ld->kind, ld->name, ld->source,
					     ld->policy, ld->brightness, ld->max_brightness, ld->trigger, ld->bl_power,
					     ld->shown);
}

static int method_list_lights(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct light_writer w = { 0 };
	struct scope sc = caller_scope(msg, b);
	struct persona *p;

	(void)error;
	w.r = sd_bus_message_new_method_return(msg, &reply);
	w.reply = reply;
	if (w.r >= 0)
		w.r = sd_bus_message_open_container(reply, 'a', "(sssssuusub)");
	for (p = LIST_FIRST(&m->personas); p && w.r >= 0; p = LIST_NEXT(p, link)) {
		if (!in_scope(&sc, p))
			continue;
		w.persona = p->name;
		leds_foreach_light(b->leds, p, write_light, &w);
	}
	if (w.r >= 0)
		w.r = sd_bus_message_close_container(reply);
	return w.r < 0 ? w.r : sd_bus_send(NULL, reply, NULL);
}

/*
 * A CreatePersona call is answered once the new persona's nodes are in
 * /dev, so that a program started after devnsctl create finds them; at
 * most CREATE_WAIT_USEC later, with an error saying they are not there.
 */
#define CREATE_WAIT_USEC (10 * 1000 * 1000)

struct create_wait {
	struct persona *persona;
	sd_bus_message *msg;
	sd_event_source *timeout;
	LIST_ENTRY(create_wait) link;
};

/* Answers w's call (with an error when code < 0) and frees w. */
static void create_wait_end(struct create_wait *w, int code, const char *message) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	int r;

	if (code < 0) {
		bus_error_set(&error, code, "%s", message);
		r = sd_bus_reply_method_error(w->msg, &error);
	} else
		r = sd_bus_reply_method_return(w->msg, NULL);
	if (r < 0)
		log_debug_errno(r, "Cannot answer CreatePersona: %m");
	LIST_REMOVE(w, link);
	sd_event_source_disable_unref(w->timeout);
	sd_bus_message_unref(w->msg);
	free(w);
}

/* Ends the waits of persona p, or every wait when p is NULL. */
static void create_waits_end(struct bus *b, struct persona *p, int code, const char *message) {
	struct create_wait *w = LIST_FIRST(&b->create_waits), *next;

	for (; w; w = next) {
		next = LIST_NEXT(w, link);
		if (!p || w->persona == p)
			create_wait_end(w, code, message);
	}
}

static int on_create_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
	struct create_wait *w = userdata;
	char message[128];

	(void)s;
	(void)usec;
	log_warning("persona %s: %u of its nodes are not in /dev after %u s", w->persona->name,
		    w->persona->nodes_waited, CREATE_WAIT_USEC / 1000000);
	snprintf(message, sizeof(message), "Persona '%s' was made, but %u of its nodes are not in /dev after %u s",
		 w->persona->name, w->persona->nodes_waited, CREATE_WAIT_USEC / 1000000);
	create_wait_end(w, -ETIMEDOUT, message);
	return 0;
}

static void on_persona_ready(struct listener *l, void *data) {
	create_waits_end(container_of(l, struct bus, persona_ready), data, 0, NULL);
}

static void on_persona_removed(struct listener *l, void *data) {
	create_waits_end(container_of(l, struct bus, persona_removed), data, -ENODEV,
			 "The persona was removed before its nodes were in /dev");
}

/* Answers msg once persona p's nodes are in /dev: at once when they are. */
static int create_wait_new(struct bus *b, sd_bus_message *msg, struct persona *p) {
	struct create_wait *w;
	int r;

	if (manager_persona_ready(p))
		return sd_bus_reply_method_return(msg, NULL);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	r = sd_event_add_time_relative(b->manager->event, &w->timeout, CLOCK_MONOTONIC, CREATE_WAIT_USEC, 0,
				       on_create_timeout, w);
	if (r < 0) {
		free(w);
		return r;
	}
	w->persona = p;
	w->msg = sd_bus_message_ref(msg);
	LIST_INSERT_HEAD(&b->create_waits, w, link);
	return 1;
}

static int method_create_persona(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p;
	const char *name;
	int r;

	r = sd_bus_message_read(msg, "s", &name);
	if (r < 0)
		return r;
	r = check_caller(msg, false, "Creating personas", b, error);
	if (r < 0)
		return r;
	r = manager_create_persona(m, name, &p);
	switch (r) {
	case -EEXIST:
		return bus_error_set(error, -BUS_E_PERSONA_EXISTS, "A persona named '%s' exists already", name);
	case -EINVAL:
		return bus_error_set(error, -EINVAL,
				     "Invalid persona name '%s' (letters, digits, '_' and '-', at most %d; with "
				     "Routed=yes not fb0, card0 or eventN, the routed nodes' names)",
				     name, NAME_MAX_LEN);
	case -E2BIG:
		return bus_error_set(error, -BUS_E_TOO_MANY_PERSONAS, "At most %d personas", CONF_MAX_PERSONAS);
	}
	if (r < 0)
		return bus_error_set(error, r, "Creating persona '%s' failed: %m", name);
	return create_wait_new(b, msg, p);
}

static int method_remove_persona(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p;
	const char *name;
	int r;

	r = read_persona(msg, b, false, "Removing personas", &p, &name, error);
	if (r < 0)
		return r;
	r = manager_remove_persona(m, p);
	if (r == -EBUSY)
		return bus_error_set(error, -BUS_E_PERSONA_ACTIVE, "Persona '%s' is active; switch away first", name);
	if (r < 0)
		return bus_error_set(error, r, "Removing persona '%s' failed: %m", name);
	return sd_bus_reply_method_return(msg, NULL);
}

static int method_attach(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct persona *p;
	const char *name;
	uint32_t pid;
	int r;

	r = read_persona(msg, b, false, "Attaching containers", &p, &name, error);
	if (r < 0)
		return r;
	r = sd_bus_message_read(msg, "u", &pid);
	if (r < 0)
		return r;
	if (pid == 0 || pid > INT32_MAX)
		return bus_error_set(error, -EINVAL, "Invalid pid %u", pid);
	return bus_attach_pid(b, p, (pid_t)pid, msg, error);
}

static int method_attach_machine(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct persona *p;
	const char *name, *machine;
	_cleanup_(closep) int leader = -1;
	int r;

	r = read_persona(msg, b, false, "Attaching containers", &p, &name, error);
	if (r < 0)
		return r;
	r = sd_bus_message_read(msg, "s", &machine);
	if (r < 0)
		return r;
	r = bus_machine_leader(sd_bus_message_get_bus(msg), machine, &leader, error);
	if (r < 0)
		return r;
	return bus_attach(b, p, leader, msg, error);
}

static int method_detach(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p;
	const char *name;
	int r;

	r = read_persona(msg, b, false, "Detaching containers", &p, &name, error);
	if (r < 0)
		return r;
	r = manager_detach(m, p);
	if (r == -ENOENT)
		return bus_error_set(error, -BUS_E_NOT_ATTACHED, "Persona '%s' is not attached to a container", name);
	if (r < 0)
		return bus_error_set(error, r, "Detaching persona '%s' failed: %m", name);
	return sd_bus_reply_method_return(msg, NULL);
}

/*
 * May this caller of p's container ask for p? Its user namespace must be the
 * container's own (the owner of the pid namespace p is bound to), and its
 * uid there, read from its uid_map, one of RequestActiveUsers=. A process
 * that made a user namespace of its own is root only in that one.
 */
static int check_request_user(struct bus *b, struct persona *p, const struct bus_peer *peer, sd_bus_error *error) {
	_cleanup_(pidns_close) struct pidns caller_userns = PIDNS_NULL;
	_cleanup_(closep) int proc = -1, container_userns = -1;
	struct stat st;
	struct idmap map;
	uint32_t uid;
	int r;

	r = bus_peer_proc(peer, &proc);
	if (r >= 0)
		r = ns_open_at(proc, "user", &caller_userns);
	if (r < 0)
		return r;
	container_userns = ioctl(p->ns.fd, NS_GET_USERNS);
	if (container_userns < 0 || fstat(container_userns, &st) < 0)
		return -errno;
	if (st.st_dev != caller_userns.dev || st.st_ino != caller_userns.ino) {
		log_refusal(b, "RequestActive", peer, "it is not in its container's own user namespace");
		return bus_error_set(error, -EACCES,
				     "RequestActive is taken only from persona %s's own user namespace, not from one "
				     "made inside it",
				     p->name);
	}
	r = idmap_read(proc, "uid_map", &map);
	if (r < 0)
		return r;
	/* Unmapped: the kernel's invalid uid, which no list holds. */
	if (idmap_from_host(&map, (uint32_t)peer->euid, &uid) < 0)
		uid = UINT32_MAX;
	return bus_check_request_uid(b, p, uid, peer->euid, error);
}

static int method_request_active(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	_cleanup_(bus_peer_done) struct bus_peer peer = BUS_PEER_NULL;
	struct bus *b = userdata;
	struct manager *m = b->manager;
	struct persona *p = NULL;
	bool granted;
	int r;

	r = bus_peer_get(msg, b->peers, &peer);
	if (r == -ESTALE)
		return bus_error_set(error, -EACCES,
				     "The process that made this connection is gone, and its pid names another process "
				     "now; in a persona's container, ask through its endpoint, %s",
				     DEVNS_ENDPOINT_PATH);
	if (r < 0)
		return r;
	r = manager_persona_of_pid(m, peer.pid, &p);
	if (r < 0 || !p)
		return bus_error_set(error, -BUS_E_NOT_IN_PERSONA, "The caller (pid %d) is not in any persona's container",
				     (int)peer.pid);
	/*
	 * Which persona asks was read from the caller's process. Without the
	 * bus's pidfd that process is known by a number only, which a process
	 * of another container may have taken since the connection was made:
	 * the pid serves to refuse, never to grant.
	 */
	if (!peer.from_bus) {
		log_refusal(b, "RequestActive", &peer, "the bus gives no pidfd of its callers (ProcessFD)");
		return bus_error_set(error, -EACCES,
				     "This bus gives no pidfd of its callers (ProcessFD), and a pid cannot tell which "
				     "persona asks; in a persona's container, ask through its endpoint, %s",
				     DEVNS_ENDPOINT_PATH);
	}
	r = check_request_user(b, p, &peer, error);
	if (r < 0)
		return r;
	r = bus_peer_confirm(msg, b->peers, &peer);
	if (r < 0)
		return r;
	r = bus_request_active(b, p, &granted, error);
	if (r < 0)
		return r;
	return sd_bus_reply_method_return(msg, "b", granted);
}

static int property_active(sd_bus *bus, const char *path, const char *interface, const char *property,
			   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	struct manager *m = b->manager;

	(void)bus;
	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	return sd_bus_message_append(reply, "s", m->active->name);
}

/* Whether whoever reads a property sees every persona: not a process of a container. */
static bool reader_sees_all(sd_bus *bus, struct bus *b) {
	sd_bus_message *call = sd_bus_get_current_message(bus);

	return call && caller_scope(call, b).all;
}

/* Node changes in flight and helpers stopped that have not ended (populate_count()); 0 for callers in containers. */
static int property_node_changes(sd_bus *bus, const char *path, const char *interface, const char *property,
				 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	unsigned int in_flight = 0, stopped = 0;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	if (reader_sees_all(bus, b))
		populate_count(b->manager, &in_flight, &stopped);
	return sd_bus_message_append(reply, "(uu)", (uint32_t)in_flight, (uint32_t)stopped);
}

/* 0 for callers in containers: the count moves as the active persona draws. */
static int property_frames_shown(sd_bus *bus, const char *path, const char *interface, const char *property,
				 sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	if (!reader_sees_all(bus, b))
		return sd_bus_message_append(reply, "t", (uint64_t)0);
	return sd_bus_message_append(reply, "t", display_frames_shown(b->display));
}

/*
 * "on", "off" (the active persona blanked it), "gone" (the display device went away), or "" without a
 * display; "" for callers in containers.
 */
static int property_display_power(sd_bus *bus, const char *path, const char *interface, const char *property,
				  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	if (!reader_sees_all(bus, b) || !b->display)
		return sd_bus_message_append(reply, "s", "");
	if (display_lost(b->display))
		return sd_bus_message_append(reply, "s", "gone");
	return sd_bus_message_append(reply, "s", display_powered_down(b->display) ? "off" : "on");
}

/*
 * The display's buffers, the memory they take, and the personas a switch
 * shows with a flip; nothing for callers in containers, to whom other
 * personas' use of the screen is none of their business.
 */
static int property_display_buffers(sd_bus *bus, const char *path, const char *interface, const char *property,
				    sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct persona *kept[DISPLAY_MAX_BUFFERS];
	struct bus *b = userdata;
	uint64_t bytes = 0;
	unsigned int n = 0;
	size_t n_kept = 0;
	int r;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	if (reader_sees_all(bus, b) && b->display) {
		n = display_buffers(b->display, &bytes);
		n_kept = display_kept_frames(b->display, kept, ELEMENTSOF(kept));
	}
	r = sd_bus_message_open_container(reply, 'r', "utas");
	if (r < 0)
		return r;
	r = sd_bus_message_append(reply, "ut", n, bytes);
	if (r < 0)
		return r;
	r = sd_bus_message_open_container(reply, 'a', "s");
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_kept; i++) {
		r = sd_bus_message_append(reply, "s", kept[i]->name);
		if (r < 0)
			return r;
	}
	r = sd_bus_message_close_container(reply);
	if (r < 0)
		return r;
	return sd_bus_message_close_container(reply);
}

/* Switches shown from kept frames and by copying; 0 for callers in containers, as FramesShown. */
static int property_switches_shown(sd_bus *bus, const char *path, const char *interface, const char *property,
				   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	uint64_t kept = 0, copied = 0;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	if (reader_sees_all(bus, b))
		display_switches_shown(b->display, &kept, &copied);
	return sd_bus_message_append(reply, "(tt)", kept, copied);
}

/* What the last restart could not take back; none for callers in containers. */
static int property_restart_notes(sd_bus *bus, const char *path, const char *interface, const char *property,
				  sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	const char *note;
	int r;

	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	r = sd_bus_message_open_container(reply, 'a', "s");
	/* The notes are devnsd's own: for callers in its pid namespace. */
	if (reader_sees_all(bus, b))
		for (size_t i = 0; r >= 0 && (note = state_restart_note(b->manager, i)); i++)
			r = sd_bus_message_append(reply, "s", note);
	return r < 0 ? r : sd_bus_message_close_container(reply);
}

/* The persona's visible frame as a sealed memfd; the caller writes the file. */
static int method_screenshot(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	_cleanup_(closep) int fd = -1;
	uint32_t width, height, stride;
	struct persona *p;
	const char *name;
	int r;

	r = read_persona(msg, b, false, "Screenshot", &p, &name, error);
	if (r < 0)
		return r;
	r = display_snapshot(b->display, p, &fd, &width, &height, &stride);
	if (r == -ENODEV)
		return bus_error_set(error, -BUS_E_NO_DISPLAY, NULL);
	if (r < 0)
		return bus_error_set(error, r, "Cannot copy the frame of '%s': %m", name);
	return sd_bus_reply_method_return(msg, "huuus", fd, width, height, stride, "XRGB8888");
}

static const sd_bus_vtable manager_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_PROPERTY("ActivePersona", "s", property_active, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_PROPERTY("FramesShown", "t", property_frames_shown, 0, 0),
	SD_BUS_PROPERTY("DisplayPower", "s", property_display_power, 0, 0),
	SD_BUS_PROPERTY("DisplayBuffers", "(utas)", property_display_buffers, 0, 0),
	SD_BUS_PROPERTY("SwitchesShown", "(tt)", property_switches_shown, 0, 0),
	SD_BUS_PROPERTY("RestartNotes", "as", property_restart_notes, 0, 0),
	SD_BUS_PROPERTY("NodeChanges", "(uu)", property_node_changes, 0, 0),
	SD_BUS_METHOD_WITH_ARGS("SwitchTo", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT, method_switch_to,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("ListPersonas", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sbas)", personas),
				method_list_personas, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("ListNodes", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssu)", nodes), method_list_nodes,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("CreatePersona", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT, method_create_persona,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("RemovePersona", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT, method_remove_persona,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Attach", SD_BUS_ARGS("s", persona, "u", pid), SD_BUS_RESULT("u", nodes_made),
				method_attach, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("AttachMachine", SD_BUS_ARGS("s", persona, "s", machine),
				SD_BUS_RESULT("u", nodes_made), method_attach_machine, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Detach", SD_BUS_ARGS("s", persona), SD_BUS_NO_RESULT, method_detach,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("RequestActive", SD_BUS_NO_ARGS, SD_BUS_RESULT("b", granted),
				method_request_active, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_SIGNAL_WITH_ARGS("PersonaActivationRequested", SD_BUS_ARGS("s", persona, "b", granted), 0),
	SD_BUS_METHOD_WITH_ARGS("ListLights", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sssssuusub)", lights),
				method_list_lights, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("Screenshot", SD_BUS_ARGS("s", persona),
				SD_BUS_RESULT("h", frame, "u", width, "u", height, "u", stride, "s", format),
				method_screenshot, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_VTABLE_END,
};

/* Now on CLOCK_BOOTTIME, the clock of processes' start times. */
static uint64_t boottime_usec(void) {
	struct timespec ts;

	if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A connection came: by now it was made, and a process that starts later did not make it. */
static int on_name_new(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	const char *name, *old_owner, *new_owner;

	(void)error;
	if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) >= 0 && name[0] == ':' &&
	    streq(name, new_owner))
		bus_peer_cache_saw(b->peers, name, boottime_usec());
	return 0;
}

/* A connection left the bus: what devnsd kept about it goes, with the pidfd that pinned its process. */
static int on_name_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct bus *b = userdata;
	const char *name, *old_owner, *new_owner;

	(void)error;
	if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) >= 0 && name[0] == ':' && !new_owner[0])
		bus_peer_cache_forget(b->peers, name);
	return 0;
}

static void on_active_changed(struct listener *l, void *data) {
	struct bus *b = container_of(l, struct bus, active_changed);

	(void)data;
	sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_INTERFACE, "ActivePersona", NULL);
}

int bus_new(struct bus **ret, struct manager *m, struct display_class *display, struct leds_class *leds) {
	_cleanup_(bus_freep) struct bus *b = NULL;
	const char *unique;
	_cleanup_(closep) int self = -1;
	int r;

	b = calloc(1, sizeof(*b));
	if (!b)
		return log_error_errno(ENOMEM, "out of memory");
	b->manager = m;
	b->display = display;
	b->leds = leds;
	b->self_userns = PIDNS_NULL;
	b->switch_gid = (gid_t)-1;
	b->refusal_log = RATELIMIT_INIT(10 * 1000000ull, 20);
	r = bus_peer_cache_new(&b->peers);
	if (r < 0)
		return log_error_errno(r, "out of memory");
	self = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = self < 0 ? -errno : ns_open_at(self, "user", &b->self_userns);
	if (r < 0)
		return log_error_errno(r, "Cannot open devnsd's own user namespace: %m");
	if (m->conf->switch_group) {
		struct group *g = getgrnam(m->conf->switch_group);
		if (g)
			b->switch_gid = g->gr_gid;
		else
			log_warning("SwitchGroup=%s: no such group; only root may switch", m->conf->switch_group);
	}

	r = sd_bus_open_system_with_description(&b->bus, "devnsd");
	if (r < 0)
		return log_error_errno(r, "Cannot connect to the system bus: %m");
	r = sd_bus_add_object_vtable(b->bus, NULL, BUS_PATH, BUS_INTERFACE, manager_vtable, b);
	if (r < 0)
		return log_error_errno(r, "Cannot register %s: %m", BUS_PATH);
	r = sd_bus_request_name(b->bus, BUS_NAME, 0);
	if (r < 0)
		return log_error_errno(r, "Cannot own the name %s (is the bus policy installed?): %m", BUS_NAME);
	/* Only names that lost their owner (arg2 empty): devnsd is not woken by every connection that comes. */
	r = sd_bus_add_match_async(b->bus, NULL,
				   "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
				   "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''",
				   on_name_owner_changed, NULL, b);
	if (r < 0)
		return log_error_errno(r, "Cannot follow the bus's connections: %m");
	/* New connections (arg1 empty): when each was made at the latest, for callers without ProcessFD (peer.c). */
	r = sd_bus_add_match_async(b->bus, NULL,
				   "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
				   "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg1=''",
				   on_name_new, NULL, b);
	if (r < 0)
		return log_error_errno(r, "Cannot follow the bus's connections: %m");
	r = sd_bus_get_unique_name(b->bus, &unique);
	if (r >= 0)
		bus_peer_cache_saw(b->peers, unique, boottime_usec());
	r = sd_bus_attach_event(b->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
	if (r < 0)
		return log_error_errno(r, "Cannot attach the bus to the event loop: %m");
	/* Logged: without endpoints, personas still reach devnsd over the bus. */
	(void)bus_endpoints_new(b, &b->endpoints);
	b->active_changed.notify = on_active_changed;
	signal_add(&m->events.active_changed, &b->active_changed);
	LIST_INIT(&b->create_waits);
	b->persona_ready.notify = on_persona_ready;
	signal_add(&m->events.persona_ready, &b->persona_ready);
	b->persona_removed.notify = on_persona_removed;
	signal_add(&m->events.persona_removed, &b->persona_removed);
	*ret = TAKE_PTR(b);
	return 0;
}

struct bus *bus_free(struct bus *b) {
	if (!b)
		return NULL;
	listener_remove(&b->active_changed);
	listener_remove(&b->persona_ready);
	listener_remove(&b->persona_removed);
	create_waits_end(b, NULL, -ESHUTDOWN, "devnsd is stopping");
	bus_machines_free(b);
	bus_endpoints_free(b->endpoints);
	sd_bus_flush_close_unref(b->bus);
	pidns_close(&b->self_userns);
	bus_peer_cache_free(b->peers);
	free(b);
	return NULL;
}
