/* SPDX-License-Identifier: MIT */
/*
 * The screen info checks follow the kernel's DRM fbdev emulation: the mode
 * and the pixel format are fixed, only the virtual height (up to
 * FB_STATE_VIRTUAL_FRAMES frames), the offsets and the activate flags can
 * change, and anything that does not fit gets -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fb-state.h"

static void fill_format(struct fb_var_screeninfo *var) {
	var->bits_per_pixel = FB_STATE_BPP;
	var->grayscale = 0;
	var->red = (struct fb_bitfield){ .offset = 16, .length = 8 };
	var->green = (struct fb_bitfield){ .offset = 8, .length = 8 };
	var->blue = (struct fb_bitfield){ .offset = 0, .length = 8 };
	var->transp = (struct fb_bitfield){ 0 };
	var->nonstd = 0;
}

static bool same_format(const struct fb_var_screeninfo *a, const struct fb_var_screeninfo *b) {
	return a->bits_per_pixel == b->bits_per_pixel && a->grayscale == b->grayscale &&
	       a->red.offset == b->red.offset && a->red.length == b->red.length &&
	       a->green.offset == b->green.offset && a->green.length == b->green.length &&
	       a->blue.offset == b->blue.offset && a->blue.length == b->blue.length &&
	       a->transp.offset == b->transp.offset && a->transp.length == b->transp.length &&
	       a->nonstd == b->nonstd;
}

static void fill_timings(struct fb_var_screeninfo *var, const struct fb_mode *m) {
	if (m->pixclock_khz)
		var->pixclock = 1000000000u / m->pixclock_khz;
	if (m->htotal > m->hsync_end && m->hsync_end >= m->hsync_start && m->hsync_start >= m->width) {
		var->right_margin = m->hsync_start - m->width;
		var->hsync_len = m->hsync_end - m->hsync_start;
		var->left_margin = m->htotal - m->hsync_end;
	}
	if (m->vtotal > m->vsync_end && m->vsync_end >= m->vsync_start && m->vsync_start >= m->height) {
		var->lower_margin = m->vsync_start - m->height;
		var->vsync_len = m->vsync_end - m->vsync_start;
		var->upper_margin = m->vtotal - m->vsync_end;
	}
}

int fb_state_init(struct fb_state *s, const struct fb_mode *mode, const char *id) {
	if (mode->width == 0 || mode->height == 0 || mode->width > FB_STATE_MAX_SIDE ||
	    mode->height > FB_STATE_MAX_SIDE)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->width = mode->width;
	s->height = mode->height;

	s->var.xres = s->var.xres_virtual = mode->width;
	s->var.yres = s->var.yres_virtual = mode->height;
	s->var.height = s->var.width = UINT32_MAX; /* size unknown, as the kernel says -1 */
	s->var.activate = FB_ACTIVATE_NOW;
	s->var.vmode = FB_VMODE_NONINTERLACED;
	fill_format(&s->var);
	fill_timings(&s->var, mode);

	snprintf(s->fix.id, sizeof(s->fix.id), "%s", id);
	s->fix.type = FB_TYPE_PACKED_PIXELS;
	s->fix.visual = FB_VISUAL_TRUECOLOR;
	s->fix.xpanstep = 1;
	s->fix.ypanstep = 1;
	s->fix.line_length = mode->width * (FB_STATE_BPP / 8);
	s->fix.smem_len = (uint32_t)fb_state_mem_size(s);
	s->fix.accel = FB_ACCEL_NONE;

	/* A linear ramp, as the kernel's default colormap for a 256-entry map. */
	for (unsigned int i = 0; i < FB_STATE_CMAP_LEN; i++)
		for (unsigned int c = 0; c < 3; c++)
			s->cmap[c][i] = (uint16_t)(i * 0x101);
	return 0;
}

size_t fb_state_mem_size(const struct fb_state *s) {
	return (size_t)s->width * (FB_STATE_BPP / 8) * s->height * FB_STATE_VIRTUAL_FRAMES;
}

size_t fb_state_visible_offset(const struct fb_state *s) {
	return (size_t)s->var.yoffset * s->fix.line_length + (size_t)s->var.xoffset * (FB_STATE_BPP / 8);
}

