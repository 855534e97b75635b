/* SPDX-License-Identifier: MIT */
/*
 * A persona's card0 over CUSE: the test plays the kernel's side of
 * /dev/cuse over a socket pair (one message a request), and the caller's
 * memory is the test's own, as an unrestricted ioctl's retries name it.
 * Ioctls in their rounds, tickets for dumb buffers, blocking reads and
 * WAIT_VBLANKs answered at the vblank, interrupts, revocation, a caller
 * that never settles, the open limits, and a routed node whose files work
 * on the card.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <drm_fourcc.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuse-device.h"
#include "cuse-drm.h"
#include "cuse-rig.h"
#include "drm-ioctl.h"
#include "util.h"

#define W 800
#define H 600
#define SOCKET_PATH "/run/devnsd/fb/t/fb0"
#define UID 1000
#define PID 4242
#define REFUSED_PID 666

static struct {
	sd_event *e;
	struct drm_node *node;
	struct cuse_drm *cd;
	int kernel_fd;
	unsigned int ready;
	uint64_t now;
	uint32_t pid; /* whose requests the kernel sends: PID unless set */
	uint32_t uid; /* the uid of ioctls and reads */
} t;

/* --- the kernel's side ------------------------------------------------------- */

static void pump(void) {
	cuse_rig_pump(t.e);
}

/* Sends a request of uid (pid PID) made of two parts, and lets devnsd handle it. */
static uint64_t send_as(uint32_t opcode, uint32_t uid, const void *a, size_t a_len, const void *b, size_t b_len) {
	return cuse_rig_send(t.e, t.kernel_fd, opcode, uid, t.pid ? t.pid : PID, a, a_len, b, b_len);
}

static uint64_t send_req(uint32_t opcode, const void *a, size_t a_len) {
	return send_as(opcode, t.uid, a, a_len, NULL, 0);
}

/* The next message devnsd wrote: its header, and its payload (up to size bytes) in body; the payload's length. */
static bool next_reply(struct fuse_out_header *ret, void *body, size_t size, size_t *ret_len) {
	return cuse_rig_next(t.kernel_fd, ret, body, size, ret_len);
}

/* The answer to request unique: its error (a negative errno), payload in body. */
static int reply_to(uint64_t unique, void *body, size_t size, size_t *ret_len) {
	struct fuse_out_header h;

	assert_true(next_reply(&h, body, size, ret_len));
	assert_int_equal(h.unique, unique);
	return h.error;
}

static void no_reply(void) {
	struct fuse_out_header h;

	assert_false(next_reply(&h, NULL, 0, NULL));
}

static uint64_t open_as(uint32_t uid, uint32_t flags, int *ret_error) {
	struct fuse_open_in in = { .flags = flags };
	struct fuse_open_out out = { 0 };
	uint64_t unique = send_as(FUSE_OPEN, uid, &in, sizeof(in), NULL, 0);

	*ret_error = reply_to(unique, &out, sizeof(out), NULL);
	return *ret_error ? 0 : out.fh;
}

static uint64_t open_file(uint32_t flags) {
	int error;
	uint64_t fh = open_as(UID, flags, &error);

	assert_int_equal(error, 0);
	return fh;
}

static void release(uint64_t fh) {
	struct fuse_release_in in = { .fh = fh };

	assert_int_equal(reply_to(send_req(FUSE_RELEASE, &in, sizeof(in)), NULL, 0, NULL), 0);
}

static uint64_t send_read(uint64_t fh, uint32_t size, uint32_t flags) {
	struct fuse_read_in in = { .fh = fh, .size = size, .flags = flags };

	return send_req(FUSE_READ, &in, sizeof(in));
}

static void interrupt(uint64_t unique) {
	struct fuse_interrupt_in in = { .unique = unique };

	send_req(FUSE_INTERRUPT, &in, sizeof(in));
}

/* --- ioctls ------------------------------------------------------------------- */

/* What one round was answered. */
struct round {
	int error;
	bool retry;
	int result;
	unsigned int n_in, n_out;
	struct fuse_ioctl_iovec in[DRM_IOCTL_IOV_MAX], out[DRM_IOCTL_IOV_MAX];
	size_t len;
	uint8_t data[DRM_IOCTL_OUT_MAX];
};

static struct round answer;

