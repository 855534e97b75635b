/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "populate/mountinfo.h"
#include "populate/uevent.h"
#include "populate/populate-internal.h"
#include "log.h"

/*
 * The parent side of populate: it plans what to bind (populate/plan.c),
 * has the zygote (populate/zygote.c) fork the helper (populate/child.c)
 * against the container, watches it through its pidfd with a deadline,
 * reads its result from a pipe, and queues a persona's node changes
 * (hotplug) one at a time.
 */

/* Node jobs waiting or running at once, over every persona; past this a change is refused. */
#define POPULATE_JOBS_MAX 256
/*
 * A persona's own share: its jobs waiting or running, and its helpers
 * stopped for their time that have not ended yet (one the kernel holds
 * counts here, against no one else).
 */
#define POPULATE_JOBS_PER_PERSONA (POPULATE_JOBS_MAX / 4)

struct populate {
	struct manager *manager;
	struct persona *persona;
	int pidfd;
	int result_fd;
	sd_event_source *exit_source, *timer;
	populate_done_fn done;
	void *userdata;
	bool finished;
	/* Whose it is, after finish() too (NULL once that persona left its container), and whether it was killed. */
	struct persona *of;
	bool killed;
	struct populate_result result;
	/* A change to one node (hotplug); NULL for a whole attach. Waits (pidfd -1) behind p's other jobs. */
	struct node_job *job;
	LIST_ENTRY(populate) link;
};

/* One node to add to or remove from an attached container. */
struct node_job {
	bool remove;
	char path[PATH_MAX]; /* devnsd's node, /dev/devns/PERSONA/NAME */
	char kind[16];
	char udev[512];
	char source[PATH_MAX]; /* the hardware, for its sysfs entry; "" if unknown */
	dev_t rdev;
};

static struct populate *populate_free(struct populate *pop) {
	if (!pop)
		return NULL;
	if (pop->persona && pop->persona->populate == pop)
		pop->persona->populate = NULL;
	if (pop->manager)
		LIST_REMOVE(pop, link);
	sd_event_source_disable_unref(pop->exit_source);
	sd_event_source_disable_unref(pop->timer);
	closep(&pop->pidfd);
	closep(&pop->result_fd);
	free(pop->job);
	free(pop);
	return NULL;
}

/* A populate of p's in m's list; it takes job (NULL for a whole attach), freeing it when it cannot be made. */
static struct populate *populate_new(struct manager *m, struct persona *p, populate_done_fn done, void *userdata,
				     struct node_job *job) {
	struct populate *pop = calloc(1, sizeof(*pop));

	if (!pop) {
		free(job);
		return NULL;
	}
	*pop = (struct populate){ .manager = m, .persona = p, .of = p, .pidfd = -1, .result_fd = -1, .done = done,
				  .userdata = userdata, .job = job };
	LIST_INSERT_HEAD(&m->populates, pop, link);
	return pop;
}

/* Calls done() once; the populate lives on until its child is reaped. */
static void finish(struct populate *pop, int r) {
	struct persona *p = pop->persona;

	if (pop->finished)
		return;
	pop->finished = true;
	if (p->populate == pop)
		p->populate = NULL;
	pop->persona = NULL;
	pop->done(p, r, &pop->result, pop->userdata);
}

static void start_next_job(struct manager *m, struct persona *p);

/*
 * The container followed a node's coming or going: its udev clients learn
 * of it as from udevd (populate/uevent.h). Best effort: a container that
 * shares devnsd's or the host's network namespace gets nothing, and a
 * message no one in the container takes is lost.
 */
static void announce(struct persona *p, const struct udev_node *n, bool remove) {
	_cleanup_(closep) int netns = -1;
	char devname[UEVENT_DEVNAME_MAX];
	struct uevent_device dev;

	if (p->container_pidfd < 0 || uevent_netns_of_pidfd(p->container_pidfd, &netns) < 0)
		return;
	uevent_device_for_node(n, populate_now_usec(), devname, &dev);
	(void)uevent_send_to_netns(netns, p->owner.uid, p->owner.gid, remove ? "remove" : "add", &dev);
}

