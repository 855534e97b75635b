/* SPDX-License-Identifier: MIT */
/* fbdev semantics without a transport: screen info, pan, colormap, stream bounds, ioctl steps, tickets, fresh memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "devns-fb.h"
#include "fb-ioctl.h"
#include "fb-node.h"
#include "fb-stream.h"
#include "fb-ticket.h"
#include "util.h"

#define W 64
#define H 48

static const struct fb_mode mode = { .width = W, .height = H, .refresh_hz = 60 };

static int node_setup(void **state) {
	struct fb_node *n = NULL;

	assert_int_equal(fb_node_new(&n, &mode, "test"), 0);
	*state = n;
	return 0;
}

static int node_teardown(void **state) {
	fb_node_free(*state);
	return 0;
}

/* Runs an ioctl as CUSE does in unrestricted mode: every retry is served from real memory. */
static int run_ioctl(struct fb_state *s, uint64_t *pos, unsigned int cmd, void *arg) {
	static struct fb_ioctl_step step;
	struct fb_ioctl_file file = { .pos = pos, .socket_path = "/run/devns/test/fb0" };
	struct iovec out_iov[FB_IOCTL_IOV_MAX];
	size_t in_size = 0, out_size = 0, n_out = 0;
	uint8_t in[4096];

	for (int i = 0; i < 4; i++) {
		fb_ioctl(s, &file, cmd, arg, in, in_size, out_size, &step);
		if (!step.retry) {
			/* The output goes to the memory the last retry named. */
			size_t off = 0;
			for (size_t k = 0; k < n_out && step.result >= 0; k++) {
				memcpy(out_iov[k].iov_base, step.out + off, out_iov[k].iov_len);
				off += out_iov[k].iov_len;
			}
			return step.result;
		}
		n_out = step.n_out;
		memcpy(out_iov, step.out_iov, sizeof(out_iov));
		in_size = 0;
		for (size_t k = 0; k < step.n_in; k++) {
			memcpy(in + in_size, step.in_iov[k].iov_base, step.in_iov[k].iov_len);
			in_size += step.in_iov[k].iov_len;
		}
		out_size = 0;
		for (size_t k = 0; k < step.n_out; k++)
			out_size += step.out_iov[k].iov_len;
	}
	fail_msg("too many retries");
	return -EIO;
}

/* For ioctls whose output goes back to arg: copy the single-iovec output there. */
static int run_ioctl_out(struct fb_state *s, uint64_t *pos, unsigned int cmd, void *arg, size_t len) {
	static struct fb_ioctl_step step;
	struct fb_ioctl_file file = { .pos = pos, .socket_path = "/run/devns/test/fb0" };
	uint8_t in[1024];

	memcpy(in, arg, len);
	fb_ioctl(s, &file, cmd, arg, in, len, len, &step);
	assert_false(step.retry);
	if (step.result >= 0 && step.out_size)
		memcpy(arg, step.out, step.out_size);
	return step.result;
}

static void test_screen_info(void **state) {
	struct fb_node *n = *state;
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	uint64_t pos = 0;

	assert_int_equal(run_ioctl_out(&n->state, &pos, FBIOGET_VSCREENINFO, &var, sizeof(var)), 0);
	assert_int_equal(var.xres, W);
	assert_int_equal(var.yres, H);
	assert_int_equal(var.bits_per_pixel, 32);
	assert_int_equal(var.red.offset, 16);
	assert_int_equal(var.blue.offset, 0);
	assert_int_equal(run_ioctl_out(&n->state, &pos, FBIOGET_FSCREENINFO, &fix, sizeof(fix)), 0);
	assert_int_equal(fix.line_length, W * 4);
	assert_int_equal(fix.smem_len, W * 4 * H * 2);
	assert_int_equal(fix.visual, FB_VISUAL_TRUECOLOR);
	assert_string_equal(fix.id, "devns");
}

