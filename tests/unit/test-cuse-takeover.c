/* SPDX-License-Identifier: MIT */
/*
 * A CUSE connection taken over by the next run: the test plays the kernel's
 * side of the connection over a socket pair (one message a request, as
 * /dev/cuse reads and writes), and an in-memory keeper plays the fd store.
 * The first run opens a handle, holds a read and a poll on it, and dies;
 * the second answers the held read ENODEV, wakes the poll, refuses the old
 * handle, numbers its own handles after the old ones, and serves them.
 * A device split among owners (a routed node) keeps each owner to its
 * share of handles and requests in flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cuse-device.h"
#include "cuse-rig.h"
#include "util.h"

#define DEVNAME "devns/t/event0"
#define REAL_FH 0xdead0000u

/* --- the fd store ------------------------------------------------------------ */

struct kept {
	char name[32];
	int fd;
};

static struct kept store[4];
/* devnsd is dying: nothing is forgotten, as when it is killed. */
static bool dying;

static struct kept *store_find(const char *name) {
	for (size_t i = 0; i < ELEMENTSOF(store); i++)
		if (store[i].fd >= 0 && streq(store[i].name, name))
			return &store[i];
	return NULL;
}

static int store_take(void *userdata, const char *name, int *ret_fd) {
	struct kept *k = store_find(name);

	(void)userdata;
	if (!k)
		return -ENOENT;
	*ret_fd = dup(k->fd);
	return *ret_fd < 0 ? -errno : 0;
}

static void store_forget(void *userdata, const char *name) {
	struct kept *k = store_find(name);

	(void)userdata;
	if (k && !dying) {
		close(k->fd);
		k->fd = -1;
	}
}

static int store_keep(void *userdata, const char *name, int fd) {
	store_forget(userdata, name);
	for (size_t i = 0; i < ELEMENTSOF(store); i++)
		if (store[i].fd < 0) {
			snprintf(store[i].name, sizeof(store[i].name), "%s", name);
			store[i].fd = dup(fd);
			return store[i].fd < 0 ? -errno : 0;
		}
	return -ENOSPC;
}

static void store_sync(void *userdata) {
	(void)userdata;
}

static const struct cuse_keeper keeper = {
	.take = store_take, .keep = store_keep, .forget = store_forget, .sync = store_sync,
};

/* --- the kernel's side ------------------------------------------------------- */

static void send_request(uint32_t opcode, uint64_t unique, const void *arg, size_t len) {
	cuse_rig_write(cuse_rig_last_fd, opcode, unique, arg, len);
}

/* The next message devnsd wrote: its header, and its payload in body (if any). */
static bool next_reply(struct fuse_out_header *ret, void *body, size_t size) {
	return cuse_rig_next(cuse_rig_last_fd, ret, body, size, NULL);
}

/* --- the device's operations -------------------------------------------------- */

/* The device a share test runs, the owner its next open names, and the reads it holds. */
static struct cuse_device *shared_dev;
static uint32_t next_owner;
static fuse_req_t held_reads[128];
static unsigned int n_held;

static struct {
	int ready;
	int opened;
	fuse_req_t held;
	uint64_t read_fh, released_fh;
	struct fuse_pollhandle *ph;
} dev;

static void t_init_done(void *userdata) {
	(void)userdata;
	dev.ready++;
}

static void t_open(fuse_req_t req, struct fuse_file_info *fi) {
	if (shared_dev) {
		int r = cuse_device_open_owner(shared_dev, next_owner);

		if (r < 0) {
			fuse_reply_err(req, -r);
			return;
		}
	}
	fi->fh = REAL_FH + (uint64_t)++dev.opened;
	fi->direct_io = 1;
	fuse_reply_open(req, fi);
}

static void t_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)size;
	(void)off;
	dev.read_fh = fi->fh;
	dev.held = req;
	if (shared_dev && n_held < ELEMENTSOF(held_reads))
		held_reads[n_held++] = req;
}

static void t_poll(fuse_req_t req, struct fuse_file_info *fi, struct fuse_pollhandle *ph) {
	(void)fi;
	if (dev.ph)
		fuse_pollhandle_destroy(dev.ph);
	dev.ph = ph;
	fuse_reply_poll(req, 0);
}

static void t_release(fuse_req_t req, struct fuse_file_info *fi) {
	dev.released_fh = fi->fh;
	fuse_reply_err(req, 0);
}

static const struct cuse_lowlevel_ops ops = {
	.init_done = t_init_done,
	.open = t_open,
	.read = t_read,
	.poll = t_poll,
	.release = t_release,
};

static void pump(sd_event *e) {
	while (sd_event_run(e, 0) > 0)
		;
}

