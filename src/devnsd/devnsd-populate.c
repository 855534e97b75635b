/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "container-fs.h"
#include "populate-private.h"
#include "devnsd-udev.h"
#include "devnsd-uevent.h"
#include "devnsd-state.h"
#include "idmap.h"
#include "view-mounts.h"


struct populate {
	struct manager *manager;
	struct persona *persona;
	int pidfd;
	int result_fd;
	sd_event_source *exit_source, *timer;
	populate_done_fn done;
	void *userdata;
	bool finished;
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

static const char *mapped_path(const struct persona *p, const char *node) {
	for (size_t i = 0; i < p->n_maps; i++)
		if (streq(p->maps[i].node, node))
			return p->maps[i].path;
	return NULL;
}

static void plan_share(struct plan *plan, const char *path) {
	struct share *sh;

	for (size_t i = 0; i < plan->n_shares; i++)
		if (streq(plan->shares[i].path, path))
			return;
	if (plan->n_shares == POPULATE_SHARES || path[0] != '/' || strlen(path) >= sizeof(sh->path))
		return;
	sh = &plan->shares[plan->n_shares];
	if (lstat(path, &sh->st) < 0 || !S_ISDIR(sh->st.st_mode))
		return;
	snprintf(sh->path, sizeof(sh->path), "%s", path);
	plan->n_shares++;
}

static struct entry *plan_entry(struct plan *plan, const struct entry *e, const char *where) {
	struct entry *copy;

