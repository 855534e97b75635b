/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * A persona's endpoint: how a program in a persona's container speaks to
 * devnsd without the host's system bus.
 *
 * devnsd binds one unix socket (SOCK_SEQPACKET) per persona and mounts its
 * directory, read-only, into the persona's container at
 * DEVNS_ENDPOINT_DIR, where the socket is DEVNS_ENDPOINT_PATH. The socket
 * exists in no other mount namespace but devnsd's own (below a directory
 * only root can enter), and a new one is made each time the persona is
 * attached, so the place decides who speaks: every connection on it is
 * the persona, and devnsd looks up no process. What a request may do is
 * what the persona may ask on the bus (RequestActive, its own status),
 * with the same checks of the caller's user (RequestActiveUsers=, from
 * the connection's SO_PEERCRED uid through the container's uid map).
 *
 * Each request is one packet of exactly sizeof(struct devns_endpoint_request)
 * bytes; devnsd answers each with one packet of sizeof(struct
 * devns_endpoint_reply) bytes, in order, with the request's serial. A
 * packet of another size, another magic, or an unknown op or flag is
 * answered with status -EBADMSG, -EPROTO or -EOPNOTSUPP; a version other
 * than DEVNS_ENDPOINT_VERSION with -EPROTONOSUPPORT and the version devnsd
 * speaks. Descriptors sent along are dropped unopened.
 *
 * Bounds: DEVNS_ENDPOINT_MAX_CONNECTIONS connections per persona, a
 * quarter of them per uid; a connection silent for
 * DEVNS_ENDPOINT_IDLE_SECONDS is closed; devnsd reads at most
 * DEVNS_ENDPOINT_MAX_PENDING requests of one connection at a wakeup, and
 * closes a connection that does not read its replies (one that cannot be
 * queued). Numbers are in the host's byte order.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In the container. */
#define DEVNS_ENDPOINT_DIR "/run/devnsd/persona"
#define DEVNS_ENDPOINT_NAME "endpoint"
#define DEVNS_ENDPOINT_PATH DEVNS_ENDPOINT_DIR "/" DEVNS_ENDPOINT_NAME

#define DEVNS_ENDPOINT_MAGIC 0x50534e44u /* "DNSP" */
#define DEVNS_ENDPOINT_VERSION 1

#define DEVNS_ENDPOINT_MAX_CONNECTIONS 16
#define DEVNS_ENDPOINT_MAX_PENDING 8
#define DEVNS_ENDPOINT_IDLE_SECONDS 30

enum devns_endpoint_op {
	/* The persona's name and whether it is active. */
	DEVNS_ENDPOINT_OP_STATUS = 1,
	/* RequestActive: DEVNS_ENDPOINT_GRANTED when the persona comes (or is) to the front. */
	DEVNS_ENDPOINT_OP_REQUEST_ACTIVE = 2,
};

struct devns_endpoint_request {
	uint32_t magic;
	uint16_t version;
	uint16_t op;     /* enum devns_endpoint_op */
	uint32_t serial; /* the client's, sent back in the reply */
	uint32_t flags;  /* 0 */
};

/* Reply flags. */
#define DEVNS_ENDPOINT_ACTIVE (1u << 0)  /* the persona is the active one, or becoming it */
#define DEVNS_ENDPOINT_GRANTED (1u << 1) /* OP_REQUEST_ACTIVE: granted */

#define DEVNS_ENDPOINT_NAME_SIZE 33
#define DEVNS_ENDPOINT_MESSAGE_SIZE 160

struct devns_endpoint_reply {
	uint32_t magic;
	uint16_t version; /* the version devnsd speaks */
	uint16_t op;      /* the request's */
	uint32_t serial;  /* the request's */
	int32_t status;   /* 0, or a negative errno */
	uint32_t flags;   /* DEVNS_ENDPOINT_ACTIVE, DEVNS_ENDPOINT_GRANTED */
	char persona[DEVNS_ENDPOINT_NAME_SIZE];       /* the endpoint's persona, NUL-terminated */
	char message[DEVNS_ENDPOINT_MESSAGE_SIZE];    /* with a status < 0, why; NUL-terminated */
	uint8_t reserved[3];
};

/*
 * Checks a request packet of size bytes (data holds at least
 * min(size, sizeof(struct devns_endpoint_request)) of them). 0 with *ret filled; otherwise a
 * negative errno for the reply's status (-EBADMSG, -EPROTO,
 * -EPROTONOSUPPORT, -EOPNOTSUPP), with *ret holding what could be read
 * (op and serial, for the reply; zero when the packet is too short).
 */
int devns_endpoint_parse_request(const void *data, size_t size, struct devns_endpoint_request *ret);

/*
 * Checks a reply packet of size bytes to the request with serial: 0 with
 * *ret filled and its strings NUL-terminated, or -EBADMSG, -EPROTO.
 */
int devns_endpoint_parse_reply(const void *data, size_t size, uint32_t serial, struct devns_endpoint_reply *ret);

/* A reply to req with status and flags; message (may be NULL) is cut to fit. */
void devns_endpoint_reply_init(struct devns_endpoint_reply *reply, const struct devns_endpoint_request *req,
			       int status, uint32_t flags, const char *persona, const char *message);
