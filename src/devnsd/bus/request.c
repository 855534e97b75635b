/* SPDX-License-Identifier: MIT */
/*
 * What the bus does for a persona whoever asks for it: Attach and
 * AttachMachine (bus.c), Machine= and Pid= (machine.c), RequestActive over
 * the bus (bus.c) and through a persona's endpoint (endpoint.c).
 */
#include <stdlib.h>
#include <sys/pidfd.h>

#include "bus/bus-internal.h"
#include "bus/errors.h"
#include "core/manager.h"
#include "populate/populate.h"
#include "log.h"

uint64_t bus_now_usec(struct manager *m) {
	uint64_t now = 0;

	if (sd_event_now(m->event, CLOCK_MONOTONIC, &now) < 0)
		now = 0;
	return now;
}

/* An Attach in flight: answered (msg set) and logged once its container is populated. */
struct attach_call {
	sd_bus_message *msg;
	pid_t pid;
};

static void log_populated(struct persona *p, pid_t pid, const struct populate_result *res) {
	if (res->shares_dev)
		log_info("persona %s: process %d's container shares devnsd's /dev; no nodes made", p->name, (int)pid);
	else
		log_info("persona %s: %u nodes in process %d's container", p->name, res->made, (int)pid);
	if (res->refused > 0)
		log_warning("persona %s: %u places in process %d's container hold something else (first /%s); "
			    "left alone, no node there",
			    p->name, res->refused, (int)pid, res->first_refused);
	if (res->sysfs_left[0])
		log_notice("persona %s: process %d's container keeps its /sys as it is (%s); libinput's udev backend "
			   "there will not take the persona's input nodes",
			   p->name, (int)pid, res->sysfs_left);
	if (res->input_group_missing)
		log_notice("persona %s: the container has no group '%s'; input nodes get its root group", p->name,
			   p->input_group.name);
	if (res->video_group_missing)
		log_notice("persona %s: the container has no group '%s'; fb0 gets its root group", p->name,
			   p->video_group.name);
	if (res->input_group_foreign)
		log_warning("persona %s: the container, which shares the host's ids, names group '%s' at another gid "
			    "than the host does; input nodes get %s", p->name, p->input_group.name,
			    p->input_group.gid >= 0 ? "the configured gid" : "its root group");
	if (res->video_group_foreign)
		log_warning("persona %s: the container, which shares the host's ids, names group '%s' at another gid "
			    "than the host does; fb0 and its socket get %s", p->name, p->video_group.name,
			    p->video_group.gid >= 0 ? "the configured gid" : "its root group");
}

static void on_attached(struct persona *p, int r, const struct populate_result *res, void *userdata) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	struct attach_call *call = userdata;

	if (r >= 0)
		log_populated(p, call->pid, res);
	else {
		bus_error_set(&error, r, "Cannot make the nodes in process %d's container (%s): %m", (int)call->pid,
			      res->failed);
		log_warning("persona %s: %s", p->name, error.message);
	}
	if (call->msg) {
		if (r >= 0)
			r = sd_bus_reply_method_return(call->msg, "u", (uint32_t)res->made);
		else
			r = sd_bus_reply_method_error(call->msg, &error);
		if (r < 0)
			log_debug_errno(r, "Cannot answer Attach: %m");
		sd_bus_message_unref(call->msg);
	}
	free(call);
}

