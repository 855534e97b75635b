/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdio.h>
#include <time.h>

/* CLOCK_MONOTONIC in microseconds. */
static inline double now_us(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Says what failed; the exit status to return. */
static inline int die(const char *what) {
	perror(what);
	return 1;
}
