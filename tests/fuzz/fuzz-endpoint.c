/* SPDX-License-Identifier: MIT */
/*
 * A persona's endpoint (devns-endpoint.h): the packets a container's
 * program sends devnsd, and the replies devnsctl reads. The input is a
 * stream of packets, each a length byte and its bytes. A request the
 * parser accepts has a known op, no flags and the version; whatever it
 * refuses, the reply built for it is one devnsctl accepts with the
 * request's serial and an error status.
 */
#include <errno.h>

#include "devns-endpoint.h"
#include "fuzz-input.h"

static void check_request(const uint8_t *data, size_t size) {
	struct devns_endpoint_request req;
	struct devns_endpoint_reply reply, got;
	int r;

	r = devns_endpoint_parse_request(data, size, &req);
	if (r == 0)
		fuzz_assert(req.magic == DEVNS_ENDPOINT_MAGIC && req.version == DEVNS_ENDPOINT_VERSION && req.flags == 0 &&
			    (req.op == DEVNS_ENDPOINT_OP_STATUS || req.op == DEVNS_ENDPOINT_OP_REQUEST_ACTIVE));
	else
		fuzz_assert(r == -EBADMSG || r == -EPROTO || r == -EPROTONOSUPPORT || r == -EOPNOTSUPP);
	devns_endpoint_reply_init(&reply, &req, r, 0, "persona", (const char *)data);
	fuzz_assert(devns_endpoint_parse_reply(&reply, sizeof(reply), req.serial, &got) == 0);
	fuzz_assert(got.status == r && got.op == req.op);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct devns_endpoint_reply reply;
	uint32_t serial = 0;
	size_t at = 0;

	/* A packet is also the reply's message, a C string: its bytes up to the first NUL. */
	while (at < size) {
		size_t len = data[at++];
		size_t n = len < size - at ? len : size - at;
		uint8_t packet[256];

		memcpy(packet, data + at, n);
		memset(packet + n, 0, sizeof(packet) - n);
		check_request(packet, len);
		at += n;
	}
	/* The whole input as a reply devnsctl reads: accepted only with its strings ended. */
	if (size >= offsetof(struct devns_endpoint_reply, status))
		memcpy(&serial, data + offsetof(struct devns_endpoint_reply, serial), sizeof(serial));
	if (devns_endpoint_parse_reply(data, size, serial, &reply) == 0)
		fuzz_assert(memchr(reply.persona, '\0', sizeof(reply.persona)) &&
			    memchr(reply.message, '\0', sizeof(reply.message)) && reply.status <= 0);
	return 0;
}