/* Once for an attach, once a container for its node changes: a mount of the container's the helper did not look into. */
static void tell_untrusted_mount(struct populate *pop) {
	const struct populate_result *res = &pop->result;
	struct persona *p = pop->of;

	if (!res->untrusted_mount || !p || (pop->job && p->populate_told_mount))
		return;
	p->populate_told_mount = true;
	if (res->untrusted_type[0])
		log_warning("persona %s: process %d's container has a %s mount at %s; devnsd does not look into file "
			    "systems of that kind that a container mounts itself, and makes nothing of the persona's there",
			    p->name, (int)p->container_pid, res->untrusted_type, res->untrusted_at);
	else
		log_warning("persona %s: process %d's container mounted something (mount %" PRIu64 ") after devnsd read "
			    "its mount table; devnsd did not look into it",
			    p->name, (int)p->container_pid, res->untrusted_id);
}

/* The helper ended (its pidfd is readable): how it went is what it wrote last, a short report a failure. */
static int on_child_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct populate *pop = userdata;
	struct persona *p = pop->job ? pop->persona : NULL;
	struct manager *m = pop->manager;
	struct child_report report;
	ssize_t n;
	int r;

	(void)s;
	(void)fd;
	(void)revents;
	n = read(pop->result_fd, &report, sizeof(report));
	if (n != (ssize_t)sizeof(report)) {
		r = -EIO;
		snprintf(pop->result.failed, sizeof(pop->result.failed), "the helper process");
	} else {
		pop->result = report.result;
		pop->result.failed[sizeof(pop->result.failed) - 1] = '\0';
		r = report.r <= 0 && report.r > -4096 ? report.r : -EIO;
	}
	if (p && r == 0 && pop->result.announce)
		announce(p, &pop->result.announced, pop->job->remove);
	if (!pop->finished)
		tell_untrusted_mount(pop);
	finish(pop, r);
	populate_free(pop);
	if (p)
		start_next_job(m, p);
	return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
	struct populate *pop = userdata;
	struct persona *p = pop->job ? pop->persona : NULL;

	(void)s;
	(void)usec;
	(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
	pop->killed = true;
	snprintf(pop->result.failed, sizeof(pop->result.failed), "the container's files (no answer in time)");
	finish(pop, -ETIMEDOUT);
	/* The next change need not wait for this helper to be reaped. */
	if (p)
		start_next_job(pop->manager, p);
	return 0;
}

static void forget_container(struct persona *p) {
	closep(&p->container_pidfd);
	p->container_pid = 0;
}

/* Stops pop's helper, if it runs, and answers its caller with -ECANCELED, if that is still owed. */
static void cancel(struct populate *pop, const char *why) {
	if (pop->pidfd >= 0) {
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		pop->killed = true;
	}
	if (pop->finished)
		return;
	snprintf(pop->result.failed, sizeof(pop->result.failed), "%s", why);
	finish(pop, -ECANCELED);
}

void populate_stop_all(struct manager *m) {
	struct populate *pop;
	struct persona *p;

	while ((pop = LIST_FIRST(&m->populates))) {
		/* The zygote reaps it. */
		cancel(pop, "devnsd stopping");
		populate_free(pop);
	}
	LIST_FOREACH(p, &m->personas, link)
		forget_container(p);
}

static void cancel_attach(struct persona *p) {
	if (p->populate)
		cancel(p->populate, "a newer request");
}

void populate_cancel(struct persona *p) {
	struct manager *m = p->manager;
	struct populate *pop, *next;

	cancel_attach(p);
	for (pop = LIST_FIRST(&m->populates); pop; pop = next) {
		next = LIST_NEXT(pop, link);
		if (pop->of == p)
			pop->of = NULL;
		if (!pop->job || pop->persona != p || pop->finished)
			continue;
		cancel(pop, "the persona left its container");
		if (pop->pidfd < 0)
			populate_free(pop);
	}
	forget_container(p);
}
/*
 * Has the zygote run fn in a helper on the container of the process behind
 * pidfd target (its /proc directory opened through the pidfd, and the
 * process checked to be alive once its files are open), for pop.
 * add_nodes fills the plan once the container's ids are known.
 */