static void test_put_var_checks(void **state) {
	struct fb_node *n = *state;
	struct fb_var_screeninfo var = n->state.var, v;
	uint64_t pos = 0;

	v = var;
	v.yres_virtual = 2 * H;
	assert_int_equal(run_ioctl_out(&n->state, &pos, FBIOPUT_VSCREENINFO, &v, sizeof(v)), 0);
	assert_int_equal(n->state.var.yres_virtual, 2 * H);

	v = var;
	v.yres_virtual = 3 * H;
	assert_int_equal(fb_state_put_var(&n->state, &v), -EINVAL);
	v = var;
	v.xres = v.xres_virtual = 100000;
	assert_int_equal(fb_state_put_var(&n->state, &v), -EINVAL);
	v = var;
	v.xres = v.yres = UINT32_MAX;
	assert_int_equal(fb_state_put_var(&n->state, &v), -EINVAL);
	v = var;
	v.bits_per_pixel = 16;
	assert_int_equal(fb_state_put_var(&n->state, &v), -EINVAL);
	v = var;
	v.xres = 4;
	assert_int_equal(fb_state_put_var(&n->state, &v), -EINVAL);
	assert_int_equal(n->state.var.yres_virtual, 2 * H);

	/* A depth of 0 keeps the format; smaller sizes are rounded up to the display's. */
	v = var;
	v.bits_per_pixel = 0;
	v.xres = 16;
	v.yres_virtual = H;
	assert_int_equal(fb_state_put_var(&n->state, &v), 0);
	assert_int_equal(v.xres, W);
	assert_int_equal(v.bits_per_pixel, 32);

	/* FB_ACTIVATE_TEST checks without applying. */
	v = n->state.var;
	v.yres_virtual = 2 * H;
	v.activate = FB_ACTIVATE_TEST;
	assert_int_equal(fb_state_put_var(&n->state, &v), 0);
	assert_int_equal(n->state.var.yres_virtual, H);
}

static void test_pan(void **state) {
	struct fb_node *n = *state;
	struct fb_var_screeninfo v = n->state.var;

	v.yoffset = 1;
	assert_int_equal(fb_state_pan(&n->state, &v), -EINVAL);
	v.yoffset = 0;
	v.yres_virtual = 2 * H;
	assert_int_equal(fb_state_put_var(&n->state, &v), 0);
	v.yoffset = H;
	assert_int_equal(fb_state_pan(&n->state, &v), 0);
	assert_int_equal(fb_state_visible_offset(&n->state), (size_t)H * W * 4);
	v.yoffset = H + 1;
	assert_int_equal(fb_state_pan(&n->state, &v), -EINVAL);
	v.yoffset = 0;
	v.vmode = FB_VMODE_YWRAP;
	assert_int_equal(fb_state_pan(&n->state, &v), -EINVAL);
}

