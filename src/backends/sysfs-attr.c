/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>

#include "led-text.h"
#include "sysfs-attr.h"
#include "util.h"

int sysfs_attr_read(int dirfd, const char *name, char *buf, size_t size) {
	_cleanup_(closep) int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size);
	if (n < 0)
		return -errno;
	if ((size_t)n == size)
		return -EFBIG;
	buf[n] = '\0';
	return (int)n;
}

int sysfs_attr_read_u32(int dirfd, const char *name, uint32_t *ret) {
	char buf[32];
	int r = sysfs_attr_read(dirfd, name, buf, sizeof(buf));

	if (r < 0)
		return r;
	return led_parse_value(buf, (size_t)r, 10, UINT32_MAX, ret);
}

int sysfs_attr_write(int dirfd, const char *name, const char *text) {
	/* O_TRUNC: sysfs ignores it; a plain file standing in for an attribute needs it. */
	_cleanup_(closep) int fd = openat(dirfd, name, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, len);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

int sysfs_attr_write_u32(int dirfd, const char *name, uint32_t value) {
	char buf[16];

	snprintf(buf, sizeof(buf), "%u\n", value);
	return sysfs_attr_write(dirfd, name, buf);
}
