/* SPDX-License-Identifier: MIT */
/*
 * A CUSE device on devnsd's loop (cuse_device_new_on_loop()): reads are
 * answered straight from the loop, with sd-event asleep; every other
 * request from sd-event's own dispatch; and the kernel gets the answers
 * in the order it sent the requests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "cuse-device.h"
#include "cuse-rig.h"
#include "loop.h"
#include "util.h"

#define DEVNAME "devns/t/event1"

static sd_event *event;
/* sd-event's state as each operation ran: SD_EVENT_RUNNING from its dispatch, SD_EVENT_ARMED from the loop. */
static int open_state = -1, read_state = -1;

static void t_open(fuse_req_t req, struct fuse_file_info *fi) {
	open_state = sd_event_get_state(event);
	fi->fh = 7;
	fuse_reply_open(req, fi);
}

static void t_read(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)size;
	(void)off;
	assert_int_equal(fi->fh, 7);
	read_state = sd_event_get_state(event);
	fuse_reply_buf(req, "abc", 3);
}

static const struct cuse_lowlevel_ops ops = {
	.open = t_open,
	.read = t_read,
};

/* Something of sd-event's own, more urgent, pending for a few turns: the loop polls between them. */
static sd_event_source *busy;
static int busy_turns;

static int on_busy(sd_event_source *s, void *userdata) {
	(void)userdata;
	if (--busy_turns <= 0)
		return sd_event_source_set_enabled(s, SD_EVENT_OFF);
	return 0;
}

static void keep_busy(void) {
	busy_turns = 3;
	assert_int_equal(sd_event_source_set_enabled(busy, SD_EVENT_ON), 0);
}

static void send_request(uint32_t opcode, uint64_t unique, const void *arg, size_t len) {
	cuse_rig_write(cuse_rig_last_fd, opcode, unique, arg, len);
}

static void pump(struct loop *l) {
	for (int i = 0; i < 1000; i++)
		if (loop_iterate(l, 0) == 0)
			return;
	fail_msg("the loop never went idle");
}

/* The next answer is to unique, with error; its payload in body. */
static void expect_answer(uint64_t unique, int error, void *body, size_t size) {
	struct fuse_out_header h;

	assert_true(cuse_rig_next(cuse_rig_last_fd, &h, body, size, NULL));
	assert_int_equal(h.unique, unique);
	assert_int_equal(h.error, -error);
}

static void test_reads_on_the_loop_the_rest_in_order(void **state) {
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION, .minor = FUSE_KERNEL_MINOR_VERSION };
	struct fuse_open_in open_in = { 0 };
	struct fuse_open_out open_out = { 0 };
	struct fuse_read_in read_in = { .size = 16 };
	struct fuse_out_header h;
	struct cuse_device *d;
	struct loop *l;
	char data[16] = "";

	(void)state;
	assert_int_equal(sd_event_new(&event), 0);
	assert_int_equal(loop_new(&l, event), 0);
	cuse_device_set_connector(cuse_rig_connect, NULL);
	assert_int_equal(cuse_device_new_on_loop(&d, l, CUSE_QUIET(FUSE_READ), DEVNAME, 0, 0, &ops, NULL), 0);
	assert_int_equal(sd_event_add_defer(event, &busy, on_busy, NULL), 0);
	assert_int_equal(sd_event_source_set_priority(busy, SD_EVENT_PRIORITY_IMPORTANT), 0);
	assert_int_equal(sd_event_source_set_enabled(busy, SD_EVENT_OFF), 0);

	/* Two requests that are not reads, queued together: the open is read only once the init is answered. */
	keep_busy();
	send_request(CUSE_INIT, 1, &init, sizeof(init));
	send_request(FUSE_OPEN, 2, &open_in, sizeof(open_in));
	pump(l);
	expect_answer(1, 0, NULL, 0);
	expect_answer(2, 0, &open_out, sizeof(open_out));
	assert_int_equal(open_state, SD_EVENT_RUNNING);

	/* A read alone: answered by the loop, sd-event left asleep. */
	read_in.fh = open_out.fh;
	send_request(FUSE_READ, 3, &read_in, sizeof(read_in));
	pump(l);
	expect_answer(3, 0, data, sizeof(data));
	assert_memory_equal(data, "abc", 3);
	assert_int_equal(read_state, SD_EVENT_ARMED);

	/* An open then a read, queued together: the read waits for the open's answer from sd-event. */
	read_state = open_state = -1;
	keep_busy();
	send_request(FUSE_OPEN, 4, &open_in, sizeof(open_in));
	read_in.fh = open_out.fh;
	send_request(FUSE_READ, 5, &read_in, sizeof(read_in));
	pump(l);
	expect_answer(4, 0, NULL, 0);
	expect_answer(5, 0, NULL, 0);
	assert_int_equal(open_state, SD_EVENT_RUNNING);
	assert_int_not_equal(read_state, -1);
	assert_int_not_equal(read_state, SD_EVENT_RUNNING);
	assert_int_equal(busy_turns, 0);
	assert_false(cuse_rig_next(cuse_rig_last_fd, &h, NULL, 0, NULL));

	cuse_device_free(d);
	sd_event_source_disable_unref(busy);
	loop_free(l);
	event = sd_event_unref(event);
	cuse_device_set_connector(NULL, NULL);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reads_on_the_loop_the_rest_in_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
