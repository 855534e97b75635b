/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A DRM dumb buffer, mapped, with a framebuffer id (XRGB8888). */
struct drm_dumb {
	uint32_t handle, fb_id, pitch;
	uint64_t size;
	uint8_t *map;
};

/* Creates, registers and maps one; zeroed. */
int drm_dumb_create(int fd, uint32_t width, uint32_t height, struct drm_dumb *ret);
void drm_dumb_destroy(int fd, struct drm_dumb *d);
