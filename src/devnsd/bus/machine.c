/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>

#include "bus/bus-internal.h"
#include "bus/errors.h"
#include "core/manager.h"
#include "log.h"
#include "pidns.h"
#include "util.h"

#define MACHINE1_NAME "org.freedesktop.machine1"
#define MACHINE1_PATH "/org/freedesktop/machine1"
#define MACHINE1_MANAGER "org.freedesktop.machine1.Manager"
#define MACHINE1_MACHINE "org.freedesktop.machine1.Machine"

/*
 * Machine= of one persona, followed while devnsd runs. A MachineNew signal
 * naming the machine is taken as a hint only: anyone may send devnsd a
 * signal, so the leader is always asked of systemd-machined itself, by the
 * machine's name. One lookup at a time; a hint that comes meanwhile starts
 * one more after it.
 *
 * systemd-machined names the leader by its pid. devnsd opens a pidfd on
 * that pid, then asks for the leader again: the same pid while the pidfd's
 * process lives means the pidfd is the leader's (a pid is not reused while
 * its process lives), and from then on the attach works from that pidfd
 * alone.
 */
struct machine_watch {
	struct bus *bus;
	const char *persona;
	const char *machine;
	sd_bus_slot *lookup;
	bool again;
	/* The leader's pid and pidfd, between the two questions. */
	uint32_t leader;
	int pidfd;
	char *path;
};

static int leader_pid(sd_bus *bus, const char *path, const char *machine, uint32_t *ret, sd_bus_error *error) {
	int r;

	r = sd_bus_get_property_trivial(bus, MACHINE1_NAME, path, MACHINE1_MACHINE, "Leader", error, 'u', ret);
	if (r < 0)
		return r;
	if (*ret == 0 || *ret > INT32_MAX)
		return bus_error_set(error, -BUS_E_NO_LEADER, "Machine %s has no valid leader (%u)", machine, *ret);
	return 0;
}

int bus_machine_leader(sd_bus *bus, const char *machine, int *ret_pidfd, sd_bus_error *error) {
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(closep) int pidfd = -1;
	uint32_t leader, again;
	const char *path;
	int r;

	r = sd_bus_call_method(bus, MACHINE1_NAME, MACHINE1_PATH, MACHINE1_MANAGER, "GetMachine", error, &reply, "s",
			       machine);
	if (r < 0)
		return r;
	r = sd_bus_message_read(reply, "o", &path);
	if (r < 0)
		return r;
	r = leader_pid(bus, path, machine, &leader, error);
	if (r < 0)
		return r;
	pidfd = pidfd_open((pid_t)leader, 0);
	if (pidfd < 0)
		return bus_error_set(error, -BUS_E_NO_LEADER, "Machine %s's leader %u has exited", machine, leader);
	r = leader_pid(bus, path, machine, &again, error);
	if (r < 0)
		return r;
	if (again != leader || pidfd_exited(pidfd))
		return bus_error_set(error, -BUS_E_NO_LEADER, "Machine %s changed its leader meanwhile", machine);
	*ret_pidfd = take_fd(&pidfd);
	return 0;
}

static void watch_lookup(struct machine_watch *w);

static void watch_done(struct machine_watch *w) {
	w->lookup = sd_bus_slot_unref(w->lookup);
	closep(&w->pidfd);
	w->path = mfree(w->path);
	if (w->again) {
		w->again = false;
		watch_lookup(w);
	}
}

/* Whether p is bound to the pid namespace of the process behind pidfd already. */
static bool bound_to(struct persona *p, int pidfd) {
	struct pidns ns = PIDNS_NULL;
	bool same;

	if (pidns_of_pidfd(pidfd, &ns) < 0)
		return false;
	same = pidns_equal(&p->ns, &ns);
	pidns_close(&ns);
	return same;
}

/* The leader asked for again: still the pid the pidfd was opened on, and that process alive. */
static int on_leader_again(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	struct machine_watch *w = userdata;
	struct manager *m = w->bus->manager;
	struct persona *p;
	uint32_t leader = 0;
	int r;

	(void)ret_error;
	if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "v", "u", &leader) < 0 ||
	    leader != w->leader || pidfd_exited(w->pidfd))
		goto done;
	p = manager_find_persona(m, w->persona);
	/* Removed meanwhile, or the machine announced again while bound already. */
	if (!p || bound_to(p, w->pidfd))
		goto done;
	log_info("[Persona %s] Machine=%s started, leader %u: attaching it", w->persona, w->machine, leader);
	r = bus_attach(w->bus, p, w->pidfd, NULL, &error);
	if (r < 0)
		log_warning("[Persona %s] Machine=%s: not attached: %s", w->persona, w->machine,
			    error.message ?: strerror(-r));
done:
	watch_done(w);
	return 0;
}

static int on_leader(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	struct machine_watch *w = userdata;
	int r;

	(void)ret_error;
	if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "v", "u", &w->leader) < 0 ||
	    w->leader == 0 || w->leader > INT32_MAX) {
		watch_done(w);
		return 0;
	}
	w->pidfd = pidfd_open((pid_t)w->leader, 0);
	if (w->pidfd < 0) {
		watch_done(w);
		return 0;
	}
	w->lookup = sd_bus_slot_unref(w->lookup);
	r = sd_bus_call_method_async(w->bus->bus, &w->lookup, MACHINE1_NAME, w->path, "org.freedesktop.DBus.Properties",
				     "Get", on_leader_again, w, "ss", MACHINE1_MACHINE, "Leader");
	if (r < 0) {
		log_warning_errno(r, "[Persona %s] Machine=%s: cannot ask for its leader: %m", w->persona, w->machine);
		watch_done(w);
	}
	return 0;
}