/* The offsets by value: the same checks and effect as FBIOPAN_DISPLAY, in one step. */
static void test_pan_at(void **state) {
	struct fb_node *n = *state;
	struct fb_var_screeninfo v = n->state.var;
	static struct fb_ioctl_step step;
	uint64_t pos = 0;
	struct fb_ioctl_file file = { .pos = &pos };

	v.yres_virtual = 2 * H;
	assert_int_equal(fb_state_put_var(&n->state, &v), 0);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, (void *)(uintptr_t)DEVNS_FB_PAN_AT_ARG(0, H), NULL, 0, 0, &step);
	assert_false(step.retry);
	assert_int_equal(step.result, 0);
	assert_int_equal(step.effect, FB_EFFECT_VIEW);
	assert_int_equal(fb_state_visible_offset(&n->state), (size_t)H * W * 4);
	/* Past the virtual frame, either way, or with the halves swapped: refused, the view stays. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, (void *)(uintptr_t)DEVNS_FB_PAN_AT_ARG(0, H + 1), NULL, 0, 0,
		 &step);
	assert_int_equal(step.result, -EINVAL);
	assert_int_equal(step.effect, FB_EFFECT_NONE);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, (void *)(uintptr_t)DEVNS_FB_PAN_AT_ARG(1, 0), NULL, 0, 0, &step);
	assert_int_equal(step.result, -EINVAL);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, (void *)(uintptr_t)DEVNS_FB_PAN_AT_ARG(H, 0), NULL, 0, 0, &step);
	assert_int_equal(step.result, -EINVAL);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, (void *)(uintptr_t)UINT64_MAX, NULL, 0, 0, &step);
	assert_int_equal(step.result, -EINVAL);
	assert_int_equal(fb_state_visible_offset(&n->state), (size_t)H * W * 4);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_PAN_AT, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, 0);
	assert_int_equal(fb_state_visible_offset(&n->state), 0);
}

static void test_cmap(void **state) {
	struct fb_node *n = *state;
	uint16_t r[4] = { 1, 2, 3, 4 }, g[4] = { 5, 6, 7, 8 }, b[4] = { 9, 10, 11, 12 }, out[3][4] = { { 0 } };
	struct fb_cmap put = { .start = 10, .len = 4, .red = r, .green = g, .blue = b };
	struct fb_cmap get = { .start = 10, .len = 4, .red = out[0], .green = out[1], .blue = out[2] };
	uint16_t big[3][10] = { { 0 } };
	struct fb_cmap bad = { .start = 250, .len = 10, .red = big[0], .green = big[1], .blue = big[2] };
	uint32_t from, to;
	uint64_t pos = 0;

	assert_int_equal(run_ioctl(&n->state, &pos, FBIOPUTCMAP, &put), 0);
	assert_int_equal(run_ioctl(&n->state, &pos, FBIOGETCMAP, &get), 0);
	assert_memory_equal(out[0], r, sizeof(r));
	assert_memory_equal(out[1], g, sizeof(g));
	assert_memory_equal(out[2], b, sizeof(b));
	assert_int_equal(run_ioctl(&n->state, &pos, FBIOPUTCMAP, &bad), -EINVAL);
	/* Reads are cut to the map, as fb_cmap_to_user() does. */
	assert_int_equal(fb_state_cmap_range(250, 10, &from, &to), 6);
	assert_int_equal(fb_state_cmap_range(256, 1, &from, &to), -EINVAL);
}

/* The arrays of a struct fb_cmap are the caller's addresses, NULL too: a retry only names them. */
static void test_cmap_null_array(void **state) {
	static struct fb_ioctl_step step;
	struct fb_node *n = *state;
	uint16_t g[4], b[4];
	struct fb_cmap get = { .start = 0, .len = 4, .red = NULL, .green = g, .blue = b };
	uint64_t pos = 0;
	struct fb_ioctl_file file = { .pos = &pos };

	fb_ioctl(&n->state, &file, FBIOGETCMAP, &get, &get, sizeof(get), 0, &step);
	assert_true(step.retry);
	assert_int_equal(step.n_out, 3);
	assert_null(step.out_iov[0].iov_base);
	assert_ptr_equal(step.out_iov[1].iov_base, g);
}

static void test_stream_bounds(void **state) {
	/* The kernel's fb_write()/fb_read() arithmetic. */
	(void)state;
	assert_int_equal(fb_stream_clamp(100, 0, 50, true), 50);
	assert_int_equal(fb_stream_clamp(100, 80, 50, true), 20);
	assert_int_equal(fb_stream_clamp(100, 100, 1, true), -ENOSPC);
	assert_int_equal(fb_stream_clamp(100, 101, 1, true), -EFBIG);
	assert_int_equal(fb_stream_clamp(100, 100, 200, true), -EFBIG);
	assert_int_equal(fb_stream_clamp(100, 0, 200, true), 100);
	assert_int_equal(fb_stream_clamp(100, 100, 0, true), 0);
	assert_int_equal(fb_stream_clamp(100, 80, 50, false), 20);
	assert_int_equal(fb_stream_clamp(100, 100, 50, false), 0);
	assert_int_equal(fb_stream_clamp(100, UINT64_MAX, 50, false), 0);
}

