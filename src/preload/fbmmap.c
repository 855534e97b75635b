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
 * devnsd then does nothing while the frame does not change. Without
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
 * sysfs.
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

#include "devns-fb.h"
#include "fb-stream.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_MAPPINGS 64
#define MAX_WRITERS 16
#define MAX_PAN_NODES 16
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

/*
 * Takes a ticket of the node fd is open on, connects to the node's socket
 * and redeems it, saying what the memfd is for: the connection, and the
 * memfd in *ret_memfd. -1 with errno on failure.
 */
static int fetch(int fd, char intent, int *ret_memfd, struct devns_fb_grant *grant) {
	struct devns_fb_request req = { .magic = DEVNS_FB_REQUEST_MAGIC, .intent = (__u8)intent };
	struct devns_fb_socket path;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sock, saved;

	memset(&path, 0, sizeof(path));
	if (ioctl(fd, DEVNS_FBIOGET_SOCKET, &path) < 0 || ioctl(fd, DEVNS_FBIOGET_TICKET, &req.ticket) < 0)
		return -1;
	path.path[sizeof(path.path) - 1] = '\0';
	memcpy(sa.sun_path, path.path, sizeof(sa.sun_path) - 1);
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -1;
	/* The request goes in one piece: devnsd takes one read as the whole of it. */
	if (connect(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(sock, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
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
 * Offers the mapping [p, p + len) at offset off to devnsd for tracking
 * over sock: whether a userfaultfd was sent. Never waits for devnsd.
 */
static bool track(int sock, void *p, size_t len, off_t off) {
	long page = sysconf(_SC_PAGESIZE);
	size_t span = page > 0 ? (len + (size_t)page - 1) / (size_t)page * (size_t)page : len;
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
		char buf[CMSG_SPACE(sizeof(int))];
	} control = { 0 };
	struct iovec iov = { .iov_base = &msg, .iov_len = sizeof(msg) };
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof(control.buf)
	};
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&mh);
	bool sent;
	int uffd;

	/* Not UFFD_USER_MODE_ONLY: the kernel's own writes into the mapping (read() into it) must fault too. */
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0)
		return false;
	if (ioctl(uffd, UFFDIO_API, &api) < 0 || !(api.features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM) ||
	    ioctl(uffd, UFFDIO_REGISTER, &reg) < 0 || !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) {
		close(uffd);
		return false;
	}
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &uffd, sizeof(int));
	sent = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg);
	/* devnsd's copy is the only one left: if devnsd goes, the kernel releases the mapping. */
	close(uffd);
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

static void *map_devns_fb(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	struct devns_fb_grant grant;
	int memfd, sock, saved, slot = -1;
	void *p;

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
	p = REAL(mmap)(addr, len, prot, flags, memfd, off);
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
						 track(sock, p, len, off);
		}
		pthread_mutex_unlock(&lock);
	}
	/* Without a slot the mapping still works; only the live refresh stops with the connection. */
	if (p == MAP_FAILED || slot < 0)
		close(sock);
	errno = saved;
	return p;
}

/* The mapping of a devns framebuffer, MAP_FAILED with errno, or NULL (errno kept) for any other fd. */
static void *try_map_devns_fb(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
	int saved = errno;
	void *p;

	/* A devns framebuffer is far smaller than off_t can count. */
	if ((off_t)off != off || (flags & MAP_ANONYMOUS) || !maybe_devns_fb(fd))
		return NULL;
	p = map_devns_fb(addr, len, prot, flags, fd, (off_t)off);
	if (!p)
		errno = saved; /* not a devns framebuffer after all */
	return p;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
	void *p = try_map_devns_fb(addr, len, prot, flags, fd, off);

	return p ? p : REAL(mmap)(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) {
	void *p = try_map_devns_fb(addr, len, prot, flags, fd, off);

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

/* Nodes a pan was made on, by device and inode, and whether each is a devns framebuffer. */
static struct {
	dev_t rdev;
	ino_t ino;
	bool devns_fb;
} pan_nodes[MAX_PAN_NODES];
static unsigned int n_pan_nodes, next_pan_node;
static pthread_mutex_t pan_nodes_lock = PTHREAD_MUTEX_INITIALIZER;

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
	bool known = false, yes = false;
	int r;

	/* A pan from a signal handler, or from another thread meanwhile, looks the node up again. */
	if (pthread_mutex_trylock(&pan_nodes_lock) != 0)
		return is_devns_fb(fd) > 0;
	for (unsigned int i = 0; i < n_pan_nodes && !known; i++)
		if (pan_nodes[i].rdev == st->st_rdev && pan_nodes[i].ino == st->st_ino) {
			known = true;
			yes = pan_nodes[i].devns_fb;
		}
	if (!known && (r = is_devns_fb(fd)) >= 0) {
		unsigned int i = n_pan_nodes < MAX_PAN_NODES ? n_pan_nodes++ : next_pan_node++ % MAX_PAN_NODES;

		yes = r > 0;
		pan_nodes[i].rdev = st->st_rdev;
		pan_nodes[i].ino = st->st_ino;
		pan_nodes[i].devns_fb = yes;
	}
	pthread_mutex_unlock(&pan_nodes_lock);
	return yes;
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
	return REAL(ioctl)(fd, request, arg);
}
