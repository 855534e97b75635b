/* SPDX-License-Identifier: MIT */
/*
 * libdevns-fbmmap.so: LD_PRELOAD it into a program that mmaps a devns
 * framebuffer (/dev/devns/PERSONA/fb0, or that node bound to /dev/fb0).
 * CUSE devices cannot be mapped; for such an fd this library asks the
 * node for a ticket (DEVNS_FBIOGET_TICKET), redeems it for the persona's
 * framebuffer memory over the socket the node names (DEVNS_FBIOGET_SOCKET),
 * receives it as a memfd, open for what the fd is open for, and maps that
 * instead. Each mapping keeps its connection open until munmap(), so
 * devnsd knows the frame may change behind its back and refreshes the
 * screen from it. Every other mmap() goes straight to libc.
 *
 * A write() of more than one CUSE request (DEVNS_FB_FAST_WRITE_MIN bytes)
 * to such an fd stores the data into the memfd itself and tells devnsd
 * what changed (DEVNS_FBIO_TELL, DEVNS_FBIO_WROTE_AT): two round trips
 * instead of one per 128 KiB. The data is copied into a mapping of the
 * memfd the library keeps per node, with process_vm_readv() from the
 * program's own buffer, so that a bad buffer gets EFAULT as from write()
 * and not a SIGSEGV; where that fails (a seccomp filter, a fault, a memfd
 * open only for writing, which cannot be mapped) the bytes are stored
 * with pwrite(). DEVNS_FBIO_TELL names the memory the library
 * holds, so memory that is no longer the node's (the persona got fresh
 * memory, or a routed node leads elsewhere) is fetched again before
 * anything is stored. Same bounds and errors as the node's own write();
 * whatever goes wrong before the data is stored falls back to it.
 *
 * A writable shared mapping is also offered to devnsd for tracking
 * (devns-fb.h): the library makes a userfaultfd that takes the kernel's
 * faults too (so that read() into the mapping works while it is
 * write-protected), registers the mapping for write-protection, sends
 * the userfaultfd over the mapping's connection and closes its own copy.
 * devnsd then does nothing while the frame does not change. Where the
 * kernel resolves write faults itself (UFFD_FEATURE_WP_ASYNC, 6.7) the
 * process's own /proc/self/pagemap goes along, and devnsd asks it which
 * pages were written instead of waiting for a fault. Without
 * such a userfaultfd (no CAP_SYS_PTRACE and vm.unprivileged_userfaultfd
 * 0, a seccomp filter, a kernel without write-protection of shared
 * memory) nothing is sent and devnsd scans the frame every refresh. A
 * child forked with a tracked mapping tells devnsd, whose tracking then
 * ends: the child's writes would not fault.
 *
 * CUSE nodes cannot seek either: lseek() of such an fd moves devnsd's
 * stream position of the open file instead (DEVNS_FBIO_SEEK).
 *
 * FBIOPAN_DISPLAY of such an fd passes its offsets by value
 * (DEVNS_FBIO_PAN_AT): one round trip where CUSE needs two to fetch the
 * struct the ioctl points at. The struct is read with process_vm_readv(),
 * so a bad pointer still gets the node's own EFAULT; pans of any other
 * device make no call beyond an fstat() and, once per node, a look at
 * sysfs. Every other ioctl goes straight to libc.
 *
 * The same goes for the dumb buffers of a devns DRM card
 * (/dev/devns/PERSONA/card0, or that node bound to /dev/dri/card0):
 * mmap() at a MAP_DUMB offset asks the card for a ticket of that buffer
 * (DEVNS_DRM_IOCTL_GET_TICKET), redeems it over the socket the card names
 * (DEVNS_DRM_IOCTL_GET_SOCKET) and maps the buffer's memfd from its start.
 * No connection is kept: the program tells the display what it drew
 * through the card itself. The answers are the kernel's drm_gem_mmap():
 * EINVAL for an offset that is not the start of one of the file's
 * buffers, for more than the buffer, for a private mapping; EACCES for a
 * writable shared mapping of a file opened only for reading, or any of a
 * file opened only for writing. Which fds are devns cards: a character
 * device whose sysfs entry is a CUSE device named cardN, or a DRM card
 * (inside a container devns presents the real card's entry for its own
 * node, so that libdrm finds it) that is not the kernel's own (major 226)
 * and answers DEVNS_DRM_IOCTL_GET_SOCKET. That answer is remembered per
 * node, so a card that is not devns' costs one failed ioctl once.
 *
 * DRM_IOCTL_PRIME_HANDLE_TO_FD of such a card, where devnsd offers PRIME,
 * trades the buffer's ticket for its dma-buf (DEVNS_FB_INTENT_DMABUF) and
 * puts that fd in the struct, with FD_CLOEXEC as DRM_CLOEXEC asks.
 */
/* Both mmap and mmap64 are defined below, so the headers must not rename one into the other. */
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fb.h>
#include <linux/userfaultfd.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <drm.h>

