/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "fb-ioctl.h"
#include "fb-node.h"
#include "fb-ticket.h"

/*
 * A framebuffer node served as a CUSE character device: fbdev ioctls,
 * read() and write() at a per-open-file stream position, and tickets for
 * its memory bound to the open file (see devns-fb.h).
 */
struct cuse_fb;

/* Files working on one persona's framebuffer at once, and how many of them one uid may open. */
#define CUSE_FB_MAX_OPEN 64
#define CUSE_FB_MAX_OPEN_PER_UID (CUSE_FB_MAX_OPEN / 4)
#define CUSE_FB_MAX_VSYNC_WAITERS 64

struct cuse_fb_hooks {
	/* The node exists in /dev. */
	void (*ready)(void *userdata);
	/* May this process open the node? 0, or a negative errno to refuse. */
	int (*may_open)(void *userdata, pid_t pid);
	/*
	 * For a routed node (created with node NULL), instead of may_open: the
	 * persona's node this process gets, decided at open, and whose share
	 * of the routed node the file takes (see cuse_device_set_shares();
	 * from 1); or a negative errno.
	 */
	int (*route)(void *userdata, pid_t pid, struct cuse_fb **ret, uint32_t *ret_owner);
	/* Rows of the virtual screen were written. */
	void (*written)(void *userdata, const struct fb_rows *rows);
	/* An ioctl changed what should be shown, or a caller waits for vsync (then cuse_fb_vsync() answers it). */
	void (*effect)(void *userdata, enum fb_effect effect);
};

/* major, minor: as for cuse_device_new(). node NULL makes a routed node (hooks->route). */
int cuse_fb_new(struct cuse_fb **ret, sd_event *event, const char *devname, unsigned int major,
		unsigned int minor, struct fb_node *node, const char *socket_path, const struct cuse_fb_hooks *hooks, void *userdata);
/*
 * Answers waiting FBIO_WAITFORVSYNC calls with ENODEV and removes the node;
 * files routed to it answer ENODEV. A routed node first answers, with
 * ENODEV, what waits through it on the persona's nodes. The fb node stays.
 */
struct cuse_fb *cuse_fb_free(struct cuse_fb *cf);
/*
 * Frees it as its device goes (unplugged, its persona removed): the node
 * leaves /dev at once, and the handles still open get ENODEV until they are
 * closed (cuse_device_retire(); group: the persona's name).
 */
struct cuse_fb *cuse_fb_retire(struct cuse_fb *cf, const char *group);
static inline void cuse_fb_freep(struct cuse_fb **cf) {
	cuse_fb_free(*cf);
}

/* Splits a routed node's files and requests among n owners; see cuse_device_set_shares(). */
int cuse_fb_set_shares(struct cuse_fb *cf, unsigned int n);

/*
 * Every file working on cf (opened on it, or routed to it) answers ENODEV
 * from now on, waiting vsyncs too, and every ticket is void. New opens
 * work as before.
 */
void cuse_fb_revoke(struct cuse_fb *cf);

/* Whom a redeemed ticket was issued to: the open file's opener and access mode (O_ACCMODE). */
struct cuse_fb_grant {
	uid_t uid;
	int access_mode;
};

/*
 * Takes a ticket issued by DEVNS_FBIOGET_TICKET on a file working on cf:
 * 0 with the file's grant, -ENOENT for a ticket unknown, used, expired, of
 * a file since closed or revoked.
 */
int cuse_fb_redeem(struct cuse_fb *cf, const struct devns_fb_ticket *ticket, struct cuse_fb_grant *ret);

/* A refresh happened: answers every waiting FBIO_WAITFORVSYNC. */
void cuse_fb_vsync(struct cuse_fb *cf);
/* Callers waiting for a refresh. */
unsigned int cuse_fb_vsync_waiters(const struct cuse_fb *cf);
/* Open files. */
/* The node's owner and mode in /dev; see cuse_device_set_owner(). */
int cuse_fb_set_owner(struct cuse_fb *cf, uid_t uid, gid_t gid, mode_t mode);
unsigned int cuse_fb_n_open(const struct cuse_fb *cf);
