/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "devns-fb.h"

/*
 * One-time tickets for a framebuffer's memory (see devns-fb.h), each bound
 * to the open file it was issued for, an opaque pointer here. A ticket is
 * good for one redemption within FB_TICKET_LIFETIME_USEC of its issue;
 * forgetting a file forgets its tickets. The caller passes the time
 * (CLOCK_MONOTONIC, microseconds).
 */
#define FB_TICKET_LEN sizeof(struct devns_fb_ticket)
#define FB_TICKET_LIFETIME_USEC ((uint64_t)DEVNS_FB_TICKET_SECONDS * 1000000u)
#define FB_TICKETS_PER_FILE DEVNS_FB_TICKETS_PER_FILE
/* Room for every open file of a node (CUSE_FB_MAX_OPEN) at its full count. */
#define FB_TICKETS_MAX (64 * FB_TICKETS_PER_FILE)

struct fb_ticket {
	struct devns_fb_ticket token;
	const void *file; /* NULL: a free slot */
	uint64_t expires;
};

struct fb_tickets {
	struct fb_ticket slot[FB_TICKETS_MAX];
};

/*
 * A new ticket for file, from the kernel's random source. A file that has
 * FB_TICKETS_PER_FILE tickets outstanding loses its oldest. -EBUSY when no
 * slot is free, or the error of getrandom().
 */
int fb_tickets_issue(struct fb_tickets *t, const void *file, uint64_t now, struct devns_fb_ticket *ret);

/* Takes a ticket: the file it was issued for, or -ENOENT for one unknown, used or expired. */
int fb_tickets_redeem(struct fb_tickets *t, const struct devns_fb_ticket *token, uint64_t now, const void **ret_file);

/* Voids file's tickets (it was closed or revoked). */
void fb_tickets_drop_file(struct fb_tickets *t, const void *file);

/* Voids every ticket. */
void fb_tickets_clear(struct fb_tickets *t);
