/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "devns-fb.h"
#include "fb-ioctl.h"
#include "util.h"

static void done(struct fb_ioctl_step *s, int result, const void *data, size_t len) {
	s->result = result;
	s->out_size = len;
	if (len > 0)
		memcpy(s->out, data, len);
}

static void want(struct iovec *iov, size_t *n, void *base, size_t len) {
	if (len > 0 && *n < FB_IOCTL_IOV_MAX)
		iov[(*n)++] = (struct iovec){ .iov_base = base, .iov_len = len };
}

/* True when a retry for in_len bytes to read and out_len to write at arg was set up. */
static bool need(struct fb_ioctl_step *s, void *arg, size_t in_len, size_t out_len, size_t in_size,
		 size_t out_size) {
	if (in_size >= in_len && out_size >= out_len)
		return false;
	s->retry = true;
	want(s->in_iov, &s->n_in, arg, in_len);
	want(s->out_iov, &s->n_out, arg, out_len);
	return true;
}

static void put_var(struct fb_ioctl_step *s, struct fb_state *st, const void *in) {
	struct fb_var_screeninfo var;
	uint32_t yoffset = st->var.yoffset, yres_virtual = st->var.yres_virtual;
	int r;

	memcpy(&var, in, sizeof(var));
	r = fb_state_put_var(st, &var);
	if (r < 0)
		return done(s, r, NULL, 0);
	if (st->var.yoffset != yoffset || st->var.yres_virtual != yres_virtual)
		s->effect = FB_EFFECT_VIEW;
	done(s, 0, &var, sizeof(var));
}

static void pan(struct fb_ioctl_step *s, struct fb_state *st, const struct fb_var_screeninfo *var) {
	int r;

	r = fb_state_pan(st, var);
	if (r == 0)
		s->effect = FB_EFFECT_VIEW;
	done(s, r, NULL, 0);
}

/* The colormap arrays a struct fb_cmap points at, in order, the transparency only when given. */
static size_t cmap_arrays(const struct fb_cmap *c, uint16_t *arrays[4]) {
	arrays[0] = c->red;
	arrays[1] = c->green;
	arrays[2] = c->blue;
	arrays[3] = c->transp;
	return c->transp ? 4 : 3;
}

static void get_cmap(struct fb_ioctl_step *s, struct fb_state *st, void *arg, const void *in, size_t in_size,
		     size_t out_size) {
	struct fb_cmap c;
	uint16_t *arrays[4];
	uint32_t from, to;
	size_t n, len;
	int count;

	memcpy(&c, in, sizeof(c));
	count = fb_state_cmap_range(c.start, c.len, &from, &to);
	if (count < 0)
		return done(s, count, NULL, 0);
	n = cmap_arrays(&c, arrays);
	len = (size_t)count * sizeof(uint16_t);
	if (out_size < n * len) {
		s->retry = true;
		want(s->in_iov, &s->n_in, arg, sizeof(c));
		/* The caller's addresses, NULL too: computed as numbers, never as pointers here. */
		for (size_t i = 0; i < n; i++)
			want(s->out_iov, &s->n_out, (void *)((uintptr_t)arrays[i] + to * sizeof(uint16_t)), len);
		return;
	}
	(void)in_size;
	for (size_t i = 0; i < n; i++)
		memcpy(s->out + i * len, &st->cmap[i][from], len);
	done(s, 0, NULL, 0);
	s->out_size = n * len;
}

static void put_cmap(struct fb_ioctl_step *s, struct fb_state *st, void *arg, const void *in, size_t in_size) {
	struct fb_cmap c;
	uint16_t *arrays[4];
	const uint16_t *data;
	size_t n, len;
	int r;

	memcpy(&c, in, sizeof(c));
	if (c.len == 0 || c.len > FB_STATE_CMAP_LEN)
		return done(s, -EINVAL, NULL, 0);
	n = cmap_arrays(&c, arrays);
	len = (size_t)c.len * sizeof(uint16_t);
	if (in_size < sizeof(c) + n * len) {
		s->retry = true;
		want(s->in_iov, &s->n_in, arg, sizeof(c));
		for (size_t i = 0; i < n; i++)
			want(s->in_iov, &s->n_in, arrays[i], len);
		return;
	}
	data = (const uint16_t *)(const void *)((const uint8_t *)in + sizeof(c));
	r = fb_state_put_cmap(st, c.start, c.len, data, data + c.len, data + 2 * c.len,
			      n == 4 ? data + 3 * c.len : NULL);
	if (r == 0)
		s->effect = FB_EFFECT_CMAP;
	done(s, r, NULL, 0);
}

static void socket_path(struct fb_ioctl_step *s, const struct fb_ioctl_file *f) {
	struct devns_fb_socket sock = { 0 };

	if (!f->socket_path)
		return done(s, -ENOTTY, NULL, 0);
	if (strlen(f->socket_path) >= sizeof(sock.path))
		return done(s, -ENAMETOOLONG, NULL, 0);
	strcpy(sock.path, f->socket_path);
	done(s, 0, &sock, sizeof(sock));
}

static void ticket(struct fb_ioctl_step *s, const struct fb_ioctl_file *f) {
	struct devns_fb_ticket t;
	int r;

	if (!f->ticket)
		return done(s, -ENOTTY, NULL, 0);
	r = f->ticket(f->userdata, &t);
	if (r < 0)
		return done(s, r, NULL, 0);
	done(s, 0, &t, sizeof(t));
}

