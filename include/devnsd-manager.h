/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/queue.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "devnsd-conf.h"
#include "evdev-state.h"

struct input_backend;
struct evdev_node;
struct cuse_evdev;
struct input_node;

/* Where persona nodes appear, below /dev. */
#define DEVNS_DEV_DIR "devns"

struct persona {
	struct manager *manager;
	char name[NAME_MAX_LEN + 1];
	LIST_HEAD(, input_node) inputs;
	LIST_ENTRY(persona) link;
};

/* One hardware input device and the nodes every persona has for it. */
struct input_device {
	struct manager *manager;
	struct input_backend *backend;
	sd_event_source *source;
	/* What the hardware reports, folded up: the state a persona resyncs to. */
	struct evdev_state hw;
	struct input_node *active;
	LIST_HEAD(, input_node) nodes;
	LIST_ENTRY(input_device) link;
};

/* A persona's /dev/devns/PERSONA/eventN. */
struct input_node {
	struct input_device *device;
	struct persona *persona;
	struct evdev_node *evdev;
	struct cuse_evdev *cuse;
	char path[64 + NAME_MAX_LEN];
	bool ready;
	LIST_ENTRY(input_node) by_device;
	LIST_ENTRY(input_node) by_persona;
};

struct manager {
	sd_event *event;
	sd_bus *bus;
	LIST_HEAD(, persona) personas;
	unsigned int n_personas;
	struct persona *active;
	LIST_HEAD(, input_device) inputs;
	unsigned int n_nodes, n_ready;
	bool notified;
};

/* Opens the configured devices and creates every persona and node. Logs what fails. */
int manager_new(struct manager **ret, sd_event *event, const struct conf *conf);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m) {
	manager_free(*m);
}

struct persona *manager_find_persona(struct manager *m, const char *name);

/* Makes p the active persona. */
int manager_switch(struct manager *m, struct persona *p);

/* A node is in /dev. */
void manager_node_ready(struct manager *m);
/* Sends READY=1 once every node is in /dev (at once when there are none). */
void manager_check_ready(struct manager *m);

/* devnsd-input.c */
int input_device_new(struct manager *m, struct input_backend *backend, struct input_device **ret);
struct input_device *input_device_free(struct input_device *d);
/* Creates the node persona p has for the device. */
int input_device_add_persona(struct input_device *d, struct persona *p);
/* Moves the hardware from one persona's node to another's. */
void input_device_switch(struct input_device *d, struct persona *from, struct persona *to);
unsigned int input_node_open_count(const struct input_node *n);

/* devnsd-bus.c */
int bus_setup(struct manager *m);
void bus_emit_active_changed(struct manager *m);
