/* SPDX-License-Identifier: MIT */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Finding the persona views of a dead devnsd in a container's mount table:
 * bind mounts whose file system is the one devnsd's views had (its device
 * number, which the kernel reports and no container can choose, and its
 * type) and whose root is below the persona's directory. Transport-free: it reads
 * /proc/PID/mountinfo text, through libmount (populate/mountinfo.h).
 */

#define VIEW_MOUNTS_MAX 8
/* The views' file system type, as mountinfo names it (FUSE, subtype devns). */
#define VIEW_MOUNTS_FSTYPE "fuse.devns"

struct view_mount {
	/* The mount's id, as statx(STATX_MNT_ID) reports it for a path on it. */
	uint64_t mnt_id;
	/* Where it is mounted, relative to the container's root, without the leading '/'. */
	char target[PATH_MAX];
	/* The directory of the view it shows, relative to the view's mount point ("work/sys/class/leds"). */
	char root[256];
};

/*
 * Fills out[] with up to max mounts of file system dev whose root is
 * persona's directory or below it, from mountinfo text of len bytes. Lines
 * that do not parse are skipped. Returns the number found.
 */
size_t view_mounts_find(const char *text, size_t len, dev_t dev, const char *persona, struct view_mount *out,
			size_t max);
