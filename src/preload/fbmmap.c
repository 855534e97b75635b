/* SPDX-License-Identifier: MIT */
/*
 * libdevns-fbmmap.so: LD_PRELOAD it into a program that mmaps a devns
 * framebuffer (/dev/devns/PERSONA/fb0, or that node bound to /dev/fb0).
 * CUSE devices cannot be mapped; for such an fd this library asks devnsd
 * for the persona's framebuffer memory over the socket the node names
 * (DEVNS_FBIOGET_SOCKET), receives it as a memfd and maps that instead.
 * Each mapping keeps its connection open until munmap(), so devnsd knows
 * the frame may change behind its back and refreshes the screen from it.
 * Every other mmap() goes straight to libc.
 */
/* Both mmap and mmap64 are defined below, so the headers must not rename one into the other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "devns-fb.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_MAPPINGS 64

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);

static struct {
	void *addr;
	int sock;
} mappings[MAX_MAPPINGS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static mmap_fn real_mmap(void) {
	static mmap_fn fn;

	if (!fn)
		fn = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
	return fn;
}

static munmap_fn real_munmap(void) {
	static munmap_fn fn;

	if (!fn)
		fn = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
	return fn;
}

/* A CUSE character device whose name ends in fbN, or one sysfs cannot tell about. */
static int maybe_devns_fb(int fd) {
	char link[64], target[PATH_MAX], *name;
	struct stat st;
	ssize_t n;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))
		return 0;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT && access("/sys/dev/char", F_OK) < 0;
	target[n] = '\0';
	name = strrchr(target, '!');
	return strstr(target, "/cuse/") && name && strncmp(name + 1, "fb", 2) == 0;
}

static int receive_memfd(int sock, struct devns_fb_grant *grant) {
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = { .iov_base = grant, .iov_len = sizeof(*grant) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)
	};
	struct cmsghdr *cmsg;
	int memfd = -1;
	ssize_t n;

	do
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	cmsg = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
	if (cmsg && cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS &&
	    cmsg->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&memfd, CMSG_DATA(cmsg), sizeof(int));
	if (memfd >= 0 && (n != (ssize_t)sizeof(*grant) || grant->magic != DEVNS_FB_GRANT_MAGIC)) {
		close(memfd);
		memfd = -1;
	}
	if (memfd < 0)
		errno = n == 0 ? EACCES : (n < 0 ? errno : EPROTO);
	return memfd;
}

/* Connects to the node's socket: the connection, and the memfd in *ret_memfd. -1 with errno on failure. */
static int fetch(int fd, int *ret_memfd, struct devns_fb_grant *grant) {
	struct devns_fb_socket path;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock, saved;

	memset(&path, 0, sizeof(path));
	if (ioctl(fd, DEVNS_FBIOGET_SOCKET, &path) < 0)
		return -1;
	path.path[sizeof(path.path) - 1] = '\0';
	memcpy(sa.sun_path, path.path, sizeof(sa.sun_path) - 1);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -1;
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	*ret_memfd = receive_memfd(sock, grant);
	if (*ret_memfd < 0)
		goto fail;
	return sock;
fail:
	saved = errno;
	close(sock);
	errno = saved;
	return -1;
}

static void *map_devns_fb(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	struct devns_fb_grant grant;
	int memfd, sock, saved, slot = -1;
	void *p;

	sock = fetch(fd, &memfd, &grant);
	if (sock < 0)
		return errno == ENOTTY ? NULL : MAP_FAILED;
	/* The kernel's fb_mmap(): nothing past the framebuffer. */
	if (off < 0 || len > grant.size || (uint64_t)off > grant.size - len) {
		close(memfd);
		close(sock);
		errno = EINVAL;
		return MAP_FAILED;
	}
	p = real_mmap()(addr, len, prot, flags, memfd, off);
	saved = errno;
	close(memfd);
	if (p != MAP_FAILED) {
		pthread_mutex_lock(&lock);
		for (int i = 0; i < MAX_MAPPINGS && slot < 0; i++)
			if (!mappings[i].addr)
				slot = i;
		if (slot >= 0)
			mappings[slot].addr = p, mappings[slot].sock = sock;
		pthread_mutex_unlock(&lock);
	}
	/* Without a slot the mapping still works; only the live refresh stops with the connection. */
	if (p == MAP_FAILED || slot < 0)
		close(sock);
	errno = saved;
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	if (!(flags & MAP_ANONYMOUS) && maybe_devns_fb(fd)) {
		int saved = errno;
		void *p = map_devns_fb(addr, len, prot, flags, fd, off);

		if (p)
			return p;
		/* Not a devns framebuffer after all. */
		errno = saved;
	}
	return real_mmap()(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	return mmap(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) {
	int sock = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_MAPPINGS; i++)
		if (addr && mappings[i].addr == addr) {
			sock = mappings[i].sock;
			mappings[i].addr = NULL;
		}
	pthread_mutex_unlock(&lock);
	if (sock >= 0)
		close(sock);
	return real_munmap()(addr, len);
}
