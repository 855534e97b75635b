/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What the bus's files share. They call one way: bus.c (the Manager
 * interface) calls endpoint.c and machine.c, which follow the personas'
 * endpoints and machines; all three call request.c (attaching, requests to
 * come forward); below them all are peer.c (the callers' records) and
 * errors.c.
 */

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "bus/bus.h"
#include "pidns.h"

/* Groups of a caller looked at; more are not considered. */
#define BUS_PEER_MAX_GROUPS 256
/* Connections whose credentials are kept between their calls; the least recently used goes first. */
#define BUS_PEER_CACHE_SIZE 32
/* Unique names kept with when devnsd heard of them (bus_peer_cache_saw()). */
#define BUS_PEER_SEEN 64

/*
 * The process that sent a bus message. The user id and groups are what the
 * kernel told the bus when the process connected; the pid is pinned by a
 * pidfd, so every /proc/PID lookup made with it can be confirmed afterwards
 * with bus_peer_confirm().
 */
struct bus_peer {
	const char *sender; /* the message's unique name, valid while the message is */
	pid_t pid;          /* as devnsd's pid namespace numbers it */
	uid_t euid;
	int pidfd;
	/*
	 * No need to ask the bus again whether the connection reports this
	 * pid: the bus handed over its own pidfd (ProcessFD), or an earlier
	 * call of this connection was confirmed with this pidfd. (Without
	 * ProcessFD, that confirmation shows only that the pidfd's process had
	 * the pid the bus reported: see bus_peer_confirm().)
	 */
	bool pinned;
	/*
	 * pidfd is the bus's own (ProcessFD), taken when the connection was
	 * made: the process it names is the one that connected, whatever its
	 * number is now. Without it, the pid is a number that another process
	 * may have taken since, and serves only to refuse.
	 */
	bool from_bus;
	/* The bus reports no groups: they are read from /proc/PID/status at every call. */
	bool gids_from_proc;
	gid_t gids[BUS_PEER_MAX_GROUPS];
	size_t n_gids;
};

#define BUS_PEER_NULL ((struct bus_peer){ .pidfd = -1 })

/*
 * What the bus reported for connections whose calls passed
 * bus_peer_confirm() before (any call, listings included), with the pidfd
 * that pinned each caller's process. The bus never gives a unique name
 * twice and records a connection's credentials once, when it connects, so
 * a connection's later calls need no question to the bus: the pidfd must
 * still be alive, and everything read from /proc (namespaces, persona,
 * groups the bus does not report) is read anew. An entry whose process is
 * gone is dropped, and the connection is asked about anew; an entry whose
 * connection left the bus is dropped when the bus says so.
 */
struct bus_peer_cache;

int bus_peer_cache_new(struct bus_peer_cache **ret);
struct bus_peer_cache *bus_peer_cache_free(struct bus_peer_cache *c);
/* The connection sender left the bus: its entry goes. */
void bus_peer_cache_forget(struct bus_peer_cache *c, const char *sender);
/*
 * The bus gave unique name name (":1.N") at now_usec (CLOCK_BOOTTIME) or
 * before: a connection of that name or an earlier one was made by then, and
 * a process that started later, whose pid the bus reports for it, did not
 * make it (bus_peer_get() gives -ESTALE). The newest BUS_PEER_SEEN names
 * are kept.
 */
void bus_peer_cache_saw(struct bus_peer_cache *c, const char *name, uint64_t now_usec);

/*
 * Tells who sent msg and pins that process: from the cache for a
 * connection confirmed before, otherwise from the bus, with its own pidfd
 * (ProcessFD) when it gives one, or with pidfd_open() of the pid it
 * reports. cache may be NULL. -ESRCH when the process is gone; -ESTALE
 * when, without ProcessFD, the process the bus's pid names started after
 * the connection was made (bus_peer_cache_saw()).
 */
int bus_peer_get(sd_bus_message *msg, struct bus_peer_cache *cache, struct bus_peer *ret);
void bus_peer_done(struct bus_peer *peer);

/*
 * Confirms that what was read from /proc/PID since bus_peer_get() was the
 * caller's: the pinned process still has its pid (it may have exited but
 * not been reaped), and, unless peer->pinned, that the sender's connection
 * still exists and still reports that pid. Then the peer is kept in cache
 * (may be NULL) for the connection's later calls; a peer whose process is
 * gone leaves it. -ESRCH otherwise.
 */
int bus_peer_confirm(sd_bus_message *msg, struct bus_peer_cache *cache, const struct bus_peer *peer);

/* The peer's /proc/PID directory, as a directory fd. */
int bus_peer_proc(const struct bus_peer *peer, int *ret_fd);

/* A namespace of the process whose /proc/PID is proc_fd ("user", "pid"...), held open. */
int ns_open_at(int proc_fd, const char *which, struct pidns *ret);

/* Whether the peer's user and pid namespaces are these: 1, 0, or a negative errno. */
int bus_peer_in_namespaces(const struct bus_peer *peer, const struct pidns *userns, const struct pidns *pidns);

/* Whether gid is among the peer's groups. */
bool bus_peer_in_group(const struct bus_peer *peer, gid_t gid);

/* machine.c: forgets the machines followed (bus_free()). */
void bus_machines_free(struct bus *b);
/*
 * A pidfd of the leader of a systemd-machined machine: the leader's pid,
 * asked of systemd-machined, opened, and asked for again to confirm that
 * the pidfd's process is the leader.
 */
int bus_machine_leader(sd_bus *bus, const char *machine, int *ret_pidfd, sd_bus_error *error);

/*
 * request.c: what the bus does for a persona, whoever asks for it (bus.c,
 * machine.c, endpoint.c).
 *
 * Binds p to the container of the process behind pidfd and makes its nodes
 * there, working from the pidfd alone; msg (if any) is answered once that
 * is done. The caller keeps pidfd.
 */
int bus_attach(struct bus *b, struct persona *p, int pidfd, sd_bus_message *msg, sd_bus_error *error);
/* bus_attach() of process pid: its pidfd opened once, the one lookup by number. */
int bus_attach_pid(struct bus *b, struct persona *p, pid_t pid, sd_bus_message *msg, sd_bus_error *error);

/* May uid (as p's container numbers it; host_uid on the host) ask for p? RequestActiveUsers= says. Logs a refusal. */
int bus_check_request_uid(struct bus *b, struct persona *p, uint32_t uid, uid_t host_uid, sd_bus_error *error);
/*
 * Persona p asks to come forward, from a caller already checked: within
 * its rate, granted by its policy (the switch starts), told on the bus and
 * logged. 0 with *ret_granted, or a negative errno with error set.
 */
int bus_request_active(struct bus *b, struct persona *p, bool *ret_granted, sd_bus_error *error);

/* The time sd-event last woke at, for rate limits. */
uint64_t bus_now_usec(struct manager *m);

/*
 * endpoint.c: every persona's endpoint socket (devns-endpoint.h), following
 * the personas, in $DEVNS_ENDPOINT_DIR or /run/devnsd/endpoints. Logs what
 * fails; without it devnsd runs on, its personas reached by the bus alone.
 */
struct bus_endpoints;
int bus_endpoints_new(struct bus *b, struct bus_endpoints **ret);
struct bus_endpoints *bus_endpoints_free(struct bus_endpoints *e);
