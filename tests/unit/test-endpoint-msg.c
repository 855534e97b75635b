/* SPDX-License-Identifier: MIT */
/* The endpoint's packets (devns-endpoint.h), as devnsd and devnsctl check them. */
#include "test-util.h"

#include <sys/socket.h>

#include "devns-endpoint.h"

static struct devns_endpoint_request request(uint16_t op, uint32_t serial) {
	return (struct devns_endpoint_request){
		.magic = DEVNS_ENDPOINT_MAGIC, .version = DEVNS_ENDPOINT_VERSION, .op = op, .serial = serial,
	};
}

static void test_valid_requests(void **state) {
	struct devns_endpoint_request req = request(DEVNS_ENDPOINT_OP_REQUEST_ACTIVE, 7), got;

	(void)state;
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), 0);
	assert_int_equal(got.op, DEVNS_ENDPOINT_OP_REQUEST_ACTIVE);
	assert_int_equal(got.serial, 7);
	req = request(DEVNS_ENDPOINT_OP_STATUS, 8);
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), 0);
	assert_int_equal(got.op, DEVNS_ENDPOINT_OP_STATUS);
}

static void test_sizes(void **state) {
	struct devns_endpoint_request req = request(DEVNS_ENDPOINT_OP_STATUS, 9), got;

	(void)state;
	assert_int_equal(devns_endpoint_parse_request(&req, 0, &got), -EBADMSG);
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req) - 1, &got), -EBADMSG);
	/* Too short: nothing of it is echoed. */
	assert_int_equal(got.serial, 0);
	/* Too long (the server reads the first bytes and learns the size from MSG_TRUNC): its serial is echoed. */
	assert_int_equal(devns_endpoint_parse_request(&req, 65536, &got), -EBADMSG);
	assert_int_equal(got.serial, 9);
}

static void test_bad_fields(void **state) {
	struct devns_endpoint_request req, got;

	(void)state;
	req = request(DEVNS_ENDPOINT_OP_STATUS, 1);
	req.magic ^= 1;
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), -EPROTO);
	req = request(DEVNS_ENDPOINT_OP_STATUS, 1);
	req.version = 2;
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), -EPROTONOSUPPORT);
	req = request(0, 1);
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), -EOPNOTSUPP);
	req = request(3, 1);
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), -EOPNOTSUPP);
	req = request(DEVNS_ENDPOINT_OP_STATUS, 1);
	req.flags = 1;
	assert_int_equal(devns_endpoint_parse_request(&req, sizeof(req), &got), -EOPNOTSUPP);
}

static void test_reply_round_trip(void **state) {
	struct devns_endpoint_request req = request(DEVNS_ENDPOINT_OP_REQUEST_ACTIVE, 42);
	struct devns_endpoint_reply reply, got;
	char long_message[400];

	(void)state;
	memset(long_message, 'x', sizeof(long_message) - 1);
	long_message[sizeof(long_message) - 1] = '\0';
	devns_endpoint_reply_init(&reply, &req, -EACCES, DEVNS_ENDPOINT_ACTIVE, "work", long_message);
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply), 42, &got), 0);
	assert_int_equal(got.status, -EACCES);
	assert_int_equal(got.flags, DEVNS_ENDPOINT_ACTIVE);
	assert_string_equal(got.persona, "work");
	assert_int_equal(strlen(got.message), DEVNS_ENDPOINT_MESSAGE_SIZE - 1);

	/* Another request's reply, a short one, a positive status. */
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply), 43, &got), -EPROTO);
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply) - 1, 42, &got), -EBADMSG);
	reply.status = 1;
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply), 42, &got), -EPROTO);
	/* Strings without their end. */
	devns_endpoint_reply_init(&reply, &req, 0, 0, "work", NULL);
	memset(reply.persona, 'a', sizeof(reply.persona));
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply), 42, &got), -EPROTO);
	devns_endpoint_reply_init(&reply, &req, 0, 0, "work", NULL);
	memset(reply.message, 'a', sizeof(reply.message));
	assert_int_equal(devns_endpoint_parse_reply(&reply, sizeof(reply), 42, &got), -EPROTO);
}

/* A packet socket keeps packets apart: what the server reads is one request, and MSG_TRUNC tells a longer one. */
static void test_packets_on_a_socket(void **state) {
	struct devns_endpoint_request req = request(DEVNS_ENDPOINT_OP_STATUS, 5), got;
	uint8_t big[300] = { 0 }, buf[sizeof(req)];
	int sv[2];
	ssize_t n;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	memcpy(big, &req, sizeof(req));
	assert_int_equal(send(sv[0], big, sizeof(big), 0), (ssize_t)sizeof(big));
	assert_int_equal(send(sv[0], &req, sizeof(req), 0), (ssize_t)sizeof(req));
	n = recv(sv[1], buf, sizeof(buf), MSG_TRUNC);
	assert_int_equal(n, (ssize_t)sizeof(big));
	assert_int_equal(devns_endpoint_parse_request(buf, (size_t)n, &got), -EBADMSG);
	n = recv(sv[1], buf, sizeof(buf), MSG_TRUNC);
	assert_int_equal(devns_endpoint_parse_request(buf, (size_t)n, &got), 0);
	assert_int_equal(got.serial, 5);
	close(sv[0]);
	close(sv[1]);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_requests),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_bad_fields),
		cmocka_unit_test(test_reply_round_trip),
		cmocka_unit_test(test_packets_on_a_socket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
