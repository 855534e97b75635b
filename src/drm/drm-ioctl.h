/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "drm-node.h"

/*
 * DRM ioctls on an open file of a node, in rounds, as an unrestricted CUSE
 * ioctl runs (fs/fuse/ioctl.c):
 *
 *  1. The first call has no data (in_size 0, out_size 0). The handler
 *     answers with a retry naming the caller memory it must read (in_iov)
 *     and write (out_iov): the argument struct first.
 *  2. The transport has the kernel fetch those ranges and calls again with
 *     in = their bytes concatenated in order and out_size = the sum of the
 *     out ranges' lengths. Once the handler has the struct, it names the
 *     arrays the struct points at (GETCONNECTOR's modes, ATOMIC's objects,
 *     then its properties...), always the struct first, in a new retry.
 *  3. When in_size and out_size are exactly what the ranges it names now
 *     add up to, the handler runs the ioctl: result, and out (out_size
 *     bytes) to be scattered over the out ranges of the last retry, in
 *     order. A failed ioctl writes nothing.
 *
 * The ranges are recomputed from the data of each round: caller memory that
 * changes between rounds only costs another round. With memory that does
 * not change, no ioctl takes more than DRM_IOCTL_ROUNDS calls; the
 * transport fails a request that asks for more with -EIO (a caller racing
 * its own memory). Every count the caller gives is bounded before any
 * range is named or anything is allocated; no round reads or writes more
 * than DRM_IOCTL_DATA_MAX bytes, nor names more than DRM_IOCTL_IOV_MAX
 * ranges each way.
 *
 * The direct case, all caller memory at hand, is drm_ioctl_direct(): the
 * same rounds served from the process's own memory.
 *
 * The command is matched by its number as the kernel's DRM core matches it
 * (the type is ignored), and the struct's size comes from the command:
 * shorter structs are zero-extended, longer ones written back with zeros.
 * Unknown numbers get -EINVAL, as the kernel answers them.
 *
 * PRIME_HANDLE_TO_FD cannot hand an fd over a transport: it checks its
 * arguments as the kernel does and fails with -EOPNOTSUPP. A program's
 * library trades the buffer's MAP_DUMB ticket for the dma-buf instead
 * (drm_node_export(), devns-drm.h). PRIME_FD_TO_HANDLE takes dma-bufs the
 * node exported (also of buffers gone from every file, while a program
 * holds their dma-buf), as ctx->same_file() tells them: the file's handle
 * to that buffer, the one it has or a new one; -EBADF for a negative fd,
 * or no such fd once the node has exported a buffer to compare it with;
 * -EINVAL for any other file.
 */

#define DRM_IOCTL_ROUNDS 4
#define DRM_IOCTL_IOV_MAX 8
/* What one round carries each way at most: FUSE's 32 pages. */
#define DRM_IOCTL_DATA_MAX (32u * 4096)
/* The largest output: a whole blob and its struct. */
#define DRM_IOCTL_OUT_MAX (DRM_BLOB_MAX_LEN + 4096)
/* The largest argument struct the command number can name (_IOC_SIZE). */
#define DRM_IOCTL_ARG_MAX 16384

/* Per-ioctl bounds on the counts a caller gives (beyond them: -EINVAL, before anything is read). */
#define DRM_ATOMIC_MAX_OBJS 64
#define DRM_ATOMIC_MAX_PROPS 1024
#define DRM_DIRTY_MAX_CLIPS 256 /* DRM_MODE_FB_DIRTY_MAX_CLIPS */
#define DRM_DAMAGE_MAX_CLIPS 256 /* in an FB_DAMAGE_CLIPS blob */

/* The caller of one ioctl, as the transport knows it. */
struct drm_ioctl_ctx {
	uint64_t now_usec; /* CLOCK_MONOTONIC: for events a commit sends at once */
	pid_t pid;         /* the caller's process (SET_MASTER lets the file's last master back in) */
	bool privileged;   /* the caller may take master without having had it (CAP_SYS_ADMIN) */
	/*
	 * PRIME_FD_TO_HANDLE: whether the caller's fd is the same open file as
	 * own, an fd of the node's (1 or 0), or -EBADF when the caller has no
	 * such fd (other errors: the node answers -EINVAL); with own < 0, only
	 * whether the caller has fd (0 or -EBADF). It must not call
	 * anything of the caller's file, nor be where its last close happens:
	 * either may wait on whoever serves it. NULL: the transport cannot
	 * tell, and import fails with -EOPNOTSUPP.
	 */
	int (*same_file)(const struct drm_ioctl_ctx *ctx, int fd, int own);
	void *userdata; /* same_file()'s */
};

struct drm_ioctl_step {
	bool retry;
	int result;
	/* Done: a blocking WAIT_VBLANK. Answer once drm_node_wait_done(wait_seq), with drm_node_wait_end(). */
	bool wait;
	uint64_t wait_seq;
	size_t out_size;
	struct iovec in_iov[DRM_IOCTL_IOV_MAX];
	size_t n_in;
	struct iovec out_iov[DRM_IOCTL_IOV_MAX];
	size_t n_out;
	_Alignas(8) uint8_t out[DRM_IOCTL_OUT_MAX];
	/* Scratch: the argument struct as the kernel's core holds it (zero-extended). */
	_Alignas(8) uint8_t arg[DRM_IOCTL_ARG_MAX];
};

/*
 * One round of cmd on file f with argument arg (a caller address, or a
 * value for the few that take one), in (in_size bytes) and out_size as
 * above. The step is large: keep one, not on a small stack.
 */
void drm_ioctl(struct drm_file *f, const struct drm_ioctl_ctx *ctx, unsigned int cmd, void *arg, const void *in,
	       size_t in_size, size_t out_size, struct drm_ioctl_step *ret);

/*
 * Runs cmd to its end against this process's memory, arg pointing at the
 * argument struct: the result (0 or more), or a negative errno. A blocking
 * WAIT_VBLANK returns 0 with step->wait set, its reply not written yet.
 */
int drm_ioctl_direct(struct drm_file *f, const struct drm_ioctl_ctx *ctx, unsigned int cmd, void *arg,
		     struct drm_ioctl_step *step);

/* Whether a blocking WAIT_VBLANK for seq can be answered: the sequence reached it, or the CRTC went off. */
bool drm_node_wait_done(const struct drm_node *n, uint64_t seq);

/*
 * Ends a blocking WAIT_VBLANK the node counted (step->wait): with reply
 * set (the step's out, union drm_wait_vblank), fills in the sequence and
 * time of the last vblank, as the kernel answers; NULL when the wait was
 * interrupted.
 */
void drm_node_wait_end(struct drm_node *n, union drm_wait_vblank *reply);