#include "devns-drm.h"
#include "devns-fb.h"
#include "fb-stream.h"
#include "pagemap-scan.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_MAPPINGS 64
#define MAX_WRITERS 16
/* Nodes whose kind the library remembers, per cache. */
#define MAX_CACHED_NODES 16
/* The kernel's own DRM nodes: never a devns card, whose CUSE nodes take a dynamic major. */
#define DRM_MAJOR 226
/* CUSE hands a write to devnsd in requests of at most 128 KiB. */
#define DEVNS_FB_FAST_WRITE_MIN (128u * 1024u + 1u)

/* The functions this library stands in front of, resolved when it is loaded (not in a signal handler). */
static struct {
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	void *(*mmap64)(void *, size_t, int, int, int, off64_t);
	int (*munmap)(void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	off_t (*lseek)(int, off_t, int);
	off64_t (*lseek64)(int, off64_t, int);
	int (*ioctl)(int, unsigned long, ...);
} real;

static void forked_child(void);

__attribute__((constructor)) static void resolve(void) {
	real.mmap = (__typeof__(real.mmap))dlsym(RTLD_NEXT, "mmap");
	real.mmap64 = (__typeof__(real.mmap64))dlsym(RTLD_NEXT, "mmap64");
	real.munmap = (__typeof__(real.munmap))dlsym(RTLD_NEXT, "munmap");
	real.write = (__typeof__(real.write))dlsym(RTLD_NEXT, "write");
	real.lseek = (__typeof__(real.lseek))dlsym(RTLD_NEXT, "lseek");
	real.lseek64 = (__typeof__(real.lseek64))dlsym(RTLD_NEXT, "lseek64");
	real.ioctl = (__typeof__(real.ioctl))dlsym(RTLD_NEXT, "ioctl");
}

__attribute__((constructor)) static void watch_fork(void) {
	pthread_atfork(NULL, NULL, forked_child);
}

/* For calls that come before the constructor ran (from other libraries' constructors). */
#define REAL(name) (real.name ? real.name : (resolve(), real.name))

static struct {
	void *addr;
	int sock;
	bool tracked;
} mappings[MAX_MAPPINGS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Framebuffer nodes written to, by device and inode, with their memfd
 * (-1: not a devns framebuffer). The memfd's own identity is kept too: a
 * program may close descriptors it does not know about.
 */
static struct writer {
	dev_t rdev;
	ino_t ino;
	int memfd;
	dev_t memfd_dev;
	ino_t memfd_ino;
	uint64_t size;
	uint64_t serial;
	/* The memfd mapped for stores: NULL until the first, MAP_FAILED when it cannot be. */
	void *map;
} writers[MAX_WRITERS];
static unsigned int n_writers, next_writer;
static pthread_mutex_t writers_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Answers the library remembers about nodes, by device and inode: the
 * oldest goes first. Lookups and stores never wait (a signal handler, or
 * another thread meanwhile, asks the node again).
 */
struct node_cache {
	pthread_mutex_t lock;
	unsigned int n, next;
	struct {
		dev_t rdev;
		ino_t ino;
		int value;
	} nodes[MAX_CACHED_NODES];
};
#define NODE_CACHE_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* The value remembered for the node st describes, or -1. */
static int node_cache_get(struct node_cache *c, const struct stat *st) {
	int value = -1;

	if (pthread_mutex_trylock(&c->lock) != 0)
		return -1;
	for (unsigned int i = 0; i < c->n && value < 0; i++)
		if (c->nodes[i].rdev == st->st_rdev && c->nodes[i].ino == st->st_ino)
			value = c->nodes[i].value;
	pthread_mutex_unlock(&c->lock);
	return value;
}

static void node_cache_set(struct node_cache *c, const struct stat *st, int value) {
	unsigned int i;

	if (pthread_mutex_trylock(&c->lock) != 0)
		return;
	for (i = 0; i < c->n; i++)
		if (c->nodes[i].rdev == st->st_rdev && c->nodes[i].ino == st->st_ino)
			break;
	if (i == c->n)
		i = c->n < MAX_CACHED_NODES ? c->n++ : c->next++ % MAX_CACHED_NODES;
	c->nodes[i].rdev = st->st_rdev;
	c->nodes[i].ino = st->st_ino;
	c->nodes[i].value = value;
	pthread_mutex_unlock(&c->lock);
}

/* What a character device may be; both when sysfs cannot tell. */
#define NODE_FB 1
#define NODE_CARD 2

static bool is_card_name(const char *name) {
	if (strncmp(name, "card", 4) != 0 || !name[4])
		return false;
	return strspn(name + 4, "0123456789") == strlen(name + 4);
}

/*
 * From the entry sysfs has for the node's number: NODE_FB for a CUSE
 * device whose name ends in fbN, NODE_CARD for a CUSE device named cardN
 * or a DRM card that is not the kernel's own, both where sysfs cannot
 * tell, 0 otherwise.
 */
static int node_kind(const struct stat *st) {
	char link[64], target[PATH_MAX], *bang, *base;
	bool cuse;
	ssize_t n;

	if (!S_ISCHR(st->st_mode) || major(st->st_rdev) == DRM_MAJOR)
		return 0;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", major(st->st_rdev), minor(st->st_rdev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT && access("/sys/dev/char", F_OK) < 0 ? NODE_FB | NODE_CARD : 0;
	target[n] = '\0';
	cuse = strstr(target, "/cuse/");
	bang = strrchr(target, '!');
	if (cuse && bang && strncmp(bang + 1, "fb", 2) == 0)
		return NODE_FB;
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (cuse && bang > base)
		base = bang + 1;
	/* Not a CUSE device: a DRM card's own entry, .../drm/cardN. */
	if (!cuse && (base - target < 5 || memcmp(base - 5, "/drm/", 5) != 0))
		return 0;
	return is_card_name(base) ? NODE_CARD : 0;
}

/* A CUSE character device whose name ends in fbN, or one sysfs cannot tell about. */
static int maybe_devns_fb(int fd) {
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && (node_kind(&st) & NODE_FB);
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
	if (memfd >= 0)
		return memfd;
	if (n == (ssize_t)sizeof(*grant) && grant->magic == DEVNS_FB_GRANT_MAGIC && grant->error > 0 &&
	    grant->error < 4096)
		errno = (int)grant->error; /* a dma-buf devnsd could not give, and why */
	else
		errno = n == 0 ? EACCES : (n < 0 ? errno : EPROTO);
	return -1;
}

/*
 * Redeems req's ticket at the socket path names: the connection, and the
 * memfd in *ret_memfd. -1 with errno on failure.
 */
static int redeem(struct devns_fb_socket *path, const struct devns_fb_request *req, int *ret_memfd,
		  struct devns_fb_grant *grant) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock, saved;

	path->path[sizeof(path->path) - 1] = '\0';
	memcpy(sa.sun_path, path->path, sizeof(sa.sun_path) - 1);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -1;
	/* The request goes in one piece: devnsd takes one read as the whole of it. */
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(sock, req, sizeof(*req), MSG_NOSIGNAL) != (ssize_t)sizeof(*req))
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

/*
 * Takes a ticket of the framebuffer fd is open on and redeems it, saying
 * what the memfd is for: the connection, and the memfd in *ret_memfd. -1
 * with errno on failure.
 */
static int fetch(int fd, char intent, int *ret_memfd, struct devns_fb_grant *grant) {
	struct devns_fb_request req = { .magic = DEVNS_FB_REQUEST_MAGIC, .intent = (__u8)intent };
	struct devns_fb_socket path;

	memset(&path, 0, sizeof(path));
	if (REAL(ioctl)(fd, DEVNS_FBIOGET_SOCKET, &path) < 0 || REAL(ioctl)(fd, DEVNS_FBIOGET_TICKET, &req.ticket) < 0)
		return -1;
	return redeem(&path, &req, ret_memfd, grant);
}

/*
 * The userfaultfd features the kernel offers (UFFDIO_API with none asked
 * answers with them), asked once per process: a userfaultfd takes one
 * UFFDIO_API, so the one that tracks is made after.
 */
static uint64_t uffd_features(void) {
	static uint64_t features;
	static bool known;
	struct uffdio_api api = { .api = UFFD_API };
	int uffd;

	if (known)
		return features;
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		return 0;
	if (ioctl(uffd, UFFDIO_API, &api) == 0)
		features = api.features;
	close(uffd);
	known = true;
	return features;
}

/* DEVNS_FB_TRACK=faults keeps tracking to write faults where the kernel could do without (devns-framebuffer(7)). */
static bool async_wanted(void) {
	const char *v = secure_getenv("DEVNS_FB_TRACK");

	return !v || strcmp(v, "faults") != 0;
}

/*
 * Offers the mapping [p, p + len) at offset off to devnsd for tracking
 * over sock: whether a userfaultfd was sent. Never waits for devnsd.
 * Where the kernel resolves write faults itself (UFFD_FEATURE_WP_ASYNC,
 * Linux 6.7) and the process can open its own pagemap, the mapping is
 * registered with such a userfaultfd, which goes with the pagemap and a
 * second, plain userfaultfd (DEVNS_FB_TRACK_ASYNC): devnsd then asks the
 * pagemap which pages were written (PAGEMAP_SCAN) and no write waits for
 * it, and moves the range to the second one while the frame does not
 * change, so that the next write faults there.
 */
static bool track(int sock, void *p, size_t len, off_t off) {
	long page = sysconf(_SC_PAGESIZE);
	size_t span = page > 0 ? (len + (size_t)page - 1) / (size_t)page * (size_t)page : len;
	uint64_t offered = uffd_features();
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)p, .len = span },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};
	struct devns_fb_track msg = {
		.magic = DEVNS_FB_TRACK_MAGIC, .addr = (uintptr_t)p, .len = span, .offset = (uint64_t)off
	};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(3 * sizeof(int))];
	} control = { 0 };
	struct iovec iov = { .iov_base = &msg, .iov_len = sizeof(msg) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = CMSG_SPACE(sizeof(int))
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&mh);
	struct uffdio_api plain = { .api = UFFD_API };
	int fds[3] = { -1, -1, -1 }, n_fds = 1;
	bool sent;

	if (!(offered & UFFD_FEATURE_WP_HUGETLBFS_SHMEM))
		return false;
	if ((offered & UFFD_FEATURE_WP_ASYNC) && async_wanted()) {
		fds[1] = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC | O_NOCTTY);
		if (fds[1] >= 0)
			fds[2] = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
		if (fds[2] >= 0 && ioctl(fds[2], UFFDIO_API, &plain) == 0) {
			api.features = UFFD_FEATURE_WP_ASYNC | (offered & UFFD_FEATURE_WP_UNPOPULATED);
			n_fds = 3;
		}
	}
	/* Not UFFD_USER_MODE_ONLY: the kernel's own writes into the mapping (read() into it) must fault too. */
	fds[0] = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	sent = fds[0] >= 0 && ioctl(fds[0], UFFDIO_API, &api) == 0 && ioctl(fds[0], UFFDIO_REGISTER, &reg) == 0 &&
	       (reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT));
	if (sent) {
		if (n_fds == 3)
			msg.flags = DEVNS_FB_TRACK_ASYNC;
		mh.msg_controllen = CMSG_SPACE((size_t)n_fds * sizeof(int));
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN((size_t)n_fds * sizeof(int));
		memcpy(CMSG_DATA(cmsg), fds, (size_t)n_fds * sizeof(int));
		sent = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg);
	}
	/* devnsd's copies are the only ones left: if devnsd goes, the kernel releases the mapping. */
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return sent;
}