/* Bytes changed through the memfd, as a write() at their position would have. */
static void wrote(struct fb_ioctl_step *s, const struct fb_state *st, const struct fb_ioctl_file *file,
		  uint64_t pos, uint64_t count) {
	uint64_t size = fb_state_mem_size(st), line = st->fix.line_length;

	if (file->read_only)
		return done(s, -EBADF, NULL, 0);
	if (pos > size || count > size - pos)
		return done(s, -EINVAL, NULL, 0);
	if (count > 0) {
		s->effect = FB_EFFECT_WROTE;
		s->rows = (struct fb_rows){ (uint32_t)(pos / line), (uint32_t)((pos + count + line - 1) / line) };
		*file->pos = pos + count;
	}
	done(s, 0, NULL, 0);
}

void fb_ioctl(struct fb_state *st, const struct fb_ioctl_file *file, unsigned int cmd, void *arg, const void *in,
	      size_t in_size, size_t out_size, struct fb_ioctl_step *s) {
	uint64_t pos;
	uint32_t crtc;

	s->retry = false;
	s->result = 0;
	s->effect = FB_EFFECT_NONE;
	s->out_size = 0;
	s->n_in = s->n_out = 0;

	switch (cmd) {
	case FBIOGET_VSCREENINFO:
		if (!need(s, arg, 0, sizeof(st->var), in_size, out_size))
			done(s, 0, &st->var, sizeof(st->var));
		return;
	case FBIOGET_FSCREENINFO:
		if (!need(s, arg, 0, sizeof(st->fix), in_size, out_size))
			done(s, 0, &st->fix, sizeof(st->fix));
		return;
	case FBIOPUT_VSCREENINFO:
		if (!need(s, arg, sizeof(struct fb_var_screeninfo), sizeof(struct fb_var_screeninfo), in_size,
			  out_size))
			put_var(s, st, in);
		return;
	case FBIOPAN_DISPLAY:
		if (!need(s, arg, sizeof(struct fb_var_screeninfo), 0, in_size, out_size)) {
			struct fb_var_screeninfo var;

			memcpy(&var, in, sizeof(var));
			pan(s, st, &var);
		}
		return;
	case DEVNS_FBIO_PAN_AT: {
		/* The offsets themselves are the argument: yoffset in the upper 32 bits, xoffset in the lower. */
		uint64_t v = (uint64_t)(uintptr_t)arg;
		struct fb_var_screeninfo var = { .xoffset = (uint32_t)v, .yoffset = (uint32_t)(v >> 32) };

		return pan(s, st, &var);
	}
	case FBIOGETCMAP:
		if (!need(s, arg, sizeof(struct fb_cmap), 0, in_size, 0))
			get_cmap(s, st, arg, in, in_size, out_size);
		return;
	case FBIOPUTCMAP:
		if (!need(s, arg, sizeof(struct fb_cmap), 0, in_size, 0))
			put_cmap(s, st, arg, in, in_size);
		return;
	case FBIOBLANK:
		/* The argument is the level itself, not a pointer. */
		fb_state_blank(st, (unsigned long)(uintptr_t)arg);
		s->effect = FB_EFFECT_BLANK;
		return done(s, 0, NULL, 0);
	case FBIO_WAITFORVSYNC:
		if (need(s, arg, sizeof(crtc), 0, in_size, out_size))
			return;
		memcpy(&crtc, in, sizeof(crtc));
		if (crtc != 0)
			return done(s, -EINVAL, NULL, 0);
		s->effect = FB_EFFECT_VSYNC;
		return done(s, 0, NULL, 0);
	case DEVNS_FBIOGET_POS:
		if (!need(s, arg, 0, sizeof(pos), in_size, out_size))
			done(s, 0, file->pos, sizeof(pos));
		return;
	case DEVNS_FBIOSET_POS:
		if (need(s, arg, sizeof(pos), 0, in_size, out_size))
			return;
		memcpy(&pos, in, sizeof(pos));
		*file->pos = pos;
		return done(s, 0, NULL, 0);
	case DEVNS_FBIO_TELL:
		/* The caller's memory, when it names it, must be the framebuffer's. */
		if (arg && (uintptr_t)arg != file->serial)
			return done(s, -ESTALE, NULL, 0);
		return done(s, *file->pos > INT_MAX ? -EOVERFLOW : (int)*file->pos, NULL, 0);
	case DEVNS_FBIO_SEEK:
		*file->pos = (uintptr_t)arg;
		return done(s, 0, NULL, 0);
	case DEVNS_FBIO_WROTE:
		if (!need(s, arg, sizeof(struct devns_fb_wrote), 0, in_size, out_size)) {
			struct devns_fb_wrote w;

			memcpy(&w, in, sizeof(w));
			wrote(s, st, file, w.pos, w.count);
		}
		return;
	case DEVNS_FBIO_WROTE_AT:
		/* The range itself is the argument: pos in the upper 32 bits, count in the lower. */
		pos = (uint64_t)(uintptr_t)arg;
		return wrote(s, st, file, pos >> 32, pos & UINT32_MAX);
	case DEVNS_FBIOGET_SOCKET:
		if (!need(s, arg, 0, sizeof(struct devns_fb_socket), in_size, out_size))
			socket_path(s, file);
		return;
	case DEVNS_FBIOGET_TICKET:
		/* Issued only once the caller's memory is there to take it. */
		if (!need(s, arg, 0, sizeof(struct devns_fb_ticket), in_size, out_size))
			ticket(s, file);
		return;
	default:
		return done(s, -ENOTTY, NULL, 0);
	}
}
