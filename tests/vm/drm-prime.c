/* SPDX-License-Identifier: MIT */
/*
 * A DRM client that shares dumb buffers as dma-bufs, the way wlroots'
 * dumb allocator and its DRM backend do, through libdrm. Usage:
 *   drm-prime DEVICE COLOR BAND [--reopen] [--import-into DEVICE2] [--import-epoll-on FILE]
 *             [--import-file FILE] [--fill-budget] [--hold MS]
 * It opens DEVICE (the master, A) and prints DRM_CAP_PRIME. With --reopen
 * it opens the card a second time by the name libdrm gives it
 * (drmGetDeviceNameFromFd2()) and authenticates that file with A's magic,
 * as wlroots does; otherwise the second file (B) is DEVICE opened again.
 * B creates a dumb buffer of the mode's size, maps it, fills it with COLOR
 * and exports it (PRIME_HANDLE_TO_FD, DRM_CLOEXEC | DRM_RDWR). The dma-buf
 * is mapped and checked to be the buffer's memory: it reads COLOR, and
 * BAND written through it into the top quarter reads back through the
 * dumb mapping. A imports the dma-buf (PRIME_FD_TO_HANDLE, twice: the
 * same handle), adds it as a framebuffer and shows it (SETCRTC).
 * Files that are no dma-buf of the card (a pipe, a memfd) are refused.
 * With --import-into, the dma-buf is also offered to DEVICE2 (another
 * persona's card) and refused there. With --import-epoll-on, a thread
 * adds FILE (one whose poll never returns) to an epoll, which holds the
 * epoll's lock while it waits, and that epoll is offered to A: refused at
 * once. With --import-file, FILE itself is offered to A six times. With
 * --fill-budget, B then exports and destroys buffers of the
 * mode's size, keeping their dma-bufs (each named with lines that look
 * like fdinfo's, saying nobody holds it, and locked in many places), until
 * CREATE_DUMB fails, lets the dma-bufs go and creates one again. Each
 * step prints one line:
 *   prime CAPS
 *   reopened NAME
 *   drawn HANDLE
 *   exported FD cloexec 0|1
 *   dmabuf maps the buffer
 *   imported HANDLE same 0|1
 *   refused pipe ERRNO-NAME
 *   refused memfd ERRNO-NAME
 *   refused by DEVICE2 ERRNO-NAME
 *   refused epoll ERRNO-NAME
 *   refused file ERRNO-NAME          (six times)
 *   shown
 *   held N of SIZE bytes, then ERRNO-NAME, with L locks
 *   room again
 *   done
 * Exit status 0, or 1 with "drm-prime: STEP: REASON" on stderr.
 */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <drm_fourcc.h>
#include <linux/dma-buf.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

#include "drm-client.h"

#define MAX_HELD 256
/* Byte-range locks on each held dma-buf: their fdinfo lines are far more than a page. */
#define LOCKS_PER_DMABUF 100

static int fail(const char *step, int err) {
	fprintf(stderr, "drm-prime: %s: %s\n", step, strerror(err));
	return 1;
}

static const char *errno_name(int err) {
	switch (err) {
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case ENOMEM:
		return "ENOMEM";
	case ENOSPC:
		return "ENOSPC";
	case EACCES:
		return "EACCES";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case ENOENT:
		return "ENOENT";
	default:
		return "other";
	}
}

static int dumb_new(int fd, uint32_t w, uint32_t h, uint32_t *ret_handle, uint32_t *ret_pitch, uint64_t *ret_size) {
	struct drm_mode_create_dumb c = { .width = w, .height = h, .bpp = 32 };

	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &c) < 0)
		return -errno;
	*ret_handle = c.handle;
	*ret_pitch = c.pitch;
	*ret_size = c.size;
	return 0;
}

static void dumb_destroy(int fd, uint32_t handle) {
	struct drm_mode_destroy_dumb d = { .handle = handle };

	(void)drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &d);
}

