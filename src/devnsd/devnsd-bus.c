/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "devnsd-manager.h"
#include "log.h"

#define BUS_NAME "org.devns1"
#define BUS_PATH "/org/devns1"
#define BUS_INTERFACE "org.devns1.Manager"
#define BUS_ERROR_NO_SUCH_PERSONA "org.devns1.Error.NoSuchPersona"

static int method_switch_to(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
	struct manager *m = userdata;
	struct persona *p;
	const char *name;
	int r;

	r = sd_bus_message_read(msg, "s", &name);
	if (r < 0)
		return r;
	p = manager_find_persona(m, name);
	if (!p)
		return sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_PERSONA, "No persona named '%s'", name);
	r = manager_switch(m, p);
	if (r < 0)
		return sd_bus_error_set_errnof(error, r, "Switching to '%s' failed: %m", name);
	return sd_bus_reply_method_return(msg, NULL);
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
	struct manager *m = userdata;
	struct persona *p;
	struct node_writer w = { 0 };
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
	struct manager *m = userdata;
	struct persona *p;
	struct node_writer w = { .detailed = true };
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

static int property_active(sd_bus *bus, const char *path, const char *interface, const char *property,
			   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
	struct manager *m = userdata;

	(void)bus;
	(void)path;
	(void)interface;
	(void)property;
	(void)error;
	return sd_bus_message_append(reply, "s", m->active->name);
}

static const sd_bus_vtable manager_vtable[] = {
	SD_BUS_VTABLE_START(0),
	SD_BUS_PROPERTY("ActivePersona", "s", property_active, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
	SD_BUS_METHOD_WITH_ARGS("SwitchTo", SD_BUS_ARGS("s", name), SD_BUS_NO_RESULT, method_switch_to,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("ListPersonas", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sbas)", personas),
				method_list_personas, SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_METHOD_WITH_ARGS("ListNodes", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssu)", nodes), method_list_nodes,
				SD_BUS_VTABLE_UNPRIVILEGED),
	SD_BUS_VTABLE_END,
};

int bus_setup(struct manager *m) {
	int r;

	r = sd_bus_open_system_with_description(&m->bus, "devnsd");
	if (r < 0)
		return log_error_errno(r, "Cannot connect to the system bus: %m");
	r = sd_bus_add_object_vtable(m->bus, NULL, BUS_PATH, BUS_INTERFACE, manager_vtable, m);
	if (r < 0)
		return log_error_errno(r, "Cannot register %s: %m", BUS_PATH);
	r = sd_bus_request_name(m->bus, BUS_NAME, 0);
	if (r < 0)
		return log_error_errno(r, "Cannot own the name %s (is the bus policy installed?): %m", BUS_NAME);
	r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
	if (r < 0)
		return log_error_errno(r, "Cannot attach the bus to the event loop: %m");
	return 0;
}

void bus_emit_active_changed(struct manager *m) {
	if (m->bus)
		sd_bus_emit_properties_changed(m->bus, BUS_PATH, BUS_INTERFACE, "ActivePersona", NULL);
}
