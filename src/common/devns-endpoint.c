/* SPDX-License-Identifier: MIT */
/* The endpoint's packets (devns-endpoint.h): checked the same way by devnsd, devnsctl and the fuzzer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "devns-endpoint.h"

_Static_assert(sizeof(struct devns_endpoint_request) == 16, "requests are 16 bytes on every ABI");
_Static_assert(sizeof(struct devns_endpoint_reply) == 216, "replies are 216 bytes on every ABI");

int devns_endpoint_parse_request(const void *data, size_t size, struct devns_endpoint_request *ret) {
	struct devns_endpoint_request req = { 0 };

	memcpy(&req, data, size < sizeof(req) ? size : sizeof(req));
	if (size != sizeof(req)) {
		/* A short packet's op and serial are not known: the reply says so with zeros. */
		*ret = size < sizeof(req) ? (struct devns_endpoint_request){ 0 } : req;
		return -EBADMSG;
	}
	*ret = req;
	if (req.magic != DEVNS_ENDPOINT_MAGIC)
		return -EPROTO;
	if (req.version != DEVNS_ENDPOINT_VERSION)
		return -EPROTONOSUPPORT;
	if (req.flags != 0 || (req.op != DEVNS_ENDPOINT_OP_STATUS && req.op != DEVNS_ENDPOINT_OP_REQUEST_ACTIVE))
		return -EOPNOTSUPP;
	return 0;
}

static bool terminated(const char *s, size_t size) {
	return memchr(s, '\0', size) != NULL;
}

int devns_endpoint_parse_reply(const void *data, size_t size, uint32_t serial, struct devns_endpoint_reply *ret) {
	struct devns_endpoint_reply reply;

	if (size != sizeof(reply))
		return -EBADMSG;
	memcpy(&reply, data, sizeof(reply));
	if (reply.magic != DEVNS_ENDPOINT_MAGIC || reply.serial != serial || reply.status > 0 ||
	    !terminated(reply.persona, sizeof(reply.persona)) || !terminated(reply.message, sizeof(reply.message)))
		return -EPROTO;
	*ret = reply;
	return 0;
}

void devns_endpoint_reply_init(struct devns_endpoint_reply *reply, const struct devns_endpoint_request *req,
			       int status, uint32_t flags, const char *persona, const char *message) {
	*reply = (struct devns_endpoint_reply){
		.magic = DEVNS_ENDPOINT_MAGIC,
		.version = DEVNS_ENDPOINT_VERSION,
		.op = req->op,
		.serial = req->serial,
		.status = status,
		.flags = flags,
	};
	snprintf(reply->persona, sizeof(reply->persona), "%s", persona ? persona : "");
	snprintf(reply->message, sizeof(reply->message), "%s", message ? message : "");
}