static uint64_t send_ioctl(uint64_t fh, unsigned int cmd, const void *arg, const void *in, size_t in_size,
			   size_t out_size) {
	struct fuse_ioctl_in io = { .fh = fh,
				    .flags = FUSE_IOCTL_UNRESTRICTED,
				    .cmd = cmd,
				    .arg = (uintptr_t)arg,
				    .in_size = (uint32_t)in_size,
				    .out_size = (uint32_t)out_size };

	return send_as(FUSE_IOCTL, t.uid, &io, sizeof(io), in, in_size);
}

/* Reads the answer to unique into answer. */
static void read_round(uint64_t unique) {
	struct fuse_out_header h;
	struct fuse_ioctl_out out;
	size_t len = 0;

	memset(&answer, 0, sizeof(answer));
	assert_true(next_reply(&h, NULL, 0, &len));
	assert_int_equal(h.unique, unique);
	answer.error = h.error;
	if (h.error)
		return;
	assert_true(len >= sizeof(out));
	memcpy(&out, cuse_rig_msg + sizeof(h), sizeof(out));
	answer.result = out.result;
	answer.retry = out.flags & FUSE_IOCTL_RETRY;
	len -= sizeof(out);
	if (answer.retry) {
		const uint8_t *p = cuse_rig_msg + sizeof(h) + sizeof(out);

		assert_true(out.in_iovs <= DRM_IOCTL_IOV_MAX && out.out_iovs <= DRM_IOCTL_IOV_MAX);
		assert_int_equal(len, (out.in_iovs + out.out_iovs) * sizeof(struct fuse_ioctl_iovec));
		answer.n_in = out.in_iovs;
		answer.n_out = out.out_iovs;
		memcpy(answer.in, p, out.in_iovs * sizeof(answer.in[0]));
		memcpy(answer.out, p + out.in_iovs * sizeof(answer.in[0]), out.out_iovs * sizeof(answer.out[0]));
		return;
	}
	assert_true(len <= sizeof(answer.data));
	answer.len = len;
	memcpy(answer.data, cuse_rig_msg + sizeof(h) + sizeof(out), len);
}

static void ioctl_round(uint64_t fh, unsigned int cmd, const void *arg, const void *in, size_t in_size,
			size_t out_size) {
	read_round(send_ioctl(fh, cmd, arg, in, in_size, out_size));
}

static uint8_t gathered[DRM_IOCTL_DATA_MAX];

/* The data the retry in answer names, gathered from this process's memory; its out size in *ret_out. */
static size_t gather(size_t *ret_out) {
	size_t in = 0, out = 0;

	for (unsigned int i = 0; i < answer.n_in; i++) {
		assert_true(in + answer.in[i].len <= sizeof(gathered));
		memcpy(gathered + in, (const void *)(uintptr_t)answer.in[i].base, answer.in[i].len);
		in += answer.in[i].len;
	}
	for (unsigned int i = 0; i < answer.n_out; i++)
		out += answer.out[i].len;
	*ret_out = out;
	return in;
}

/* The kernel's unrestricted ioctl: rounds until an answer; the result or a negative errno, and the rounds taken. */
static int kernel_ioctl_rounds(uint64_t fh, unsigned int cmd, void *arg, unsigned int *ret_rounds) {
	struct fuse_ioctl_iovec out_iov[DRM_IOCTL_IOV_MAX];
	unsigned int n_out = 0, rounds = 0;
	size_t in_size = 0, out_size = 0;

	for (;;) {
		assert_true(++rounds <= DRM_IOCTL_ROUNDS + 1);
		ioctl_round(fh, cmd, arg, gathered, in_size, out_size);
		if (answer.error)
			break;
		if (!answer.retry) {
			size_t off = 0;

			for (unsigned int i = 0; i < n_out && off < answer.len; i++) {
				size_t len = MIN((size_t)out_iov[i].len, answer.len - off);

				memcpy((void *)(uintptr_t)out_iov[i].base, answer.data + off, len);
				off += len;
			}
			break;
		}
		in_size = gather(&out_size);
		n_out = answer.n_out;
		memcpy(out_iov, answer.out, sizeof(out_iov));
	}
	if (ret_rounds)
		*ret_rounds = rounds;
	return answer.error ? answer.error : answer.result;
}

static int kernel_ioctl(uint64_t fh, unsigned int cmd, void *arg) {
	return kernel_ioctl_rounds(fh, cmd, arg, NULL);
}

/* Sends cmd's rounds up to its last, whose answer is left unread: its unique. */
static uint64_t ioctl_blocked(uint64_t fh, unsigned int cmd, void *arg, size_t size) {
	ioctl_round(fh, cmd, arg, NULL, 0, 0);
	assert_true(answer.retry);
	return send_ioctl(fh, cmd, arg, arg, size, size);
}

