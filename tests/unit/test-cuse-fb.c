/* SPDX-License-Identifier: MIT */
/*
 * A persona's fb0 and the routed fb0 over CUSE, each with the kernel's side
 * of /dev/cuse played over a socket pair of its own: a file opened on the
 * routed node works on the persona's node, and a caller waiting there in
 * FBIO_WAITFORVSYNC is answered through the connection it came on, also
 * when the routed node goes first (as it does when devnsd stops).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fb.h>
#include <linux/fuse.h>
#include <string.h>
#include <unistd.h>

#include "cuse-device.h"
#include "cuse-fb.h"
#include "cuse-rig.h"
#include "util.h"

#define PID 4242
#define UID 1000

static const struct fb_mode mode = { .width = 64, .height = 48, .refresh_hz = 60 };

static struct {
	sd_event *e;
	struct fb_node *node;
	struct cuse_fb *persona, *routed;
	int persona_fd, routed_fd; /* the kernel's side of each connection */
	unsigned int vsync_effects;
} t;

/* Sends a request made of two parts on the kernel's side fd, and lets devnsd handle it. */
static uint64_t send_on(int fd, uint32_t opcode, const void *a, size_t a_len, const void *b, size_t b_len) {
	return cuse_rig_send(t.e, fd, opcode, UID, PID, a, a_len, b, b_len);
}

static bool next_reply(int fd, struct fuse_out_header *ret, void *body, size_t size) {
	return cuse_rig_next(fd, ret, body, size, NULL);
}

static int reply_to(int fd, uint64_t unique, void *body, size_t size) {
	struct fuse_out_header h;

	assert_true(next_reply(fd, &h, body, size));
	assert_int_equal(h.unique, unique);
	return h.error;
}

static void init(int fd) {
	struct fuse_init_in in = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	struct fuse_out_header h;

	send_on(fd, CUSE_INIT, &in, sizeof(in), NULL, 0);
	assert_true(next_reply(fd, &h, NULL, 0));
	assert_int_equal(h.error, 0);
}

static uint64_t open_on(int fd) {
	struct fuse_open_in in = { .flags = O_RDWR };
	struct fuse_open_out out = { 0 };

	assert_int_equal(reply_to(fd, send_on(fd, FUSE_OPEN, &in, sizeof(in), NULL, 0), &out, sizeof(out)), 0);
	return out.fh;
}

/* FBIO_WAITFORVSYNC on fh through fd, up to its last round, whose answer is left unread: its unique. */
static uint64_t wait_vsync(int fd, uint64_t fh) {
	static uint32_t crtc;
	struct fuse_ioctl_in io = { .fh = fh, .flags = FUSE_IOCTL_UNRESTRICTED, .cmd = FBIO_WAITFORVSYNC,
				    .arg = (uintptr_t)&crtc };
	struct fuse_ioctl_out out = { 0 };

	assert_int_equal(reply_to(fd, send_on(fd, FUSE_IOCTL, &io, sizeof(io), NULL, 0), &out, sizeof(out)), 0);
	assert_true(out.flags & FUSE_IOCTL_RETRY);
	io.in_size = sizeof(crtc);
	return send_on(fd, FUSE_IOCTL, &io, sizeof(io), &crtc, sizeof(crtc));
}

static void no_reply(int fd) {
	struct fuse_out_header h;

	assert_false(next_reply(fd, &h, NULL, 0));
}

/* --- the nodes ------------------------------------------------------------------- */

static void on_ready(void *userdata) {
	(void)userdata;
}

static int may_open(void *userdata, pid_t pid) {
	(void)userdata;
	(void)pid;
	return 0;
}

static void on_written(void *userdata, const struct fb_rows *rows) {
	(void)userdata;
	(void)rows;
}

static void on_effect(void *userdata, enum fb_effect effect) {
	(void)userdata;
	t.vsync_effects += effect == FB_EFFECT_VSYNC;
}

static int route(void *userdata, pid_t pid, struct cuse_fb **ret, uint32_t *ret_owner) {
	(void)userdata;
	(void)pid;
	if (!t.persona)
		return -ENODEV;
	*ret = t.persona;
	*ret_owner = 1;
	return 0;
}

static const struct cuse_fb_hooks persona_hooks = {
	.ready = on_ready, .may_open = may_open, .written = on_written, .effect = on_effect
};
static const struct cuse_fb_hooks routed_hooks = {
	.ready = on_ready, .route = route, .written = on_written, .effect = on_effect
};

static int setup(void **state) {
	(void)state;
	memset(&t, 0, sizeof(t));
	assert_int_equal(sd_event_new(&t.e), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	assert_int_equal(fb_node_new(&t.node, &mode, "test"), 0);
	assert_int_equal(cuse_fb_new(&t.persona, t.e, "devns/t/fb0", 0, 0, t.node, NULL, &persona_hooks, NULL), 0);
	t.persona_fd = cuse_rig_last_fd;
	init(t.persona_fd);
	assert_int_equal(cuse_fb_new(&t.routed, t.e, "devns/fb0", 0, 0, NULL, NULL, &routed_hooks, NULL), 0);
	assert_int_equal(cuse_fb_set_shares(t.routed, 3), 0);
	t.routed_fd = cuse_rig_last_fd;
	init(t.routed_fd);
	return 0;
}

static int teardown(void **state) {
	(void)state;
	t.routed = cuse_fb_free(t.routed);
	t.persona = cuse_fb_free(t.persona);
	fb_node_free(t.node);
	t.e = sd_event_unref(t.e);
	cuse_device_set_connector(NULL, NULL);
	close(t.persona_fd);
	close(t.routed_fd);
	return 0;
}

/* --- the tests ---------------------------------------------------------------------- */

static void test_routed_vsync_answered_at_the_vsync(void **state) {
	uint64_t fh, waiting;

	(void)state;
	fh = open_on(t.routed_fd);
	waiting = wait_vsync(t.routed_fd, fh);
	no_reply(t.routed_fd);
	/* It waits on the persona's node, and its answer comes on the routed connection. */
	assert_int_equal(cuse_fb_vsync_waiters(t.persona), 1);
	assert_int_equal(t.vsync_effects, 1);
	cuse_fb_vsync(t.persona);
	assert_int_equal(reply_to(t.routed_fd, waiting, NULL, 0), 0);
	no_reply(t.persona_fd);
	/* The persona's revocation reaches it. */
	waiting = wait_vsync(t.routed_fd, fh);
	cuse_fb_revoke(t.persona);
	assert_int_equal(reply_to(t.routed_fd, waiting, NULL, 0), -ENODEV);
	assert_int_equal(cuse_fb_vsync_waiters(t.persona), 0);
}

static void test_routed_node_goes_first(void **state) {
	uint64_t fh, waiting, direct, direct_waiting;

	(void)state;
	fh = open_on(t.routed_fd);
	waiting = wait_vsync(t.routed_fd, fh);
	direct = open_on(t.persona_fd);
	direct_waiting = wait_vsync(t.persona_fd, direct);
	assert_int_equal(cuse_fb_vsync_waiters(t.persona), 2);
	/* The routed node's caller is answered before its connection ends; the persona's own still waits. */
	t.routed = cuse_fb_free(t.routed);
	assert_int_equal(reply_to(t.routed_fd, waiting, NULL, 0), -ENODEV);
	assert_int_equal(cuse_fb_vsync_waiters(t.persona), 1);
	no_reply(t.persona_fd);
	cuse_fb_vsync(t.persona);
	assert_int_equal(reply_to(t.persona_fd, direct_waiting, NULL, 0), 0);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_routed_vsync_answered_at_the_vsync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routed_node_goes_first, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
