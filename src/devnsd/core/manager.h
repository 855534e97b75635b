/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/queue.h>
#include <systemd/sd-event.h>

#include "conf/conf.h"
#include "core/switch.h"
#include "listener.h"
#include "pidns.h"
#include "ratelimit.h"

/* Where persona nodes appear, below /dev. */
#define DEVNS_DEV_DIR "devns"

struct manager;
struct devnum;
struct state;
struct populate;
struct zygote;

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
	/* Never the same for two personas of a run (from 1): whose share of a routed node a handle takes. */
	uint32_t serial;
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
	/* The process it was attached through (pidfd, -1 before), for later changes to its container's /dev. */
	int container_pidfd;
	pid_t container_pid;
	/*
	 * Pid='s process, opened once at start (manager_new()), until the
	 * configuration's attach takes it (bus_attach_machines()): a pid
	 * looked up again could name another process by then. -1 otherwise.
	 */
	int conf_pidfd;
	/* Said once to the log for its container (populate.c): a mount not looked into, a full job table. */
	bool populate_told_mount, populate_told_full;
	/*
	 * The directory of its endpoint socket (devns-endpoint.h) in devnsd's
	 * mount namespace, "" while it has none: populate binds it at
	 * DEVNS_ENDPOINT_DIR in the container. The bus's endpoint sets it, and
	 * makes a new one whenever the persona is attached.
	 */
	char endpoint_dir[128];
	/* Its nodes made and not yet in /dev (manager_node_added() and manager_node_ready()). */
	unsigned int nodes_waited;
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
 * A kind of device shared among personas: input, framebuffer, LEDs. Each
 * class has its own header and constructor; devnsd.c creates the classes
 * and registers them with manager_add_class(). The manager drives them only
 * through these ops, all mandatory.
 */
struct device_class_ops {
	/* Creates persona p's nodes (also for personas created at runtime). Logs what fails. */
	int (*add_persona)(struct device_class *dc, struct persona *p);
	/* Removes persona p's nodes; p is not the active persona. */
	void (*remove_persona)(struct device_class *dc, struct persona *p);
	/*
	 * Moves the hardware from one persona to the other, as part of the
	 * switch op. A class that finishes later (the display, at the flip)
	 * takes a reference on op and releases it once done.
	 */
	void (*switch_to)(struct device_class *dc, struct persona *from, struct persona *to, struct switch_op *op);
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
	/* Set by manager_add_class(): the manager's personas get nodes of what the class adds later. */
	bool registered;
	LIST_ENTRY(device_class) link;
};

/* RequestActive: a persona may ask this many times at once, then once an interval. */
#define REQUEST_ACTIVE_BURST 3
#define REQUEST_ACTIVE_INTERVAL_USEC (10 * 1000000ull)

struct loop;

struct manager {
	sd_event *event;
	/* event, with the input path's descriptors polled beside it (loop.h): what devnsd runs. */
	struct loop *loop;
	LIST_HEAD(, persona) personas;
	unsigned int n_personas;
	uint32_t last_serial;
	struct persona *active;
	/* Newest first: a class may use the classes registered before it, which outlive it. */
	LIST_HEAD(, device_class) classes;
	/* Containers being populated (and finished ones whose helper is not reaped yet). */
	LIST_HEAD(, populate) populates;
	/* populate/populate.c's listeners to events.leaving and events.freeing, added at its first start. */
	struct listener populate_leaving, populate_freeing;
	unsigned int n_nodes, n_ready;
	bool notified;
	/* devnsd's own pid namespace: processes in it may open any node. */
	struct pidns self_ns;
	struct denial denials[DENIALS_REMEMBERED];
	unsigned int n_denials;
	const struct conf *conf;
	struct devnum *devnum;
	/* The process that forks populate helpers (populate/populate.h); NULL unless devnsd.c starts it. */
	struct zygote *zygote;
	/* What a restart takes back (restart/state.h); NULL unless devnsd.c sets it up. */
	struct state *state;
	/* The switch under way: set until every class has it on screen. */
	struct switch_op *switch_op;
	/* The secure attention chord brought its persona forward: only the user switches, until the user does. */
	bool attention_held;
	struct listener switch_done;
	/*
	 * What the layers above hear of (bus/bus.c, for one). Data:
	 * active_changed, the persona now active, at once when a switch
	 * starts; switch_done, the struct switch_op, once it completes;
	 * persona_added and persona_removed, the persona (removed: before it
	 * is freed); persona_ready, the persona, once the last of its nodes
	 * then waited for is in /dev; display_power, a const bool, true when the display has
	 * just been powered down (a blanked active persona), false when it
	 * has been powered up again.
	 *
	 * For the layers that keep what the manager does (populate, restart):
	 * attached, a struct persona_attached, once a persona is bound to a
	 * container's pid namespace; leaving, the persona, when it leaves its
	 * container or is removed (before its nodes go); detached, the
	 * persona, once it is unbound; freeing, the manager, as
	 * manager_free() starts; classes_freed, the manager, in
	 * manager_free() once the classes and personas are gone.
	 */
	struct {
		struct signal_list active_changed;
		struct signal_list switch_done;
		struct signal_list persona_added;
		struct signal_list persona_removed;
		struct signal_list persona_ready;
		struct signal_list display_power;
		struct signal_list attached;
		struct signal_list leaving;
		struct signal_list detached;
		struct signal_list freeing;
		struct signal_list classes_freed;
	} events;
};

