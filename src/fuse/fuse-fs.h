/* SPDX-License-Identifier: MIT */
#pragma once

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <systemd/sd-event.h>

/*
 * A FUSE filesystem served from the sd-event loop: its /dev/fuse session fd
 * is an event source, requests are processed as they arrive, and freeing it
 * unmounts the filesystem.
 */
struct fuse_fs;

/*
 * Mounts a filesystem with the given low-level operations at mountpoint
 * (created if missing; a stale mount of a previous run is detached first).
 * fuse_req_userdata() returns userdata. Other users may enter it when devnsd
 * runs as root (allow_other). The kernel checks every access against the
 * owners and modes the operations report (default_permissions); the
 * operations check the rest.
 */
int fuse_fs_new(struct fuse_fs **ret, sd_event *event, const char *mountpoint, const struct fuse_lowlevel_ops *ops,
		void *userdata);
struct fuse_fs *fuse_fs_free(struct fuse_fs *fs);
static inline void fuse_fs_freep(struct fuse_fs **fs) {
	fuse_fs_free(*fs);
}