/* A framebuffer of the whole mode on the CRTC, through fh (the master). */
static uint32_t light(uint64_t fh) {
	struct drm_mode_create_dumb c = { .width = W, .height = H, .bpp = 32 };
	struct drm_mode_fb_cmd2 fb = { .width = W, .height = H, .pixel_format = DRM_FORMAT_XRGB8888 };
	struct drm_mode_modeinfo modes[DRM_NODE_MAX_MODES];
	struct drm_mode_get_connector conn = { .connector_id = DRM_NODE_CONNECTOR_ID };
	uint32_t conn_id = DRM_NODE_CONNECTOR_ID;
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID, .set_connectors_ptr = (uintptr_t)&conn_id,
				      .count_connectors = 1, .mode_valid = 1 };

	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_CREATE_DUMB, &c), 0);
	fb.handles[0] = c.handle;
	fb.pitches[0] = c.pitch;
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_ADDFB2, &fb), 0);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETCONNECTOR, &conn), 0);
	assert_true(conn.count_modes >= 1 && conn.count_modes <= DRM_NODE_MAX_MODES);
	conn.modes_ptr = (uintptr_t)modes;
	conn.count_props = conn.count_encoders = 0;
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETCONNECTOR, &conn), 0);
	crtc.fb_id = fb.fb_id;
	crtc.mode = modes[0];
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_SETCRTC, &crtc), 0);
	return fb.fb_id;
}

static void vblank(void) {
	t.now += 16667;
	drm_node_vblank(t.node, t.now);
	cuse_drm_vblank(t.cd);
	pump();
}

/* --- the device ------------------------------------------------------------------ */

static void on_ready(void *userdata) {
	(void)userdata;
	t.ready++;
}

static int may_open(void *userdata, pid_t pid) {
	(void)userdata;
	return pid == REFUSED_PID ? -EACCES : 0;
}

static const struct cuse_drm_hooks hooks = { .ready = on_ready, .may_open = may_open };

static int setup(void **state) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	struct drm_node_config cfg = { .mode = { .width = W, .height = H, .refresh_hz = 60 }, .name = "test" };
	struct fuse_out_header h;

	(void)state;
	memset(&t, 0, sizeof(t));
	t.now = 5000000;
	t.uid = UID;
	assert_int_equal(sd_event_new(&t.e), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	assert_int_equal(drm_node_new(&t.node, &cfg), 0);
	assert_int_equal(cuse_drm_new(&t.cd, t.e, "devns/t/card0", 0, 0, t.node, SOCKET_PATH, &hooks, NULL), 0);
	t.kernel_fd = cuse_rig_last_fd;
	send_req(CUSE_INIT, &init, sizeof(init));
	assert_true(next_reply(&h, NULL, 0, NULL));
	assert_int_equal(h.error, 0);
	assert_int_equal(t.ready, 1);
	return 0;
}

static int teardown(void **state) {
	(void)state;
	t.cd = cuse_drm_free(t.cd);
	t.node = drm_node_free(t.node);
	t.e = sd_event_unref(t.e);
	cuse_device_set_connector(NULL, NULL);
	close(t.kernel_fd);
	return 0;
}

/* --- the tests ---------------------------------------------------------------------- */

static void test_version_rounds(void **state) {
	char name[16];
	struct drm_version v = { .name_len = sizeof(name), .name = name }, got;
	uint64_t fh = open_file(O_RDWR);

	(void)state;
	/* First the struct alone, both ways. */
	ioctl_round(fh, DRM_IOCTL_VERSION, &v, NULL, 0, 0);
	assert_int_equal(answer.error, 0);
	assert_true(answer.retry);
	assert_int_equal(answer.n_in, 1);
	assert_int_equal(answer.n_out, 1);
	assert_int_equal(answer.in[0].base, (uintptr_t)&v);
	assert_int_equal(answer.in[0].len, sizeof(v));
	assert_int_equal(answer.out[0].base, (uintptr_t)&v);
	assert_int_equal(answer.out[0].len, sizeof(v));
	/* With the struct: the name's bytes, after the struct. */
	ioctl_round(fh, DRM_IOCTL_VERSION, &v, &v, sizeof(v), sizeof(v));
	assert_true(answer.retry);
	assert_int_equal(answer.n_out, 2);
	assert_int_equal(answer.out[1].base, (uintptr_t)name);
	assert_int_equal(answer.out[1].len, strlen("devns"));
	/* Everything there: the struct and the name. */
	ioctl_round(fh, DRM_IOCTL_VERSION, &v, &v, sizeof(v), sizeof(v) + strlen("devns"));
	assert_int_equal(answer.error, 0);
	assert_false(answer.retry);
	assert_int_equal(answer.result, 0);
	assert_int_equal(answer.len, sizeof(v) + strlen("devns"));
	memcpy(&got, answer.data, sizeof(got));
	assert_int_equal(got.name_len, strlen("devns"));
	assert_int_equal(got.version_major, 1);
	assert_memory_equal(answer.data + sizeof(v), "devns", strlen("devns"));
	release(fh);
}