static int spawn(struct populate *pop, struct plan *plan, int target, enum zygote_fn fn,
		 void (*add_nodes)(struct populate *pop, struct plan *plan)) {
	_cleanup_(closep) int proc_fd = -1, root_fd = -1, mnt_fd = -1;
	_cleanup_(mnt_free_tablep) struct libmnt_table *own = NULL;
	struct manager *m = pop->manager;
	bool own_cut = true;
	int pipe_fds[2];
	int r;

	r = pidfd_open_proc(target, &proc_fd, NULL);
	if (r < 0)
		return r;
	r = populate_plan_owner(plan, proc_fd);
	if (r < 0)
		return r;
	root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (root_fd < 0 || mnt_fd < 0)
		return -errno;
	/* devnsd's own mount table, read once: its peer groups, and the superblocks the host has (NULL unread). */
	(void)mountinfo_read(AT_FDCWD, "/proc/self/mountinfo", MOUNTINFO_MAX, &own, &own_cut);
	populate_plan_outside(plan, own_cut ? NULL : own);
	populate_plan_mountinfo(plan, proc_fd, own);
	if (pidfd_exited(target))
		return -ESRCH;
	add_nodes(pop, plan);
	if (!plan->node_job)
		populate_views_plan(m, plan, proc_fd);
	pop->result = plan->result;
	if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	pop->result_fd = pipe_fds[0];
	/* Forked by the zygote, which holds none of devnsd's descriptors: not by devnsd. */
	r = zygote_spawn(m->zygote, fn, plan, pipe_fds[1], root_fd, mnt_fd, &pop->pidfd);
	close(pipe_fds[1]);
	if (r < 0)
		return r;
	r = sd_event_add_io(m->event, &pop->exit_source, pop->pidfd, EPOLLIN, on_child_exit, pop);
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &pop->timer, CLOCK_MONOTONIC, POPULATE_TIMEOUT_USEC, 0,
					       on_timeout, pop);
	if (r < 0) {
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		return r;
	}
	return 0;
}

static void add_all_nodes(struct populate *pop, struct plan *plan) {
	manager_foreach_node(pop->manager, plan->persona, populate_plan_node, plan);
	populate_plan_endpoint(plan);
}

static void on_leaving(struct listener *l, void *data) {
	populate_cancel(data);
}

static void on_freeing(struct listener *l, void *data) {
	struct manager *m = data;

	listener_remove(&m->populate_leaving);
	listener_remove(&m->populate_freeing);
	populate_stop_all(m);
}

/* The manager tells populate when a persona leaves its container and when it stops: heard from the first start on. */
static void listen_to_manager(struct manager *m) {
	if (m->populate_freeing.signal)
		return;
	m->populate_leaving.notify = on_leaving;
	m->populate_freeing.notify = on_freeing;
	signal_add(&m->events.leaving, &m->populate_leaving);
	signal_add(&m->events.freeing, &m->populate_freeing);
}

int populate_start(struct manager *m, struct persona *p, int pidfd, populate_done_fn done, void *userdata) {
	_cleanup_(freep) struct plan *plan = NULL;
	_cleanup_(closep) int target = -1;
	struct populate *pop;
	pid_t pid;
	int r;

	listen_to_manager(m);
	plan = populate_plan_new(p);
	if (!plan)
		return -ENOMEM;
	/* The process attached through, for this attach and the node changes that follow. */
	target = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
	if (target < 0)
		return -errno;
	r = pidfd_get_pid(target, &pid);
	if (r < 0)
		return r;
	pop = populate_new(m, p, done, userdata, NULL);
	if (!pop)
		return -ENOMEM;
	r = spawn(pop, plan, target, ZYGOTE_POPULATE, add_all_nodes);
	if (r < 0) {
		populate_free(pop);
		return r;
	}
	cancel_attach(p);
	p->populate = pop;
	p->populate_told_mount = p->populate_told_full = false;
	/* Later changes to its nodes (hotplug) go to this container. */
	forget_container(p);
	p->container_pidfd = take_fd(&target);
	p->container_pid = pid;
	return 0;
}

/* --- one node at a time ------------------------------------------------------ */

static void add_job_node(struct populate *pop, struct plan *plan) {
	const struct node_job *job = pop->job;
	struct node_desc nd = { .path = job->path, .kind = job->kind, .udev = job->udev,
				.source = job->source[0] ? job->source : NULL };

	plan->node_job = true;
	populate_plan_node_at(plan, &nd, job->rdev);
}

/* Whether pop counts against a persona's share: its node change is owed an answer, or its helper was killed and lives on. */
static bool job_counts(const struct populate *pop) {
	return pop->job ? !pop->finished || (pop->killed && pop->pidfd >= 0) : pop->killed && pop->pidfd >= 0;
}

