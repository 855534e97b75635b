/* SPDX-License-Identifier: MIT */
/* fbdev semantics without a transport: screen info, pan, colormap, stream bounds, ioctl steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "devns-fb.h"
#include "fb-ioctl.h"
#include "fb-node.h"
#include "fb-stream.h"
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
	/* A position the result cannot carry. */
	fb_ioctl(&n->state, &file, DEVNS_FBIO_SEEK, (void *)(uintptr_t)0x80000000u, NULL, 0, 0, &step);
	fb_ioctl(&n->state, &file, DEVNS_FBIO_TELL, NULL, NULL, 0, 0, &step);
	assert_int_equal(step.result, -EOVERFLOW);
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
		cmocka_unit_test_setup_teardown(test_cmap, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_cmap_null_array, node_setup, node_teardown),
		cmocka_unit_test(test_stream_bounds),
		cmocka_unit_test_setup_teardown(test_memfd_writer_ioctls, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_read_write_position, node_setup, node_teardown),
		cmocka_unit_test_setup_teardown(test_other_ioctls, node_setup, node_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
