/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/*
 * Waits up to timeout_usec for path to exist: a device node the kernel has
 * not made yet, its driver still loading early in a boot. Returns 0 once
 * it exists, -ETIMEDOUT, -ECANCELED when SIGTERM or SIGINT comes (the
 * caller blocks them, as an sd-event loop does; the signal is taken, and
 * the caller is to stop), or another negative errno.
 */
int node_wait(const char *path, uint64_t timeout_usec);
