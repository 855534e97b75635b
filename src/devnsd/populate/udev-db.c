/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>

#include "container-fs.h"
#include "populate/populate-internal.h"

/* The name of a node's record in udev's database: the number of the container's node, the one its sysfs entry gives. */
static void udev_record_name(const struct entry *e, char *buf, size_t size) {
	char name[32];

	udev_db_name(e->rdev, name);
	snprintf(buf, size, "%s", name);
}

/* Udev's database entry, as udevd writes it (udev_db_record()). */
int populate_udev_write(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	char name[32], text[1024];
	const char *base;
	int r;

	r = udev_db_record(e->udev, populate_now_usec(), text, sizeof(text));
	if (r < 0)
		return r;
	r = populate_open_dir_of(plan, root_fd, "run/udev/data/x", 1, &dir, &base);
	if (r < 0)
		return r;
	udev_record_name(e, name, sizeof(name));
	r = cfs_write_file(dir, name, text, 0644);
	if (r < 0)
		return r;
	closep(&dir);
	dir = -1;
	r = populate_open_dir_of(plan, root_fd, "run/udev/control", 1, &dir, &base);
	if (r < 0)
		return r;
	/* Clients take udev as running when this exists; whatever is there already stays. */
	r = cfs_touch(dir, base, 0644);
	return r == -EEXIST ? 0 : r;
}

/* Removes the udev record of a node this helper wrote: only a regular file is taken away. */
void populate_udev_remove(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	const char *base;
	char name[32];
	struct stat st;

	if (populate_open_dir_of(plan, root_fd, "run/udev/data/x", 0, &dir, &base) < 0)
		return;
	udev_record_name(e, name, sizeof(name));
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		(void)unlinkat(dir, name, 0);
}