static void test_read_write_position(void **state) {
	struct fb_node *n = *state;
	uint64_t pos = 0, p2;
	struct fb_rows rows, vis;
	const void *data;
	uint8_t buf[8] = "ABCDEFGH";

	assert_int_equal(fb_node_write(n, &pos, buf, 8, &rows), 8);
	assert_int_equal(pos, 8);
	assert_int_equal(rows.y0, 0);
	assert_int_equal(rows.y1, 1);
	p2 = W * 4 * 3 - 4;
	assert_int_equal(fb_node_write(n, &p2, buf, 8, &rows), 8);
	assert_int_equal(rows.y0, 2);
	assert_int_equal(rows.y1, 4);
	assert_true(fb_node_visible_rows(n, &rows, &vis));
	p2 = 0;
	assert_int_equal(fb_node_read(n, &p2, 8, &data), 8);
	assert_memory_equal(data, "ABCDEFGH", 8);
	/* Set the position through the ioctl and write across the end. */
	p2 = n->size - 4;
	assert_int_equal(run_ioctl_out(&n->state, &pos, DEVNS_FBIOSET_POS, &p2, sizeof(p2)), 0);
	assert_int_equal(pos, n->size - 4);
	assert_int_equal(fb_node_write(n, &pos, buf, 8, &rows), 4);
	assert_int_equal(fb_node_write(n, &pos, buf, 8, &rows), -ENOSPC);
	/* Rows past the visible frame are not shown. */
	assert_false(fb_node_visible_rows(n, &rows, &vis));
}

