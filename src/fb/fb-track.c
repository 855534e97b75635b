/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

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

bool fb_track_page_rows(uint64_t start, uint64_t end, uint64_t map_addr, uint64_t map_len, uint64_t map_offset,
			uint64_t frame_offset, uint32_t line, uint32_t height, uint32_t *ret_y0, uint32_t *ret_y1) {
	uint64_t lo, hi, frame_end;

	if (line == 0 || height == 0 || map_len == 0 || map_addr + map_len < map_addr)
		return false;
	/* Into the mapping, then into framebuffer offsets. */
	start = start < map_addr ? map_addr : start;
	end = end > map_addr + map_len ? map_addr + map_len : end;
	if (start >= end)
		return false;
	lo = map_offset + (start - map_addr);
	hi = map_offset + (end - map_addr);
	if (hi < lo)
		return false;
	/* Into the visible frame. */
	frame_end = frame_offset + (uint64_t)line * height;
	lo = lo < frame_offset ? frame_offset : lo;
	hi = hi > frame_end ? frame_end : hi;
	if (lo >= hi)
		return false;
	*ret_y0 = (uint32_t)((lo - frame_offset) / line);
	*ret_y1 = (uint32_t)((hi - frame_offset + line - 1) / line);
	return true;
}

bool fb_track_scan_complete(uint64_t n, uint64_t vec_len, uint64_t walk_end, uint64_t end) {
	return n < vec_len && walk_end == end;
}

bool fb_track_pagemap_name(const char *link) {
	static const char suffix[] = "/pagemap";
	size_t n = strlen(link), k = sizeof(suffix) - 1, digits = 0;

	if (link[0] != '/' || n < k + 2 || strcmp(link + n - k, suffix) != 0)
		return false;
	n -= k;
	while (n > 0 && link[n - 1] >= '0' && link[n - 1] <= '9') {
		n--;
		digits++;
	}
	return digits > 0 && digits <= 10 && n > 0 && link[n - 1] == '/';
}

bool fb_track_frame_span(uint64_t map_addr, uint64_t map_len, uint64_t map_offset, uint64_t frame_offset,
			 uint64_t frame_bytes, uint64_t page, uint64_t *ret_start, uint64_t *ret_end) {
	uint64_t lo, hi;

	if (page == 0 || (page & (page - 1)) || frame_bytes == 0 || frame_offset + frame_bytes < frame_offset ||
	    map_offset + map_len < map_offset || map_addr + map_len < map_addr)
		return false;
	lo = frame_offset > map_offset ? frame_offset : map_offset;
	hi = frame_offset + frame_bytes < map_offset + map_len ? frame_offset + frame_bytes : map_offset + map_len;
	if (lo >= hi)
		return false;
	lo = (lo - map_offset) & ~(page - 1);
	hi = (hi - map_offset + page - 1) & ~(page - 1);
	*ret_start = map_addr + lo;
	*ret_end = map_addr + (hi < map_len ? hi : map_len);
	return true;
}
