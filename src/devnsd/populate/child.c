/* SPDX-License-Identifier: MIT */
/*
 * What the helper process does, in and against the container: it drops to
 * the container's root user, makes places for nodes from fds below the
 * container's root, and mounts devnsd's nodes, shares and views there.
 */
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container-fs.h"
#include "populate/populate-internal.h"

/* devnsd is not the helper's parent and cannot wait for it: how it went is in the report. */
_Noreturn static void child_exit(struct plan *plan, int fd, int r, const char *failed) {
	struct child_report report;
	ssize_t n;

	if (r < 0)
		snprintf(plan->result.failed, sizeof(plan->result.failed), "%s", failed);
	report = (struct child_report){ .result = plan->result, .r = r < 0 ? r : 0 };
	do
		n = write(fd, &report, sizeof(report));
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

/*
 * The host gid of a group named in the container's /etc/group, else its
 * fallback. In a container that shares the host's ids (host_gid: the
 * host's gid of the name, -1 for none), the container's gid counts only
 * if it is the host's: its root writes that file.
 */
static gid_t resolve_group(const struct plan *plan, const char *text, size_t len, const struct conf_group *g,
			   int64_t host_gid, bool *ret_missing, bool *ret_foreign) {
	uint32_t inside = 0, host;
	bool found = false;

	*ret_missing = *ret_foreign = false;
	if (g->name[0] && text && cfs_group_find(text, len, g->name, &inside) == 0) {
		found = true;
		if (plan->result.host_groups && (int64_t)inside != host_gid) {
			*ret_foreign = true;
			found = false;
		}
	}
	if (g->name[0] && !found) {
		*ret_missing = g->gid < 0 && !*ret_foreign;
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
		resolve_group(plan, text, len, &plan->input_group, plan->host_input_gid,
			      &plan->result.input_group_missing, &plan->result.input_group_foreign);
	plan->result.owner.video_gid =
		resolve_group(plan, text, len, &plan->video_group, plan->host_video_gid,
			      &plan->result.video_group_missing, &plan->result.video_group_foreign);
}

/* A place the container made something else of: a symlink, a file, devnsd's own file system, a mount not looked into. */
static bool refused(int r) {
	return r == -ELOOP || r == -ENOTDIR || r == -EXDEV || r == -EMEDIUMTYPE;
}

static void refuse(struct plan *plan, const char *path) {
	if (plan->result.refused++ == 0)
		snprintf(plan->result.first_refused, sizeof(plan->result.first_refused), "%s", path);
}

/* Removes name in dir only if it is an empty regular file: the kind of place made for a node's mount. */
static void remove_empty_file(int dir, const char *name) {
	struct stat st;

	if (cfs_stat_at(dir, name, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0)
		(void)unlinkat(dir, name, 0);
}

/* Takes away the empty file made for a node's mount. */
static void unmake_target(const struct mount_job *job) {
	if (job->node)
		remove_empty_file(job->dir_fd, job->name);
}

/*
 * The child holds none of the zygote's other files (its socket, the plan's
 * memfd). The zygote holds none of devnsd's: a CUSE device devnsd closes
 * goes away at once, and nothing closed here can wait on a client's file.
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

/*
 * A share (a socket's directory) as it is bound into the container:
 * read-only, no set-uid programs, no device nodes, nothing executed. A
 * socket there still takes connections (connect() writes to no file
 * system). -1 when it cannot be made so: then it is not bound.
 */
static int share_tree(const char *path) {
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
	};
	int fd = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);

	if (fd >= 0 && mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A directory removed from devnsd's file system, seen in the container: the
 * bind of an endpoint directory of an earlier attachment (bus/endpoint.c
 * removes each when it makes the next). Nothing can be made in it.
 */
static bool removed_share(const struct plan *plan, const struct stat *st) {
	return on_devnsd_fs(plan, st) && S_ISDIR(st->st_mode) && st->st_nlink == 0;
}

/*
 * Unmounts the removed directories bound at job's place (the helper is in
 * the container's mount namespace), and opens the place again for the new
 * bind. A few stacked binds at most: one is removed at each attach.
 */
static int unmount_removed(const struct plan *plan, int root_fd, struct mount_job *job) {
	struct stat st;
	int r;

	for (int i = 0; i < 8; i++) {
		if (fstat(job->target_fd, &st) < 0)
			return -errno;
		if (!removed_share(plan, &st))
			return 0;
		/* The bind's root is the working directory: "." names that mount, wherever it is. */
		if (fchdir(job->target_fd) < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
			return -errno;
		closep(&job->target_fd);
		r = cfs_open_dir(root_fd, job->where, 1, 0755, &job->target_fd);
		if (r < 0)
			return r;
	}
	return -ELOOP;
}

/*
 * The helper's first step: it dies with the zygote (which dies with
 * devnsd), keeps only its result pipe and the container's fds, and looks
 * into none of the container's mounts but those the plan trusts
 * (populate/mount-trust.c).
 */
static void child_begin(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	int r;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	close_others(result_fd, root_fd, mnt_fd);
	cfs_guard_mounts(plan_mount_trusted, plan);
	r = populate_helper_seccomp();
	if (r < 0)
		child_exit(plan, result_fd, r, "refusing itself system calls");
}

/* Becomes the container's root user (drop_privileges()), or ends. */
static void child_drop_privileges(struct plan *plan, int result_fd) {
	int r = drop_privileges(plan);

	if (r < 0)
		child_exit(plan, result_fd, r, "dropping privileges");
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
_Noreturn void populate_child_remove(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	int dirs[POPULATE_MAX];
	const char *names[POPULATE_MAX];
	size_t n = 0;
	bool own_run;

	child_begin(plan, result_fd, root_fd, mnt_fd);
	child_drop_privileges(plan, result_fd);
	container_dirs(plan, result_fd, root_fd, &own_run);
	for (size_t i = 0; i < plan->n; i++) {
		const struct entry *e = &plan->entries[i];
		struct stat st;
		int dir = -1;

		if (own_run && e->record) {
			populate_udev_remove(plan, root_fd, e);
			populate_sysfs_describe_removed(plan, root_fd, e);
			if (plan->result.announce)
				populate_sysfs_forget(root_fd, plan->result.announced.syspath);
		}
		if (populate_open_dir_of(plan, root_fd, e->path, 0, &dir, &names[n]) < 0)
			continue;
		if (cfs_stat_at(dir, names[n], &st) < 0 || !S_ISCHR(st.st_mode) ||
		    st.st_rdev != e->rdev) {
			close(dir);
			continue;
		}
		dirs[n++] = dir;
	}
	if (n > 0 && setns(mnt_fd, CLONE_NEWNS) < 0)
		child_exit(plan, result_fd, -errno, "entering the container's mount namespace");
	for (size_t i = 0; i < n; i++) {
		if (fchdir(dirs[i]) < 0 || umount2(names[i], MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
			continue;
		remove_empty_file(dirs[i], names[i]);
		plan->result.made++;
	}
	child_exit(plan, result_fd, 0, NULL);
}

_Noreturn void populate_child(struct plan *plan, int result_fd, int root_fd, int mnt_fd) {
	struct mount_job jobs[POPULATE_MAX + POPULATE_SHARES + VIEW_MOUNTS_MAX];
	struct sysfs_job sysfs = { .overlay_fd = -1, .target_fd = -1, .parent_fd = -1 };
	size_t n_jobs = 0;
	int host_trees[POPULATE_MAX], share_trees[POPULATE_SHARES], view_trees[VIEW_MOUNTS_MAX];
	bool own_run;
	struct stat st;
	int r;

	child_begin(plan, result_fd, root_fd, mnt_fd);
	/* devnsd's nodes and shares, taken from its own mount namespace while it is still there. */
	for (size_t i = 0; i < plan->n; i++)
		host_trees[i] = (int)open_tree(AT_FDCWD, plan->entries[i].host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	for (size_t i = 0; i < plan->n_shares; i++)
		share_trees[i] = share_tree(plan->shares[i].path);
	populate_views_open(plan, view_trees);

	child_drop_privileges(plan, result_fd);
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
		if (r == -EEXIST || refused(r)) {
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
		if (own_run && e->record) {
			r = populate_udev_write(plan, root_fd, e);
			if (refused(r))
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

		r = cfs_open_dir(root_fd, plan->shares[i].where + 1, 1, 0755, &dir);
		if (r >= 0 && fstat(dir, &st) < 0)
			r = -errno;
		if (r >= 0 && same_inode(&st, &plan->shares[i].st))
			continue; /* bound before */
		if (r >= 0 && removed_share(plan, &st)) {
			jobs[n_jobs++] = (struct mount_job){ .tree_fd = share_trees[i], .target_fd = take_fd(&dir),
							     .stale = true, .where = plan->shares[i].where + 1 };
			continue;
		}
		if (r >= 0 && on_devnsd_fs(plan, &st))
			r = -EXDEV;
		if (refused(r)) {
			refuse(plan, plan->shares[i].where + 1);
			continue;
		}
		if (r < 0 || share_trees[i] < 0)
			child_exit(plan, result_fd, r < 0 ? r : -ENODEV, "making a place for a socket directory");
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = share_trees[i], .target_fd = take_fd(&dir) };
	}
	n_jobs += populate_views_jobs(plan, root_fd, view_trees, jobs + n_jobs);

	/* Mounts need the container's mount namespace; every path was resolved before. */
	if ((n_jobs > 0 || sysfs.overlay_fd >= 0) && setns(mnt_fd, CLONE_NEWNS) < 0)
		child_exit(plan, result_fd, -errno, "entering the container's mount namespace");
	for (size_t i = 0; i < n_jobs; i++) {
		r = jobs[i].stale ? unmount_removed(plan, root_fd, &jobs[i]) : 0;
		if (r < 0 || move_mount(jobs[i].tree_fd, "", jobs[i].target_fd, "",
					MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
			r = r < 0 ? r : -errno;
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