/* The data of events.attached: p is bound to the pid namespace of process pidfd (pid, for messages). */
struct persona_attached {
	struct persona *persona;
	pid_t pid;
	int pidfd;
};

/*
 * Creates the configured personas, with no device class yet: devnsd.c
 * registers them with manager_add_class(). Logs what fails.
 */
int manager_new(struct manager **ret, sd_event *event, const struct conf *conf);
/*
 * Registers a class (taken over, also on failure) and creates its nodes
 * for every persona. Logs nothing; the class's add_persona logs.
 */
int manager_add_class(struct manager *m, struct device_class *dc);
struct manager *manager_free(struct manager *m);
static inline void manager_freep(struct manager **m) {
	manager_free(*m);
}

struct persona *manager_find_persona(struct manager *m, const char *name);

/* A new persona with every device class's nodes. -EEXIST, -EINVAL for a bad name, -E2BIG past the limit. */
int manager_create_persona(struct manager *m, const char *name, struct persona **ret);
/* Removes a persona and its nodes. -EBUSY for the active persona. */
int manager_remove_persona(struct manager *m, struct persona *p);

/*
 * Makes p the active persona. done (may be NULL) runs with userdata once
 * every class has finished the switch (the display: the flip showing it),
 * perhaps before this returns.
 *
 * A switch asked for while another is under way joins it: the classes move
 * on to p at once, the latest target wins, and every caller waiting for
 * the switch is told, when the last one is on screen, which persona is
 * shown. At most SWITCH_WAITERS_MAX callers wait; past that, done runs at
 * once. Returns 1 if p was not active, 0 if it was, or a negative errno.
 */
int manager_switch(struct manager *m, struct persona *p, switch_done_fn done, void *userdata);

/* Who asked for a switch. */
enum switch_origin {
	/* Root or a SwitchGroup= member over D-Bus, a SwitchKeys= chord: manager_switch(). */
	SWITCH_BY_USER,
	/* A persona's RequestActive: input waits (switch_op.input_held). */
	SWITCH_BY_PERSONA,
	/* The secure attention chord: as the user's, and personas' requests wait for the user's next switch. */
	SWITCH_BY_ATTENTION,
};

/*
 * manager_switch(), for a switch origin asked for. SWITCH_BY_PERSONA
 * switches hold input back (see switch_op.input_held) and are refused
 * (-EPERM) while the secure attention chord holds the screen
 * (m->attention_held).
 */
int manager_switch_by(struct manager *m, struct persona *p, enum switch_origin origin, switch_done_fn done,
		      void *userdata);

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
 * logged, for processes in no persona. ret_owner gets whose share of the
 * routed node the handle takes: the container's persona's serial, or
 * ROUTED_OWNER_HOST.
 */
#define ROUTED_OWNER_HOST UINT32_MAX
/* A routed node's handles and requests are split among this many owners: every persona, and the host. */
#define ROUTED_SHARES (CONF_MAX_PERSONAS + 1)
int manager_route(struct manager *m, const char *path, pid_t pid, struct persona **ret, uint32_t *ret_owner);

/* Binds persona p to the pid namespace of the process behind pidfd (looked up through it alone). */
int manager_attach(struct manager *m, struct persona *p, int pidfd);
/* Unbinds p from its container and revokes what was opened there. -ENOENT when p is not attached. */
int manager_detach(struct manager *m, struct persona *p);
/* Gives p->owner to every class's nodes; with revoke, revokes every handle opened before. */
void manager_rebind(struct manager *m, struct persona *p, bool revoke);

/* Stable device numbers for /dev/DEVNAME (0, 0 when none can be kept). */
void manager_node_numbers(struct manager *m, const char *devname, unsigned int *ret_major, unsigned int *ret_minor);
/*
 * At start: numbers_begin once every persona is there (the configuration's
 * and the restored ones) and before any node asks for its numbers, so that
 * the nodes of an earlier run's personas that are gone may give a new card
 * their minor; numbers_settled once every node has asked, so that the
 * earlier run's others may too.
 */
void manager_numbers_begin(struct manager *m);
void manager_numbers_settled(struct manager *m);

/* Counts a node of persona p (NULL: a routed node) that will announce itself with manager_node_ready(). */
void manager_node_added(struct manager *m, struct persona *p);
/* A node of persona p (NULL: a routed node) is in /dev; the last one p waited for: events.persona_ready. */
void manager_node_ready(struct manager *m, struct persona *p);
/* Whether every node persona p has is in /dev. */
bool manager_persona_ready(const struct persona *p);
/* Sends READY=1 once every node is in /dev (at once when there are none). */
void manager_check_ready(struct manager *m);