static void test_getresources(void **state) {
	uint32_t crtcs[4], conns[4], encs[4];
	struct drm_mode_card_res r = { 0 };
	uint64_t fh = open_file(O_RDWR);
	unsigned int rounds;

	(void)state;
	assert_int_equal(kernel_ioctl_rounds(fh, DRM_IOCTL_MODE_GETRESOURCES, &r, &rounds), 0);
	assert_int_equal(rounds, 2);
	assert_int_equal(r.count_crtcs, 1);
	assert_int_equal(r.count_connectors, 1);
	assert_int_equal(r.count_encoders, 1);
	assert_int_equal(r.count_fbs, 0);
	assert_int_equal(r.max_width, DRM_NODE_MAX_SIDE);
	memset(crtcs, 0xff, sizeof(crtcs));
	memset(conns, 0xff, sizeof(conns));
	memset(encs, 0xff, sizeof(encs));
	r.crtc_id_ptr = (uintptr_t)crtcs;
	r.connector_id_ptr = (uintptr_t)conns;
	r.encoder_id_ptr = (uintptr_t)encs;
	assert_int_equal(kernel_ioctl_rounds(fh, DRM_IOCTL_MODE_GETRESOURCES, &r, &rounds), 0);
	assert_int_equal(rounds, 3);
	assert_int_equal(crtcs[0], DRM_NODE_CRTC_ID);
	assert_int_equal(conns[0], DRM_NODE_CONNECTOR_ID);
	assert_int_equal(encs[0], DRM_NODE_ENCODER_ID);
	assert_int_equal(crtcs[1], UINT32_MAX);
	assert_int_equal(r.count_crtcs, 1);
	release(fh);
}

static void test_tickets(void **state) {
	struct drm_mode_create_dumb c = { .width = 64, .height = 32, .bpp = 32 };
	struct drm_mode_map_dumb m = { 0 };
	struct drm_mode_destroy_dumb d = { 0 };
	struct devns_fb_socket sock = { 0 };
	struct devns_drm_ticket tk = { 0 }, other = { 0 };
	struct cuse_drm_grant g;
	uint64_t a = open_file(O_RDWR), b = open_file(O_RDONLY);
	unsigned int rounds;
	struct stat st;

	(void)state;
	assert_int_equal(kernel_ioctl(a, DRM_IOCTL_MODE_CREATE_DUMB, &c), 0);
	assert_int_equal(c.size, 64 * 32 * 4);
	m.handle = c.handle;
	assert_int_equal(kernel_ioctl(a, DRM_IOCTL_MODE_MAP_DUMB, &m), 0);
	assert_int_not_equal(m.offset, 0);

	assert_int_equal(kernel_ioctl_rounds(a, DEVNS_DRM_IOCTL_GET_SOCKET, &sock, &rounds), 0);
	assert_int_equal(rounds, 2);
	assert_string_equal(sock.path, SOCKET_PATH);

	tk.offset = m.offset;
	assert_int_equal(kernel_ioctl_rounds(a, DEVNS_DRM_IOCTL_GET_TICKET, &tk, &rounds), 0);
	assert_int_equal(rounds, 2);
	assert_int_equal(tk.offset, m.offset);
	assert_int_equal(cuse_drm_redeem(t.cd, &tk.ticket, false, &g), 0);
	assert_true(g.memfd >= 0);
	assert_int_equal(fstat(g.memfd, &st), 0);
	assert_int_equal(st.st_size, c.size);
	assert_int_equal(g.size, c.size);
	assert_int_not_equal(g.serial, 0);
	assert_int_equal(g.uid, UID);
	assert_int_equal(g.access_mode, O_RDWR);
	/* One use. */
	assert_int_equal(cuse_drm_redeem(t.cd, &tk.ticket, false, &g), -ENOENT);

	/* Another file's buffer, and an offset of no buffer: as mmap() of them. */
	other.offset = m.offset;
	assert_int_equal(kernel_ioctl(b, DEVNS_DRM_IOCTL_GET_TICKET, &other), -ENOENT);
	tk.offset = m.offset + 4096 * 16;
	assert_int_equal(kernel_ioctl(a, DEVNS_DRM_IOCTL_GET_TICKET, &tk), -ENOENT);

	/* The buffer gone between issue and redemption. */
	tk.offset = m.offset;
	assert_int_equal(kernel_ioctl(a, DEVNS_DRM_IOCTL_GET_TICKET, &tk), 0);
	d.handle = c.handle;
	assert_int_equal(kernel_ioctl(a, DRM_IOCTL_MODE_DESTROY_DUMB, &d), 0);
	assert_int_equal(cuse_drm_redeem(t.cd, &tk.ticket, false, &g), -ENOENT);
	release(a);
	release(b);
}

