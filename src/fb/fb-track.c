/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "fb-track.h"

void fb_track_policy_reset(struct fb_track_policy *p) {
	*p = (struct fb_track_policy){ 0 };
}

bool fb_track_policy_scanned(struct fb_track_policy *p, uint64_t usec, uint64_t period_usec, bool changed) {
	if (p->scanning) {
		p->quiet = changed ? 0 : p->quiet + 1;
		if (p->quiet >= FB_TRACK_QUIET_REFRESHES) {
			fb_track_policy_reset(p);
			return false;
		}
		return true;
	}
	if (!changed)
		return false;
	/* A change more than 1.2 periods after the one before starts a new run. */
	if (p->last_change_usec && (usec - p->last_change_usec) * 5 <= period_usec * 6)
		p->busy++;
	else
		p->busy = 1;
	p->last_change_usec = usec;
	if (p->busy >= FB_TRACK_BUSY_REFRESHES) {
		*p = (struct fb_track_policy){ .scanning = true };
		return true;
	}
	return false;
}

int fb_track_check_range(uint64_t addr, uint64_t len, uint64_t offset, uint64_t fb_size, uint64_t page_size) {
	uint64_t mask = page_size - 1;

	if (!page_size || (page_size & mask) || ((addr | len | offset) & mask) || !len)
		return -EINVAL;
	if (len > fb_size || offset > fb_size - len || addr + len < addr)
		return -EINVAL;
	return 0;
}