/* msg, if any, is answered with the number of nodes made. */
int bus_attach(struct bus *b, struct persona *p, int pidfd, sd_bus_message *msg, sd_bus_error *error) {
	struct attach_call *call;
	pid_t pid = 0;
	int r;

	r = pidfd_get_pid(pidfd, &pid);
	if (r < 0)
		return bus_error_set(error, -BUS_E_NO_PROCESS, "The process to attach has exited");
	call = calloc(1, sizeof(*call));
	if (!call)
		return -ENOMEM;
	*call = (struct attach_call){ .msg = sd_bus_message_ref(msg), .pid = pid };
	r = manager_attach_container(b->manager, p, pidfd, on_attached, call);
	if (r < 0) {
		sd_bus_message_unref(call->msg);
		free(call);
	}
	switch (r) {
	case -ESRCH:
		return bus_error_set(error, -BUS_E_NO_PROCESS, "No process %d", (int)pid);
	case -EINVAL:
		return bus_error_set(error, -BUS_E_NOT_IN_CONTAINER,
				     "Process %d is not in a container: it shares devnsd's pid namespace", (int)pid);
	case -EBUSY:
		return bus_error_set(error, -BUS_E_CONTAINER_TAKEN, "Process %d's container is bound to another persona",
				     (int)pid);
	case -EPERM:
		return bus_error_set(error, -BUS_E_NO_ROOT_USER, "Process %d's user namespace maps no root user",
				     (int)pid);
	}
	if (r < 0)
		return bus_error_set(error, r, "Cannot bind to process %d: %m", (int)pid);
	log_info("persona %s bound to the pid namespace of process %d", p->name, (int)pid);
	return 1;
}

int bus_attach_pid(struct bus *b, struct persona *p, pid_t pid, sd_bus_message *msg, sd_bus_error *error) {
	_cleanup_(closep) int pidfd = pidfd_open(pid, 0);

	if (pidfd < 0)
		return bus_error_set(error, -BUS_E_NO_PROCESS, "No process %d", (int)pid);
	return bus_attach(b, p, pidfd, msg, error);
}

/* The uids RequestActiveUsers= names, for messages. */
static void format_uids(const struct conf_uids *u, char *buf, size_t size) {
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < u->n && len < size; i++) {
		if (u->ranges[i].first == u->ranges[i].last)
			len += (size_t)snprintf(buf + len, size - len, "%s%u", i ? " " : "", u->ranges[i].first);
		else
			len += (size_t)snprintf(buf + len, size - len, "%s%u-%u", i ? " " : "", u->ranges[i].first,
						u->ranges[i].last);
	}
	if (u->n == 0)
		snprintf(buf, size, "none");
}

int bus_check_request_uid(struct bus *b, struct persona *p, uint32_t uid, uid_t host_uid, sd_bus_error *error) {
	char uids[128];

	if (conf_uids_contain(&p->request_users, uid))
		return 0;
	format_uids(&p->request_users, uids, sizeof(uids));
	if (ratelimit_take(&b->refusal_log, bus_now_usec(b->manager)))
		log_notice("persona %s: RequestActive refused to uid %u (host uid %u): RequestActiveUsers=%s", p->name,
			   uid, (unsigned int)host_uid, uids);
	return bus_error_set(error, -EACCES, "Persona %s takes RequestActive from its uids %s (RequestActiveUsers=)",
			     p->name, uids);
}


int bus_request_active(struct bus *b, struct persona *p, bool *ret_granted, sd_bus_error *error) {
	struct manager *m = b->manager;
	bool granted;
	int r;

	if (!ratelimit_take(&p->request_limit, bus_now_usec(m)))
		return bus_error_set(error, -BUS_E_TOO_OFTEN,
				     "Persona %s asks too often: at most %d requests at once, then one every %llu s", p->name,
				     REQUEST_ACTIVE_BURST, REQUEST_ACTIVE_INTERVAL_USEC / 1000000ull);
	granted = p == m->active || (p->allow_request_active && !m->attention_held);
	log_info("persona %s asks to come forward: %s", p->name,
		 granted ? "granted" :
		 p->allow_request_active ? "refused: the secure attention key holds the screen until the user switches" :
					   "refused by its policy");
	r = sd_bus_emit_signal(b->bus, "/org/devns1", "org.devns1.Manager", "PersonaActivationRequested", "sb",
			       p->name, granted);
	if (r < 0)
		log_warning_errno(r, "Cannot send PersonaActivationRequested: %m");
	/* Not the user's switch: the persona gets input once every key is up and its frame is shown. */
	if (granted)
		manager_switch_by(m, p, SWITCH_BY_PERSONA, NULL, NULL);
	*ret_granted = granted;
	return 0;
}