static void test_blocking_read(void **state) {
	uint64_t fh = open_file(O_RDWR), reader, unique;
	struct fuse_poll_in poll_in = { .fh = fh, .kh = 5, .flags = FUSE_POLL_SCHEDULE_NOTIFY, .events = POLLIN };
	struct fuse_notify_poll_wakeup_out wake;
	struct fuse_poll_out polled = { 0 };
	struct drm_mode_crtc_page_flip flip = { .crtc_id = DRM_NODE_CRTC_ID, .flags = DRM_MODE_PAGE_FLIP_EVENT,
						.user_data = 0x1234 };
	struct drm_event_vblank ev;
	struct fuse_out_header h;
	size_t len;

	(void)state;
	flip.fb_id = light(fh);
	reader = send_read(fh, 4096, 0);
	no_reply();
	/* Non-blocking: at once. */
	assert_int_equal(reply_to(send_read(fh, 4096, O_NONBLOCK), NULL, 0, NULL), -EAGAIN);
	assert_int_equal(reply_to(send_req(FUSE_POLL, &poll_in, sizeof(poll_in)), &polled, sizeof(polled), NULL), 0);
	assert_int_equal(polled.revents, 0);

	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_PAGE_FLIP, &flip), 0);
	no_reply();
	vblank();
	assert_int_equal(reply_to(reader, &ev, sizeof(ev), &len), 0);
	assert_int_equal(len, sizeof(ev));
	assert_int_equal(ev.base.type, DRM_EVENT_FLIP_COMPLETE);
	assert_int_equal(ev.user_data, 0x1234);
	assert_int_equal(ev.sequence, 1);
	assert_int_equal(ev.tv_usec, t.now % 1000000);
	/* The read took the event: the poller has nothing to wake for. */
	no_reply();

	/* The next one wakes the poller, and a read smaller than an event returns nothing, as the kernel's. */
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_PAGE_FLIP, &flip), 0);
	vblank();
	assert_true(next_reply(&h, &wake, sizeof(wake), NULL));
	assert_int_equal(h.error, FUSE_NOTIFY_POLL);
	assert_int_equal(wake.kh, 5);
	assert_int_equal(reply_to(send_read(fh, sizeof(ev) - 1, O_NONBLOCK), NULL, 0, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(reply_to(send_read(fh, 4096, O_NONBLOCK), &ev, sizeof(ev), &len), 0);
	assert_int_equal(len, sizeof(ev));
	assert_int_equal(ev.sequence, 2);

	/* Interrupted. */
	unique = send_read(fh, 4096, 0);
	no_reply();
	interrupt(unique);
	assert_int_equal(reply_to(unique, NULL, 0, NULL), -EINTR);
	release(fh);
}

static void test_wait_vblank(void **state) {
	uint64_t fh = open_file(O_RDWR), unique;
	union drm_wait_vblank v = { .request = { .type = _DRM_VBLANK_RELATIVE, .sequence = 1 } }, got;
	struct drm_mode_crtc off = { .crtc_id = DRM_NODE_CRTC_ID };
	size_t len;

	(void)state;
	light(fh);
	unique = ioctl_blocked(fh, DRM_IOCTL_WAIT_VBLANK, &v, sizeof(v));
	no_reply();
	assert_int_equal(cuse_drm_n_waiting(t.cd), 1);
	assert_true(drm_node_wants_vblank(t.node));
	vblank();
	read_round(unique);
	assert_int_equal(answer.error, 0);
	assert_int_equal(answer.result, 0);
	assert_int_equal(answer.len, sizeof(got));
	memcpy(&got, answer.data, sizeof(got));
	assert_int_equal(got.reply.sequence, 1);
	assert_int_equal(got.reply.tval_sec, t.now / 1000000);
	assert_int_equal(got.reply.tval_usec, t.now % 1000000);
	assert_int_equal(cuse_drm_n_waiting(t.cd), 0);

	/* Interrupted: nothing waits for a vblank any more. */
	unique = ioctl_blocked(fh, DRM_IOCTL_WAIT_VBLANK, &v, sizeof(v));
	assert_int_equal(cuse_drm_n_waiting(t.cd), 1);
	interrupt(unique);
	assert_int_equal(reply_to(unique, NULL, 0, &len), -EINTR);
	assert_int_equal(cuse_drm_n_waiting(t.cd), 0);
	assert_false(drm_node_wants_vblank(t.node));

	/* The CRTC going off answers it, as the kernel's vblank off does. */
	unique = ioctl_blocked(fh, DRM_IOCTL_WAIT_VBLANK, &v, sizeof(v));
	no_reply();
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_SETCRTC, &off), 0);
	read_round(unique);
	assert_int_equal(answer.error, 0);
	memcpy(&got, answer.data, sizeof(got));
	assert_int_equal(got.reply.sequence, 1);
	assert_int_equal(cuse_drm_n_waiting(t.cd), 0);
	release(fh);
}