/* In a child forked with tracked mappings: devnsd stops relying on faults, which the child's writes would not cause. */
static void forked_child(void) {
	for (int i = 0; i < MAX_MAPPINGS; i++)
		if (mappings[i].addr && mappings[i].tracked) {
			(void)send(mappings[i].sock, "f", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			mappings[i].tracked = false;
		}
}

/* The mapping of a devns framebuffer, MAP_FAILED with errno, or NULL for any other node. */
static void *map_devns_fb(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
	struct devns_fb_grant grant;
	int memfd, sock, saved, slot = -1;
	void *p;

	/* A devns framebuffer is far smaller than off_t can count. */
	if ((off_t)off != off)
		return NULL;
	sock = fetch(fd, DEVNS_FB_INTENT_MAP, &memfd, &grant);
	if (sock < 0)
		return errno == ENOTTY ? NULL : MAP_FAILED;
	/* The kernel's fb_mmap(): nothing past the framebuffer. */
	if (off < 0 || len > grant.size || (uint64_t)off > grant.size - len) {
		close(memfd);
		close(sock);
		errno = EINVAL;
		return MAP_FAILED;
	}
	p = REAL(mmap)(addr, len, prot, flags, memfd, (off_t)off);
	saved = errno;
	close(memfd);
	if (p != MAP_FAILED) {
		pthread_mutex_lock(&lock);
		for (int i = 0; i < MAX_MAPPINGS && slot < 0; i++)
			if (!mappings[i].addr)
				slot = i;
		if (slot >= 0) {
			mappings[slot].addr = p, mappings[slot].sock = sock;
			mappings[slot].tracked = (prot & PROT_WRITE) && (flags & MAP_TYPE) != MAP_PRIVATE &&
						 track(sock, p, len, (off_t)off);
		}
		pthread_mutex_unlock(&lock);
	}
	/* Without a slot the mapping still works; only the live refresh stops with the connection. */
	if (p == MAP_FAILED || slot < 0)
		close(sock);
	errno = saved;
	return p;
}

/*
 * Nodes asked for a card's socket, and what they turned out to be:
 * NODE_CARD for a devns card; for any other, what else they may be.
 */
static struct node_cache card_nodes = NODE_CACHE_INIT;

/*
 * The socket of the devns card fd is open on, in *path: 1; 0 when it is
 * not one (the kernel's DRM core answers EINVAL, other drivers ENOTTY);
 * -1 with errno when the card failed otherwise. kind is what sysfs said:
 * where it could not tell, any failure means another device.
 */
static int card_socket(int fd, const struct stat *st, int kind, struct devns_fb_socket *path) {
	memset(path, 0, sizeof(*path));
	if (REAL(ioctl)(fd, DEVNS_DRM_IOCTL_GET_SOCKET, path) == 0) {
		node_cache_set(&card_nodes, st, NODE_CARD);
		return 1;
	}
	if (errno != EINVAL && errno != ENOTTY)
		return kind == NODE_CARD ? -1 : 0;
	node_cache_set(&card_nodes, st, kind & ~NODE_CARD);
	return 0;
}

static uint64_t page_align(uint64_t n, uint64_t page) {
	return n > UINT64_MAX - (page - 1) ? UINT64_MAX : (n + page - 1) / page * page;
}

/*
 * The mapping of the dumb buffer at off of the devns card fd is open on,
 * MAP_FAILED with errno, or NULL for any other node (kind: what sysfs
 * said of it). The checks are the kernel's, in its order: mmap()'s, then
 * drm_gem_mmap()'s (an unknown offset, which devnsd answers with ENOENT,
 * more than the buffer, a private mapping: EINVAL).
 */
static void *map_devns_card(void *addr, size_t len, int prot, int flags, int fd, const struct stat *st, int kind,
			    off64_t off) {
	struct devns_fb_request req = { .magic = DEVNS_FB_REQUEST_MAGIC, .intent = DEVNS_FB_INTENT_MAP };
	struct devns_drm_ticket ticket = { .offset = (uint64_t)off };
	struct devns_fb_socket path;
	struct devns_fb_grant grant;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	int r, mode, memfd, sock, saved;
	void *p = MAP_FAILED;

	r = card_socket(fd, st, kind, &path);
	if (r <= 0)
		return r == 0 ? NULL : MAP_FAILED;
	mode = fcntl(fd, F_GETFL);
	if (mode < 0)
		return MAP_FAILED;
	mode &= O_ACCMODE;
	if (len == 0 || ticket.offset % page != 0) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (mode == O_WRONLY || (mode == O_RDONLY && (prot & PROT_WRITE) && (flags & MAP_TYPE) != MAP_PRIVATE)) {
		errno = EACCES;
		return MAP_FAILED;
	}
	if ((flags & MAP_TYPE) == MAP_PRIVATE) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (REAL(ioctl)(fd, DEVNS_DRM_IOCTL_GET_TICKET, &ticket) < 0) {
		if (errno == ENOENT)
			errno = EINVAL;
		return MAP_FAILED;
	}
	req.ticket = ticket.ticket;
	sock = redeem(&path, &req, &memfd, &grant);
	if (sock < 0)
		return MAP_FAILED;
	/* devnsd closes the connection: the mapping needs none. */
	close(sock);
	if (page_align(len, page) > page_align(grant.size, page))
		errno = EINVAL;
	else
		p = REAL(mmap)(addr, len, prot, flags, memfd, 0);
	saved = errno;
	close(memfd);
	errno = saved;
	return p;
}

/*
 * DRM_IOCTL_PRIME_HANDLE_TO_FD of a devns card whose devnsd makes dma-bufs:
 * 1 with the result in *ret, 0 to leave the ioctl to the node (any other
 * fd, a card without PRIME, flags or a struct the node refuses as the
 * kernel does). The handle's MAP_DUMB offset gets a ticket, which devnsd
 * redeems for the buffer's dma-buf (devns-drm.h). The struct is read and
 * written with process_vm_readv() and process_vm_writev(), so a bad pointer
 * gets EFAULT, not a SIGSEGV.
 */
static int export_devns_card(int fd, void *arg, int *ret) {
	struct devns_fb_request req = { .magic = DEVNS_FB_REQUEST_MAGIC, .intent = DEVNS_FB_INTENT_DMABUF };
	struct drm_prime_handle args;
	struct iovec local = { &args, sizeof(args) }, remote = { arg, sizeof(args) };
	struct drm_get_cap cap = { .capability = DRM_CAP_PRIME };
	struct drm_mode_map_dumb map = { 0 };
	struct devns_drm_ticket ticket = { 0 };
	struct devns_fb_socket path;
	struct devns_fb_grant grant;
	int saved = errno, kind, dmabuf, sock;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode))
		goto not_ours;
	kind = node_cache_get(&card_nodes, &st);
	if (kind < 0)
		kind = node_kind(&st);
	if (!(kind & NODE_CARD) || card_socket(fd, &st, kind, &path) <= 0)
		goto not_ours;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(args) ||
	    (args.flags & ~(uint32_t)(DRM_CLOEXEC | DRM_RDWR)))
		goto not_ours;
	if (REAL(ioctl)(fd, DRM_IOCTL_GET_CAP, &cap) < 0 || !(cap.value & DRM_PRIME_CAP_EXPORT))
		goto not_ours;
	/* From here on the answer is this library's, as the kernel's would be. */
	*ret = -1;
	map.handle = args.handle;
	if (REAL(ioctl)(fd, DRM_IOCTL_MODE_MAP_DUMB, &map) < 0)
		return 1;
	ticket.offset = map.offset;
	if (REAL(ioctl)(fd, DEVNS_DRM_IOCTL_GET_TICKET, &ticket) < 0)
		return 1;
	req.ticket = ticket.ticket;
	sock = redeem(&path, &req, &dmabuf, &grant);
	if (sock < 0)
		return 1;
	close(sock);
	if (!(args.flags & DRM_CLOEXEC) && fcntl(dmabuf, F_SETFD, 0) < 0) {
		saved = errno;
		close(dmabuf);
		errno = saved;
		return 1;
	}
	args.fd = dmabuf;
	if (process_vm_writev(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(args)) {
		close(dmabuf);
		errno = EFAULT;
		return 1;
	}
	errno = saved;
	*ret = 0;
	return 1;
not_ours:
	errno = saved;
	return 0;
}