static int on_machine_path(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
	struct machine_watch *w = userdata;
	const char *path;
	int r;

	(void)ret_error;
	/* No such machine: the hint was wrong, or the machine is gone again. */
	if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "o", &path) < 0) {
		watch_done(w);
		return 0;
	}
	w->lookup = sd_bus_slot_unref(w->lookup);
	w->path = strdup(path);
	if (!w->path) {
		watch_done(w);
		return 0;
	}
	r = sd_bus_call_method_async(w->bus->bus, &w->lookup, MACHINE1_NAME, path, "org.freedesktop.DBus.Properties",
				     "Get", on_leader, w, "ss", MACHINE1_MACHINE, "Leader");
	if (r < 0) {
		log_warning_errno(r, "[Persona %s] Machine=%s: cannot ask for its leader: %m", w->persona, w->machine);
		watch_done(w);
	}
	return 0;
}

static void watch_lookup(struct machine_watch *w) {
	int r;

	if (w->lookup) {
		w->again = true;
		return;
	}
	r = sd_bus_call_method_async(w->bus->bus, &w->lookup, MACHINE1_NAME, MACHINE1_PATH, MACHINE1_MANAGER,
				     "GetMachine", on_machine_path, w, "s", w->machine);
	if (r < 0)
		log_warning_errno(r, "[Persona %s] Machine=%s: cannot look it up: %m", w->persona, w->machine);
}

static int on_machine_new(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
	struct bus *b = userdata;
	const char *name;

	(void)ret_error;
	if (sd_bus_message_read(msg, "s", &name) < 0)
		return 0;
	for (size_t i = 0; i < b->n_machine_watches; i++)
		if (streq(b->machine_watches[i].machine, name))
			watch_lookup(&b->machine_watches[i]);
	return 0;
}

/* Follows MachineNew for the personas with Machine=. Before the first lookups: a machine that registers between them is announced. */
static int follow_machines(struct bus *b) {
	const struct conf *conf = b->manager->conf;
	size_t n = 0;
	int r;

	for (size_t i = 0; i < conf->n_personas; i++)
		if (conf->personas[i].machine)
			n++;
	if (n == 0 || b->machine_watches)
		return 0;
	b->machine_watches = calloc(n, sizeof(*b->machine_watches));
	if (!b->machine_watches)
		return -ENOMEM;
	for (size_t i = 0; i < conf->n_personas; i++)
		if (conf->personas[i].machine)
			b->machine_watches[b->n_machine_watches++] = (struct machine_watch){
				.bus = b,
				.persona = conf->personas[i].name,
				.machine = conf->personas[i].machine,
				.pidfd = -1,
			};
	r = sd_bus_match_signal_async(b->bus, &b->machine_new, MACHINE1_NAME, MACHINE1_PATH, MACHINE1_MANAGER,
				      "MachineNew", on_machine_new, NULL, b);
	return r < 0 ? r : 0;
}

void bus_attach_machines(struct bus *b) {
	struct manager *m = b->manager;
	int r;

	r = follow_machines(b);
	if (r < 0)
		log_warning_errno(r, "Cannot follow systemd-machined's machines: Machine= attaches only those running now: %m");
	for (size_t i = 0; i < m->conf->n_personas; i++) {
		_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
		const struct conf_persona *cp = &m->conf->personas[i];
		struct persona *p = manager_find_persona(m, cp->name);
		_cleanup_(closep) int leader = -1;

		if (!p)
			continue;
		/* The process Pid= named when devnsd started, by the pidfd opened then: its number may be another's now. */
		if (p->conf_pidfd >= 0) {
			r = bus_attach(b, p, p->conf_pidfd, NULL, &error);
			closep(&p->conf_pidfd);
			if (r < 0)
				log_warning("[Persona %s] Pid=%d: not attached: %s", cp->name, (int)cp->pid,
					    error.message ?: strerror(-r));
			sd_bus_error_free(&error);
		}
		if (!cp->machine)
			continue;
		r = bus_machine_leader(b->bus, cp->machine, &leader, &error);
		if (r >= 0)
			r = bus_attach(b, p, leader, NULL, &error);
		if (r < 0 && b->machine_new)
			log_info("[Persona %s] Machine=%s: not attached now (%s); attached when it starts", cp->name,
				 cp->machine, error.message ?: strerror(-r));
		else if (r < 0)
			log_warning("[Persona %s] Machine=%s: not attached: %s", cp->name, cp->machine,
				    error.message ?: strerror(-r));
	}
}

void bus_machines_free(struct bus *b) {
	b->machine_new = sd_bus_slot_unref(b->machine_new);
	for (size_t i = 0; i < b->n_machine_watches; i++) {
		sd_bus_slot_unref(b->machine_watches[i].lookup);
		closep(&b->machine_watches[i].pidfd);
		free(b->machine_watches[i].path);
	}
	free(b->machine_watches);
	b->machine_watches = NULL;
	b->n_machine_watches = 0;
}
