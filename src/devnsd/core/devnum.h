/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Device numbers for persona nodes that stay the same when devnsd restarts,
 * so nodes already made inside containers keep working: one major for all
 * of devns, a minor per node name, kept in a small state file.
 */
struct devnum;

#define DEVNUM_STATE_DIR "/run/devnsd"
#define DEVNUM_MAX_NODES 4096

/* Loads the state file in dir (created if missing) and settles on a major. */
int devnum_new(struct devnum **ret, const char *dir);
struct devnum *devnum_free(struct devnum *d);
static inline void devnum_freep(struct devnum **d) {
	devnum_free(*d);
}

/* The numbers for a node ("devns/work/event3"), assigned and saved on first use. */
int devnum_get(struct devnum *d, const char *devname, unsigned int *ret_major, unsigned int *ret_minor);
