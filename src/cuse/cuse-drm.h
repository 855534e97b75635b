/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "devns-drm.h"
#include "drm-node.h"

/*
 * A persona's DRM/KMS node (drm-node.h) served as a CUSE character device:
 * its ioctls in CUSE's retry rounds (drm-ioctl.h), events through read()
 * (blocking, or -EAGAIN with O_NONBLOCK) and poll(), blocking WAIT_VBLANK,
 * and tickets for mapping dumb buffers (devns-drm.h).
 *
 * The transport owns no clock: whoever drives the node's vblanks
 * (drm_node_vblank()) calls cuse_drm_vblank() after each, and the
 * transport answers what waited for it. Reads and polls follow the
 * node's events.readable by themselves.
 */
struct cuse_drm;

/* Files of one persona's card0 at once, how many of them one uid may open, and blocked callers per file. */
#define CUSE_DRM_MAX_OPEN DRM_NODE_MAX_FILES
#define CUSE_DRM_MAX_OPEN_PER_UID (CUSE_DRM_MAX_OPEN / 4)
#define CUSE_DRM_MAX_WAITERS_PER_FILE 16

struct cuse_drm_hooks {
	/* The node exists in /dev. */
	void (*ready)(void *userdata);
	/* May this process open the node? 0, or a negative errno to refuse. */
	int (*may_open)(void *userdata, pid_t pid);
	/*
	 * For a routed node (created with node NULL), instead of may_open: the
	 * card whose node this process's open works on, and the owner (from 1)
	 * whose share of the routed node the file takes (see
	 * cuse_drm_set_shares()); or a negative errno to refuse.
	 */
	int (*route)(void *userdata, pid_t pid, struct cuse_drm **ret, uint32_t *ret_owner);
};

/*
 * Serves node (which the caller keeps, and frees after this) as devname,
 * numbers as for cuse_device_new(). socket_path: what
 * DEVNS_DRM_IOCTL_GET_SOCKET answers (NULL: it fails with -ENOTTY, and no
 * ticket is issued). node NULL makes a routed node: each open works on the
 * card hooks->route() names, as if opened there (its limits, its socket,
 * its revocation), until that card is freed (ENODEV from then on).
 */
int cuse_drm_new(struct cuse_drm **ret, sd_event *event, const char *devname, unsigned int major,
		 unsigned int minor, struct drm_node *node, const char *socket_path, const struct cuse_drm_hooks *hooks,
		 void *userdata);
/* Answers blocked reads and waits with ENODEV, closes every file on the node and removes the device. */
struct cuse_drm *cuse_drm_free(struct cuse_drm *cd);
/*
 * As cuse_fb_retire(): the node leaves /dev at once, the handles still open
 * get ENODEV until they are closed. The drm node's files are closed now.
 */
struct cuse_drm *cuse_drm_retire(struct cuse_drm *cd, const char *group);
static inline void cuse_drm_freep(struct cuse_drm **cd) {
	cuse_drm_free(*cd);
}

/*
 * Every open file stops working (ENODEV from now on, blocked callers too),
 * those routed here included; its drm file is closed (its framebuffers and
 * master go), its tickets are void. New opens work as before. Nothing on a
 * routed node.
 */
void cuse_drm_revoke(struct cuse_drm *cd);

/* A vblank of the node happened (after drm_node_vblank()): answers the WAIT_VBLANKs it completed. */
void cuse_drm_vblank(struct cuse_drm *cd);

/* Open files, and callers blocked in WAIT_VBLANK. */
unsigned int cuse_drm_n_open(const struct cuse_drm *cd);
unsigned int cuse_drm_n_waiting(const struct cuse_drm *cd);

/* The node's owner and mode in /dev; see cuse_device_set_owner(). */
int cuse_drm_set_owner(struct cuse_drm *cd, uid_t uid, gid_t gid, mode_t mode);
/* Splits a routed node's files and requests among n owners; see cuse_device_set_shares(). */
int cuse_drm_set_shares(struct cuse_drm *cd, unsigned int n);

/*
 * What a redeemed ticket gives: the buffer's memory (the node's fd: dup or
 * reopen it) or, asked for, its dma-buf (the node's: send it as it is),
 * and whom it was issued to.
 */
struct cuse_drm_grant {
	int memfd;
	uint64_t size;
	uint64_t serial;
	uid_t uid;
	int access_mode; /* O_ACCMODE of the open file */
};

/*
 * Takes a ticket DEVNS_DRM_IOCTL_GET_TICKET issued: 0 with the grant,
 * -ENOENT for a ticket unknown, used, expired, of a file since closed or
 * revoked, or whose buffer is gone. With dmabuf, the grant's memfd is the
 * buffer's dma-buf (PRIME export): -EACCES for a file not open for reading
 * and writing (a dma-buf maps writable), -EOPNOTSUPP without PRIME, or
 * udmabuf's error.
 */
int cuse_drm_redeem(struct cuse_drm *cd, const struct devns_fb_ticket *ticket, bool dmabuf,
		    struct cuse_drm_grant *ret);
