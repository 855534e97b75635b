/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/queue.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "devnsd-conf.h"
#include "pidns.h"
#include "ratelimit.h"

/* Where persona nodes appear, below /dev. */
#define DEVNS_DEV_DIR "devns"

struct manager;
struct devnum;
struct populate;
struct state;

/*
 * Who owns a persona's nodes, in the host's ids: the container's root user
 * and the groups its nodes get there (InputGroup=, VideoGroup=), mapped
 * through the container's user namespace. Host root (all 0) while the
 * persona is not attached.
 */
struct persona_owner {
	uid_t uid;
	gid_t gid;
	gid_t input_gid;
	gid_t video_gid;
};

struct persona {
	struct manager *manager;
	char name[NAME_MAX_LEN + 1];
	/* The container's pid namespace, once attached; fd -1 before. */
	struct pidns ns;
	struct persona_owner owner;
	/* Groups the nodes get in the container. */
	struct conf_group input_group, video_group;
	bool allow_request_active;
	/* Container uids that may call RequestActive, and how often the persona may. */
	struct conf_uids request_users;
	struct ratelimit request_limit;
	/* Making the nodes in its container, while that runs. */
	struct populate *populate;
	/* Where nodes appear inside the container: node name -> path. */
	struct conf_map maps[CONF_MAX_MAPS];
	size_t n_maps;
	LIST_ENTRY(persona) link;
};

/* A recent refusal, so each is logged once. */
struct denial {
	const struct persona *persona;
	pid_t pid;
};
#define DENIALS_REMEMBERED 64

/* One node a persona has, as ListNodes and devnsctl status show it. */
struct node_desc {
	const char *path;   /* /dev/devns/PERSONA/NAME */
	const char *kind;   /* "input", ... */
	const char *source; /* the hardware it stands for */
	unsigned int opened;
	const char *udev;   /* udev properties, "KEY=VALUE\n" lines; NULL if none */
	const char *share;  /* a host directory its users need at the same path (a socket's); NULL if none */
};

typedef void (*node_desc_fn)(void *userdata, const struct node_desc *nd);

struct device_class;

/*
 * A kind of device shared among personas: input, framebuffer, LEDs. The
 * manager keeps one instance per kind and drives it through these ops, all
 * mandatory.
 */
struct device_class_ops {
	/* Creates persona p's nodes (also for personas created at runtime). */
	int (*add_persona)(struct device_class *dc, struct persona *p);
	/* Removes persona p's nodes; p is not the active persona. */
	void (*remove_persona)(struct device_class *dc, struct persona *p);
	/* Moves the hardware from one persona to the other. */
	void (*switch_to)(struct device_class *dc, struct persona *from, struct persona *to);
	/* Calls fn for each node persona p has. */
	void (*foreach_node)(struct device_class *dc, struct persona *p, node_desc_fn fn, void *userdata);
	/*
	 * p's container changed: p->owner is set, and the persona's nodes,
	 * sockets and views take it. With revoke, p left a container
	 * (attached to another, detached): every handle opened before on
	 * p's nodes, views and sockets stops working (ENODEV), as logind
	 * revokes a session's devices.
	 */
	void (*rebind)(struct device_class *dc, struct persona *p, bool revoke);
	void (*free)(struct device_class *dc);
};

struct device_class {
	const struct device_class_ops *ops;
	struct manager *manager;
	LIST_ENTRY(device_class) link;
};

/* SwitchTo calls that may wait for the screen at once; more are answered at once. */
#define SWITCH_REPLIES_MAX 16

/* RequestActive: a persona may ask this many times at once, then once an interval. */
#define REQUEST_ACTIVE_BURST 3
#define REQUEST_ACTIVE_INTERVAL_USEC (10 * 1000000ull)