/* The ioctls of a writer that stores through the memfd. */
static void test_memfd_writer_ioctls(void **state) {
	struct fb_node *n = *state;
	uint64_t pos = 0;
	static struct fb_ioctl_step step;
	struct fb_ioctl_file file = { .pos = &pos };
	uint32_t line = n->state.fix.line_length;
	struct devns_fb_wrote w = { .pos = line * 3 + 8, .count = line * 2 };

	fb_ioctl(&n->state, &file, DEVNS_FBIO_SEEK, (void *)(uintptr_t)(line * 7), NULL, 0, 0, &step);
	assert_int_equal(step.result, 0);
	assert_int_equal(pos, line * 7);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_TELL, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, line * 7);
	/* The range comes through memory: the first step asks for it. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, NULL, 0, 0, &step);
	assert_true(step.retry);
	assert_int_equal(step.n_in, 1);
	assert_int_equal(step.in_iov[0].iov_len, sizeof(w));
	/* From the middle of row 3 into row 5: rows 3 to 5 changed, whatever the position was. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.result, 0);
	assert_int_equal(step.effect, FB_EFFECT_WROTE);
	assert_int_equal(step.rows.y0, 3);
	assert_int_equal(step.rows.y1, 6);
	assert_int_equal(pos, line * 5 + 8);
	/* Nothing changes without bytes; nothing past the end. */
	w.count = 0;
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.effect, FB_EFFECT_NONE);
	w = (struct devns_fb_wrote){ .pos = 0, .count = n->size + 1 };
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.result, -EINVAL);
	w = (struct devns_fb_wrote){ .pos = n->size, .count = 1 };
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.result, -EINVAL);
	w = (struct devns_fb_wrote){ .pos = UINT64_MAX, .count = UINT64_MAX };
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.result, -EINVAL);
	assert_int_equal(pos, line * 5 + 8);
	/* The same range by value, in one step: rows 1 to 2, from the end of row 0. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE_AT, (void *)(uintptr_t)DEVNS_FB_WROTE_AT_ARG(line - 4, line + 8),
		 NULL, 0, 0, &step);
	assert_false(step.retry);
	assert_int_equal(step.result, 0);
	assert_int_equal(step.effect, FB_EFFECT_WROTE);
	assert_int_equal(step.rows.y0, 0);
	assert_int_equal(step.rows.y1, 3);
	assert_int_equal(pos, line * 2 + 4);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE_AT, (void *)(uintptr_t)DEVNS_FB_WROTE_AT_ARG(n->size, 1), NULL, 0,
		 0, &step);
	assert_int_equal(step.result, -EINVAL);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE_AT, (void *)(uintptr_t)DEVNS_FB_WROTE_AT_ARG(0, n->size + 1), NULL,
		 0, 0, &step);
	assert_int_equal(step.result, -EINVAL);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE_AT, (void *)(uintptr_t)UINT64_MAX, NULL, 0, 0, &step);
	assert_int_equal(step.result, -EINVAL);
	assert_int_equal(pos, line * 2 + 4);
	/* A file open only for reading changes nothing, as its write() would not. */
	file.read_only = true;
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE_AT, (void *)(uintptr_t)DEVNS_FB_WROTE_AT_ARG(0, line), NULL, 0, 0,
		 &step);
	assert_int_equal(step.result, -EBADF);
	assert_int_equal(step.effect, FB_EFFECT_NONE);
	w = (struct devns_fb_wrote){ .pos = 0, .count = line };
	fb_ioctl(&n->state, &file, DEVNS_FBIO_WROTE, &w, &w, sizeof(w), 0, &step);
	assert_int_equal(step.result, -EBADF);
	assert_int_equal(pos, line * 2 + 4);
	file.read_only = false;
	pos = line * 5 + 8;
	/* Told with the serial of the memory the caller holds: only the node's memory now will do. */
	file.serial = n->serial;
	fb_ioctl(&n->state, &file, DEVNS_FBIO_TELL, (void *)(uintptr_t)n->serial, NULL, 0, 0, &step);
	assert_int_equal(step.result, line * 5 + 8);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_TELL, (void *)(uintptr_t)(n->serial + 1), NULL, 0, 0, &step);
	assert_int_equal(step.result, -ESTALE);
	/* A position the result cannot carry. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_SEEK, (void *)(uintptr_t)0x80000000u, NULL, 0, 0, &step);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_TELL, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, -EOVERFLOW);
}

static int issued;

static int fake_ticket(void *userdata, struct devns_fb_ticket *ret) {
	memset(ret->token, *(int *)userdata, sizeof(ret->token));
	issued++;
	return 0;
}

/* DEVNS_FBIOGET_TICKET issues a ticket only once the caller's memory is there to take it. */
static void test_ticket_ioctl(void **state) {
	struct fb_node *n = *state;
	static struct fb_ioctl_step step;
	struct devns_fb_ticket t, want;
	uint64_t pos = 0;
	int fill = 0x5a;
	struct fb_ioctl_file file = { .pos = &pos, .ticket = fake_ticket, .userdata = &fill };

	issued = 0;
	fb_ioctl(&n->state, &file, DEVNS_FBIOGET_TICKET, &t, NULL, 0, 0, &step);
	assert_true(step.retry);
	assert_int_equal(step.n_out, 1);
	assert_int_equal(step.out_iov[0].iov_len, sizeof(t));
	assert_int_equal(issued, 0);
	fb_ioctl(&n->state, &file, DEVNS_FBIOGET_TICKET, &t, NULL, 0, sizeof(t), &step);
	assert_int_equal(step.result, 0);
	assert_int_equal(issued, 1);
	memset(want.token, 0x5a, sizeof(want.token));
	assert_int_equal(step.out_size, sizeof(t));
	assert_memory_equal(step.out, &want, sizeof(want));
	/* A node without a socket has no tickets. */
	file.ticket = NULL;
	fb_ioctl(&n->state, &file, DEVNS_FBIOGET_TICKET, &t, NULL, 0, sizeof(t), &step);
	assert_int_equal(step.result, -ENOTTY);
}

#define NOW 1000000000u

