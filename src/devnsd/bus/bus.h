/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-bus.h>

#include "core/manager.h"
#include "listener.h"
#include "pidns.h"
#include "ratelimit.h"

struct bus_peer_cache;
struct display_class;
struct leds_class;

/*
 * bus/bus.c: org.devns1 on the system bus. It drives the manager
 * through its functions and hears of it through the manager's events; the
 * classes whose state it shows (NULL when devnsd runs none) are given to it.
 */
struct bus {
	struct manager *manager;
	struct display_class *display;
	struct leds_class *leds;
	sd_bus *bus;
	/* devnsd's own user namespace: root of the bus is root in it and in the manager's self_ns. */
	struct pidns self_userns;
	/* Members of this group may switch; (gid_t)-1: only root. */
	gid_t switch_gid;
	/* Refused calls are logged at this rate at most. */
	struct ratelimit refusal_log;
	/* Callers the bus told devnsd about, for their next calls. */
	struct bus_peer_cache *peers;
	struct listener active_changed;
	/* CreatePersona calls waiting for their persona's nodes (bus.c), and what ends the wait. */
	LIST_HEAD(, create_wait) create_waits;
	struct listener persona_ready, persona_removed;
	/* Machine=: the personas whose machines are followed, and the match on systemd-machined's MachineNew. */
	struct machine_watch *machine_watches;
	size_t n_machine_watches;
	sd_bus_slot *machine_new;
	/* Every persona's endpoint socket (bus/endpoint.c). */
	struct bus_endpoints *endpoints;
};

/* Connects to the system bus, takes org.devns1 and serves it on m's event loop. Logs what fails. */
int bus_new(struct bus **ret, struct manager *m, struct display_class *display, struct leds_class *leds);
/* Leaves the bus. SwitchTo calls still waiting are answered when their switch completes, if the bus allows. */
struct bus *bus_free(struct bus *b);
static inline void bus_freep(struct bus **b) {
	bus_free(*b);
}

/*
 * Attaches the personas configured with Pid=, or Machine= (through
 * systemd-machined), as Attach does; from then on a Machine= that starts,
 * or starts again, is attached when systemd-machined announces it.
 */
void bus_attach_machines(struct bus *b);