/* Exports and destroys buffers until CREATE_DUMB fails, holding their dma-bufs; then lets them go. */
static int fill_budget(int fd, uint32_t w, uint32_t h) {
	static int held[MAX_HELD];
	uint32_t handle = 0, pitch = 0;
	uint64_t size = 0;
	int n = 0, locks = 0, r;

	for (;;) {
		r = dumb_new(fd, w, h, &handle, &pitch, &size);
		if (r < 0)
			break;
		if (n == MAX_HELD)
			return fail("more buffers than any budget should allow", ENOSPC);
		if (drmPrimeHandleToFD(fd, handle, DRM_CLOEXEC | DRM_RDWR, &held[n]) < 0)
			return fail("PRIME_HANDLE_TO_FD while filling", errno);
		/* A name that reads, in fdinfo, as if nobody else held the dma-buf. */
		if (ioctl(held[n], DMA_BUF_SET_NAME, "held\ncount:\t1\nino:\t1") < 0)
			return fail("DMA_BUF_SET_NAME", errno);
		/* Locks of the open file, which devnsd shares: listed in its fdinfo before the count, many. */
		locks += flock(held[n], LOCK_EX | LOCK_NB) == 0;
		for (int k = 0; k < LOCKS_PER_DMABUF; k++) {
			struct flock lk = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 2 * k, .l_len = 1 };

			locks += fcntl(held[n], F_OFD_SETLK, &lk) == 0;
		}
		n++;
		dumb_destroy(fd, handle);
	}
	printf("held %d of %llu bytes, then %s, with %d locks\n", n, (unsigned long long)size, errno_name(-r), locks);
	fflush(stdout);
	for (int i = 0; i < n; i++)
		close(held[i]);
	/* devnsd looks again at most four times a second: a few tries. */
	for (int tries = 0; (r = dumb_new(fd, w, h, &handle, &pitch, &size)) == -ENOMEM && tries < 20; tries++) {
		struct timespec ts = { .tv_nsec = 100000000L };

		nanosleep(&ts, NULL);
	}
	if (r < 0)
		return fail("CREATE_DUMB after the dma-bufs went", -r);
	dumb_destroy(fd, handle);
	printf("room again\n");
	return 0;
}

static void *add_to_epoll(void *arg) {
	int *fds = arg;
	struct epoll_event ev = { .events = EPOLLIN };

	/* Waits in the file's poll, holding the epoll's lock, until the process ends. */
	(void)epoll_ctl(fds[0], EPOLL_CTL_ADD, fds[1], &ev);
	return NULL;
}

/* An epoll whose lock a thread holds while it waits on path's poll, offered to fd: refused at once. */
static int stuck_epoll(int fd, const char *path) {
	static int fds[2];
	struct timespec ts = { .tv_sec = 1 };
	uint32_t handle = 0;
	pthread_t thread;

	fds[0] = epoll_create1(EPOLL_CLOEXEC);
	fds[1] = open(path, O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0 || fds[1] < 0)
		return fail(path, errno);
	if (pthread_create(&thread, NULL, add_to_epoll, fds) != 0)
		return fail("pthread_create", EAGAIN);
	nanosleep(&ts, NULL);
	if (drmPrimeFDToHandle(fd, fds[0], &handle) == 0) {
		fprintf(stderr, "drm-prime: the epoll was imported as handle %u\n", handle);
		return 1;
	}
	printf("refused epoll %s\n", errno_name(errno));
	fflush(stdout);
	return 0;
}

static int refused(int fd, int other, const char *what) {
	uint32_t handle = 0;

	if (drmPrimeFDToHandle(fd, other, &handle) == 0) {
		fprintf(stderr, "drm-prime: %s was imported as handle %u\n", what, handle);
		return -1;
	}
	printf("refused %s %s\n", what, errno_name(errno));
	return 0;
}

