/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "fb-state.h"

/*
 * A persona's framebuffer without a transport: its fbdev state and its
 * pixels, kept in a memfd (sealed against shrinking and growing) so that
 * the same memory can be handed to the persona's programs to mmap.
 */
struct fb_node {
	struct fb_state state;
	struct fb_mode mode;
	char label[64];
	int memfd;
	uint8_t *mem;
	size_t size;
	/* Which memory the node has: never 0, never reused within the process. */
	uint64_t serial;
};

/*
 * A node of the given mode, all black. name labels the memfd, which is
 * mode 0600: only root may reopen it through /proc, so a read-only copy
 * handed out stays read-only.
 */
int fb_node_new(struct fb_node **ret, const struct fb_mode *mode, const char *name);

/*
 * A node of the given mode over memfd, the memory a node of the same mode
 * had before (devnsd restarting): its pixels are kept, its state is the
 * first one. memfd is taken over, also on failure. -ESTALE when its size
 * is not the mode's, -EPERM when it is not sealed against resizing.
 */
int fb_node_adopt(struct fb_node **ret, const struct fb_mode *mode, const char *name, int memfd);

/*
 * Gives the node fresh memory, all black, and its first state (no pan,
 * unblanked, the first colormap), under a new serial. Whoever holds the
 * old memfd keeps it, but it is no longer the node's. On failure the node
 * is unchanged.
 */
int fb_node_renew(struct fb_node *n);

/*
 * A new description of the node's memory, for one program: open for reading
 * (O_RDONLY), writing (O_WRONLY) or both (O_RDWR). It never waits: -EAGAIN
 * when someone holds a lease on the memory (the node's own description
 * counts as a writer, which keeps leases off it while the node has it).
 */
int fb_node_reopen(const struct fb_node *n, int access_mode, int *ret_fd);
struct fb_node *fb_node_free(struct fb_node *n);
static inline void fb_node_freep(struct fb_node **n) {
	fb_node_free(*n);
}

/*
 * read() and write() at the stream position *pos, which they advance.
 * Bounds as the kernel's fbdev: see fb_stream_clamp(). A read points
 * *ret_data at the bytes to return; a write reports the rows it touched.
 */
ssize_t fb_node_read(struct fb_node *n, uint64_t *pos, size_t count, const void **ret_data);
ssize_t fb_node_write(struct fb_node *n, uint64_t *pos, const void *buf, size_t count, struct fb_rows *ret_rows);

/* The visible frame: the first byte shown, at the pan offset, and its line length. */
const uint8_t *fb_node_visible(const struct fb_node *n);

/* Rows of the visible screen a range of virtual rows covers: false when none. */
bool fb_node_visible_rows(const struct fb_node *n, const struct fb_rows *virt, struct fb_rows *ret);

/* A sealed read-only copy of the visible frame in a new memfd (for screenshots). */
int fb_node_snapshot(const struct fb_node *n, int *ret_fd);