static uint64_t open_handle(sd_event *e, uint64_t unique) {
	struct fuse_open_in in = { 0 };
	struct fuse_open_out out = { 0 };
	struct fuse_out_header h;

	send_request(FUSE_OPEN, unique, &in, sizeof(in));
	pump(e);
	assert_true(next_reply(&h, &out, sizeof(out)));
	assert_int_equal(h.unique, unique);
	assert_int_equal(h.error, 0);
	return out.fh;
}

static void send_read(uint64_t unique, uint64_t fh) {
	struct fuse_read_in in = { .fh = fh, .size = 24 };

	send_request(FUSE_READ, unique, &in, sizeof(in));
}

static void test_takeover(void **state) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	struct fuse_poll_in poll_in = { .kh = 77, .flags = FUSE_POLL_SCHEDULE_NOTIFY, .events = 1 };
	struct fuse_notify_poll_wakeup_out wake;
	struct fuse_release_in rel = { 0 };
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct cuse_device *d;
	struct fuse_out_header h;
	uint64_t old, fresh;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(store); i++)
		store[i].fd = -1;
	assert_int_equal(sd_event_new(&e), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	cuse_device_set_keeper(&keeper);

	/* The first run: the connection and its record go to the store at once. */
	assert_int_equal(cuse_device_new(&d, e, DEVNAME, 500, 3, &ops, NULL), 0);
	assert_non_null(store_find("cuse.500.3"));
	assert_non_null(store_find("cuse.500.3.j"));
	send_request(CUSE_INIT, 2, &init, sizeof(init));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 2);
	assert_int_equal(dev.ready, 1);
	/* The kernel holds a handle of the connection's own numbering, not the device's fh. */
	old = open_handle(e, 4);
	assert_int_equal(old, 1);
	send_read(6, old);
	pump(e);
	assert_int_equal(dev.read_fh, REAL_FH + 1);
	assert_non_null(dev.held);
	poll_in.fh = old;
	send_request(FUSE_POLL, 8, &poll_in, sizeof(poll_in));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 8);
	assert_false(next_reply(&h, NULL, 0));

	/* It dies with the read unanswered and the poll armed: what it held is only memory. */
	dying = true;
	fuse_reply_none(dev.held);
	dev.held = NULL;
	fuse_pollhandle_destroy(dev.ph);
	dev.ph = NULL;
	cuse_device_free(d);
	dying = false;
	assert_int_equal(cuse_rig_last_fd >= 0, true);

	/* The next run takes it over: the node is ready again without a CUSE_INIT. */
	assert_int_equal(cuse_device_new(&d, e, DEVNAME, 500, 3, &ops, NULL), 0);
	pump(e);
	assert_int_equal(dev.ready, 2);
	/* The held read gets ENODEV, then the poller is woken; the made-up CUSE_INIT's reply went nowhere. */
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 6);
	assert_int_equal(h.error, -ENODEV);
	assert_true(next_reply(&h, &wake, sizeof(wake)));
	assert_int_equal(h.unique, 0);
	assert_int_equal(h.error, FUSE_NOTIFY_POLL);
	assert_int_equal(wake.kh, 77);
	assert_false(next_reply(&h, NULL, 0));

	/* The old handle: ENODEV, never reaching the device. */
	dev.read_fh = 0;
	send_read(10, old);
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 10);
	assert_int_equal(h.error, -ENODEV);
	assert_int_equal(dev.read_fh, 0);
	send_request(FUSE_POLL, 12, &poll_in, sizeof(poll_in));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.error, -ENODEV);

	/* A new open is numbered after every handle of the last run, and served. */
	fresh = open_handle(e, 14);
	assert_int_equal(fresh, 2);
	send_read(16, fresh);
	pump(e);
	assert_int_equal(dev.read_fh, REAL_FH + 2);
	fuse_reply_err(dev.held, EAGAIN);
	dev.held = NULL;
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 16);
	assert_int_equal(h.error, -EAGAIN);

	/* Releasing the old handle is accepted without the device; the new one reaches it. */
	rel.fh = old;
	send_request(FUSE_RELEASE, 18, &rel, sizeof(rel));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.error, 0);
	assert_int_equal(dev.released_fh, 0);
	rel.fh = fresh;
	send_request(FUSE_RELEASE, 20, &rel, sizeof(rel));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, 20);
	assert_int_equal(dev.released_fh, REAL_FH + 2);

	/* Freed for good: nothing is kept. */
	cuse_device_free(d);
	assert_null(store_find("cuse.500.3"));
	assert_null(store_find("cuse.500.3.j"));
	cuse_device_set_keeper(NULL);
	cuse_device_set_connector(NULL, NULL);
	close(cuse_rig_last_fd);
}

