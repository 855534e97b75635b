/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Reading a fuzzer's input as a stream of values. Past the end every read
 * gives zeros, so a target never has to check how much is left.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fuzz_input {
	const uint8_t *p;
	size_t left;
};

static inline bool fuzz_done(const struct fuzz_input *in) {
	return in->left == 0;
}

/* Copies n bytes into out; what the input lacks is zero. Returns how many came from the input. */
static inline size_t fuzz_bytes(struct fuzz_input *in, void *out, size_t n) {
	size_t k = n < in->left ? n : in->left;

	memcpy(out, in->p, k);
	memset((uint8_t *)out + k, 0, n - k);
	in->p += k;
	in->left -= k;
	return k;
}

/* Points at up to n bytes of the input, without copying; *ret_len says how many. */
static inline const uint8_t *fuzz_span(struct fuzz_input *in, size_t n, size_t *ret_len) {
	const uint8_t *p = in->p;

	*ret_len = n < in->left ? n : in->left;
	in->p += *ret_len;
	in->left -= *ret_len;
	return p;
}

static inline uint8_t fuzz_u8(struct fuzz_input *in) {
	uint8_t v;

	fuzz_bytes(in, &v, sizeof(v));
	return v;
}

static inline uint16_t fuzz_u16(struct fuzz_input *in) {
	uint16_t v;

	fuzz_bytes(in, &v, sizeof(v));
	return v;
}

static inline uint32_t fuzz_u32(struct fuzz_input *in) {
	uint32_t v;

	fuzz_bytes(in, &v, sizeof(v));
	return v;
}

static inline uint64_t fuzz_u64(struct fuzz_input *in) {
	uint64_t v;

	fuzz_bytes(in, &v, sizeof(v));
	return v;
}

/* A length from one byte: mostly short, sometimes up to max. */
static inline size_t fuzz_len(struct fuzz_input *in, size_t max) {
	uint8_t b = fuzz_u8(in);
	size_t len = b & 0x80 ? (size_t)fuzz_u16(in) : (size_t)(b & 0x7f);

	return len > max ? max : len;
}

/* Reports a broken invariant as a crash, so the fuzzer keeps the input. */
#define fuzz_assert(cond)                                                                           \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                    \
		}                                                                                   \
	} while (0)