/* The mapping of a devns framebuffer or dumb buffer, MAP_FAILED with errno, or NULL (errno kept) for any other fd. */
static void *try_map_devns(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
	int saved = errno, kind;
	struct stat st;
	void *p = NULL;

	if ((flags & MAP_ANONYMOUS) || fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
		errno = saved;
		return NULL;
	}
	/* A node already asked needs no look at sysfs. */
	kind = node_cache_get(&card_nodes, &st);
	if (kind < 0)
		kind = node_kind(&st);
	if (kind & NODE_CARD)
		p = map_devns_card(addr, len, prot, flags, fd, &st, kind, off);
	if (!p && (kind & NODE_FB))
		p = map_devns_fb(addr, len, prot, flags, fd, off);
	if (!p)
		errno = saved; /* not a devns node after all */
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	void *p = try_map_devns(addr, len, prot, flags, fd, off);

	return p ? p : REAL(mmap)(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
	void *p = try_map_devns(addr, len, prot, flags, fd, off);

	return p ? p : REAL(mmap64)(addr, len, prot, flags, fd, off);
}

EXPORT int munmap(void *addr, size_t len) {
	int sock = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_MAPPINGS; i++)
		if (addr && mappings[i].addr == addr) {
			sock = mappings[i].sock;
			mappings[i].addr = NULL;
			mappings[i].tracked = false;
		}
	pthread_mutex_unlock(&lock);
	if (sock >= 0)
		close(sock);
	return REAL(munmap)(addr, len);
}

