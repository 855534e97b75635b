/* SPDX-License-Identifier: MIT */
/* PRIME's memory: dma-bufs of dumb buffers through udmabuf, and telling which dma-buf an open file is. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/udmabuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "drm-node.h"
#include "util.h"

/* An fdinfo file is a few short lines; a dma-buf's adds its size, count, exporter and name. */
#define FDINFO_MAX 4096

int drm_dmabuf_parse(char *text, struct drm_dmabuf_id *ret, long *ret_count) {
	bool has_mnt = false, has_ino = false, has_count = false, is_dmabuf = false;
	struct drm_dmabuf_id id = { 0 };
	char *line, *save = NULL;
	long count = -1;

	/*
	 * The first of each line counts: procfs's own lines come first, then
	 * the dma-buf's, and last its name, which whoever holds the dma-buf
	 * sets (DMA_BUF_SET_NAME) and may fill with lines of its own.
	 */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;

		if (!has_mnt && sscanf(line, "mnt_id: %llu", &v) == 1) {
			id.mnt_id = v;
			has_mnt = true;
		} else if (!has_ino && sscanf(line, "ino: %llu", &v) == 1) {
			id.ino = v;
			has_ino = true;
		} else if (!has_count && sscanf(line, "count: %llu", &v) == 1) {
			count = v <= (unsigned long long)LONG_MAX ? (long)v : LONG_MAX;
			has_count = true;
		} else if (strncmp(line, "exp_name:", 9) == 0) {
			is_dmabuf = true;
			/* What follows is the name's. */
			break;
		}
	}
	/* Only the kernel's dma-buf files show an exporter; the inode in fdinfo came with Linux 5.14. */
	if (!is_dmabuf || !has_mnt || !has_ino || (ret_count && !has_count))
		return -EINVAL;
	*ret = id;
	if (ret_count)
		*ret_count = count;
	return 0;
}

int drm_dmabuf_identify(int dirfd, int fd, struct drm_dmabuf_id *ret, long *ret_count) {
	char name[16], buf[FDINFO_MAX];
	_cleanup_(closep) int info = -1;
	size_t len = 0;
	ssize_t k;

	if (fd < 0)
		return -EBADF;
	snprintf(name, sizeof(name), "%d", fd);
	info = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (info < 0)
		return errno == ENOENT ? -EBADF : -errno;
	/* procfs hands a seq_file out in pieces: read to its end. */
	while (len < sizeof(buf) - 1 && (k = read(info, buf + len, sizeof(buf) - 1 - len)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return errno == ENOENT || errno == EBADF ? -EBADF : -errno;
		}
		len += (size_t)k;
	}
	buf[len] = '\0';
	return drm_dmabuf_parse(buf, ret, ret_count);
}

static int udmabuf_export(void *userdata, int fd, uint64_t size, int *ret_dmabuf, struct drm_dmabuf_id *ret_id) {
	struct udmabuf_create create = { .memfd = (uint32_t)fd, .flags = UDMABUF_FLAGS_CLOEXEC, .size = size };
	_cleanup_(closep) int dir = -1, dmabuf = -1;
	const int *udmabuf = userdata;
	int r;
	long count;

	dmabuf = ioctl(*udmabuf, UDMABUF_CREATE, &create);
	if (dmabuf < 0)
		return -errno;
	dir = open("/proc/self/fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	r = drm_dmabuf_identify(dir, dmabuf, ret_id, &count);
	if (r < 0)
		return r;
	*ret_dmabuf = take_fd(&dmabuf);
	return 0;
}

static bool udmabuf_exported_held(void *userdata, int dmabuf) {
	_cleanup_(closep) int dir = -1;
	struct drm_dmabuf_id id;
	long count;

	(void)userdata;
	dir = open("/proc/self/fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Not knowing, the memory stays counted. */
	if (dir < 0 || drm_dmabuf_identify(dir, dmabuf, &id, &count) < 0)
		return true;
	return count > 1;
}

static int udmabuf_alloc(void *userdata, uint64_t size, int *ret_fd) {
	(void)userdata;
	return drm_memfd_ops.alloc(NULL, size, ret_fd);
}

static void udmabuf_release(void *userdata, int fd, uint64_t size) {
	(void)userdata;
	drm_memfd_ops.release(NULL, fd, size);
}

const struct drm_memory_ops drm_udmabuf_ops = {
	.alloc = udmabuf_alloc,
	.release = udmabuf_release,
	.export = udmabuf_export,
	.exported_held = udmabuf_exported_held,
};
