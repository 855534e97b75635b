/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "container-fs.h"
#include "populate/populate-internal.h"

/*
 * Whether the mount holding fd passes mounts on to peers (the host's, say):
 * then nothing is laid on it. A mount devnsd did not find passing nothing
 * on is taken to pass mounts on.
 */
static bool mount_shared(const struct plan *plan, int fd) {
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return true;
	for (size_t i = 0; i < plan->n_private_mounts; i++)
		if ((uint64_t)plan->private_mounts[i] == stx.stx_mnt_id)
			return false;
	return true;
}


/* A directory (name NULL) or file of the container's /sys to lay something on. */
static int sysfs_target(struct plan *plan, int root_fd, const char *dir, const char *name, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	struct stat st;
	int r;

	r = cfs_open_dir(root_fd, dir, 0, 0, &fd);
	if (r < 0)
		return r;
	if (name) {
		int file = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (file < 0)
			return -errno;
		close(fd);
		fd = file;
		r = cfs_check_mount(fd);
		if (r < 0)
			return r;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (name ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (on_devnsd_fs(plan, &st))
		return -EXDEV;
	if (mount_shared(plan, fd))
		return -EREMOTE;
	*ret_fd = take_fd(&fd);
	return 0;
}

static void sysfs_left(struct plan *plan, const char *why) {
	if (!plan->result.sysfs_left[0])
		snprintf(plan->result.sysfs_left, sizeof(plan->result.sysfs_left), "%s", why);
}

/*
 * Prepares the overlays that make the container's sysfs lead to the
 * persona's input nodes and card, for once the child is in the container's mount
 * namespace. A container whose /sys is missing, or passes mounts on to
 * peers, keeps its /sys as it is.
 */
void populate_sysfs_plan(struct plan *plan, int root_fd, struct sysfs_job *job) {
	int r;

	for (size_t i = 0; i < POPULATE_MAX; i++)
		job->uevent_fd[i] = job->dev_fd[i] = -1;
	if (plan->n_nodes == 0)
		return;
	if (!plan->mounts_read)
		return sysfs_left(plan, "its mount table could not be read");
	r = sysfs_target(plan, root_fd, "sys/dev/char", NULL, &job->target_fd);
	if (r >= 0 && plan->node_job && cfs_open_dir(root_fd, "sys/dev", 0, 0, &job->parent_fd) < 0)
		job->parent_fd = -1;
	if (r == -EREMOTE)
		return sysfs_left(plan, "its /sys passes mounts on to other namespaces");
	if (r == -EMEDIUMTYPE)
		return sysfs_left(plan, "its /sys is on a file system it mounted itself");
	if (r < 0)
		return sysfs_left(plan, "it has no /sys/dev/char of its own");
	/* From the container's own view, so that what earlier attaches or nodes laid there stays. */
	if (udev_overlay_new(job->target_fd, plan->nodes, plan->n_nodes, &job->overlay_fd) < 0) {
		closep(&job->target_fd);
		job->target_fd = -1;
		return sysfs_left(plan, "making its /sys/dev/char failed");
	}
	for (size_t i = 0; i < plan->n_nodes; i++) {
		const char *dir = plan->nodes[i].syspath + 1;
		if (sysfs_target(plan, root_fd, dir, "uevent", &job->uevent_fd[i]) < 0 ||
		    sysfs_target(plan, root_fd, dir, "dev", &job->dev_fd[i]) < 0)
			sysfs_left(plan, "a device's sysfs entry is not there");
	}
}

/*
 * Takes away the /sys/dev/char overlay an earlier populate laid (a
 * read-only tmpfs, whose links the new one copied), so that overlays do
 * not pile up with every device that comes; the target becomes what is
 * under it.
 */
static void unlay_overlay(struct sysfs_job *job) {
	struct statfs sf;
	int fd;

	if (job->parent_fd < 0 || fstatfs(job->target_fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC ||
	    !(sf.f_flags & ST_RDONLY))
		return;
	if (fchdir(job->parent_fd) < 0 || umount2("char", MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		return;
	fd = openat(job->parent_fd, "char", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return;
	if (cfs_check_mount(fd) < 0) {
		close(fd);
		return;
	}
	close(job->target_fd);
	job->target_fd = fd;
}

/* In the container's mount namespace: lays the overlays populate_sysfs_plan() prepared. */
int populate_sysfs_lay(struct plan *plan, struct sysfs_job *job) {
	if (job->overlay_fd < 0)
		return 0;
	unlay_overlay(job);
	if (move_mount(job->overlay_fd, "", job->target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return -errno;
	for (size_t i = 0; i < plan->n_nodes; i++) {
		if (job->uevent_fd[i] < 0 || job->dev_fd[i] < 0)
			continue;
		if (udev_overlay_bind(job->overlay_fd, i, job->uevent_fd[i], job->dev_fd[i]) < 0)
			sysfs_left(plan, "binding a device's sysfs files failed");
		else
			plan->result.presented++;
	}
	return udev_overlay_seal(job->overlay_fd, plan->n_nodes);
}

/*
 * The device a node that goes stood for, as the container's sysfs presents
 * it (its /sys/dev/char entry for the node's number, which an earlier
 * attach or hotplug laid): what its "remove" event names. The kernel's
 * directory may be gone already.
 */
void populate_sysfs_describe_removed(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	struct udev_node *n = &plan->result.announced;
	char name[32], target[UDEV_SYSPATH_MAX];
	ssize_t len;

	if (!plan->node_job || !e->record || strncmp(e->path, "dev/", 4) != 0 ||
	    cfs_open_dir(root_fd, "sys/dev/char", 0, 0, &dir) < 0)
		return;
	snprintf(name, sizeof(name), "%u:%u", major(e->rdev), minor(e->rdev));
	len = readlinkat(dir, name, target, sizeof(target) - 1);
	if (len <= 0)
		return;
	target[len] = '\0';
	/* "../../devices/...", as udev_overlay_new() makes it. */
	if (strncmp(target, "../../devices/", 14) != 0 || strstr(target + 14, "..") ||
	    strlen(e->path + 4) >= sizeof(n->devname) || strlen(e->udev) >= sizeof(n->properties))
		return;
	*n = (struct udev_node){ .devnum = e->rdev };
	snprintf(n->subsystem, sizeof(n->subsystem), "%s", streq(e->kind, "drm") ? "drm" : "input");
	snprintf(n->devtype, sizeof(n->devtype), "%s", streq(e->kind, "drm") ? "drm_minor" : "");
	snprintf(n->syspath, sizeof(n->syspath), "/sys/%s", target + 6);
	snprintf(n->devname, sizeof(n->devname), "%s", e->path + 4);
	snprintf(n->properties, sizeof(n->properties), "%s", e->udev);
	plan->result.announce = true;
}

/*
 * The kernel keeps a removed device's sysfs directory, and the binds laid
 * on its uevent and dev files, until someone looks it up: that finds it
 * gone and drops it, binds and all (their overlay's tmpfs with them).
 */
void populate_sysfs_forget(int root_fd, const char *syspath) {
	_cleanup_(closep) int fd = -1;

	if (strncmp(syspath, "/sys/devices/", 13) == 0)
		(void)cfs_open_dir(root_fd, syspath + 1, 0, 0, &fd);
}