/* A record of another node is not taken over: the connection is made anew. */
static void test_other_node_is_not_taken_over(void **state) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	struct cuse_device *d;
	struct fuse_out_header h;
	int first;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(store); i++)
		store[i].fd = -1;
	dev.ready = 0;
	assert_int_equal(sd_event_new(&e), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	cuse_device_set_keeper(&keeper);
	assert_int_equal(cuse_device_new(&d, e, DEVNAME, 500, 3, &ops, NULL), 0);
	first = cuse_rig_last_fd;
	send_request(CUSE_INIT, 2, &init, sizeof(init));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	dying = true;
	cuse_device_free(d);
	dying = false;

	assert_int_equal(cuse_device_new(&d, e, "devns/other/event0", 500, 3, &ops, NULL), 0);
	pump(e);
	/* A fresh connection (the kernel's side changed), waiting for its CUSE_INIT. */
	assert_int_not_equal(cuse_rig_last_fd, first);
	assert_int_equal(dev.ready, 1);
	cuse_device_free(d);
	cuse_device_set_keeper(NULL);
	cuse_device_set_connector(NULL, NULL);
	close(first);
	close(cuse_rig_last_fd);
}

/* An open as owner: the handle, or 0 and the error in *ret_error. */
static uint64_t open_as(sd_event *e, uint64_t unique, uint32_t owner, int *ret_error) {
	struct fuse_open_in in = { 0 };
	struct fuse_open_out out = { 0 };
	struct fuse_out_header h;

	next_owner = owner;
	send_request(FUSE_OPEN, unique, &in, sizeof(in));
	pump(e);
	assert_true(next_reply(&h, &out, sizeof(out)));
	assert_int_equal(h.unique, unique);
	*ret_error = -h.error;
	return h.error ? 0 : out.fh;
}

/* A routed node split in 64 shares: 16 handles and 48 requests in flight an owner. */
static void test_shares(void **state) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	struct fuse_release_in rel = { 0 };
	_cleanup_(sd_event_unrefp) sd_event *e = NULL;
	uint64_t mine[16], theirs, unique = 100;
	struct fuse_out_header h;
	int err;

	(void)state;
	assert_int_equal(sd_event_new(&e), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	assert_int_equal(cuse_device_new(&shared_dev, e, DEVNAME, 0, 0, &ops, NULL), 0);
	assert_int_equal(cuse_device_set_shares(shared_dev, CUSE_DEVICE_MAX_FILES + 1), -EINVAL);
	assert_int_equal(cuse_device_set_shares(shared_dev, 64), 0);
	send_request(CUSE_INIT, 2, &init, sizeof(init));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));

	/* Owner 1 takes its 16 handles; the 17th is refused, owner 2 still opens. */
	for (size_t i = 0; i < ELEMENTSOF(mine); i++) {
		mine[i] = open_as(e, unique++, 1, &err);
		assert_int_equal(err, 0);
	}
	assert_int_equal(open_as(e, unique++, 1, &err), 0);
	assert_int_equal(err, EMFILE);
	theirs = open_as(e, unique++, 2, &err);
	assert_int_equal(err, 0);
	assert_int_equal(cuse_device_owner_files(shared_dev, 1), 16);
	assert_int_equal(cuse_device_owner_files(shared_dev, 2), 1);

	/* Owner 1 parks 48 reads; its 49th gets EBUSY at once, owner 2's read still reaches the device. */
	for (unsigned int i = 0; i < 48; i++) {
		send_read(unique++, mine[i % ELEMENTSOF(mine)]);
		pump(e);
	}
	assert_false(next_reply(&h, NULL, 0));
	assert_int_equal(cuse_device_owner_requests(shared_dev, 1), 48);
	send_read(unique, mine[0]);
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.unique, unique++);
	assert_int_equal(h.error, -EBUSY);
	assert_int_equal(n_held, 48);
	send_read(unique++, theirs);
	pump(e);
	assert_int_equal(n_held, 49);
	assert_false(next_reply(&h, NULL, 0));

	/* A release is never refused; a handle closed makes room for the next open. */
	rel.fh = mine[15];
	send_request(FUSE_RELEASE, unique++, &rel, sizeof(rel));
	pump(e);
	assert_true(next_reply(&h, NULL, 0));
	assert_int_equal(h.error, 0);
	assert_int_equal(cuse_device_owner_files(shared_dev, 1), 15);
	mine[15] = open_as(e, unique++, 1, &err);
	assert_int_equal(err, 0);

	/* Answered reads give their places back. */
	for (unsigned int i = 0; i < n_held; i++) {
		fuse_reply_err(held_reads[i], EAGAIN);
		assert_true(next_reply(&h, NULL, 0));
	}
	n_held = 0;
	assert_int_equal(cuse_device_owner_requests(shared_dev, 1), 0);
	send_read(unique++, mine[0]);
	pump(e);
	assert_int_equal(n_held, 1);
	fuse_reply_err(held_reads[0], EAGAIN);
	n_held = 0;

	shared_dev = cuse_device_free(shared_dev);
	cuse_device_set_connector(NULL, NULL);
	close(cuse_rig_last_fd);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_takeover),
		cmocka_unit_test(test_other_node_is_not_taken_over),
		cmocka_unit_test(test_shares),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