static bool offsets_fit(const struct fb_var_screeninfo *want, uint32_t xres, uint32_t yres, uint32_t xres_virtual,
			uint32_t yres_virtual) {
	return want->xoffset <= xres_virtual - xres && want->yoffset <= yres_virtual - yres;
}

int fb_state_put_var(struct fb_state *s, struct fb_var_screeninfo *var) {
	struct fb_var_screeninfo v = *var;
	uint32_t max_vheight = s->height * FB_STATE_VIRTUAL_FRAMES;

	/* fb_set_var(): tiny and overflowing resolutions. */
	if (v.xres < 8 || v.yres < 8)
		return -EINVAL;
	if ((uint64_t)v.xres * v.yres > UINT32_MAX || (uint64_t)v.xres_virtual * v.yres_virtual > UINT32_MAX)
		return -EINVAL;
	/* The mode is the display's: nothing may be larger, and a depth of 0 means "keep". */
	if (v.bits_per_pixel > FB_STATE_BPP || v.xres > s->width || v.yres > s->height ||
	    v.xres_virtual > s->width || v.yres_virtual > max_vheight)
		return -EINVAL;
	if (v.bits_per_pixel == 0 || (v.red.length == 0 && v.green.length == 0 && v.blue.length == 0))
		fill_format(&v);
	if (!same_format(&v, &s->var))
		return -EINVAL;

	v.xres = v.xres_virtual = s->width;
	v.yres = s->height;
	if (v.yres_virtual < v.yres)
		v.yres_virtual = v.yres;
	if (!offsets_fit(&v, v.xres, v.yres, v.xres_virtual, v.yres_virtual))
		return -EINVAL;
	/* What the display decides. */
	v.pixclock = s->var.pixclock;
	v.left_margin = s->var.left_margin;
	v.right_margin = s->var.right_margin;
	v.upper_margin = s->var.upper_margin;
	v.lower_margin = s->var.lower_margin;
	v.hsync_len = s->var.hsync_len;
	v.vsync_len = s->var.vsync_len;
	v.height = s->var.height;
	v.width = s->var.width;
	v.vmode = s->var.vmode;
	v.rotate = 0;

	*var = v;
	if ((v.activate & FB_ACTIVATE_MASK) != FB_ACTIVATE_TEST) {
		s->var = v;
		s->var.activate = FB_ACTIVATE_NOW;
	}
	return 0;
}

int fb_state_pan(struct fb_state *s, const struct fb_var_screeninfo *var) {
	if (var->vmode & FB_VMODE_YWRAP)
		return -EINVAL;
	if (!offsets_fit(var, s->var.xres, s->var.yres, s->var.xres_virtual, s->var.yres_virtual))
		return -EINVAL;
	s->var.xoffset = var->xoffset;
	s->var.yoffset = var->yoffset;
	return 0;
}

int fb_state_put_cmap(struct fb_state *s, uint32_t start, uint32_t len, const uint16_t *red, const uint16_t *green,
		      const uint16_t *blue, const uint16_t *transp) {
	if (len == 0 || start >= FB_STATE_CMAP_LEN || len > FB_STATE_CMAP_LEN - start)
		return -EINVAL;
	memcpy(&s->cmap[0][start], red, len * sizeof(uint16_t));
	memcpy(&s->cmap[1][start], green, len * sizeof(uint16_t));
	memcpy(&s->cmap[2][start], blue, len * sizeof(uint16_t));
	if (transp)
		memcpy(&s->cmap[3][start], transp, len * sizeof(uint16_t));
	return 0;
}

int fb_state_cmap_range(uint32_t start, uint32_t len, uint32_t *ret_from, uint32_t *ret_to) {
	int64_t fromoff = (int64_t)start, tooff = 0, size;

	if (fromoff >= FB_STATE_CMAP_LEN || len == 0)
		return -EINVAL;
	size = (int64_t)len - tooff;
	if (size > FB_STATE_CMAP_LEN - fromoff)
		size = FB_STATE_CMAP_LEN - fromoff;
	*ret_from = (uint32_t)fromoff;
	*ret_to = (uint32_t)tooff;
	return (int)size;
}

void fb_state_blank(struct fb_state *s, unsigned long level) {
	s->blank = level > FB_BLANK_POWERDOWN ? FB_BLANK_POWERDOWN : (int)level;
}
