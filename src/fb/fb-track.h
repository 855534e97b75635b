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

/*
 * Written pages (PAGEMAP_SCAN's ranges, in the program's addresses) as
 * rows of the visible frame. The mapping [map_addr, map_addr + map_len)
 * shows the framebuffer from map_offset; the visible frame starts at
 * frame_offset in the framebuffer, height rows of line bytes. A range is
 * clipped to the mapping and to the frame: false if nothing of it is
 * left (a page of another frame, or the kernel named something outside
 * the mapping), else *ret_y0 and *ret_y1 the rows it touches.
 */
bool fb_track_page_rows(uint64_t start, uint64_t end, uint64_t map_addr, uint64_t map_len, uint64_t map_offset,
			uint64_t frame_offset, uint32_t line, uint32_t height, uint32_t *ret_y0, uint32_t *ret_y1);

/*
 * Whether a scan that returned n ranges of a vector of vec_len, and
 * stopped at walk_end of [start, end), saw everything: a full vector, or
 * a walk that ended early or elsewhere, may have left written pages
 * unreported, and the whole frame counts as changed.
 */
bool fb_track_scan_complete(uint64_t n, uint64_t vec_len, uint64_t walk_end, uint64_t end);

/*
 * The part of the mapping [map_addr, map_addr + map_len) (showing the
 * framebuffer from map_offset) that shows the frame at frame_offset,
 * frame_bytes long, widened to whole pages: false if none does.
 */
bool fb_track_frame_span(uint64_t map_addr, uint64_t map_len, uint64_t map_offset, uint64_t frame_offset,
			 uint64_t frame_bytes, uint64_t page, uint64_t *ret_start, uint64_t *ret_end);

/* Whether a descriptor's link names a process's pagemap: an absolute path ending in /PID/pagemap. */
bool fb_track_pagemap_name(const char *link);

/*
 * With asynchronous write-protection nothing wakes devnsd at a write: a
 * tracked frame is scanned for written pages every refresh while it
 * changes. After FB_TRACK_POLL_QUIET_SCANS scans in a row that found
 * nothing its mappings go back to a write fault for the next write
 * (display/track.c parks them), so that an unchanged frame costs nothing.
 */
#define FB_TRACK_POLL_QUIET_SCANS 12u