	if (plan->n == POPULATE_MAX)
		return NULL;
	copy = &plan->entries[plan->n++];
	*copy = *e;
	snprintf(copy->path, sizeof(copy->path), "%s", where + strspn(where, "/"));
	return copy;
}

/* A kernel input device's node at /dev/NAME in the container: its sysfs entry is to lead there. */
static void plan_udev_node(struct plan *plan, struct entry *e, const struct node_desc *nd) {
	if (!e || !nd->udev || !nd->source || strncmp(e->path, "dev/", 4) != 0)
		return;
	if (udev_node_describe(nd->source, e->rdev, e->path + 4, nd->udev, &plan->nodes[plan->n_nodes]) < 0)
		return;
	e->node = (int)plan->n_nodes++;
}

/*
 * Only devnsd's character devices below /dev are bound: never a path in one
 * of devnsd's own FUSE mounts (the LED views), which this process serves
 * and must not wait on.
 */
static void plan_node_at(struct plan *plan, const struct node_desc *nd, dev_t rdev) {
	const char *name = strrchr(nd->path, '/') + 1;
	const char *where = mapped_path(plan->persona, name);
	struct entry e = { .node = -1 };
	char path[PATH_MAX];

	snprintf(e.host, sizeof(e.host), "%s", nd->path);
	e.rdev = rdev;
	snprintf(e.udev, sizeof(e.udev), "%s", nd->udev ? nd->udev : "");
	if (!where) {
		snprintf(path, sizeof(path), streq(nd->kind, "input") ? "/dev/input/%s" : "/dev/%s", name);
		where = path;
	}
	plan_udev_node(plan, plan_entry(plan, &e, where), nd);
	/* The node's sysfs entry names it /dev/devns/PERSONA/NAME, and udev clients open that name. */
	if (!streq(where, nd->path)) {
		e.udev[0] = '\0';
		plan_entry(plan, &e, nd->path);
	}
}

static void plan_node(void *userdata, const struct node_desc *nd) {
	struct plan *plan = userdata;
	struct stat st;

	if (nd->share)
		plan_share(plan, nd->share);
	if (strncmp(nd->path, "/dev/", 5) != 0 || lstat(nd->path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	plan_node_at(plan, nd, st.st_rdev);
}

/* --- the child ------------------------------------------------------------- */

_Noreturn static void child_exit(struct plan *plan, int fd, int r, const char *failed) {
	ssize_t n;

	if (r < 0)
		snprintf(plan->result.failed, sizeof(plan->result.failed), "%s", failed);
	do
		n = write(fd, &plan->result, sizeof(plan->result));
	while (n < 0 && errno == EINTR);
	_exit(r < 0 ? (-r & 0xff) : 0);
}

/* From here on the child may touch the container's files: as its root user, with no file capabilities. */
static int drop_privileges(const struct plan *plan) {
	struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };
	uint32_t keep = (1u << CAP_SYS_ADMIN) | (1u << CAP_SYS_CHROOT);

	if (setgroups(0, NULL) < 0)
		return -errno;
	(void)setfsgid(plan->result.owner.gid);
	(void)setfsuid(plan->result.owner.uid);
	if ((uid_t)setfsuid((uid_t)-1) != plan->result.owner.uid || (gid_t)setfsgid((gid_t)-1) != plan->result.owner.gid)
		return -EPERM;
	data[0].effective = data[0].permitted = keep;
	if (syscall(SYS_capset, &head, data) < 0)
		return -errno;
	umask(022);
	return 0;
}

/* The host gid of a group named in the container's /etc/group, else its fallback. */
static gid_t resolve_group(const struct plan *plan, const char *text, size_t len, const struct conf_group *g,
			   bool *ret_missing) {
	uint32_t inside = 0, host;

	*ret_missing = false;
	if (g->name[0] && (!text || cfs_group_find(text, len, g->name, &inside) < 0)) {
		*ret_missing = g->gid < 0;
		inside = g->gid >= 0 ? (uint32_t)g->gid : 0;
	} else if (!g->name[0])
		inside = (uint32_t)MAX(g->gid, 0);
	if (idmap_to_host(&plan->gids, inside, &host) < 0)
		return plan->result.owner.gid;
	return (gid_t)host;
}

static void resolve_groups(struct plan *plan, int root_fd) {
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;

	/* A missing, odd or oversized /etc/group is a container with no groups. */
	if (cfs_read_file(root_fd, "etc/group", CFS_READ_MAX, &text, &len) < 0) {
		free(text);
		text = NULL;
	}
	plan->result.owner.input_gid =
		resolve_group(plan, text, len, &plan->input_group, &plan->result.input_group_missing);
	plan->result.owner.video_gid =
		resolve_group(plan, text, len, &plan->video_group, &plan->result.video_group_missing);
}

static void refuse(struct plan *plan, const char *path) {
	if (plan->result.refused++ == 0)
		snprintf(plan->result.first_refused, sizeof(plan->result.first_refused), "%s", path);
}

/* A directory for path's last component, on none of devnsd's own file systems. */
int populate_open_dir_of(struct plan *plan, int root_fd, const char *path, int create, int *ret_fd,
			 const char **ret_name) {
	_cleanup_(closep) int fd = -1;
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;
	int r;

	if (!slash)
		return -EINVAL;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	r = cfs_open_dir(root_fd, dir, create, 0755, &fd);
	if (r < 0)
		return r;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_dev == plan->host_dev.st_dev || st.st_dev == plan->host_run.st_dev)
		return -EXDEV;
	*ret_fd = take_fd(&fd);
	*ret_name = slash + 1;
	return 0;
}

struct mount_job {
	int tree_fd;
	int target_fd;
	bool node;
	/* Where a node's empty file was made, to take it away again if the mount fails. */
	int dir_fd;
	const char *name;
	bool view;
};

/* Takes away the empty file made for a node's mount. */
static void unmake_target(const struct mount_job *job) {
	struct stat st;

	if (job->node && fstatat(job->dir_fd, job->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size == 0)
		(void)unlinkat(job->dir_fd, job->name, 0);
}

/*
 * The child holds none of devnsd's other files: a CUSE device devnsd closes
 * goes away at once, not when the child ends.
 */
static void close_others(int a, int b, int c) {
	int keep[3] = { a, b, c }, from = 3;

	for (int i = 0; i < 3; i++)
		for (int j = i + 1; j < 3; j++)
			if (keep[j] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[j];
				keep[j] = t;
			}
	for (int i = 0; i < 3; i++) {
		if (keep[i] > from)
			(void)close_range((unsigned int)from, (unsigned int)keep[i] - 1, 0);
		from = MAX(from, keep[i] + 1);
	}
	(void)close_range((unsigned int)from, ~0U, 0);
}

/* The container has its own /dev (else nothing is done there), and its own /run? */
static int container_dirs(struct plan *plan, int result_fd, int root_fd, bool *ret_own_run) {
	_cleanup_(closep) int dev = -1, run = -1;
	struct stat st;
	int r;

	r = cfs_open_dir(root_fd, "dev", 0, 0, &dev);
	if (r < 0)
		child_exit(plan, result_fd, r, "opening the container's /dev");
	if (fstat(dev, &st) < 0)
		child_exit(plan, result_fd, -errno, "opening the container's /dev");
	if (same_inode(&st, &plan->host_dev)) {
		plan->result.shares_dev = true;
		child_exit(plan, result_fd, 0, NULL);
	}
	*ret_own_run = cfs_open_dir(root_fd, "run", 0, 0, &run) == 0 && fstat(run, &st) == 0 &&
		       st.st_dev != plan->host_run.st_dev;
	return 0;
}


/*
 * Takes nodes away: at each place, only a character device with the node's
 * number (the bind mount this helper made) is unmounted, and then only the
 * empty file it was mounted on is removed.
 */
_Noreturn static void populate_child_remove(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	int dirs[POPULATE_MAX];
	const char *names[POPULATE_MAX];
	size_t n = 0;
	bool own_run;
	int r;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_others(result_fd, root_fd, mnt_fd);
	r = drop_privileges(plan);
	if (r < 0)
		child_exit(plan, result_fd, r, "dropping privileges");
	container_dirs(plan, result_fd, root_fd, &own_run);
	for (size_t i = 0; i < plan->n; i++) {
		const struct entry *e = &plan->entries[i];
		struct stat st;
		int dir = -1;

		if (own_run && e->udev[0]) {
			populate_udev_remove(plan, root_fd, e);
			populate_sysfs_describe_removed(plan, root_fd, e);
			if (plan->result.announce)
				populate_sysfs_forget(root_fd, plan->result.announced.syspath);
		}
		if (populate_open_dir_of(plan, root_fd, e->path, 0, &dir, &names[n]) < 0)
			continue;
		if (fstatat(dir, names[n], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
		    st.st_rdev != e->rdev) {
			close(dir);
			continue;
		}
		dirs[n++] = dir;
	}
	if (n > 0 && setns(mnt_fd, CLONE_NEWNS) < 0)
		child_exit(plan, result_fd, -errno, "entering the container's mount namespace");
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (fchdir(dirs[i]) < 0 || umount2(names[i], MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			continue;
		if (fstatat(dirs[i], names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
			(void)unlinkat(dirs[i], names[i], 0);
		plan->result.made++;
	}
	child_exit(plan, result_fd, 0, NULL);
}

_Noreturn static void populate_child(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	struct mount_job jobs[POPULATE_MAX + POPULATE_SHARES + VIEW_MOUNTS_MAX];
	struct sysfs_job sysfs = { .overlay_fd = -1, .target_fd = -1, .parent_fd = -1 };
	size_t n_jobs = 0;
	int host_trees[POPULATE_MAX], share_trees[POPULATE_SHARES], view_trees[VIEW_MOUNTS_MAX];
	bool own_run;
	struct stat st;
	int r;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_others(result_fd, root_fd, mnt_fd);
	/* devnsd's nodes and shares, taken from its own mount namespace while it is still there. */
	for (size_t i = 0; i < plan->n; i++)
		host_trees[i] = (int)open_tree(AT_FDCWD, plan->entries[i].host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	for (size_t i = 0; i < plan->n_shares; i++)
		share_trees[i] = (int)open_tree(AT_FDCWD, plan->shares[i].path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	/* The live view's directories: devnsd (the parent) answers these lookups while this runs. */
	for (size_t i = 0; i < plan->n_views; i++) {
		char path[PATH_MAX + 256];

		snprintf(path, sizeof(path), "%s/%s", plan->view_dir, plan->views[i].root);
		view_trees[i] = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	}

	r = drop_privileges(plan);
	if (r < 0)
		child_exit(plan, result_fd, r, "dropping privileges");
	resolve_groups(plan, root_fd);
	container_dirs(plan, result_fd, root_fd, &own_run);

	for (size_t i = 0; i < plan->n; i++) {
		const struct entry *e = &plan->entries[i];
		_cleanup_(closep) int dir = -1;
		const char *name;
		int target = -1;

		if (host_trees[i] < 0)
			child_exit(plan, result_fd, -ENODEV, "taking devnsd's node");
		r = populate_open_dir_of(plan, root_fd, e->path, 1, &dir, &name);
		if (r >= 0)
			r = cfs_mount_target(dir, name, e->rdev, &target);
		if (r == -EEXIST || r == -ELOOP || r == -ENOTDIR || r == -EXDEV) {
			refuse(plan, e->path);
			continue;
		}
		if (r < 0)
			child_exit(plan, result_fd, r, "making a place for a node");
		if (r == 0)
			jobs[n_jobs++] = (struct mount_job){ .tree_fd = host_trees[i], .target_fd = target, .node = true,
							     .dir_fd = take_fd(&dir), .name = name };
		else
			plan->result.made++;
		if (own_run && e->udev[0]) {
			r = populate_udev_write(plan, root_fd, e);
			if (r == -ELOOP || r == -ENOTDIR || r == -EXDEV)
				refuse(plan, "run/udev");
			else if (r < 0)
				child_exit(plan, result_fd, r, "writing udev data");
		}
	}
	if (own_run)
		populate_sysfs_plan(plan, root_fd, &sysfs);
	/* Sockets (the framebuffer's, for mmap) live below /run: bind them where the container has its own. */
	for (size_t i = 0; own_run && i < plan->n_shares; i++) {
		_cleanup_(closep) int dir = -1;

		r = cfs_open_dir(root_fd, plan->shares[i].path + 1, 1, 0755, &dir);
		if (r >= 0 && fstat(dir, &st) < 0)
			r = -errno;
		if (r >= 0 && same_inode(&st, &plan->shares[i].st))
			continue; /* bound before */
		if (r >= 0 && (st.st_dev == plan->host_dev.st_dev || st.st_dev == plan->host_run.st_dev))
			r = -EXDEV;
		if (r == -ELOOP || r == -ENOTDIR || r == -EXDEV) {
			refuse(plan, plan->shares[i].path + 1);
			continue;
		}
		if (r < 0 || share_trees[i] < 0)
			child_exit(plan, result_fd, r < 0 ? r : -ENODEV, "making a place for a socket directory");
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = share_trees[i], .target_fd = take_fd(&dir) };
	}

	/*
	 * A dead view is replaced only where the container's path still leads
	 * to that very mount (its id), so nothing else is ever covered.
	 */
	for (size_t i = 0; i < plan->n_views; i++) {
		struct open_how how = { .flags = O_PATH | O_CLOEXEC,
					.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		struct statx stx;
		int fd;

		if (view_trees[i] < 0)
			continue;
		fd = (int)syscall(SYS_openat2, root_fd, plan->views[i].target, &how, sizeof(how));
		if (fd < 0)
			continue;
		if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0 ||
		    !(stx.stx_mask & STATX_MNT_ID) || stx.stx_mnt_id != plan->views[i].mnt_id) {
			close(fd);
			continue;
		}
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = view_trees[i], .target_fd = fd, .view = true };
	}

	/* Mounts need the container's mount namespace; every path was resolved before. */
	if ((n_jobs > 0 || sysfs.overlay_fd >= 0) && setns(mnt_fd, CLONE_NEWNS) < 0)
		child_exit(plan, result_fd, -errno, "entering the container's mount namespace");
	for (size_t i = 0; i < n_jobs; i++) {
		if (move_mount(jobs[i].tree_fd, "", jobs[i].target_fd, "",
			       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
			r = -errno;
			/* No empty file is left where a node belongs (a node that went away meanwhile). */
			for (size_t k = i; k < n_jobs; k++)
				unmake_target(&jobs[k]);
			child_exit(plan, result_fd, r, "mounting a node");
		}
		if (jobs[i].node)
			plan->result.made++;
		if (jobs[i].view)
			plan->result.views++;
	}
	r = populate_sysfs_lay(plan, &sysfs);
	if (r < 0)
		child_exit(plan, result_fd, r, "laying the container's /sys/dev/char");
	if (plan->node_job && plan->result.presented > 0) {
		plan->result.announce = true;
		plan->result.announced = plan->nodes[0];
	}
	child_exit(plan, result_fd, 0, NULL);
}


/* --- the parent ------------------------------------------------------------ */

/* Node jobs waiting or running at once, over every persona; past this a change is refused. */
#define POPULATE_JOBS_MAX 256

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

static bool exited(int pidfd) {
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return poll(&pfd, 1, 0) != 0;
}

/*
 * The container followed a node's coming or going: its udev clients learn
 * of it as from udevd (devnsd-uevent.h). Best effort: a container that
 * shares devnsd's or the host's network namespace gets nothing, and a
 * message no one in the container takes is lost.
 */
static void announce(struct persona *p, const struct udev_node *n, bool remove) {
	_cleanup_(closep) int netns = -1;
	char devname[UEVENT_DEVNAME_MAX];
	struct uevent_device dev;
	struct timespec ts;

	if (p->container_pidfd < 0 || uevent_netns_of_pid(p->container_pid, &netns) < 0 || exited(p->container_pidfd))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uevent_device_for_input(n, (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000, devname, &dev);
	(void)uevent_send_to_netns(netns, p->owner.uid, p->owner.gid, remove ? "remove" : "add", &dev);
}

static int on_child_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct populate *pop = userdata;
	struct persona *p = pop->job ? pop->persona : NULL;
	struct manager *m = pop->manager;
	siginfo_t si = { 0 };
	ssize_t n;
	int r = 0;

	(void)s;
	(void)revents;
	if (waitid(P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) < 0 || si.si_pid == 0)
		return 0;
	n = read(pop->result_fd, &pop->result, sizeof(pop->result));
	if (si.si_code != CLD_EXITED)
		r = -EIO;
	else if (si.si_status != 0)
		r = -si.si_status;
	else if (n != (ssize_t)sizeof(pop->result))
		r = -EIO;
	if (n != (ssize_t)sizeof(pop->result))
		snprintf(pop->result.failed, sizeof(pop->result.failed), "the helper process");
	if (p && r == 0 && pop->result.announce)
		announce(p, &pop->result.announced, pop->job->remove);
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

void populate_stop_all(struct manager *m) {
	struct populate *pop;
	struct persona *p;

	while ((pop = LIST_FIRST(&m->populates))) {
		if (pop->pidfd >= 0)
			(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		if (!pop->finished) {
			snprintf(pop->result.failed, sizeof(pop->result.failed), "devnsd stopping");
			finish(pop, -ECANCELED);
		}
		/* Reaped now if it is gone already; else by init once devnsd exits. */
		if (pop->pidfd >= 0)
			(void)waitid(P_PIDFD, (id_t)pop->pidfd, &(siginfo_t){ 0 }, WEXITED | WNOHANG);
		populate_free(pop);
	}
	LIST_FOREACH(p, &m->personas, link)
		forget_container(p);
}

static void cancel(struct populate *pop, const char *why) {
	if (pop->pidfd >= 0)
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
	snprintf(pop->result.failed, sizeof(pop->result.failed), "%s", why);
	finish(pop, -ECANCELED);
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
		if (!pop->job || pop->persona != p || pop->finished)
			continue;
		cancel(pop, "the persona left its container");
		if (pop->pidfd < 0)
			populate_free(pop);
	}
	forget_container(p);
}

/* Views a devnsd that died left bound in the container (its mount table is the kernel's text). */
static void plan_views(struct manager *m, struct plan *plan, int proc_fd) {
	_cleanup_(freep) char *text = NULL;
	_cleanup_(closep) int fd = -1;
	dev_t old = state_old_view_dev(m);
	const char *dir = state_view_dir(m);
	size_t len;

	if (old == 0 || !dir || strlen(dir) >= sizeof(plan->view_dir))
		return;
	fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC);
	text = malloc(CFS_READ_MAX);
	if (fd < 0 || !text || read_bounded(fd, text, CFS_READ_MAX, &len) < 0)
		return;
	snprintf(plan->view_dir, sizeof(plan->view_dir), "%s", dir);
	plan->n_views = view_mounts_find(text, len, old, plan->persona->name, plan->views, VIEW_MOUNTS_MAX);
}

/* Ids of the container's root, from its user namespace's maps. */
static int plan_owner(struct plan *plan, int proc_fd) {
	uint32_t uid, gid;
	int r;

	r = idmap_read(proc_fd, "uid_map", &plan->uids);
	if (r >= 0)
		r = idmap_read(proc_fd, "gid_map", &plan->gids);
	if (r < 0)
		return r;
	if (idmap_to_host(&plan->uids, 0, &uid) < 0 || idmap_to_host(&plan->gids, 0, &gid) < 0)
		return -EPERM;
	plan->result.owner = (struct persona_owner){ .uid = uid, .gid = gid, .input_gid = gid, .video_gid = gid };
	return 0;
}

/* The kernel's text of the container's mount table (never a file of the container's). */
static void read_mountinfo(struct plan *plan, int proc_fd) {
	_cleanup_(closep) int fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC);
	size_t len = 0;

	plan->mountinfo[0] = '\0';
	if (fd >= 0 && read_bounded(fd, plan->mountinfo, sizeof(plan->mountinfo) - 1, &len) == 0)
		plan->mountinfo[len] = '\0';
}

static struct plan *plan_new(struct persona *p) {
	struct plan *plan = calloc(1, sizeof(*plan));

	if (!plan)
		return NULL;
	plan->persona = p;
	plan->input_group = p->input_group;
	plan->video_group = p->video_group;
	if (stat("/dev", &plan->host_dev) < 0 || stat("/run", &plan->host_run) < 0) {
		free(plan);
		return NULL;
	}
	return plan;
}

typedef void (*child_fn)(struct plan *plan, int result_fd, int root_fd, int mnt_fd);

/*
 * Runs fn in a child on the container of process pid (its pidfd target,
 * checked to be alive once its files are open), for pop. add_nodes fills
 * the plan once the container's ids are known.
 */
static int spawn(struct populate *pop, struct plan *plan, pid_t pid, int target, child_fn fn,
		 void (*add_nodes)(struct populate *pop, struct plan *plan)) {
	_cleanup_(closep) int proc_fd = -1, root_fd = -1, mnt_fd = -1;
	struct manager *m = pop->manager;
	int pipe_fds[2];
	char path[64];
	pid_t child;
	int r;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	proc_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc_fd < 0)
		return -errno;
	r = plan_owner(plan, proc_fd);
	if (r < 0)
		return r;
	root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
	mnt_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
	if (root_fd < 0 || mnt_fd < 0)
		return -errno;
	read_mountinfo(plan, proc_fd);
	if (exited(target))
		return -ESRCH;
	add_nodes(pop, plan);
	if (!plan->node_job)
		plan_views(m, plan, proc_fd);
	pop->result = plan->result;
	if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
		return -errno;
	pop->result_fd = pipe_fds[0];
	child = fork();
	if (child < 0) {
		close(pipe_fds[1]);
		return -errno;
	}
	if (child == 0) {
		close(pipe_fds[0]);
		fn(plan, pipe_fds[1], root_fd, mnt_fd);
		_exit(EXIT_FAILURE);
	}
	close(pipe_fds[1]);
	pop->pidfd = pidfd_open(child, 0);
	if (pop->pidfd < 0) {
		r = -errno;
		(void)kill(child, SIGKILL);
		(void)waitpid(child, NULL, 0);
		return r;
	}
	r = sd_event_add_io(m->event, &pop->exit_source, pop->pidfd, EPOLLIN, on_child_exit, pop);
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &pop->timer, CLOCK_MONOTONIC, POPULATE_TIMEOUT_USEC, 0,
					       on_timeout, pop);
	if (r < 0) {
		(void)pidfd_send_signal(pop->pidfd, SIGKILL, NULL, 0);
		(void)waitid(P_PIDFD, (id_t)pop->pidfd, &(siginfo_t){ 0 }, WEXITED);
		return r;
	}
	return 0;
}

static void add_all_nodes(struct populate *pop, struct plan *plan) {
	manager_foreach_node(pop->manager, plan->persona, plan_node, plan);
}

int populate_start(struct manager *m, struct persona *p, pid_t pid, populate_done_fn done, void *userdata) {
	_cleanup_(freep) struct plan *plan = NULL;
	_cleanup_(closep) int target = -1;
	struct populate *pop;
	int r;

	plan = plan_new(p);
	if (!plan)
		return -ENOMEM;
	/* The process stays the one named while its files are opened: checked through its pidfd after. */
	target = pidfd_open(pid, 0);
	if (target < 0)
		return errno == EINVAL ? -ESRCH : -errno;
	pop = calloc(1, sizeof(*pop));
	if (!pop)
		return -ENOMEM;
	*pop = (struct populate){ .manager = m, .persona = p, .pidfd = -1, .result_fd = -1, .done = done,
				  .userdata = userdata };
	LIST_INSERT_HEAD(&m->populates, pop, link);
	r = spawn(pop, plan, pid, target, populate_child, add_all_nodes);
	if (r < 0) {
		populate_free(pop);
		return r;
	}
	cancel_attach(p);
	p->populate = pop;
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
	plan_node_at(plan, &nd, job->rdev);
}

static bool job_running(struct manager *m, struct persona *p) {
	struct populate *pop;

	LIST_FOREACH(pop, &m->populates, link)
		if (pop->job && pop->persona == p && pop->pidfd >= 0 && !pop->finished)
			return true;
	return false;
}

/* Starts p's oldest waiting job, unless one runs. Jobs run in the order they came. */
static void start_next_job(struct manager *m, struct persona *p) {
	struct populate *pop, *oldest = NULL;

	if (job_running(m, p))
		return;
	/* New jobs go to the head of the list: the oldest is the last one. */
	LIST_FOREACH(pop, &m->populates, link)
		if (pop->job && pop->persona == p && pop->pidfd < 0 && !pop->finished)
			oldest = pop;
	while (oldest) {
		_cleanup_(freep) struct plan *plan = plan_new(p);
		int r = plan ? 0 : -ENOMEM;

		if (r == 0 && (p->container_pidfd < 0 || exited(p->container_pidfd)))
			r = -ESRCH;
		if (r == 0)
			r = spawn(oldest, plan, p->container_pid, p->container_pidfd,
				  oldest->job->remove ? populate_child_remove : populate_child, add_job_node);
		if (r == 0)
			return;
		/* This one cannot run: it is done, and the next gets its turn. */
		finish(oldest, r);
		populate_free(oldest);
		oldest = NULL;
		LIST_FOREACH(pop, &m->populates, link)
			if (pop->job && pop->persona == p && pop->pidfd < 0 && !pop->finished)
				oldest = pop;
	}
}

int populate_node(struct manager *m, struct persona *p, const struct node_desc *nd, bool remove,
		  populate_done_fn done, void *userdata) {
	struct populate *pop;
	struct node_job *job;
	unsigned int n = 0;
	struct stat st;

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
		if (remove && pop->job && !pop->job->remove && pop->persona == p && pop->pidfd < 0 && !pop->finished &&
		    pop->job->rdev == st.st_rdev && streq(pop->job->path, nd->path)) {
			finish(pop, 0);
			populate_free(pop);
			return 1;
		}
		n += pop->job != NULL;
	}
	if (n >= POPULATE_JOBS_MAX)
		return -EBUSY;
	job = calloc(1, sizeof(*job));
	pop = calloc(1, sizeof(*pop));
	if (!job || !pop) {
		free(job);
		free(pop);
		return -ENOMEM;
	}
	*job = (struct node_job){ .remove = remove, .rdev = st.st_rdev };
	snprintf(job->path, sizeof(job->path), "%s", nd->path);
	snprintf(job->kind, sizeof(job->kind), "%s", nd->kind);
	snprintf(job->udev, sizeof(job->udev), "%s", nd->udev ? nd->udev : "");
	snprintf(job->source, sizeof(job->source), "%s", nd->source ? nd->source : "");
	*pop = (struct populate){ .manager = m, .persona = p, .pidfd = -1, .result_fd = -1, .done = done,
				  .userdata = userdata, .job = job };
	LIST_INSERT_HEAD(&m->populates, pop, link);
	start_next_job(m, p);
	return 1;
}
