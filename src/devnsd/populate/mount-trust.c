/* SPDX-License-Identifier: MIT */
/*
 * Which of a container's mounts the helper may look into. A file system
 * the container mounted itself may never answer (FUSE; 9p or NFS over a
 * socket it serves): a process that looks up a name there waits, and once
 * killed waits on in the kernel, unkillable. The helper steps only onto
 * mounts of local file systems, whose answers the kernel gives, and of
 * superblocks the host has mounted itself (a container's root on the
 * host's file systems, whatever their type). Decided in devnsd from the
 * container's mount table; checked by the helper at each step
 * (cfs_guard_mounts()).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "populate/mountinfo.h"
#include "populate/populate-internal.h"

/* devnsd's own mounts looked at, for the superblocks the host has. */
#define HOST_MOUNTS_MAX 4096

static bool local_type(const char *type) {
	static const char *const local[] = {
		"tmpfs", "devtmpfs", "ramfs",	"sysfs", "proc",  "devpts",   "mqueue", "cgroup", "cgroup2",
		"ext2",	 "ext3",     "ext4",	"xfs",	 "btrfs", "squashfs", "erofs",	"vfat",	  "f2fs",
	};

	for (size_t i = 0; type && i < sizeof(local) / sizeof(local[0]); i++)
		if (streq(type, local[i]))
			return true;
	return false;
}

/* The device numbers of devnsd's own mounts (its table own, or none). */
static size_t host_devs(struct libmnt_table *own, dev_t *devs, size_t max) {
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	size_t n = 0;

	if (!own)
		return 0;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	while (it && n < max && mnt_table_next_fs(own, it, &fs) == 0)
		devs[n++] = mnt_fs_get_devno(fs);
	mnt_free_iter(it);
	return n;
}

static bool host_has(const dev_t *devs, size_t n, dev_t dev) {
	for (size_t i = 0; i < n; i++)
		if (devs[i] == dev)
			return true;
	return false;
}

void populate_plan_trust(struct plan *plan, struct libmnt_table *tb, struct libmnt_table *own) {
	_cleanup_(freep) dev_t *devs = calloc(HOST_MOUNTS_MAX, sizeof(*devs));
	size_t n_devs = devs ? host_devs(own, devs, HOST_MOUNTS_MAX) : 0;
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;

	plan->n_trusted_mounts = plan->n_untrusted_mounts = 0;
	while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *type = mnt_fs_get_fstype(fs), *target = mnt_fs_get_target(fs);
		struct plan_mount pm = { .id = mnt_fs_get_id(fs), .dev = mnt_fs_get_devno(fs) };

		snprintf(pm.type, sizeof(pm.type), "%s", type ? type : "?");
		snprintf(pm.target, sizeof(pm.target), "%s", target ? target : "?");
		if (local_type(type) || host_has(devs, n_devs, pm.dev)) {
			if (plan->n_trusted_mounts < PLAN_TRUSTED_MOUNTS_MAX)
				plan->trusted_mounts[plan->n_trusted_mounts++] = pm;
		} else if (plan->n_untrusted_mounts < PLAN_UNTRUSTED_NAMED)
			plan->untrusted_mounts[plan->n_untrusted_mounts++] = pm;
	}
	mnt_free_iter(it);
}

bool plan_mount_trusted(uint64_t mnt_id, void *userdata) {
	struct plan *plan = userdata;
	struct populate_result *res = &plan->result;

	for (size_t i = 0; i < plan->n_trusted_mounts; i++)
		if ((uint64_t)plan->trusted_mounts[i].id == mnt_id)
			return true;
	if (res->untrusted_mount)
		return false;
	res->untrusted_mount = true;
	res->untrusted_id = mnt_id;
	for (size_t i = 0; i < plan->n_untrusted_mounts; i++)
		if ((uint64_t)plan->untrusted_mounts[i].id == mnt_id) {
			snprintf(res->untrusted_type, sizeof(res->untrusted_type), "%s", plan->untrusted_mounts[i].type);
			snprintf(res->untrusted_at, sizeof(res->untrusted_at), "%s", plan->untrusted_mounts[i].target);
		}
	return false;
}