static void test_tickets(void **state) {
	static struct fb_tickets t;
	struct devns_fb_ticket a, b, forged, first;
	const void *file = NULL;
	int fa, fb;

	(void)state;
	fb_tickets_clear(&t);
	assert_int_equal(fb_tickets_issue(&t, &fa, NOW, &a), 0);
	assert_int_equal(fb_tickets_issue(&t, &fb, NOW, &b), 0);
	assert_memory_not_equal(&a, &b, sizeof(a));
	/* One use each, for the file it was issued to. */
	assert_int_equal(fb_tickets_redeem(&t, &b, NOW + 1, &file), 0);
	assert_ptr_equal(file, &fb);
	assert_int_equal(fb_tickets_redeem(&t, &b, NOW + 1, &file), -ENOENT);
	/* A guess is nothing; an all-zero one neither, though free slots are zero. */
	forged = a;
	forged.token[15] ^= 1;
	assert_int_equal(fb_tickets_redeem(&t, &forged, NOW + 1, &file), -ENOENT);
	memset(&forged, 0, sizeof(forged));
	assert_int_equal(fb_tickets_redeem(&t, &forged, NOW + 1, &file), -ENOENT);
	/* Expired at its lifetime, and gone once tried. */
	assert_int_equal(fb_tickets_redeem(&t, &a, NOW + FB_TICKET_LIFETIME_USEC, &file), -ENOENT);
	assert_int_equal(fb_tickets_redeem(&t, &a, NOW + 1, &file), -ENOENT);
	/* A file closed or revoked takes its tickets with it. */
	assert_int_equal(fb_tickets_issue(&t, &fa, NOW, &a), 0);
	fb_tickets_drop_file(&t, &fa);
	assert_int_equal(fb_tickets_redeem(&t, &a, NOW + 1, &file), -ENOENT);
	/* A file has FB_TICKETS_PER_FILE at most: a new one replaces its oldest. */
	assert_int_equal(fb_tickets_issue(&t, &fa, NOW, &first), 0);
	for (unsigned int i = 1; i <= FB_TICKETS_PER_FILE; i++)
		assert_int_equal(fb_tickets_issue(&t, &fa, NOW + i, &a), 0);
	assert_int_equal(fb_tickets_redeem(&t, &first, NOW + 10, &file), -ENOENT);
	assert_int_equal(fb_tickets_redeem(&t, &a, NOW + 10, &file), 0);
	assert_ptr_equal(file, &fa);
	fb_tickets_clear(&t);
	assert_int_equal(fb_tickets_issue(&t, &fa, NOW, &a), 0);
	fb_tickets_clear(&t);
	assert_int_equal(fb_tickets_redeem(&t, &a, NOW + 1, &file), -ENOENT);
}

/* Every open file of a node at its full count fits; beyond, only expired tickets make room. */
static void test_tickets_full(void **state) {
	static struct fb_tickets t;
	static char files[FB_TICKETS_MAX / FB_TICKETS_PER_FILE + 1];
	struct devns_fb_ticket tk;

	(void)state;
	fb_tickets_clear(&t);
	for (size_t f = 0; f + 1 < sizeof(files); f++)
		for (unsigned int i = 0; i < FB_TICKETS_PER_FILE; i++)
			assert_int_equal(fb_tickets_issue(&t, &files[f], NOW, &tk), 0);
	assert_int_equal(fb_tickets_issue(&t, &files[sizeof(files) - 1], NOW, &tk), -EBUSY);
	assert_int_equal(fb_tickets_issue(&t, &files[sizeof(files) - 1], NOW + FB_TICKET_LIFETIME_USEC, &tk), 0);
}