/* Whether fd is the memfd a writer entry stored (the program may have closed it and reused the number). */
static bool writer_memfd_is(const struct writer *w, int fd, struct stat *ret) {
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_dev != w->memfd_dev || st.st_ino != w->memfd_ino)
		return false;
	if (ret)
		*ret = st;
	return true;
}

static void writer_unmap(struct writer *w) {
	if (w->map && w->map != MAP_FAILED)
		REAL(munmap)(w->map, w->size);
	w->map = NULL;
}

/* process_vm_readv() refused to this process (a seccomp filter): stores go by pwrite() from then on. */
static bool copy_refused;

/*
 * The writer entry for the node fd is open on, set up on first use, or
 * fetched again with refetch; NULL: not a devns framebuffer.
 */
static struct writer *writer_of(int fd, const struct stat *st, bool refetch) {
	struct devns_fb_grant grant;
	struct writer *w = NULL;
	struct stat mst;
	int memfd = -1, sock;

	for (unsigned int i = 0; i < n_writers && !w; i++)
		if (writers[i].rdev == st->st_rdev && writers[i].ino == st->st_ino)
			w = &writers[i];
	if (w && w->memfd < 0 && !refetch)
		return NULL;
	if (w && writer_memfd_is(w, w->memfd, NULL)) {
		if (!refetch)
			return w;
		close(w->memfd);
		w->memfd = -1;
	}
	if (w)
		writer_unmap(w);
	/* New, or its memfd was closed behind the library's back: fetch it (again). */
	if (maybe_devns_fb(fd) && (sock = fetch(fd, DEVNS_FB_INTENT_WRITE, &memfd, &grant)) >= 0) {
		close(sock);
		if (fstat(memfd, &mst) < 0) {
			close(memfd);
			memfd = -1;
		}
	}
	/* A refetched entry keeps its place; the number its memfd had is somebody else's now. */
	if (!w && n_writers < MAX_WRITERS)
		w = &writers[n_writers++];
	else if (!w) {
		w = &writers[next_writer];
		next_writer = (next_writer + 1) % MAX_WRITERS;
		if (writer_memfd_is(w, w->memfd, NULL))
			close(w->memfd);
		writer_unmap(w);
	}
	*w = (struct writer){ .rdev = st->st_rdev, .ino = st->st_ino, .memfd = memfd };
	if (memfd < 0)
		return NULL;
	w->memfd_dev = mst.st_dev;
	w->memfd_ino = mst.st_ino;
	w->size = grant.size;
	w->serial = grant.serial;
	return w;
}

