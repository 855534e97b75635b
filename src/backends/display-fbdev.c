/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/kd.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "display-backend.h"
#include "fbdev-hw.h"
#include "util.h"

/*
 * A kernel fbdev: with room for two frames it flips by panning, otherwise
 * it draws into the one frame shown.
 */
struct fbdev {
	struct display_output base;
	struct fbdev_hw hw;
};

/*
 * The kernel's console (fbcon) draws on the framebuffer too, its cursor
 * blinking over the frame, unless the virtual terminal shown is in
 * graphics mode, as a display server puts it. Held while any fbdev
 * display is open (a device that comes back is opened before the one
 * that went is closed); text mode again after the last, as display
 * servers leave it: the mode found may be what a devnsd that died left.
 */
static struct {
	unsigned int users;
	int fd;
} console = { .fd = -1 };

static void console_take(void) {
	int fd;

	if (console.users++ > 0)
		return;
	/* No virtual terminals (CONFIG_VT=n), or not allowed: nothing draws there, or nothing to do. */
	fd = open("/dev/tty0", O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return;
	if (ioctl(fd, KDSETMODE, KD_GRAPHICS) < 0) {
		close(fd);
		return;
	}
	console.fd = fd;
}

static void console_release(void) {
	if (console.users == 0 || --console.users > 0 || console.fd < 0)
		return;
	(void)ioctl(console.fd, KDSETMODE, KD_TEXT);
	close(console.fd);
	console.fd = -1;
}

static struct fbdev *to_fbdev(struct display_output *b) {
	return container_of(b, struct fbdev, base);
}

static int fbdev_flip(struct display_output *b, unsigned int i) {
	struct fbdev *f = to_fbdev(b);
	int r;

	if (b->n_buffers > 1) {
		r = fbdev_hw_pan(b->fd, &f->hw, i * f->hw.var.yres);
		if (r < 0)
			return r;
	}
	return 1;
}

static int fbdev_set_power(struct display_output *b, bool on) {
	return ioctl(b->fd, FBIOBLANK, on ? FB_BLANK_UNBLANK : FB_BLANK_POWERDOWN) < 0 ? -errno : 0;
}

/* A framebuffer unregistered while open answers every call with ENODEV, also once another took its number. */
static bool fbdev_gone(struct display_output *b) {
	struct fb_var_screeninfo var;

	return ioctl(b->fd, FBIOGET_VSCREENINFO, &var) < 0 && errno == ENODEV;
}

static void fbdev_destroy(struct display_output *b) {
	struct fbdev *f = to_fbdev(b);

	if (b->fd >= 0) {
		/* The console comes back lit. */
		if (b->powered_down)
			(void)fbdev_set_power(b, true);
		fbdev_hw_close(b->fd, &f->hw);
		console_release();
	}
	free(f);
}

static const struct display_output_ops fbdev_ops = {
	.flip = fbdev_flip,
	.set_power = fbdev_set_power,
	.gone = fbdev_gone,
	.destroy = fbdev_destroy,
};

int display_fbdev_open(const char *path, struct display_output **ret) {
	struct fbdev *f;
	struct fb_var_screeninfo *v;
	int fd, r;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	r = fbdev_hw_open(path, &fd, &f->hw);
	if (r < 0) {
		free(f);
		return r;
	}
	f->base.ops = &fbdev_ops;
	f->base.kind = "fbdev";
	f->base.fd = fd;
	/* Released by fbdev_destroy(). */
	console_take();
	v = &f->hw.var;
	if (v->bits_per_pixel != 32 || v->red.offset != 16 || v->green.offset != 8 || v->blue.offset != 0 ||
	    v->xres > FB_STATE_MAX_SIDE || v->yres > FB_STATE_MAX_SIDE) {
		fbdev_destroy(&f->base);
		return -EMEDIUMTYPE;
	}
	f->base.mode = (struct fb_mode){ .width = v->xres, .height = v->yres, .refresh_hz = 60 };
	f->base.n_buffers = (uint64_t)f->hw.fix.line_length * v->yres * 2 <= f->hw.fix.smem_len &&
					    v->yres_virtual >= 2 * v->yres ?
				    2 :
				    1;
	for (unsigned int i = 0; i < f->base.n_buffers; i++)
		f->base.buffers[i] = (struct display_buffer){
			.map = (uint8_t *)f->hw.mem + (size_t)i * f->hw.fix.line_length * v->yres,
			.stride = f->hw.fix.line_length,
		};
	f->base.front = v->yoffset >= v->yres && f->base.n_buffers > 1 ? 1 : 0;
	display_output_init_buffers(&f->base);
	*ret = &f->base;
	return 0;
}
