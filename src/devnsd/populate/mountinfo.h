/* SPDX-License-Identifier: MIT */
#pragma once

#include <libmount.h>
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

static inline void mnt_free_tablep(struct libmnt_table **tb) {
	mnt_unref_table(*tb);
}