static void test_revoke(void **state) {
	uint64_t fh = open_file(O_RDWR), fresh, reader, waiter;
	union drm_wait_vblank v = { .request = { .type = _DRM_VBLANK_RELATIVE, .sequence = 1 } };
	struct drm_mode_create_dumb c = { .width = 64, .height = 64, .bpp = 32 };
	struct drm_mode_map_dumb m = { 0 };
	struct devns_drm_ticket tk = { 0 };
	struct fuse_poll_in poll_in = { .fh = fh };
	struct fuse_poll_out polled = { 0 };
	struct drm_mode_card_res r = { 0 };
	struct cuse_drm_grant g;
	struct fuse_out_header h;
	bool answered[2] = { false, false };

	(void)state;
	light(fh);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_CREATE_DUMB, &c), 0);
	m.handle = c.handle;
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_MAP_DUMB, &m), 0);
	tk.offset = m.offset;
	assert_int_equal(kernel_ioctl(fh, DEVNS_DRM_IOCTL_GET_TICKET, &tk), 0);
	reader = send_read(fh, 4096, 0);
	waiter = ioctl_blocked(fh, DRM_IOCTL_WAIT_VBLANK, &v, sizeof(v));
	no_reply();
	assert_int_equal(cuse_drm_n_open(t.cd), 1);

	cuse_drm_revoke(t.cd);
	for (int i = 0; i < 2; i++) {
		assert_true(next_reply(&h, NULL, 0, NULL));
		assert_int_equal(h.error, -ENODEV);
		assert_true(h.unique == reader || h.unique == waiter);
		answered[h.unique == waiter] = true;
	}
	assert_true(answered[0] && answered[1]);
	assert_int_equal(cuse_drm_n_open(t.cd), 0);
	assert_int_equal(cuse_drm_n_waiting(t.cd), 0);
	assert_false(drm_node_wants_vblank(t.node));
	assert_int_equal(cuse_drm_redeem(t.cd, &tk.ticket, false, &g), -ENOENT);

	/* The old handle: ENODEV to everything, a hang-up to poll. */
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETRESOURCES, &r), -ENODEV);
	assert_int_equal(reply_to(send_read(fh, 4096, 0), NULL, 0, NULL), -ENODEV);
	assert_int_equal(reply_to(send_req(FUSE_POLL, &poll_in, sizeof(poll_in)), &polled, sizeof(polled), NULL), 0);
	assert_int_equal(polled.revents, POLLERR | POLLHUP);

	/* New opens work as before. */
	fresh = open_file(O_RDWR);
	assert_int_equal(kernel_ioctl(fresh, DRM_IOCTL_MODE_GETRESOURCES, &r), 0);
	assert_int_equal(r.count_crtcs, 1);
	release(fh);
	release(fresh);
	assert_int_equal(cuse_drm_n_open(t.cd), 0);
}

static void test_rounds_bounded(void **state) {
	struct drm_mode_card_res r = { 0 };
	uint64_t fh = open_file(O_RDWR);

	(void)state;
	/* A caller whose memory never matches what the last round named. */
	ioctl_round(fh, DRM_IOCTL_MODE_GETRESOURCES, &r, NULL, 0, 0);
	assert_true(answer.retry);
	for (unsigned int round = 2; round < DRM_IOCTL_ROUNDS; round++) {
		ioctl_round(fh, DRM_IOCTL_MODE_GETRESOURCES, &r, &r, sizeof(r), 1);
		assert_int_equal(answer.error, 0);
		assert_true(answer.retry);
	}
	ioctl_round(fh, DRM_IOCTL_MODE_GETRESOURCES, &r, &r, sizeof(r), 1);
	assert_int_equal(answer.error, -EIO);
	/* A new call starts counting again. */
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETRESOURCES, &r), 0);
	assert_int_equal(r.count_crtcs, 1);
	release(fh);
}