/* The stream position, once the writer's memory is the node's (fetched again if it was not); -1 with errno. */
static int writer_tell(int fd, const struct stat *st, struct writer **w) {
	int pos;

	*w = writer_of(fd, st, false);
	if (!*w)
		return -1;
	pos = ioctl(fd, DEVNS_FBIO_TELL, (unsigned long)(*w)->serial);
	if (pos >= 0 || errno != ESTALE)
		return pos;
	*w = writer_of(fd, st, true);
	return *w ? ioctl(fd, DEVNS_FBIO_TELL, (unsigned long)(*w)->serial) : -1;
}

/*
 * Stores len bytes of buf at pos of the writer's memory: the count stored,
 * or -1 with errno. A copy into the mapping that falls short (a bad
 * buffer, or memory devnsd has given up meanwhile) is made again with
 * pwrite(), whose answer is write()'s: EFAULT for a bad buffer.
 */
static ssize_t writer_store(struct writer *w, const void *buf, size_t len, uint64_t pos) {
	int saved = errno;

	/* A memfd open only for writing cannot be mapped: tried once. */
	if (!w->map && !copy_refused) {
		w->map = REAL(mmap)(NULL, w->size, PROT_READ | PROT_WRITE, MAP_SHARED, w->memfd, 0);
		/* The screen's memory stays out of the program's core dumps. */
		if (w->map != MAP_FAILED)
			(void)madvise(w->map, w->size, MADV_DONTDUMP);
	}
	if (w->map && w->map != MAP_FAILED && !copy_refused) {
		struct iovec local = { (char *)w->map + pos, len }, remote = { (void *)buf, len };

		if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)len)
			return (ssize_t)len;
		if (errno == EPERM || errno == ENOSYS)
			copy_refused = true;
		errno = saved;
	}
	return pwrite(w->memfd, buf, len, (off_t)pos);
}