struct manager {
	sd_event *event;
	sd_bus *bus;
	LIST_HEAD(, persona) personas;
	unsigned int n_personas;
	struct persona *active;
	LIST_HEAD(, device_class) classes;
	/* Containers being populated (and finished ones whose helper is not reaped yet). */
	LIST_HEAD(, populate) populates;
	unsigned int n_nodes, n_ready;
	bool notified;
	/* devnsd's own pid namespace: processes in it may open any node. */
	struct pidns self_ns;
	/* devnsd's own user namespace: root of the bus is root in it and in self_ns. */
	struct pidns self_userns;
	struct denial denials[DENIALS_REMEMBERED];
	unsigned int n_denials;
	const struct conf *conf;
	struct devnum *devnum;
	/* What a restart takes back (devnsd-state.h). */
	struct state *state;
	/* Members of this group may switch; (gid_t)-1: only root. */
	gid_t switch_gid;
	/* Classes still bringing the last switch to the screen. */
	unsigned int switch_holds;
	/* Refused bus calls are logged at this rate at most. */
	struct ratelimit refusal_log;
	/* SwitchTo calls answered once the switch is on screen. */
	sd_bus_message *switch_replies[SWITCH_REPLIES_MAX];
	unsigned int n_switch_replies;
};

/* Opens the configured devices and creates every persona and node. Logs what fails. */
int manager_new(struct manager **ret, sd_event *event, const struct conf *conf);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m) {
	manager_free(*m);
}

struct persona *manager_find_persona(struct manager *m, const char *name);

/* A new persona with every device class's nodes. -EEXIST, -EINVAL for a bad name, -E2BIG past the limit. */
int manager_create_persona(struct manager *m, const char *name, struct persona **ret);
/* Removes a persona and its nodes. -EBUSY for the active persona. */
int manager_remove_persona(struct manager *m, struct persona *p);

/* Makes p the active persona. */
int manager_switch(struct manager *m, struct persona *p);
/*
 * For classes whose switch completes later (the display, at the flip):
 * hold() in switch_to, shown() once the new persona is on screen.
 */
void manager_switch_hold(struct manager *m);
void manager_switch_shown(struct manager *m);
/* A class is still bringing the last switch to the screen. */
bool manager_switch_showing(const struct manager *m);

/* Calls fn for every node persona p has, across device classes. */
void manager_foreach_node(struct manager *m, struct persona *p, node_desc_fn fn, void *userdata);

/*
 * May process pid (as the daemon's pid namespace numbers it) open persona
 * p's nodes? 0, or -EACCES (logged once per persona and pid). Every node
 * devnsd serves asks this in its open path.
 */
int manager_check_access(struct manager *m, struct persona *p, pid_t pid);

/*
 * The persona process pid belongs to: the nearest persona bound to its pid
 * namespace or an ancestor of it. *ret is NULL for processes in devnsd's
 * own namespace. -ENOENT for processes in no persona, -ESRCH if pid is gone.
 */
int manager_persona_of_pid(struct manager *m, pid_t pid, struct persona **ret);

/*
 * Whose node a routed node (path) gives process pid: the persona of its
 * container, or the active persona for processes on the host. -EACCES,
 * logged, for processes in no persona.
 */
int manager_route(struct manager *m, const char *path, pid_t pid, struct persona **ret);

/* Binds persona p to the pid namespace of process pid. */
int manager_attach(struct manager *m, struct persona *p, pid_t pid);
/* Unbinds p from its container and revokes what was opened there. -ENOENT when p is not attached. */
int manager_detach(struct manager *m, struct persona *p);
/* Gives p->owner to every class's nodes; with revoke, revokes every handle opened before. */
void manager_rebind(struct manager *m, struct persona *p, bool revoke);

/* Stable device numbers for /dev/DEVNAME (0, 0 when none can be kept). */
void manager_node_numbers(struct manager *m, const char *devname, unsigned int *ret_major, unsigned int *ret_minor);

/* Counts a node that will announce itself with manager_node_ready(). */
void manager_node_added(struct manager *m);
/* A node is in /dev. */
void manager_node_ready(struct manager *m);
/* Sends READY=1 once every node is in /dev (at once when there are none). */
void manager_check_ready(struct manager *m);

/* devnsd-input.c: the evdev input class. */
int input_class_new(struct manager *m, const struct conf *conf, struct device_class **ret);

/* devnsd-display.c: the framebuffer class ([Display] only). */
int display_class_new(struct manager *m, const struct conf *conf, struct device_class **ret);

/* devnsd-bus.c */
int bus_setup(struct manager *m);
void bus_emit_active_changed(struct manager *m);
/* Answers the SwitchTo calls that waited for the screen. */
void bus_switch_shown(struct manager *m);
/* Attaches the personas configured with Pid=, or Machine= (through systemd-machined), as Attach does. */
void bus_attach_machines(struct manager *m);
