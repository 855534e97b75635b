/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/*
 * Device numbers for persona nodes that stay the same when devnsd restarts,
 * so nodes already made inside containers keep working: one major for all
 * of devns, a minor per node name, kept in a small state file.
 */
struct devnum;

#define DEVNUM_STATE_DIR "/run/devnsd"
#define DEVNUM_MAX_NODES 4096
/*
 * Minors below this are for DRM primary nodes (a last component cardN):
 * libdrm takes a node's type from minor >> 6. Other nodes get minors from
 * here on; those a state file of an earlier run gave below it stay.
 */
#define DEVNUM_CARD_MINORS 64

/* Loads the state file in dir (created if missing) and settles on a major. */
int devnum_new(struct devnum **ret, const char *dir);
struct devnum *devnum_free(struct devnum *d);
static inline void devnum_freep(struct devnum **d) {
	devnum_free(*d);
}

/*
 * The numbers for a node ("devns/work/event3"), assigned and saved on first
 * use. A new card takes a free minor below DEVNUM_CARD_MINORS, else the
 * minor of a card whose node is gone for good (devnum_release_persona(),
 * devnum_release_gone(), devnum_settle()); -ENOSPC when there is none.
 */
int devnum_get(struct devnum *d, const char *devname, unsigned int *ret_major, unsigned int *ret_minor);

/*
 * The persona is deleted: its nodes ("devns/PERSONA/...") are gone for
 * good. Their numbers stay theirs, unless a new card needs a minor and no
 * other is free.
 */
void devnum_release_persona(struct devnum *d, const char *persona);

/*
 * Before any node asks: the nodes of an earlier run's personas that are no
 * persona now (alive() says which are) are gone for good.
 */
void devnum_release_gone(struct devnum *d, bool (*alive)(void *userdata, const char *persona), void *userdata);

/*
 * devnsd has started: every node of this run, the restored personas'
 * included, has asked for its numbers. Those of an earlier run that none
 * asked for (the routed nodes of a run with Routed=yes) are gone for good.
 */
void devnum_settle(struct devnum *d);
