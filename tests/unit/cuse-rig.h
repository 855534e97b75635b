/* SPDX-License-Identifier: MIT */
#pragma once

#include <linux/fuse.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

/*
 * The kernel's side of /dev/cuse, played over a socket pair per device (one
 * message a request): cuse_device_set_connector(cuse_rig_connect, NULL)
 * makes each new device's connection such a pair, whose kernel side is then
 * in cuse_rig_last_fd. The last message read or written is in cuse_rig_msg.
 */
#define CUSE_RIG_MSG_MAX (256 * 1024)
extern int cuse_rig_last_fd;
extern uint8_t cuse_rig_msg[CUSE_RIG_MSG_MAX];

int cuse_rig_connect(void *userdata);

/* Runs e until nothing is left to dispatch. */
void cuse_rig_pump(sd_event *e);

/* Sends a request of uid and pid made of two parts on the kernel's side fd, then runs e: its unique. */
uint64_t cuse_rig_send(sd_event *e, int fd, uint32_t opcode, uint32_t uid, uint32_t pid, const void *a,
		       size_t a_len, const void *b, size_t b_len);

/* Writes a request with the given unique and argument on the kernel's side fd, and nothing else. */
void cuse_rig_write(int fd, uint32_t opcode, uint64_t unique, const void *arg, size_t len);

/*
 * The next message devnsd wrote on fd: its header, and its payload (up to
 * size bytes) in body; its payload's length in *ret_len. False if none came.
 */
bool cuse_rig_next(int fd, struct fuse_out_header *ret, void *body, size_t size, size_t *ret_len);
