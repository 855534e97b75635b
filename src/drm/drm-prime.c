/* SPDX-License-Identifier: MIT */
/* PRIME's memory: dma-bufs of dumb buffers through udmabuf, and whether a program still holds one. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/kcmp.h>
#include <linux/udmabuf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "drm-node.h"
#include "util.h"

/* The fdinfo of the node's own dma-buf, once the locks on it are gone: a few short lines and a name of 32 bytes. */
#define FDINFO_MAX 4096

int drm_dmabuf_count(char *text, long *ret) {
	char *line, *save = NULL;
	bool has_count = false;
	long count = -1;

	/*
	 * The first count counts: procfs's own lines come first, then the
	 * dma-buf's, and last its name, which whoever holds the dma-buf sets
	 * (DMA_BUF_SET_NAME) and may fill with lines of its own.
	 */
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long v;

		if (!has_count && sscanf(line, "count: %llu", &v) == 1) {
			count = v <= (unsigned long long)LONG_MAX ? (long)v : LONG_MAX;
			has_count = true;
		} else if (strncmp(line, "exp_name:", 9) == 0) {
			if (!has_count)
				break;
			*ret = count;
			return 0;
		}
	}
	return -EINVAL;
}

static int udmabuf_create(int udmabuf, int fd, uint64_t size, int *ret_dmabuf) {
	struct udmabuf_create create = { .memfd = (uint32_t)fd, .flags = UDMABUF_FLAGS_CLOEXEC, .size = size };
	int dmabuf = ioctl(udmabuf, UDMABUF_CREATE, &create);

	if (dmabuf < 0)
		return -errno;
	*ret_dmabuf = dmabuf;
	return 0;
}

static bool udmabuf_exported_held(void *userdata, int dmabuf);

int drm_udmabuf_probe(int udmabuf) {
	_cleanup_(closep) int memfd = -1, dmabuf = -1, pidfd = -1, got = -1;
	pid_t self = getpid();
	int r;

	r = drm_memfd_ops.alloc(NULL, (uint64_t)sysconf(_SC_PAGESIZE), &memfd);
	if (r < 0)
		return r;
	r = udmabuf_create(udmabuf, memfd, (uint64_t)sysconf(_SC_PAGESIZE), &dmabuf);
	if (r < 0)
		return r;
	/*
	 * Telling a caller's fd apart: a reference of devnsd's own to the
	 * caller's file (pidfd_getfd(), Linux 5.6), compared with kcmp()
	 * (CONFIG_KCMP); a system call filter may refuse either.
	 */
	pidfd = (int)syscall(SYS_pidfd_open, self, 0);
	if (pidfd < 0)
		return -errno;
	got = (int)syscall(SYS_pidfd_getfd, pidfd, dmabuf, 0);
	if (got < 0)
		return -errno;
	r = (int)syscall(SYS_kcmp, self, self, KCMP_FILE, dmabuf, got);
	if (r != 0)
		return r < 0 ? -errno : -EIO;
	close(got);
	got = -1;
	/* Its references must read as its own alone now. */
	if (udmabuf_exported_held(NULL, dmabuf))
		return -EPROTO;
	return 0;
}

static int udmabuf_export(void *userdata, int fd, uint64_t size, int *ret_dmabuf) {
	const int *udmabuf = userdata;

	return udmabuf_create(*udmabuf, fd, size, ret_dmabuf);
}

/*
 * The dma-buf's file references, from devnsd's own fdinfo of it. A program
 * holding the dma-buf shares devnsd's open file and may have locked it:
 * flock() and open file description locks belong to that file, are listed
 * in its fdinfo before the count, and would stay until the last reference
 * goes. They are lifted first (a lock on a dma-buf guards nothing).
 */
static bool udmabuf_exported_held(void *userdata, int dmabuf) {
	struct flock unlock = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
	char path[64], buf[FDINFO_MAX];
	_cleanup_(closep) int info = -1;
	size_t len;
	long count;

	(void)userdata;
	(void)flock(dmabuf, LOCK_UN | LOCK_NB);
	(void)fcntl(dmabuf, F_OFD_SETLK, &unlock);
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", dmabuf);
	info = open(path, O_RDONLY | O_CLOEXEC);
	/* Not knowing (no fdinfo, or more of it than the few lines left once the locks are gone), it stays counted. */
	if (info < 0 || read_bounded(info, buf, sizeof(buf) - 1, &len) < 0)
		return true;
	buf[len] = '\0';
	return drm_dmabuf_count(buf, &count) < 0 || count > 1;
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