/* Tells devnsd that count bytes at pos changed: in one round trip where the range fits the argument. */
static int report_wrote(int fd, uint64_t pos, uint64_t count) {
	struct devns_fb_wrote wrote = { .pos = pos, .count = count };

	if (sizeof(unsigned long) == sizeof(uint64_t) && pos <= UINT32_MAX && count <= UINT32_MAX) {
		if (ioctl(fd, DEVNS_FBIO_WROTE_AT, (unsigned long)DEVNS_FB_WROTE_AT_ARG(pos, count)) == 0)
			return 0;
		/* A devnsd older than the library knows only the other form. */
		if (errno != ENOTTY)
			return -1;
	}
	return ioctl(fd, DEVNS_FBIO_WROTE, &wrote);
}

/* 1 with *ret set when the write was done here, 0 to leave it to the node. */
static int fast_write(int fd, const void *buf, size_t count, ssize_t *ret) {
	struct writer *w;
	struct stat st;
	long len;
	int pos, mode, saved = errno, done = 0;
	ssize_t n;

	/* Only an fd open for writing; the node itself answers the others (EBADF). */
	mode = fcntl(fd, F_GETFL);
	if (mode < 0 || (mode & O_ACCMODE) == O_RDONLY || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
		errno = saved;
		return 0;
	}
	/* A write from a signal handler, or from another thread meanwhile, takes the plain path. */
	if (pthread_mutex_trylock(&writers_lock) != 0)
		return 0;
	pos = writer_tell(fd, &st, &w);
	if (pos >= 0) {
		len = fb_stream_clamp(w->size, (uint64_t)pos, count, true);
		done = 1;
		*ret = -1;
		if (len < 0)
			saved = (int)-len;
		else if ((n = writer_store(w, buf, (size_t)len, (uint64_t)pos)) < 0)
			saved = errno;
		else {
			/* Said with the position written at: another writer may have moved the stream meanwhile. */
			if (n > 0 && report_wrote(fd, (uint64_t)pos, (uint64_t)n) < 0)
				saved = errno;
			else
				*ret = n;
		}
	}
	pthread_mutex_unlock(&writers_lock);
	errno = saved;
	return done;
}

EXPORT ssize_t write(int fd, const void *buf, size_t count) {
	ssize_t n;

	if (count >= DEVNS_FB_FAST_WRITE_MIN && fast_write(fd, buf, count, &n))
		return n;
	return REAL(write)(fd, buf, count);
}

/*
 * lseek() of a devns framebuffer: devnsd's stream position of the open
 * file. 0 when fd turns out not to be one (the caller keeps the original
 * answer), 1 with the result in *ret.
 */
