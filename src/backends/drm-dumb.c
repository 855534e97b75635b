/* SPDX-License-Identifier: MIT */
#include <drm_fourcc.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

#include "device-memory.h"
#include "drm-dumb.h"

int drm_dumb_create(int fd, uint32_t width, uint32_t height, struct drm_dumb *ret) {
	struct drm_mode_create_dumb create = { .width = width, .height = height, .bpp = 32 };
	struct drm_mode_map_dumb map = { 0 };
	struct drm_mode_destroy_dumb destroy = { 0 };
	uint32_t handles[4] = { 0 }, pitches[4] = { 0 }, offsets[4] = { 0 }, fb_id;
	void *mem;
	int r;

	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &create) < 0)
		return -errno;
	handles[0] = create.handle;
	pitches[0] = create.pitch;
	if (drmModeAddFB2(fd, width, height, DRM_FORMAT_XRGB8888, handles, pitches, offsets, &fb_id, 0) < 0) {
		r = -errno;
		goto fail;
	}
	map.handle = create.handle;
	if (drmIoctl(fd, DRM_IOCTL_MODE_MAP_DUMB, &map) < 0) {
		r = -errno;
		drmModeRmFB(fd, fb_id);
		goto fail;
	}
	mem = mmap(NULL, create.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map.offset);
	if (mem == MAP_FAILED) {
		r = -errno;
		drmModeRmFB(fd, fb_id);
		goto fail;
	}
	/* Best effort: with every guard in use the buffer goes unguarded (device-memory.h). */
	(void)device_memory_guard(mem, create.size);
	memset(mem, 0, create.size);
	*ret = (struct drm_dumb){
		.handle = create.handle, .fb_id = fb_id, .pitch = create.pitch, .size = create.size, .map = mem
	};
	return 0;
fail:
	destroy.handle = create.handle;
	drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &destroy);
	return r;
}

void drm_dumb_destroy(int fd, struct drm_dumb *d) {
	struct drm_mode_destroy_dumb destroy = { .handle = d->handle };

	if (!d->map)
		return;
	device_memory_unguard(d->map);
	munmap(d->map, d->size);
	drmModeRmFB(fd, d->fb_id);
	drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &destroy);
	*d = (struct drm_dumb){ 0 };
}
