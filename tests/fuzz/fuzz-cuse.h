/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The kernel's half of an unrestricted CUSE ioctl (fs/fuse/ioctl.c), for
 * fuzzing the daemon's half: the first request carries no data; every
 * retry names caller memory to read and to write, which the next request
 * carries; the final answer is copied into the memory the last retry
 * named. The caller's memory is a buffer at a made-up address, so that
 * pointers inside ioctl arguments (EVIOCSMASK's codes_ptr, fb_cmap's
 * arrays) are plain numbers the fuzzer can aim into it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "fuzz-input.h"
#include "util.h"

#define FUZZ_USER_BASE 0x10000u
#define FUZZ_USER_SIZE (64u * 1024)
/* What one request may carry each way: FUSE's default 32 pages. */
#define FUZZ_IOCTL_DATA_MAX (32u * 4096)
/* Retries after which a daemon is taken to loop: memory does not change in between here. */
#define FUZZ_IOCTL_ROUNDS 16

/* One step's answer, whatever the device's step struct looks like. */
struct fuzz_step {
	bool retry;
	int result;
	size_t out_size;
	const struct iovec *in_iov, *out_iov;
	size_t n_in, n_out, max_iov;
	const uint8_t *out;
};

/* Views a device's step struct (struct evdev_ioctl_step, struct fb_ioctl_step) as a struct fuzz_step. */
#define FUZZ_STEP_OF(s)                                                                                \
	((struct fuzz_step){ .retry = (s).retry,                                                       \
			     .result = (s).result,                                                     \
			     .out_size = (s).out_size,                                                 \
			     .in_iov = (s).in_iov,                                                     \
			     .n_in = (s).n_in,                                                         \
			     .out_iov = (s).out_iov,                                                   \
			     .n_out = (s).n_out,                                                       \
			     .max_iov = ELEMENTSOF((s).in_iov),                                        \
			     .out = (s).out })

typedef void (*fuzz_step_fn)(void *userdata, void *arg, const void *in, size_t in_size, size_t out_size,
			     struct fuzz_step *ret);

/* The caller memory an iovec names, or NULL when it is not all mapped (EFAULT). */
static inline uint8_t *fuzz_user_at(uint8_t *user, const struct iovec *iov) {
	uintptr_t a = (uintptr_t)iov->iov_base;

	if (a < FUZZ_USER_BASE || a - FUZZ_USER_BASE > FUZZ_USER_SIZE ||
	    iov->iov_len > FUZZ_USER_SIZE - (a - FUZZ_USER_BASE))
		return NULL;
	return user + (a - FUZZ_USER_BASE);
}

static inline void *fuzz_user_addr(size_t offset) {
	return (void *)(uintptr_t)(FUZZ_USER_BASE + offset % FUZZ_USER_SIZE);
}

/*
 * An ioctl's argument: an address in the caller's memory, a value (for the
 * ioctls that take theirs by value; wide: 32 bits, else 8), or any number.
 */
static inline void *fuzz_ioctl_arg(struct fuzz_input *in, bool wide) {
	switch (fuzz_u8(in) % 3) {
	case 0:
		return fuzz_user_addr(fuzz_u16(in));
	case 1:
		return (void *)(uintptr_t)(wide ? fuzz_u32(in) : fuzz_u8(in));
	default:
		return (void *)(uintptr_t)fuzz_u64(in);
	}
}

/* Runs an ioctl to its end; returns what the caller's ioctl() would (a negative errno on failure). */
static inline int fuzz_cuse_ioctl(uint8_t *user, void *arg, fuzz_step_fn run, void *userdata) {
	/* As aligned as the argument in a FUSE request. */
	static _Alignas(8) uint8_t in[FUZZ_IOCTL_DATA_MAX];
	struct iovec out_iov[FUZZ_IOCTL_ROUNDS];
	size_t in_size = 0, out_size = 0, n_out = 0;
	struct fuzz_step s;

	for (unsigned int round = 0; round < FUZZ_IOCTL_ROUNDS; round++) {
		run(userdata, arg, in, in_size, out_size, &s);
		if (!s.retry) {
			const uint8_t *p = s.out;
			size_t left = s.out_size;

			fuzz_assert(s.result >= -4095);
			if (s.result < 0)
				return s.result;
			/* The kernel fails an answer longer than what it offered with EIO: a daemon bug. */
			fuzz_assert(s.out_size <= out_size);
			for (size_t i = 0; i < n_out && left > 0; i++) {
				size_t len = MIN(left, out_iov[i].iov_len);
				uint8_t *dst = fuzz_user_at(user, &out_iov[i]);

				if (!dst)
					return -EFAULT;
				memcpy(dst, p, len);
				p += len;
				left -= len;
			}
			return s.result;
		}
		fuzz_assert(s.n_in <= s.max_iov && s.n_out <= s.max_iov);
		in_size = 0;
		for (size_t i = 0; i < s.n_in; i++) {
			const uint8_t *src = fuzz_user_at(user, &s.in_iov[i]);

			if (s.in_iov[i].iov_len > sizeof(in) - in_size)
				return -ENOMEM;
			if (!src)
				return -EFAULT;
			memcpy(in + in_size, src, s.in_iov[i].iov_len);
			in_size += s.in_iov[i].iov_len;
		}
		out_size = 0;
		n_out = s.n_out;
		for (size_t i = 0; i < n_out; i++) {
			out_iov[i] = s.out_iov[i];
			if (out_iov[i].iov_len > FUZZ_IOCTL_DATA_MAX - out_size)
				return -ENOMEM;
			out_size += out_iov[i].iov_len;
		}
	}
	fprintf(stderr, "ioctl still asks for a retry after %d rounds with unchanged memory\n", FUZZ_IOCTL_ROUNDS);
	abort();
}
