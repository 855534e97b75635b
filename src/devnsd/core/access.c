/* SPDX-License-Identifier: MIT */
/*
 * Who may open a persona's nodes. A persona is bound to its container's pid
 * namespace; a process may open the persona's nodes when it lives in that
 * namespace or in one nested inside it, or when it is root in devnsd's own
 * namespace (other host users get nothing, whatever a node's mode says).
 *
 * The opener is looked up from the pid in its request, through
 * /proc/PID/ns/pid. The pid cannot be stale: once devnsd has read a request,
 * the kernel does not let the requesting task finish (not even on SIGKILL)
 * until devnsd answers, so its pid stays allocated to it for the whole check.
 * A process whose request was never read is dropped from the queue by the
 * kernel, and its pid never reaches devnsd. And the namespace a persona is
 * bound to is held open by devnsd, so no other namespace can take its
 * identity.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/manager.h"
#include "log.h"

static bool same_ns(void *userdata, const struct pidns *ns) {
	return pidns_equal(userdata, ns);
}

static void log_denied(struct manager *m, const struct persona *p, pid_t pid) {
	for (unsigned int i = 0; i < MIN(m->n_denials, DENIALS_REMEMBERED); i++)
		if (m->denials[i].persona == p && m->denials[i].pid == pid)
			return;
	m->denials[m->n_denials++ % DENIALS_REMEMBERED] = (struct denial){ .persona = p, .pid = pid };
	log_notice("refused pid %d access to persona %s's nodes: it is not in that persona's container, nor root on "
		   "the host", (int)pid, p->name);
}

/* Whether process pid acts on files as the host's root (its filesystem uid, as the host numbers it). */
static bool acts_as_root(pid_t pid) {
	char path[64], buf[1024];
	_cleanup_(closep) int fd = -1;
	unsigned int ruid, euid, suid, fsuid;
	const char *line;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	line = strstr(buf, "\nUid:");
	return line && sscanf(line, "\nUid: %u %u %u %u", &ruid, &euid, &suid, &fsuid) == 4 && fsuid == 0;
}

int manager_check_access(struct manager *m, struct persona *p, pid_t pid) {
	_cleanup_(pidns_close) struct pidns opener = PIDNS_NULL;
	int r;

	r = pidns_of_pid(pid, &opener);
	if (r < 0) {
		log_denied(m, p, pid);
		return -EACCES;
	}
	if (pidns_equal(&opener, &m->self_ns)) {
		if (acts_as_root(pid))
			return 0;
		log_denied(m, p, pid);
		return -EACCES;
	}
	if (p->ns.fd >= 0 && pidns_find_ancestor(&opener, same_ns, &p->ns) >= 0)
		return 0;
	log_denied(m, p, pid);
	return -EACCES;
}

struct nearest {
	struct manager *m;
	struct persona *found;
};

static bool is_persona_ns(void *userdata, const struct pidns *ns) {
	struct nearest *n = userdata;
	struct persona *p;

	LIST_FOREACH(p, &n->m->personas, link)
		if (pidns_equal(&p->ns, ns)) {
			n->found = p;
			return true;
		}
	return false;
}

int manager_persona_of_pid(struct manager *m, pid_t pid, struct persona **ret) {
	_cleanup_(pidns_close) struct pidns ns = PIDNS_NULL;
	struct nearest n = { .m = m };
	int r;

	r = pidns_of_pid(pid, &ns);
	if (r < 0)
		return r;
	if (pidns_equal(&ns, &m->self_ns)) {
		*ret = NULL;
		return 0;
	}
	if (pidns_find_ancestor(&ns, is_persona_ns, &n) < 0)
		return -ENOENT;
	*ret = n.found;
	return 0;
}

int manager_route(struct manager *m, const char *path, pid_t pid, struct persona **ret, uint32_t *ret_owner) {
	struct persona *p;

	if (manager_persona_of_pid(m, pid, &p) < 0) {
		log_notice("%s: refused pid %d: it is in no persona's container", path, (int)pid);
		return -EACCES;
	}
	if (!p && !acts_as_root(pid)) {
		log_notice("%s: refused pid %d: on the host, only root may open persona nodes", path, (int)pid);
		return -EACCES;
	}
	*ret = p ?: m->active;
	*ret_owner = p ? p->serial : ROUTED_OWNER_HOST;
	return 0;
}
