/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>

#include "populate/mountinfo.h"

int mountinfo_parse(const char *text, size_t len, struct libmnt_table **ret) {
	struct libmnt_table *tb;
	FILE *f = NULL;
	int r = 0;

	/* A line cut short is not given to libmount, which would read it (2.38 does). */
	while (len > 0 && text[len - 1] != '\n')
		len--;
	tb = mnt_new_table();
	if (!tb)
		return -ENOMEM;
	if (len > 0) {
		f = fmemopen((void *)text, len, "r");
		if (!f) {
			mnt_unref_table(tb);
			return -errno;
		}
		/*
		 * The name is for libmount's messages, and a lookup it makes of it
		 * (a thread id in /proc/TID/...): not a file of the container's.
		 */
		r = mnt_table_parse_stream(tb, f, "/proc/PID/mountinfo");
		fclose(f);
	}
	if (r < 0) {
		mnt_unref_table(tb);
		return r;
	}
	*ret = tb;
	return 0;
}
