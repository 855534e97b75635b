/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/*
 * How the active persona's mapped frame is watched: tracked (every
 * mapping write-protected; a write faults, and only then is the frame
 * scanned at the next refresh) or scanned every refresh. Tracking costs
 * nothing while nothing is drawn, and shows each frame a program draws
 * slower than the display refreshes once (the refresh after its first
 * write). A frame that changes at every refresh gains nothing from it:
 * scanned every refresh it costs the same scans without a fault and two
 * protection changes each. So the policy switches to scanning after
 * FB_TRACK_BUSY_REFRESHES changed scans in a row, each at most 1.2
 * refresh periods after the one before (every refresh, give or take the
 * timers' jitter; a 60 fps program on a 75 Hz display stays tracked), and
 * back to tracking after FB_TRACK_QUIET_REFRESHES scans in a row that
 * found nothing.
 */
#define FB_TRACK_BUSY_REFRESHES 8u
#define FB_TRACK_QUIET_REFRESHES 15u

struct fb_track_policy {
	bool scanning;
	/* Changed scans in a row close together (tracking), unchanged scans in a row (scanning). */
	unsigned int busy, quiet;
	/* When the last changed scan ran (0: none yet). */
	uint64_t last_change_usec;
};

/* Tracking, with no history (a switch, a new set of mappings). */
void fb_track_policy_reset(struct fb_track_policy *p);

/*
 * A scan of the frame ran at usec (refresh period period_usec) and found
 * changes or not. Returns whether the frame is to be scanned every
 * refresh from now on (false: tracked).
 */
bool fb_track_policy_scanned(struct fb_track_policy *p, uint64_t usec, uint64_t period_usec, bool changed);

/*
 * Checks the range a program says it registered (struct devns_fb_track)
 * against a framebuffer of fb_size bytes: every value page-aligned, the
 * length not 0, the mapping inside the framebuffer and the address range
 * not wrapping. 0 or -EINVAL.
 */
int fb_track_check_range(uint64_t addr, uint64_t len, uint64_t offset, uint64_t fb_size, uint64_t page_size);