static void test_open_limits(void **state) {
	uint64_t fhs[CUSE_DRM_MAX_OPEN_PER_UID], other;
	int error;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(fhs); i++) {
		fhs[i] = open_as(UID, O_RDWR, &error);
		assert_int_equal(error, 0);
	}
	assert_int_equal(open_as(UID, O_RDWR, &error), 0);
	assert_int_equal(error, -EMFILE);
	other = open_as(UID + 1, O_RDWR, &error);
	assert_int_equal(error, 0);
	assert_int_equal(cuse_drm_n_open(t.cd), CUSE_DRM_MAX_OPEN_PER_UID + 1);
	/* A handle closed makes room. */
	release(fhs[0]);
	fhs[0] = open_as(UID, O_RDWR, &error);
	assert_int_equal(error, 0);

	/* may_open refuses this process. */
	t.pid = REFUSED_PID;
	assert_int_equal(open_as(UID + 2, O_RDWR, &error), 0);
	assert_int_equal(error, -EACCES);
	t.pid = 0;

	for (size_t i = 0; i < ELEMENTSOF(fhs); i++)
		release(fhs[i]);
	release(other);
	assert_int_equal(cuse_drm_n_open(t.cd), 0);
}

/* Taking master without having had it takes root on the host: a container's root is another uid there. */
static void test_privileged(void **state) {
	uint64_t a = open_file(O_RDWR), b = open_file(O_RDWR);

	(void)state;
	assert_int_equal(kernel_ioctl(a, DRM_IOCTL_DROP_MASTER, NULL), 0);
	assert_int_equal(kernel_ioctl(b, DRM_IOCTL_SET_MASTER, NULL), -EACCES);
	t.uid = 0;
	assert_int_equal(kernel_ioctl(b, DRM_IOCTL_SET_MASTER, NULL), 0);
	t.uid = UID;
	release(a);
	release(b);
}

/* --- a routed node: every open works on the card the route names ------------------- */

static int route(void *userdata, pid_t pid, struct cuse_drm **ret, uint32_t *ret_owner) {
	(void)userdata;
	if (pid == REFUSED_PID)
		return -EACCES;
	if (!t.cd)
		return -ENODEV;
	*ret = t.cd;
	*ret_owner = 1;
	return 0;
}

static const struct cuse_drm_hooks routed_hooks = { .ready = on_ready, .route = route };

/* A routed node beside the card, with a kernel side of its own: its fd in *ret_fd; t.kernel_fd stays the card's. */
static struct cuse_drm *routed_new(int *ret_fd) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	int card_fd = t.kernel_fd;
	struct cuse_drm *routed;
	struct fuse_out_header h;

	assert_int_equal(cuse_drm_new(&routed, t.e, "devns/card0", 0, 0, NULL, NULL, &routed_hooks, NULL), 0);
	assert_int_equal(cuse_drm_set_shares(routed, 3), 0);
	t.kernel_fd = cuse_rig_last_fd;
	send_req(CUSE_INIT, &init, sizeof(init));
	assert_true(next_reply(&h, NULL, 0, NULL));
	assert_int_equal(h.error, 0);
	*ret_fd = t.kernel_fd;
	t.kernel_fd = card_fd;
	return routed;
}

