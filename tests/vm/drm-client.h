/* SPDX-License-Identifier: MIT */
#pragma once

/* What the VM tests' DRM clients share: an output to show on, dumb buffers, flips. */
#include <stdbool.h>
#include <stdint.h>
#include <xf86drmMode.h>

struct buffer {
	uint32_t handle, pitch, fb_id;
	uint64_t size;
	uint32_t *mem;
};

/* The first connected connector with a mode, and a CRTC for it; -errno (-ENOENT: none). */
int pick_output(int fd, drmModeConnector **ret_conn, uint32_t *ret_crtc);

/* Creates, adds and maps a buffer of w x h; -errno with *ret_step naming what failed. */
int buffer_new(int fd, uint32_t w, uint32_t h, struct buffer *b, const char **ret_step);

/* Fills the visible w x h of b with color and reads it back: whether it reads back. */
bool buffer_fill(const struct buffer *b, uint32_t w, uint32_t h, uint32_t color);

void buffer_free(int fd, struct buffer *b);

/* Flips crtc to fb_id and waits for the flip's event: its sequence, or -errno with *ret_step naming what failed. */
long flip_to(int fd, uint32_t crtc, uint32_t fb_id, const char **ret_step);

/* Sets the connector's DPMS property (DRM_MODE_DPMS_ON, _OFF): 0 or -errno (-ENOENT: it has none). */
int set_dpms(int fd, uint32_t connector_id, uint64_t value);
