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
	int memfd;
	uint8_t *mem;
	size_t size;
};

/* A node of the given mode, all black. name labels the memfd. */
int fb_node_new(struct fb_node **ret, const struct fb_mode *mode, const char *name);
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