static int seek_devns_fb(int fd, int64_t off, int whence, int64_t *ret) {
	struct fb_fix_screeninfo fix;
	int64_t base = 0;
	int saved = errno;

	if (whence == SEEK_CUR) {
		base = ioctl(fd, DEVNS_FBIO_TELL, 0UL);
		if (base < 0 && errno != EOVERFLOW)
			goto not_ours;
	} else if (whence == SEEK_END) {
		if (ioctl(fd, FBIOGET_FSCREENINFO, &fix) < 0)
			goto not_ours;
		base = fix.smem_len;
	} else if (whence != SEEK_SET) {
		/* SEEK_DATA, SEEK_HOLE: not for a device, ours or not. */
		goto not_ours;
	}
	*ret = -1;
	if (base < 0)
		return 1; /* EOVERFLOW from DEVNS_FBIO_TELL */
	if (off < -base || __builtin_add_overflow(base, off, &base) || (unsigned long)base != (uint64_t)base) {
		errno = EINVAL;
		return 1;
	}
	if (ioctl(fd, DEVNS_FBIO_SEEK, (unsigned long)base) < 0) {
		if (errno == ENOTTY)
			goto not_ours;
		return 1;
	}
	*ret = base;
	return 1;
not_ours:
	errno = saved;
	return 0;
}

/*
 * CUSE answers lseek() with 0 and moves nothing; other nodes that cannot
 * seek fail with ESPIPE. Only then is the fd looked at.
 */
static bool may_seek_devns_fb(int fd, int64_t r, int err) {
	struct stat st;

	return (r == 0 || (r < 0 && err == ESPIPE)) && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && maybe_devns_fb(fd);
}

EXPORT off_t lseek(int fd, off_t off, int whence) {
	int saved = errno;
	off_t r = REAL(lseek)(fd, off, whence);
	int err = r < 0 ? errno : saved;
	int64_t pos;

	if (may_seek_devns_fb(fd, r, err) && seek_devns_fb(fd, off, whence, &pos)) {
		if (pos >= 0 && (off_t)pos != pos) {
			errno = EOVERFLOW;
			return -1;
		}
		return (off_t)pos;
	}
	errno = err;
	return r;
}

EXPORT off64_t lseek64(int fd, off64_t off, int whence) {
	int saved = errno;
	off64_t r = REAL(lseek64)(fd, off, whence);
	int err = r < 0 ? errno : saved;
	int64_t pos;

	if (may_seek_devns_fb(fd, r, err) && seek_devns_fb(fd, off, whence, &pos))
		return pos;
	errno = err;
	return r;
}

/* Nodes a pan was made on: 1 for a devns framebuffer, 0 for any other. */
static struct node_cache pan_nodes = NODE_CACHE_INIT;

/*
 * 1: a devns framebuffer for sure, one that answers DEVNS_FBIO_TELL, which
 * no kernel driver knows; 0: not one (not a CUSE framebuffer, or ENOTTY);
 * -1: cannot tell now (the node failed otherwise), asked again next time.
 */
static int is_devns_fb(int fd) {
	if (!maybe_devns_fb(fd))
		return 0;
	if (REAL(ioctl)(fd, DEVNS_FBIO_TELL, 0UL) >= 0 || errno == EOVERFLOW)
		return 1;
	return errno == ENOTTY ? 0 : -1;
}

static bool pan_node_is_devns_fb(int fd, const struct stat *st) {
	int r = node_cache_get(&pan_nodes, st);

	if (r < 0 && (r = is_devns_fb(fd)) >= 0)
		node_cache_set(&pan_nodes, st, r);
	return r > 0;
}

/*
 * FBIOPAN_DISPLAY of a devns framebuffer, by value: 1 with the result in
 * *ret, 0 to leave the ioctl to the node (not a devns framebuffer, a
 * devnsd that does not know DEVNS_FBIO_PAN_AT, FB_VMODE_YWRAP, or a
 * struct that cannot be read, which the node answers with EFAULT).
 */
static int pan_devns_fb(int fd, const void *arg, int *ret) {
	struct fb_var_screeninfo var;
	struct iovec local = { &var, sizeof(var) }, remote = { (void *)arg, sizeof(var) };
	struct stat st;
	int saved = errno;

	/* Only a devns framebuffer's pan makes a system call the program did not make. */
	if (sizeof(unsigned long) != sizeof(uint64_t) || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) ||
	    !pan_node_is_devns_fb(fd, &st))
		goto not_ours;
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(var) ||
	    (var.vmode & FB_VMODE_YWRAP))
		goto not_ours;
	*ret = REAL(ioctl)(fd, DEVNS_FBIO_PAN_AT, (unsigned long)DEVNS_FB_PAN_AT_ARG(var.xoffset, var.yoffset));
	if (*ret < 0 && errno == ENOTTY)
		goto not_ours;
	if (*ret == 0)
		errno = saved;
	return 1;
not_ours:
	errno = saved;
	return 0;
}

EXPORT int ioctl(int fd, unsigned long request, ...) {
	va_list ap;
	void *arg;
	int r;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (request == FBIOPAN_DISPLAY && pan_devns_fb(fd, arg, &r))
		return r;
	if (request == DRM_IOCTL_PRIME_HANDLE_TO_FD && export_devns_card(fd, arg, &r))
		return r;
	return REAL(ioctl)(fd, request, arg);
}
