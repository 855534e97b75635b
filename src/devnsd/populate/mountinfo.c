/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "populate/mountinfo.h"
#include "util.h"

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

/* The number after "NAME:" in a list of optional fields such as "shared:3 master:1"; 0 if absent. */
static unsigned int field_number(const char *fields, const char *name) {
	size_t len = strlen(name);

	for (const char *f = fields; f && *f;) {
		f += strspn(f, " ");
		if (strncmp(f, name, len) == 0 && f[len] == ':') {
			char *end;
			unsigned long n = strtoul(f + len + 1, &end, 10);

			return (*end == ' ' || *end == '\0') && n <= UINT32_MAX ? (unsigned int)n : 0;
		}
		f += strcspn(f, " ");
	}
	return 0;
}

unsigned int mountinfo_peer_group(struct libmnt_fs *fs, unsigned int *ret_master) {
	const char *fields = mnt_fs_get_optional_fields(fs);

	if (ret_master)
		*ret_master = field_number(fields, "master");
	return field_number(fields, "shared");
}

int mountinfo_read(int dir_fd, const char *path, size_t max, struct libmnt_table **ret, bool *ret_cut) {
	_cleanup_(closep) int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	int r;

	if (fd < 0)
		return -errno;
	text = malloc(max);
	if (!text)
		return -ENOMEM;
	r = read_bounded(fd, text, max - 1, &len);
	if (r < 0)
		return r;
	if (len == 0)
		return -ENODATA;
	if (ret_cut)
		*ret_cut = len >= max - 1;
	return mountinfo_parse(text, len, ret);
}
