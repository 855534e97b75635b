/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * A token bucket: at most burst events at once, then one every interval.
 * Zero-initialised with burst and interval set, it starts full.
 */
struct ratelimit {
	uint64_t interval_usec;
	unsigned int burst;
	/* Tokens spent; refilled one an interval after last. */
	unsigned int spent;
	uint64_t last_usec;
};

#define RATELIMIT_INIT(interval, n) ((struct ratelimit){ .interval_usec = (interval), .burst = (n) })

/* Takes a token at time now (monotonic microseconds): true when the event may happen. */
bool ratelimit_take(struct ratelimit *rl, uint64_t now_usec);

/* When the next token comes (monotonic microseconds): 0 while one is left. */
uint64_t ratelimit_next(const struct ratelimit *rl);