static void test_routed(void **state) {
	int card_fd = t.kernel_fd, routed_fd, error;
	struct cuse_drm *routed = routed_new(&routed_fd);
	struct drm_mode_crtc_page_flip flip = { .crtc_id = DRM_NODE_CRTC_ID, .flags = DRM_MODE_PAGE_FLIP_EVENT,
						.user_data = 0x77 };
	struct drm_mode_crtc crtc = { .crtc_id = DRM_NODE_CRTC_ID };
	struct drm_mode_card_res r = { 0 };
	struct fuse_poll_in poll_in = { .kh = 9, .flags = FUSE_POLL_SCHEDULE_NOTIFY, .events = POLLIN };
	struct fuse_notify_poll_wakeup_out wake;
	struct fuse_poll_out polled = { 0 };
	struct drm_event_vblank ev;
	struct fuse_out_header h;
	uint64_t fh, direct, reader;
	size_t len;

	(void)state;
	/* Opened on the routed node, the file is one of the card's: its count, its CRTC, its events. */
	t.kernel_fd = routed_fd;
	fh = open_file(O_RDWR);
	assert_int_equal(cuse_drm_n_open(t.cd), 1);
	assert_int_equal(cuse_drm_n_open(routed), 0);
	flip.fb_id = light(fh);
	t.kernel_fd = card_fd;
	direct = open_file(O_RDWR);
	assert_int_equal(kernel_ioctl(direct, DRM_IOCTL_MODE_GETCRTC, &crtc), 0);
	assert_int_equal(crtc.fb_id, flip.fb_id);
	t.kernel_fd = routed_fd;
	reader = send_read(fh, 4096, 0);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_PAGE_FLIP, &flip), 0);
	no_reply();
	t.kernel_fd = card_fd;
	vblank();
	no_reply();
	t.kernel_fd = routed_fd;
	assert_int_equal(reply_to(reader, &ev, sizeof(ev), &len), 0);
	assert_int_equal(len, sizeof(ev));
	assert_int_equal(ev.user_data, 0x77);

	/* The route refuses this process. */
	t.pid = REFUSED_PID;
	assert_int_equal(open_as(UID, O_RDWR, &error), 0);
	assert_int_equal(error, -EACCES);
	t.pid = 0;

	/* The card's revocation reaches the files routed to it; new opens work. */
	reader = send_read(fh, 4096, 0);
	cuse_drm_revoke(t.cd);
	assert_int_equal(reply_to(reader, NULL, 0, NULL), -ENODEV);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETRESOURCES, &r), -ENODEV);
	assert_int_equal(cuse_drm_n_open(t.cd), 0);
	release(fh);
	fh = open_file(O_RDWR);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETRESOURCES, &r), 0);
	assert_int_equal(r.count_crtcs, 1);
	assert_int_equal(cuse_drm_n_open(t.cd), 1);

	/*
	 * The routed node goes first: its files leave the card, and what waits
	 * on them (a read, a poller) is answered through the routed node's
	 * connection before it ends.
	 */
	reader = send_read(fh, 4096, 0);
	poll_in.fh = fh;
	assert_int_equal(reply_to(send_req(FUSE_POLL, &poll_in, sizeof(poll_in)), &polled, sizeof(polled), NULL), 0);
	assert_int_equal(polled.revents, 0);
	no_reply();
	routed = cuse_drm_free(routed);
	assert_int_equal(reply_to(reader, NULL, 0, NULL), -ENODEV);
	assert_true(next_reply(&h, &wake, sizeof(wake), NULL));
	assert_int_equal(h.error, FUSE_NOTIFY_POLL);
	assert_int_equal(wake.kh, 9);
	assert_int_equal(cuse_drm_n_open(t.cd), 0);
	close(routed_fd);
	t.kernel_fd = card_fd;
	release(direct);
}

static void test_routed_card_gone(void **state) {
	int card_fd = t.kernel_fd, routed_fd, error;
	struct cuse_drm *routed = routed_new(&routed_fd);
	struct fuse_poll_in poll_in = { .kh = 3 };
	struct fuse_poll_out polled = { 0 };
	struct drm_mode_card_res r = { 0 };
	uint64_t fh, reader;

	(void)state;
	t.kernel_fd = routed_fd;
	fh = open_file(O_RDWR);
	reader = send_read(fh, 4096, 0);
	no_reply();
	/* The card goes first (its persona removed): the routed file answers ENODEV until its release. */
	t.cd = cuse_drm_free(t.cd);
	assert_int_equal(reply_to(reader, NULL, 0, NULL), -ENODEV);
	assert_int_equal(kernel_ioctl(fh, DRM_IOCTL_MODE_GETRESOURCES, &r), -ENODEV);
	poll_in.fh = fh;
	assert_int_equal(reply_to(send_req(FUSE_POLL, &poll_in, sizeof(poll_in)), &polled, sizeof(polled), NULL), 0);
	assert_int_equal(polled.revents, POLLERR | POLLHUP);
	assert_int_equal(open_as(UID, O_RDWR, &error), 0);
	assert_int_equal(error, -ENODEV);
	release(fh);
	routed = cuse_drm_free(routed);
	close(routed_fd);
	t.kernel_fd = card_fd;
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_version_rounds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_getresources, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tickets, setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocking_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wait_vblank, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rounds_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_privileged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routed_card_gone, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
