/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fb-node.h"
#include "fb-stream.h"
#include "util.h"

/*
 * The daemon's own description of the memory: one opened through /proc,
 * which (unlike memfd_create()'s) counts as a writer of the file, so that
 * nobody can take a lease on the memory while the daemon has it.
 */
static int memory_own(int *fd) {
	int own, r;

	r = memfd_reopen(*fd, O_RDWR, &own);
	if (r < 0)
		return r;
	close(*fd);
	*fd = own;
	return 0;
}

/* Memory of size bytes for name, mapped, and sealed against resizing. */
static int memory_new(const char *label, size_t size, int *ret_fd, uint8_t **ret_mem) {
	_cleanup_(closep) int fd = -1;
	void *mem;
	int r;

	r = memfd_sized(label, size, MFD_ALLOW_SEALING, &fd);
	if (r < 0)
		return r;
	/* Programs that map it must not be able to pull pages from under the daemon. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -errno;
	/* A read-only fd of it must not be reopened for writing through /proc by anyone but root. */
	if (fchmod(fd, 0600) < 0)
		return -errno;
	r = memory_own(&fd);
	if (r < 0)
		return r;
	mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED)
		return -errno;
	*ret_fd = take_fd(&fd);
	*ret_mem = mem;
	return 0;
}

static uint64_t next_serial(void) {
	static uint64_t serial;

	return ++serial;
}

/* A node of mode in its first state, without memory yet. */
static int node_alloc(const struct fb_mode *mode, const char *name, struct fb_node **ret) {
	_cleanup_(fb_node_freep) struct fb_node *n = NULL;
	int r;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->memfd = -1;
	n->mem = MAP_FAILED;
	n->mode = *mode;
	r = fb_state_init(&n->state, mode, "devns");
	if (r < 0)
		return r;
	n->size = fb_state_mem_size(&n->state);
	snprintf(n->label, sizeof(n->label), "devns-fb-%s", name);
	*ret = TAKE_PTR(n);
	return 0;
}

int fb_node_new(struct fb_node **ret, const struct fb_mode *mode, const char *name) {
	_cleanup_(fb_node_freep) struct fb_node *n = NULL;
	int r;

	r = node_alloc(mode, name, &n);
	if (r < 0)
		return r;
	r = memory_new(n->label, n->size, &n->memfd, &n->mem);
	if (r < 0)
		return r;
	n->serial = next_serial();
	*ret = TAKE_PTR(n);
	return 0;
}

int fb_node_adopt(struct fb_node **ret, const struct fb_mode *mode, const char *name, int memfd) {
	_cleanup_(closep) int fd = memfd;
	_cleanup_(fb_node_freep) struct fb_node *n = NULL;
	unsigned int need = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
	struct stat st;
	int seals, flags, r;
	void *mem;

	if (fstat(fd, &st) < 0)
		return -errno;
	seals = fcntl(fd, F_GET_SEALS);
	flags = fcntl(fd, F_GETFL);
	if (seals < 0 || flags < 0)
		return -errno;
	if (((unsigned int)seals & need) != need || (seals & F_SEAL_WRITE) || (flags & O_ACCMODE) != O_RDWR ||
	    !S_ISREG(st.st_mode) || (st.st_mode & 0077))
		return -EPERM;
	r = node_alloc(mode, name, &n);
	if (r < 0)
		return r;
	if ((uint64_t)st.st_size != n->size)
		return -ESTALE;
	/* The last run's may be memfd_create()'s own, which leaves the memory open to leases. */
	r = memory_own(&fd);
	if (r < 0)
		return r;
	mem = mmap(NULL, n->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED)
		return -errno;
	n->mem = mem;
	n->memfd = take_fd(&fd);
	n->serial = next_serial();
	*ret = TAKE_PTR(n);
	return 0;
}

int fb_node_renew(struct fb_node *n) {
	uint8_t *mem;
	int fd, r;

	r = memory_new(n->label, n->size, &fd, &mem);
	if (r < 0)
		return r;
	munmap(n->mem, n->size);
	close(n->memfd);
	n->memfd = fd;
	n->mem = mem;
	n->serial = next_serial();
	/* The mode was accepted once; it cannot fail now. */
	fb_state_init(&n->state, &n->mode, "devns");
	return 0;
}

int fb_node_reopen(const struct fb_node *n, int access_mode, int *ret_fd) {
	if (access_mode != O_RDONLY && access_mode != O_WRONLY && access_mode != O_RDWR)
		return -EINVAL;
	return memfd_reopen(n->memfd, access_mode, ret_fd);
}

struct fb_node *fb_node_free(struct fb_node *n) {
	if (!n)
		return NULL;
	if (n->mem != MAP_FAILED)
		munmap(n->mem, n->size);
	closep(&n->memfd);
	free(n);
	return NULL;
}

ssize_t fb_node_read(struct fb_node *n, uint64_t *pos, size_t count, const void **ret_data) {
	long len = fb_stream_clamp(n->size, *pos, count, false);

	*ret_data = n->mem + (len > 0 ? *pos : 0);
	if (len > 0)
		*pos += (uint64_t)len;
	return len;
}

ssize_t fb_node_write(struct fb_node *n, uint64_t *pos, const void *buf, size_t count, struct fb_rows *ret_rows) {
	long len = fb_stream_clamp(n->size, *pos, count, true);
	uint32_t line = n->state.fix.line_length;

	*ret_rows = (struct fb_rows){ 0, 0 };
	if (len <= 0)
		return len;
	memcpy(n->mem + *pos, buf, (size_t)len);
	ret_rows->y0 = (uint32_t)(*pos / line);
	ret_rows->y1 = (uint32_t)((*pos + (uint64_t)len + line - 1) / line);
	*pos += (uint64_t)len;
	return len;
}

const uint8_t *fb_node_visible(const struct fb_node *n) {
	return n->mem + fb_state_visible_offset(&n->state);
}

bool fb_node_visible_rows(const struct fb_node *n, const struct fb_rows *virt, struct fb_rows *ret) {
	uint32_t top = n->state.var.yoffset, bottom = top + n->state.var.yres;
	uint32_t y0 = MAX(virt->y0, top), y1 = MIN(virt->y1, bottom);

	if (y0 >= y1)
		return false;
	*ret = (struct fb_rows){ y0 - top, y1 - top };
	return true;
}

int fb_node_snapshot(const struct fb_node *n, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	size_t frame = (size_t)n->state.fix.line_length * n->state.var.yres;
	ssize_t k;
	int r;

	r = memfd_sized("devns-screenshot", 0, MFD_ALLOW_SEALING, &fd);
	if (r < 0)
		return r;
	k = write(fd, fb_node_visible(n), frame);
	if (k < 0)
		return -errno;
	if ((size_t)k != frame)
		return -EIO;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	return 0;
}
