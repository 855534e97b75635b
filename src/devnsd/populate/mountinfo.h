/* SPDX-License-Identifier: MIT */
#pragma once

#include <libmount.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * populate/mountinfo.c: a container's mount table, parsed by libmount from
 * the text the kernel gave devnsd for /proc/PID/mountinfo (at most len
 * bytes: a container chooses how many mounts it has, so devnsd reads a
 * bounded amount first). Runs in devnsd, before the populate helper
 * starts: the helper is given what was found, never the text. libmount
 * parses only this text: no fstab, no utab, no file of the container's.
 * Lines that do not parse, and a last line without its newline, are
 * skipped.
 */
int mountinfo_parse(const char *text, size_t len, struct libmnt_table **ret);

/*
 * What of a mount table is read (its size is the container's choice):
 * populate leaves a container with a larger one its /sys as it is, and
 * asynchronous tracking is refused to a program whose table is larger.
 */
#define MOUNTINFO_MAX (256 * 1024)

/*
 * Reads at most max - 1 bytes of the mount table at path (relative to
 * dir_fd, opened read-only and non-blocking: a file of the kernel's under
 * /proc) and parses them. -ENODATA for an empty table; *ret_cut, if not
 * NULL, says whether the table was longer than that.
 */
int mountinfo_read(int dir_fd, const char *path, size_t max, struct libmnt_table **ret, bool *ret_cut);

/*
 * The peer group fs is in ("shared:N" among its optional fields), or 0 for
 * a mount that passes nothing on; the group it receives from ("master:N")
 * in *ret_master if that is not NULL, 0 for none.
 */
unsigned int mountinfo_peer_group(struct libmnt_fs *fs, unsigned int *ret_master);

static inline void mnt_free_tablep(struct libmnt_table **tb) {
	mnt_unref_table(*tb);
}
