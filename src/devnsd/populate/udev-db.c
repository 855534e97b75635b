/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "container-fs.h"
#include "populate/populate-internal.h"

/* The name of a node's record in udev's database: the number of the container's node, the one its sysfs entry gives. */
static void udev_record_name(const struct entry *e, char *buf, size_t size) {
	char name[32];

	udev_db_name(e->rdev, name);
	snprintf(buf, size, "%s", name);
}

/* The tags of e's record: a card's, or an input device's. */
static const char *const *entry_tags(const struct entry *e) {
	return udev_tags(streq(e->kind, "drm") ? "drm" : "input");
}

/* The file run/udev/tags/TAG/NAME, or its directory: what enumerating by tag lists. */
static void tag_path(const char *tag, const char *name, char *buf, size_t size) {
	snprintf(buf, size, "run/udev/tags/%s/%s", tag, name);
}

/* Lists e under each of its tags, as udevd does; best effort, the record is what counts. */
static void write_tags(struct plan *plan, int root_fd, const struct entry *e, const char *name) {
	for (const char *const *tag = entry_tags(e); *tag; tag++) {
		_cleanup_(closep) int dir = -1;
		const char *base;
		char path[96];

		tag_path(*tag, name, path, sizeof(path));
		if (populate_open_dir_of(plan, root_fd, path, 1, &dir, &base) >= 0)
			(void)cfs_touch(dir, base, 0644);
	}
}

/* Removes name in dir if it is a regular file. */
static void remove_file(int dir, const char *name) {
	struct stat st;

	if (cfs_stat_at(dir, name, &st) == 0 && S_ISREG(st.st_mode))
		(void)unlinkat(dir, name, 0);
}

/* The parent input device's id of an input node with a sysfs presentation, or -EINVAL. */
static int parent_of(const struct plan *plan, const struct entry *e, char buf[static UDEV_PARENT_ID_MAX]) {
	if (!streq(e->kind, "input") || e->node < 0)
		return -EINVAL;
	return udev_input_parent(plan->nodes[e->node].syspath, buf);
}

static const char *const parent_tags[] = { "seat", NULL };

/*
 * The record of an input node's parent (inputN), tagged "seat" as udevd
 * tags it, so that systemd-logind in the container counts the node as the
 * seat's; best effort, as the tags are.
 */
static void write_parent(struct plan *plan, int root_fd, int data_dir, const struct entry *e) {
	char id[UDEV_PARENT_ID_MAX], text[256], path[96];
	_cleanup_(closep) int dir = -1;
	const char *base;

	if (parent_of(plan, e, id) < 0 || udev_db_record("", parent_tags, populate_now_usec(), text, sizeof(text)) < 0 ||
	    cfs_write_file(data_dir, id, text, 0644) < 0)
		return;
	tag_path(parent_tags[0], id, path, sizeof(path));
	if (populate_open_dir_of(plan, root_fd, path, 1, &dir, &base) >= 0)
		(void)cfs_touch(dir, base, 0644);
}

static void remove_parent(struct plan *plan, int root_fd, int data_dir, const struct entry *e) {
	char id[UDEV_PARENT_ID_MAX], path[96];
	_cleanup_(closep) int dir = -1;
	const char *base;

	if (parent_of(plan, e, id) < 0)
		return;
	remove_file(data_dir, id);
	tag_path(parent_tags[0], id, path, sizeof(path));
	if (populate_open_dir_of(plan, root_fd, path, 0, &dir, &base) >= 0)
		remove_file(dir, base);
}

/* Udev's database entry, as udevd writes it (udev_db_record()). */
int populate_udev_write(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	char name[32], text[1024];
	const char *base;
	int r;

	r = udev_db_record(e->udev, entry_tags(e), populate_now_usec(), text, sizeof(text));
	if (r < 0)
		return r;
	r = populate_open_dir_of(plan, root_fd, "run/udev/data/x", 1, &dir, &base);
	if (r < 0)
		return r;
	udev_record_name(e, name, sizeof(name));
	r = cfs_write_file(dir, name, text, 0644);
	if (r < 0)
		return r;
	write_tags(plan, root_fd, e, name);
	write_parent(plan, root_fd, dir, e);
	closep(&dir);
	dir = -1;
	r = populate_open_dir_of(plan, root_fd, "run/udev/control", 1, &dir, &base);
	if (r < 0)
		return r;
	/* Clients take udev as running when this exists; whatever is there already stays. */
	r = cfs_touch(dir, base, 0644);
	return r == -EEXIST ? 0 : r;
}

/* Removes the udev record of a node this helper wrote, and its tags' entries: only regular files are taken away. */
void populate_udev_remove(struct plan *plan, int root_fd, const struct entry *e) {
	_cleanup_(closep) int dir = -1;
	const char *base;
	char name[32];

	udev_record_name(e, name, sizeof(name));
	for (const char *const *tag = entry_tags(e); *tag; tag++) {
		_cleanup_(closep) int tag_dir = -1;
		char path[96];

		tag_path(*tag, name, path, sizeof(path));
		if (populate_open_dir_of(plan, root_fd, path, 0, &tag_dir, &base) >= 0)
			remove_file(tag_dir, base);
	}
	if (populate_open_dir_of(plan, root_fd, "run/udev/data/x", 0, &dir, &base) < 0)
		return;
	remove_file(dir, name);
	remove_parent(plan, root_fd, dir, e);
}