/* Fresh memory: black, the first state, a new serial; copies handed out keep their access. */
static void test_renew_and_reopen(void **state) {
	struct fb_node *n = *state;
	struct fb_var_screeninfo v = n->state.var;
	uint64_t serial = n->serial;
	struct stat st;
	int fd, old = dup(n->memfd);
	void *p;

	assert_true(old >= 0);
	memset(n->mem, 0xab, n->size);
	v.yres_virtual = 2 * H;
	assert_int_equal(fb_state_put_var(&n->state, &v), 0);
	fb_state_blank(&n->state, FB_BLANK_POWERDOWN);
	assert_int_equal(fb_node_renew(n), 0);
	assert_true(n->serial != serial && n->serial != 0);
	assert_int_equal(n->state.var.yres_virtual, H);
	assert_int_equal(n->state.blank, FB_BLANK_UNBLANK);
	for (size_t i = 0; i < n->size; i++)
		if (n->mem[i])
			fail_msg("byte %zu of the fresh memory is %u", i, n->mem[i]);
	/* The old memory is apart: what its holders write is not the node's. */
	p = mmap(NULL, n->size, PROT_READ | PROT_WRITE, MAP_SHARED, old, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0xcd, n->size);
	assert_int_equal(n->mem[0], 0);
	munmap(p, n->size);
	close(old);

	/* Only root may reopen the memory through /proc; a read-only copy cannot be mapped for writing. */
	assert_int_equal(fstat(n->memfd, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(fb_node_reopen(n, O_RDONLY, &fd), 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	assert_true(mmap(NULL, n->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED);
	assert_int_equal(errno, EACCES);
	p = mmap(NULL, n->size, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	munmap(p, n->size);
	close(fd);
	assert_int_equal(fb_node_reopen(n, O_WRONLY, &fd), 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_WRONLY);
	close(fd);
	/* A program that reads and writes gets a description of its own, not the node's. */
	assert_int_equal(fb_node_reopen(n, O_RDWR, &fd), 0);
	assert_int_equal(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	assert_false(fcntl(n->memfd, F_GETFL) & O_NONBLOCK);
	close(fd);
	assert_int_equal(fb_node_reopen(n, O_RDWR | O_APPEND, &fd), -EINVAL);

	/* Nobody gets a lease on the memory (the node's description is a writer): no open of it ever waits. */
	assert_int_equal(fb_node_reopen(n, O_RDONLY, &fd), 0);
	assert_true(fcntl(fd, F_SETLEASE, F_RDLCK) < 0);
	assert_int_equal(errno, EAGAIN);
	assert_true(fcntl(fd, F_SETLEASE, F_WRLCK) < 0);
	assert_int_equal(errno, EAGAIN);
	close(fd);
	assert_true(fcntl(n->memfd, F_SETLEASE, F_RDLCK) < 0);
}

static void test_other_ioctls(void **state) {
	struct fb_node *n = *state;
	struct devns_fb_socket sock;
	uint32_t crtc = 1;
	uint64_t pos = 0;
	static struct fb_ioctl_step step;
	struct fb_ioctl_file file = { .pos = &pos };

	assert_int_equal(run_ioctl_out(&n->state, &pos, DEVNS_FBIOGET_SOCKET, &sock, sizeof(sock)), 0);
	assert_string_equal(sock.path, "/run/devns/test/fb0");
	assert_int_equal(run_ioctl_out(&n->state, &pos, FBIO_WAITFORVSYNC, &crtc, sizeof(crtc)), -EINVAL);
	crtc = 0;
	assert_int_equal(run_ioctl_out(&n->state, &pos, FBIO_WAITFORVSYNC, &crtc, sizeof(crtc)), 0);
	fb_ioctl(&n->state, &file, FBIOBLANK, (void *)(uintptr_t)99, NULL, 0, 0, &step);
	assert_int_equal(step.result, 0);
	assert_int_equal(step.effect, FB_EFFECT_BLANK);
	assert_int_equal(n->state.blank, FB_BLANK_POWERDOWN);
	fb_ioctl(&n->state, &file, 0x4611 + 0x30, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, -ENOTTY);
	fb_ioctl(&n->state, &file, 0x5401, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, -ENOTTY);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_screen_info, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_put_var_checks, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_pan, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_pan_at, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_cmap, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_cmap_null_array, node_setup, node_teardown),
		cmocka_unit_test(test_stream_bounds),
		cmocka_unit_test_setup_teardown(test_memfd_writer_ioctls, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_read_write_position, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_other_ioctls, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_ticket_ioctl, node_setup, node_teardown),
		cmocka_unit_test(test_tickets),
		cmocka_unit_test(test_tickets_full),
		cmocka_unit_test_setup_teardown(test_renew_and_reopen, node_setup, node_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
