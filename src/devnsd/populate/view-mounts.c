/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "populate/mountinfo.h"
#include "populate/view-mounts.h"

/* One of the persona's views, mounted in the container: what libmount read of it, checked. */
static bool view_of(struct libmnt_fs *fs, dev_t dev, const char *persona, struct view_mount *ret) {
	const char *type = mnt_fs_get_fstype(fs), *root = mnt_fs_get_root(fs), *target = mnt_fs_get_target(fs);
	size_t plen = strlen(persona);
	int id = mnt_fs_get_id(fs);

	if (id < 0 || mnt_fs_get_devno(fs) != dev || !type || !streq(type, VIEW_MOUNTS_FSTYPE) || !root || !target)
		return false;
	/* "/PERSONA" or "/PERSONA/..." */
	if (root[0] != '/' || strlen(root) >= sizeof(ret->root) || strncmp(root + 1, persona, plen) != 0 ||
	    (root[1 + plen] != '\0' && root[1 + plen] != '/') || strstr(root, "/..") || strstr(root, "//"))
		return false;
	/* Where the kernel would write it: absolute, canonical, not the root. */
	if (target[0] != '/' || !target[1] || strlen(target) >= sizeof(ret->target) || strstr(target, "//"))
		return false;
	ret->mnt_id = (uint64_t)id;
	snprintf(ret->target, sizeof(ret->target), "%s", target + 1);
	snprintf(ret->root, sizeof(ret->root), "%s", root + 1);
	return true;
}

size_t view_mounts_find(const char *text, size_t len, dev_t dev, const char *persona, struct view_mount *out,
			size_t max) {
	_cleanup_(mnt_free_tablep) struct libmnt_table *tb = NULL;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	size_t found = 0;

	if (dev == 0 || mountinfo_parse(text, len, &tb) < 0)
		return 0;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return 0;
	while (found < max && mnt_table_next_fs(tb, it, &fs) == 0)
		if (view_of(fs, dev, persona, &out[found]))
			found++;
	mnt_free_iter(it);
	return found;
}
