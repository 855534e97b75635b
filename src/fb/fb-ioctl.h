/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fb-state.h"

/* What an ioctl changed that the display may have to show. */
enum fb_effect {
	FB_EFFECT_NONE,
	FB_EFFECT_VIEW,  /* the visible part moved (pan, new virtual size) */
	FB_EFFECT_BLANK, /* blanking changed */
	FB_EFFECT_CMAP,  /* the colormap changed */
	FB_EFFECT_VSYNC, /* the caller waits for the next refresh; answer later */
	FB_EFFECT_WROTE, /* rows changed through the memfd (DEVNS_FBIO_WROTE): fb_ioctl_step.rows */
};

/* Largest output one step produces: a whole 4-array colormap. */
#define FB_IOCTL_OUT_MAX (4 * FB_STATE_CMAP_LEN * sizeof(uint16_t))
#define FB_IOCTL_IOV_MAX 5

/*
 * One step of an ioctl as CUSE delivers it in unrestricted mode (see
 * struct evdev_ioctl_step): done with a result and output, or a retry that
 * names the user memory the next step needs.
 */
struct fb_ioctl_step {
	bool retry;
	int result;
	enum fb_effect effect;
	struct fb_rows rows; /* FB_EFFECT_WROTE: in the virtual frame */
	size_t out_size;
	struct iovec in_iov[FB_IOCTL_IOV_MAX];
	size_t n_in;
	struct iovec out_iov[FB_IOCTL_IOV_MAX];
	size_t n_out;
	uint8_t out[FB_IOCTL_OUT_MAX];
};

struct devns_fb_ticket;

/* What an ioctl may read or change besides the fbdev state: the open file's stream position, its memory. */
struct fb_ioctl_file {
	uint64_t *pos;
	const char *socket_path; /* for DEVNS_FBIOGET_SOCKET; NULL: ENOTTY */
	uint64_t serial;         /* the serial of the framebuffer's memory, for DEVNS_FBIO_TELL */
	bool read_only;          /* opened O_RDONLY: DEVNS_FBIO_WROTE(_AT) get EBADF, as write() does */
	/* DEVNS_FBIOGET_TICKET: issues a ticket for this open file (0 or a negative errno); NULL: ENOTTY. */
	int (*ticket)(void *userdata, struct devns_fb_ticket *ret);
	void *userdata;
};

/*
 * Runs one step of cmd on s: the fbdev ioctls of the kernel's DRM fbdev
 * emulation (FBIOGET/PUT_VSCREENINFO, FBIOGET_FSCREENINFO, FBIOPAN_DISPLAY,
 * FBIOBLANK, FBIO_WAITFORVSYNC, FBIOGET/PUTCMAP) and devns-fb.h's. Anything
 * else gets -ENOTTY.
 */
void fb_ioctl(struct fb_state *s, const struct fb_ioctl_file *file, unsigned int cmd, void *arg, const void *in,
	      size_t in_size, size_t out_size, struct fb_ioctl_step *ret);
