/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/fb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * One persona's fbdev state without a transport: the screen info it
 * reports and accepts, its pan offset, colormap and blanking. Pixels are
 * XRGB8888. The virtual height may be up to FB_STATE_VIRTUAL_FRAMES times
 * the visible one, so programs can flip with yoffset.
 */

/* Rows [y0, y1) of the virtual screen that a write touched. */
struct fb_rows {
	uint32_t y0, y1;
};

#define FB_STATE_VIRTUAL_FRAMES 2
#define FB_STATE_CMAP_LEN 256
#define FB_STATE_MAX_SIDE 8192
#define FB_STATE_BPP 32

/* The display mode a framebuffer follows. */
struct fb_mode {
	uint32_t width, height;
	uint32_t refresh_hz;   /* 0: unknown */
	uint32_t pixclock_khz; /* 0: unknown */
	uint32_t hsync_start, hsync_end, htotal;
	uint32_t vsync_start, vsync_end, vtotal;
};

struct fb_state {
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	uint32_t width, height;
	uint16_t cmap[4][FB_STATE_CMAP_LEN]; /* red, green, blue, transp */
	int blank;
};

/* Fills s for a mode. -EINVAL when the mode is empty or larger than FB_STATE_MAX_SIDE. */
int fb_state_init(struct fb_state *s, const struct fb_mode *mode, const char *id);

/* Bytes of framebuffer memory: the line length times the largest virtual height. */
size_t fb_state_mem_size(const struct fb_state *s);

/* Byte offset of the visible frame (the pan position). */
size_t fb_state_visible_offset(const struct fb_state *s);

/*
 * FBIOPUT_VSCREENINFO: checks var and fills in what is fixed (the mode, the
 * format). Applies it unless activate has FB_ACTIVATE_TEST. 0, or -EINVAL
 * for anything the framebuffer cannot show (var is then unchanged).
 */
int fb_state_put_var(struct fb_state *s, struct fb_var_screeninfo *var);

/* FBIOPAN_DISPLAY: 0, or -EINVAL when the offsets leave the virtual screen. */
int fb_state_pan(struct fb_state *s, const struct fb_var_screeninfo *var);

/* FBIOPUTCMAP: entries start..start+len-1 from the arrays (transp may be NULL). 0 or -EINVAL. */
int fb_state_put_cmap(struct fb_state *s, uint32_t start, uint32_t len, const uint16_t *red, const uint16_t *green,
		      const uint16_t *blue, const uint16_t *transp);

/*
 * FBIOGETCMAP: which part of a request for start..start+len-1 overlaps the
 * colormap, as the kernel's fb_cmap_to_user() computes it. Returns the
 * number of entries to copy from colormap entry *ret_from into the user's
 * arrays at *ret_to, or -EINVAL when nothing overlaps.
 */
int fb_state_cmap_range(uint32_t start, uint32_t len, uint32_t *ret_from, uint32_t *ret_to);

/* FBIOBLANK: FB_BLANK_UNBLANK..FB_BLANK_POWERDOWN; larger values count as POWERDOWN. */
void fb_state_blank(struct fb_state *s, unsigned long level);

