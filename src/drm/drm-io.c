/* SPDX-License-Identifier: MIT */
/* The rounds of an ioctl (see drm-ioctl.h): the ranges a handler names, and whether this round's data holds them. */
#include "drm-internal.h"
#include "util.h"

static void name_range(struct iovec *iov, size_t *n, bool *overflow, uint64_t addr, size_t len) {
	if (len == 0)
		return;
	if (*n >= DRM_IOCTL_IOV_MAX) {
		*overflow = true;
		return;
	}
	iov[(*n)++] = (struct iovec){ .iov_base = (void *)(uintptr_t)addr, .iov_len = len };
}

const void *drm_io_in(struct drm_io *io, uint64_t addr, size_t len) {
	struct drm_ioctl_step *s = io->s;
	size_t at = io->in_off;

	if (len > DRM_IOCTL_DATA_MAX - MIN(io->in_off, (size_t)DRM_IOCTL_DATA_MAX)) {
		io->overflow = true;
		return NULL;
	}
	name_range(s->in_iov, &s->n_in, &io->overflow, addr, len);
	io->in_off += len;
	if (io->missing || io->in_off > io->in_size) {
		io->missing = true;
		return NULL;
	}
	/* Nothing read yet and nothing asked for: no data, but never a null pointer to memcpy() from. */
	if (!io->in)
		return (const uint8_t *)"";
	return io->in + at;
}

void *drm_io_out(struct drm_io *io, uint64_t addr, size_t len) {
	struct drm_ioctl_step *s = io->s;
	size_t at = io->out_off;

	if (len > DRM_IOCTL_OUT_MAX - MIN(io->out_off, (size_t)DRM_IOCTL_OUT_MAX)) {
		io->overflow = true;
		/* Somewhere harmless: the step fails before anything is returned. */
		return s->out;
	}
	name_range(s->out_iov, &s->n_out, &io->overflow, addr, len);
	io->out_off += len;
	return s->out + at;
}

bool drm_io_ready(struct drm_io *io) {
	struct drm_ioctl_step *s = io->s;

	if (io->overflow)
		return false;
	if (!io->missing && io->in_off == io->in_size && io->out_off == io->out_size)
		return true;
	s->retry = true;
	return false;
}
