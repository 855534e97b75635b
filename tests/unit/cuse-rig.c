/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cuse-rig.h"
#include "util.h"

int cuse_rig_last_fd = -1;
uint8_t cuse_rig_msg[CUSE_RIG_MSG_MAX];

int cuse_rig_connect(void *userdata) {
	int p[2];

	(void)userdata;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, p) < 0)
		return -errno;
	cuse_rig_last_fd = p[1];
	return p[0];
}

void cuse_rig_pump(sd_event *e) {
	while (sd_event_run(e, 0) > 0)
		;
}

uint64_t cuse_rig_send(sd_event *e, int fd, uint32_t opcode, uint32_t uid, uint32_t pid, const void *a,
		       size_t a_len, const void *b, size_t b_len) {
	static uint64_t unique;
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + a_len + b_len),
				    .opcode = opcode,
				    .unique = ++unique,
				    .uid = uid,
				    .pid = pid };

	assert_true(h.len <= sizeof(cuse_rig_msg));
	memcpy(cuse_rig_msg, &h, sizeof(h));
	if (a_len)
		memcpy(cuse_rig_msg + sizeof(h), a, a_len);
	if (b_len)
		memcpy(cuse_rig_msg + sizeof(h) + a_len, b, b_len);
	assert_int_equal(write(fd, cuse_rig_msg, h.len), (ssize_t)h.len);
	cuse_rig_pump(e);
	return h.unique;
}

void cuse_rig_write(int fd, uint32_t opcode, uint64_t unique, const void *arg, size_t len) {
	struct fuse_in_header h = { .len = (uint32_t)(sizeof(h) + len), .opcode = opcode, .unique = unique };

	assert_true(h.len <= sizeof(cuse_rig_msg));
	memcpy(cuse_rig_msg, &h, sizeof(h));
	if (len)
		memcpy(cuse_rig_msg + sizeof(h), arg, len);
	assert_int_equal(write(fd, cuse_rig_msg, h.len), (ssize_t)h.len);
}

bool cuse_rig_next(int fd, struct fuse_out_header *ret, void *body, size_t size, size_t *ret_len) {
	ssize_t n = read(fd, cuse_rig_msg, sizeof(cuse_rig_msg));

	if (n < (ssize_t)sizeof(*ret))
		return false;
	memcpy(ret, cuse_rig_msg, sizeof(*ret));
	if (body)
		memcpy(body, cuse_rig_msg + sizeof(*ret), MIN(size, (size_t)n - sizeof(*ret)));
	if (ret_len)
		*ret_len = (size_t)n - sizeof(*ret);
	return true;
}