int main(int argc, char *argv[]) {
	const char *import_into = NULL, *epoll_on = NULL, *import_file = NULL;
	bool reopen = false, budget = false;
	unsigned int hold_ms = 0;
	uint32_t color, band, w, h, crtc = 0, handle = 0, pitch = 0, ha, ha2, fb_id;
	uint32_t handles[4] = { 0 }, pitches[4] = { 0 }, offsets[4] = { 0 };
	drmModeConnector *conn = NULL;
	drmModeModeInfo mode;
	uint64_t caps = 0, size = 0;
	struct drm_mode_map_dumb map = { 0 };
	uint32_t *mem, *shared;
	int a, b, dmabuf, r, fds[2], memfd;

	if (argc < 4) {
		fprintf(stderr, "usage: drm-prime DEVICE COLOR BAND [--reopen] [--import-into DEVICE2] [--fill-budget] "
				"[--hold MS]\n");
		return 2;
	}
	color = (uint32_t)strtoul(argv[2], NULL, 16) & 0xffffff;
	band = (uint32_t)strtoul(argv[3], NULL, 16) & 0xffffff;
	for (int i = 4; i < argc; i++) {
		if (strcmp(argv[i], "--reopen") == 0)
			reopen = true;
		else if (strcmp(argv[i], "--fill-budget") == 0)
			budget = true;
		else if (strcmp(argv[i], "--import-into") == 0 && i + 1 < argc)
			import_into = argv[++i];
		else if (strcmp(argv[i], "--import-epoll-on") == 0 && i + 1 < argc)
			epoll_on = argv[++i];
		else if (strcmp(argv[i], "--import-file") == 0 && i + 1 < argc)
			import_file = argv[++i];
		else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
			hold_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "drm-prime: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	a = open(argv[1], O_RDWR | O_CLOEXEC);
	if (a < 0)
		return fail(argv[1], errno);
	if (drmGetCap(a, DRM_CAP_PRIME, &caps) < 0)
		return fail("GET_CAP PRIME", errno);
	printf("prime %llu\n", (unsigned long long)caps);
	fflush(stdout);
	if (reopen) {
		char *name = drmGetDeviceNameFromFd2(a);
		drm_magic_t magic;

		if (!name)
			return fail("drmGetDeviceNameFromFd2", errno ? errno : ENOENT);
		b = open(name, O_RDWR | O_CLOEXEC);
		if (b < 0)
			return fail(name, errno);
		if (drmIsMaster(a) && (drmGetMagic(b, &magic) < 0 || drmAuthMagic(a, magic) < 0))
			return fail("GET_MAGIC, AUTH_MAGIC", errno);
		printf("reopened %s\n", name);
		free(name);
	} else {
		b = open(argv[1], O_RDWR | O_CLOEXEC);
		if (b < 0)
			return fail(argv[1], errno);
	}
	r = pick_output(a, &conn, &crtc);
	if (r < 0)
		return fail("no connected connector with a mode", -r);
	mode = conn->modes[0];
	w = mode.hdisplay;
	h = mode.vdisplay;

	r = dumb_new(b, w, h, &handle, &pitch, &size);
	if (r < 0)
		return fail("CREATE_DUMB", -r);
	map.handle = handle;
	if (drmIoctl(b, DRM_IOCTL_MODE_MAP_DUMB, &map) < 0)
		return fail("MAP_DUMB", errno);
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, b, (off_t)map.offset);
	if (mem == MAP_FAILED)
		return fail("mmap of the dumb buffer", errno);
	for (uint32_t y = 0; y < h; y++)
		for (uint32_t x = 0; x < w; x++)
			mem[y * (pitch / 4) + x] = color;
	printf("drawn %u\n", handle);

	if (drmPrimeHandleToFD(b, handle, DRM_CLOEXEC | DRM_RDWR, &dmabuf) < 0)
		return fail("PRIME_HANDLE_TO_FD", errno);
	printf("exported %d cloexec %d\n", dmabuf, (fcntl(dmabuf, F_GETFD) & FD_CLOEXEC) ? 1 : 0);
	shared = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, dmabuf, 0);
	if (shared == MAP_FAILED)
		return fail("mmap of the dma-buf", errno);
	if (shared[0] != color || shared[(h - 1) * (pitch / 4) + w - 1] != color)
		return fail("the dma-buf does not read what the dumb buffer holds", EIO);
	for (uint32_t y = 0; y < h / 4; y++)
		for (uint32_t x = 0; x < w; x++)
			shared[y * (pitch / 4) + x] = band;
	if (mem[(h / 8) * (pitch / 4) + w / 2] != band)
		return fail("what the dma-buf took is not in the dumb buffer", EIO);
	printf("dmabuf maps the buffer\n");

	if (drmPrimeFDToHandle(a, dmabuf, &ha) < 0)
		return fail("PRIME_FD_TO_HANDLE", errno);
	if (drmPrimeFDToHandle(a, dmabuf, &ha2) < 0)
		return fail("PRIME_FD_TO_HANDLE again", errno);
	printf("imported %u same %d\n", ha, ha == ha2);
	if (pipe(fds) < 0 || refused(a, fds[0], "pipe") < 0)
		return 1;
	memfd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, (off_t)size) < 0 || refused(a, memfd, "memfd") < 0)
		return 1;
	if (import_into) {
		int other = open(import_into, O_RDWR | O_CLOEXEC);

		if (other < 0)
			return fail(import_into, errno);
		if (refused(other, dmabuf, "by DEVICE2") < 0)
			return 1;
		close(other);
	}
	fflush(stdout);
	if (epoll_on && stuck_epoll(a, epoll_on))
		return 1;
	if (import_file) {
		int file = open(import_file, O_RDONLY | O_CLOEXEC);

		if (file < 0)
			return fail(import_file, errno);
		for (int i = 0; i < 6; i++)
			if (refused(a, file, "file") < 0)
				return 1;
		fflush(stdout);
		close(file);
	}

	handles[0] = ha;
	pitches[0] = pitch;
	if (drmModeAddFB2(a, w, h, DRM_FORMAT_XRGB8888, handles, pitches, offsets, &fb_id, 0) < 0)
		return fail("ADDFB2", errno);
	if (drmModeSetCrtc(a, crtc, fb_id, 0, 0, &conn->connector_id, 1, &mode) < 0)
		return fail("SETCRTC", errno);
	printf("shown\n");
	fflush(stdout);
	if (budget && fill_budget(b, w, h))
		return 1;
	fflush(stdout);
	if (hold_ms) {
		struct timespec ts = { .tv_sec = hold_ms / 1000, .tv_nsec = (long)(hold_ms % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	drmModeFreeConnector(conn);
	printf("done\n");
	return 0;
}
