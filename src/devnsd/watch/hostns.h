/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

/*
 * devnsd's mounts as the host sees them. Under a sandboxed systemd unit
 * (ProtectSystem=, PrivateTmp=, ...) devnsd runs in a mount namespace of
 * its own, and a mount made there never reaches PID 1's namespace, where
 * container managers bind the persona views from.
 */

/* Moves a copy of the mount at path into PID 1's mount namespace at the same
 * path, replacing a dead mount of an earlier run there. Returns 0 when done,
 * 1 when devnsd already runs in PID 1's mount namespace (nothing to do), or
 * a negative errno. */
int hostns_publish(const char *path);

/* Detaches the mount at path in PID 1's mount namespace if it is of the file
 * system dev (what hostns_publish() put there). Returns 0 or a negative errno. */
int hostns_unpublish(const char *path, dev_t dev);
