/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "container-fs.h"
#include "restart/state.h"
#include "populate/populate-internal.h"

/* Views a devnsd that died left bound in the container (its mount table is the kernel's text). */
void populate_views_plan(struct manager *m, struct plan *plan, int proc_fd) {
	_cleanup_(freep) char *text = NULL;
	_cleanup_(closep) int fd = -1;
	dev_t old = state_old_view_dev(m);
	const char *dir = state_view_dir(m);
	size_t len;

	if (old == 0 || !dir || strlen(dir) >= sizeof(plan->view_dir))
		return;
	fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	text = malloc(CFS_READ_MAX);
	if (fd < 0 || !text || read_bounded(fd, text, CFS_READ_MAX, &len) < 0)
		return;
	snprintf(plan->view_dir, sizeof(plan->view_dir), "%s", dir);
	plan->n_views = view_mounts_find(text, len, old, plan->persona->name, plan->views, VIEW_MOUNTS_MAX);
}


/* The live view's directories: devnsd (the parent) answers these lookups while this runs. */
void populate_views_open(const struct plan *plan, int *trees) {
	for (size_t i = 0; i < plan->n_views; i++) {
		char path[PATH_MAX + 256];

		snprintf(path, sizeof(path), "%s/%s", plan->view_dir, plan->views[i].root);
		trees[i] = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	}
}

/*
 * A dead view is replaced only where the container's path still leads
 * to that very mount (its id), so nothing else is ever covered.
 */
size_t populate_views_jobs(const struct plan *plan, int root_fd, const int *trees, struct mount_job *jobs) {
	size_t n_jobs = 0;

	for (size_t i = 0; i < plan->n_views; i++) {
		struct open_how how = { .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
					.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		_cleanup_(closep) int dir = -1;
		const char *slash = strrchr(plan->views[i].target, '/');
		char parent[PATH_MAX];
		struct statx stx;
		int fd;

		if (trees[i] < 0)
			continue;
		/* Up to the view, only through mounts the helper looks into; the view itself is a dead devnsd's. */
		snprintf(parent, sizeof(parent), "%.*s", slash ? (int)(slash - plan->views[i].target) : 0,
			 plan->views[i].target);
		if (cfs_open_dir(root_fd, parent, 0, 0, &dir) < 0)
			continue;
		fd = (int)syscall(SYS_openat2, dir, slash ? slash + 1 : plan->views[i].target, &how, sizeof(how));
		if (fd < 0)
			continue;
		if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0 ||
		    !(stx.stx_mask & STATX_MNT_ID) || stx.stx_mnt_id != plan->views[i].mnt_id) {
			close(fd);
			continue;
		}
		jobs[n_jobs++] = (struct mount_job){ .tree_fd = trees[i], .target_fd = fd, .view = true };
	}
	return n_jobs;
}