void populate_count(struct manager *m, unsigned int *ret_in_flight, unsigned int *ret_stopped) {
	struct populate *pop;

	*ret_in_flight = *ret_stopped = 0;
	LIST_FOREACH(pop, &m->populates, link) {
		*ret_in_flight += pop->job && !pop->finished;
		*ret_stopped += pop->killed && pop->pidfd >= 0;
	}
}

/* 0 if p may queue another node change, -EBUSY when the table or p's share of it is full (said once). */
static int job_room(struct manager *m, struct persona *p) {
	unsigned int total = 0, mine = 0;
	struct populate *pop;

	LIST_FOREACH(pop, &m->populates, link) {
		total += pop->job && !pop->finished;
		mine += pop->of == p && job_counts(pop);
	}
	if (total < POPULATE_JOBS_MAX && mine < POPULATE_JOBS_PER_PERSONA) {
		p->populate_told_full = false;
		return 0;
	}
	if (!p->populate_told_full)
		log_warning("persona %s: %u node changes of its container are in flight or stopped (%u of every "
			    "persona's); its further ones are refused until they end",
			    p->name, mine, total);
	p->populate_told_full = true;
	return -EBUSY;
}

/* A node change of p's that waits for its turn (no helper yet) and is still owed an answer. */
static bool job_waiting(const struct populate *pop, const struct persona *p) {
	return pop->job && pop->persona == p && pop->pidfd < 0 && !pop->finished;
}

static bool job_running(struct manager *m, struct persona *p) {
	struct populate *pop;

	LIST_FOREACH(pop, &m->populates, link)
		if (pop->job && pop->persona == p && pop->pidfd >= 0 && !pop->finished)
			return true;
	return false;
}

/* p's oldest waiting job: new jobs go to the head of the list, so the oldest is the last one. */
static struct populate *oldest_job(struct manager *m, struct persona *p) {
	struct populate *pop, *oldest = NULL;

	LIST_FOREACH(pop, &m->populates, link)
		if (job_waiting(pop, p))
			oldest = pop;
	return oldest;
}

/* Starts p's oldest waiting job, unless one runs. Jobs run in the order they came. */
static void start_next_job(struct manager *m, struct persona *p) {
	struct populate *oldest;

	if (job_running(m, p))
		return;
	while ((oldest = oldest_job(m, p))) {
		_cleanup_(freep) struct plan *plan = populate_plan_new(p);
		int r = plan ? 0 : -ENOMEM;

		if (r == 0 && (p->container_pidfd < 0 || pidfd_exited(p->container_pidfd)))
			r = -ESRCH;
		if (r == 0)
			r = spawn(oldest, plan, p->container_pidfd, oldest->job->remove ? ZYGOTE_REMOVE : ZYGOTE_POPULATE,
				  add_job_node);
		if (r == 0)
			return;
		/* This one cannot run: it is done, and the next gets its turn. */
		finish(oldest, r);
		populate_free(oldest);
	}
}

int populate_node(struct manager *m, struct persona *p, const struct node_desc *nd, bool remove,
		  populate_done_fn done, void *userdata) {
	struct populate *pop;
	struct node_job *job;
	struct stat st;
	int r;

	if (p->container_pidfd < 0)
		return 0;
	if (strncmp(nd->path, "/dev/", 5) != 0 || strlen(nd->path) >= sizeof(job->path))
		return -EINVAL;
	if (lstat(nd->path, &st) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode))
		return -ENODEV;
	LIST_FOREACH(pop, &m->populates, link) {
		/* A node that goes before its coming reached the container: neither needs doing. */
		if (remove && job_waiting(pop, p) && !pop->job->remove && pop->job->rdev == st.st_rdev && streq(pop->job->path, nd->path)) {
			finish(pop, 0);
			populate_free(pop);
			return 1;
		}
	}
	r = job_room(m, p);
	if (r < 0)
		return r;
	job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	*job = (struct node_job){ .remove = remove, .rdev = st.st_rdev };
	snprintf(job->path, sizeof(job->path), "%s", nd->path);
	snprintf(job->kind, sizeof(job->kind), "%s", nd->kind);
	snprintf(job->udev, sizeof(job->udev), "%s", nd->udev ? nd->udev : "");
	snprintf(job->source, sizeof(job->source), "%s", nd->source ? nd->source : "");
	pop = populate_new(m, p, done, userdata, job);
	if (!pop)
		return -ENOMEM;
	start_next_job(m, p);
	return 1;
}
