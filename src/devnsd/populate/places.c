/* SPDX-License-Identifier: MIT */
/*
 * Places in the container that the helper opens to make something there:
 * nodes' places (populate/child.c) and udev's records (populate/udev-db.c).
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "container-fs.h"
#include "populate/populate-internal.h"

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
	if (on_devnsd_fs(plan, &st))
		return -EXDEV;
	*ret_fd = take_fd(&fd);
	*ret_name = slash + 1;
	return 0;
}
