/* SPDX-License-Identifier: MIT */
/* When a mapped frame is tracked through write faults and when scanned every refresh; the ranges a program may name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>

#include "fb-track.h"

#define PERIOD 16667u
#define PAGE 4096u
#define FB (1280u * 800u * 4u)

/* Changes at every refresh: tracking gives way to scanning after FB_TRACK_BUSY_REFRESHES of them. */
static void test_full_rate_goes_to_scanning(void **state) {
	struct fb_track_policy p;
	uint64_t t = 1000000;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 1; i < FB_TRACK_BUSY_REFRESHES; i++, t += PERIOD)
		assert_false(fb_track_policy_scanned(&p, t, PERIOD, true));
	assert_true(fb_track_policy_scanned(&p, t, PERIOD, true));
	assert_true(p.scanning);
}

/* A program drawing at 60 fps on a 75 Hz display changes the frame slower than every refresh: tracked. */
static void test_slower_than_refresh_stays_tracked(void **state) {
	struct fb_track_policy p;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 0; i < 200; i++)
		assert_false(fb_track_policy_scanned(&p, 1000000 + i * 16667u, 13333u, true));
}

/* Every refresh, with the timers' jitter (a refresh late, the next one early): busy. */
static void test_jittery_full_rate_is_busy(void **state) {
	struct fb_track_policy p;
	uint64_t t = 1000000;
	bool scanning = false;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 0; i < FB_TRACK_BUSY_REFRESHES && !scanning; i++) {
		t += i % 2 ? PERIOD + PERIOD / 10 : PERIOD - PERIOD / 10;
		scanning = fb_track_policy_scanned(&p, t, PERIOD, true);
	}
	assert_true(scanning);
}

/* Changes three refreshes apart (20 fps at 60 Hz) stay tracked: a fault each costs less than 3 scans. */
static void test_sparse_changes_stay_tracked(void **state) {
	struct fb_track_policy p;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 0; i < 100; i++)
		assert_false(fb_track_policy_scanned(&p, 1000000 + i * 3u * PERIOD, PERIOD, true));
	/* One second apart (a clock): tracked. */
	for (unsigned int i = 0; i < 10; i++)
		assert_false(fb_track_policy_scanned(&p, 10000000 + i * 1000000ull, PERIOD, true));
}

/* A pause of a few periods starts the count again. */
static void test_pause_resets_the_run(void **state) {
	struct fb_track_policy p;
	uint64_t t = 1000000;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 1; i < FB_TRACK_BUSY_REFRESHES; i++, t += PERIOD)
		assert_false(fb_track_policy_scanned(&p, t, PERIOD, true));
	t += 3 * PERIOD;
	for (unsigned int i = 1; i < FB_TRACK_BUSY_REFRESHES; i++, t += PERIOD)
		assert_false(fb_track_policy_scanned(&p, t, PERIOD, true));
	assert_true(fb_track_policy_scanned(&p, t, PERIOD, true));
}

/* Scanning goes back to tracking after FB_TRACK_QUIET_REFRESHES unchanged scans in a row, not before. */
static void test_quiet_goes_back_to_tracking(void **state) {
	struct fb_track_policy p = { .scanning = true };
	uint64_t t = 1000000;

	(void)state;
	for (unsigned int i = 1; i < FB_TRACK_QUIET_REFRESHES; i++, t += PERIOD)
		assert_true(fb_track_policy_scanned(&p, t, PERIOD, false));
	/* One change restarts the quiet count. */
	assert_true(fb_track_policy_scanned(&p, t, PERIOD, true));
	t += PERIOD;
	for (unsigned int i = 1; i < FB_TRACK_QUIET_REFRESHES; i++, t += PERIOD)
		assert_true(fb_track_policy_scanned(&p, t, PERIOD, false));
	assert_false(fb_track_policy_scanned(&p, t, PERIOD, false));
	assert_false(p.scanning);
	/* Tracking afresh: a single change does not send it back. */
	assert_false(fb_track_policy_scanned(&p, t + PERIOD, PERIOD, true));
}

/* Unchanged scans while tracking (a scan after a write of the same pixels) change nothing. */
static void test_unchanged_while_tracking(void **state) {
	struct fb_track_policy p;

	(void)state;
	fb_track_policy_reset(&p);
	for (unsigned int i = 0; i < 100; i++)
		assert_false(fb_track_policy_scanned(&p, 1000000 + i * PERIOD, PERIOD, false));
	assert_int_equal(p.busy, 0);
}

static void test_ranges(void **state) {
	(void)state;
	assert_int_equal(fb_track_check_range(0x7f0000000000, FB, 0, FB, PAGE), 0);
	assert_int_equal(fb_track_check_range(0x7f0000000000, PAGE, FB - PAGE, FB, PAGE), 0);
	/* Not page-aligned. */
	assert_int_equal(fb_track_check_range(0x7f0000000001, PAGE, 0, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(0x7f0000000000, PAGE + 1, 0, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(0x7f0000000000, PAGE, 100, FB, PAGE), -EINVAL);
	/* Empty, past the framebuffer, wrapping. */
	assert_int_equal(fb_track_check_range(0x7f0000000000, 0, 0, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(0x7f0000000000, FB + PAGE, 0, FB + 2 * PAGE, PAGE), 0);
	assert_int_equal(fb_track_check_range(0x7f0000000000, 2 * PAGE, FB - PAGE, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(0x7f0000000000, FB + PAGE, 0, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(0x7f0000000000, PAGE, UINT64_MAX - PAGE + 1, FB, PAGE), -EINVAL);
	assert_int_equal(fb_track_check_range(UINT64_MAX - PAGE + 1, 2 * PAGE, 0, FB, PAGE), -EINVAL);
	/* A page size that is no power of two. */
	assert_int_equal(fb_track_check_range(0, 3000, 0, FB, 3000), -EINVAL);
}

#define LINE 5120u
#define HEIGHT 800u
#define MAP 0x7f0000000000ull

/* Pages to rows: a page of the frame touches the rows it overlaps, partly or wholly. */
static void test_page_rows(void **state) {
	uint32_t y0 = 0, y1 = 0;

	(void)state;
	/* The first page lies within row 0; the second overlaps rows 0 and 1. */
	assert_true(fb_track_page_rows(MAP, MAP + PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 0);
	assert_int_equal(y1, 1);
	assert_true(fb_track_page_rows(MAP + PAGE, MAP + 2 * PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 0);
	assert_int_equal(y1, 2);
	/* Pages 5 and 6: bytes 20480 to 28672, rows 4 to 5. */
	assert_true(fb_track_page_rows(MAP + 5 * PAGE, MAP + 7 * PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 4);
	assert_int_equal(y1, 6);
	/* The last page of the frame ends with its last row. */
	assert_true(fb_track_page_rows(MAP + FB - PAGE, MAP + FB, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y1, HEIGHT);
	/* A mapping of the second half of the framebuffer, the frame panned there. */
	assert_true(fb_track_page_rows(MAP, MAP + PAGE, MAP, FB, FB, FB, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 0);
	assert_int_equal(y1, 1);
}

/* What lies outside the mapping or the visible frame is clipped, or nothing. */
static void test_page_rows_clipped(void **state) {
	uint32_t y0 = 0, y1 = 0;

	(void)state;
	/* Before and after the mapping. */
	assert_false(fb_track_page_rows(MAP - 2 * PAGE, MAP, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_false(fb_track_page_rows(MAP + FB, MAP + FB + PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	/* Overlapping its start: clipped to its first page. */
	assert_true(fb_track_page_rows(MAP - PAGE, MAP + PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 0);
	assert_int_equal(y1, 1);
	/* The whole address space: the whole frame. */
	assert_true(fb_track_page_rows(0, UINT64_MAX, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_int_equal(y0, 0);
	assert_int_equal(y1, HEIGHT);
	/* A page of the other (hidden) frame of a double-buffered mapping. */
	assert_false(fb_track_page_rows(MAP + FB, MAP + FB + PAGE, MAP, 2 * FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	/* A mapping that wraps, no line, no rows. */
	assert_false(fb_track_page_rows(MAP, MAP + PAGE, UINT64_MAX - PAGE + 1, 2 * PAGE, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_false(fb_track_page_rows(MAP, MAP + PAGE, MAP, FB, 0, 0, 0, HEIGHT, &y0, &y1));
	assert_false(fb_track_page_rows(MAP, MAP + PAGE, MAP, FB, 0, 0, LINE, 0, &y0, &y1));
	/* Empty and reversed ranges. */
	assert_false(fb_track_page_rows(MAP + PAGE, MAP + PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
	assert_false(fb_track_page_rows(MAP + 2 * PAGE, MAP + PAGE, MAP, FB, 0, 0, LINE, HEIGHT, &y0, &y1));
}

/* A full vector, or a walk that stopped short, may have missed written pages. */
static void test_scan_complete(void **state) {
	(void)state;
	assert_true(fb_track_scan_complete(0, 16, MAP + FB, MAP + FB));
	assert_true(fb_track_scan_complete(15, 16, MAP + FB, MAP + FB));
	assert_false(fb_track_scan_complete(16, 16, MAP + FB, MAP + FB));
	assert_false(fb_track_scan_complete(17, 16, MAP + FB, MAP + FB));
	assert_false(fb_track_scan_complete(3, 16, MAP + PAGE, MAP + FB));
	assert_false(fb_track_scan_complete(3, 16, MAP + FB + PAGE, MAP + FB));
}

/* The part of a mapping that shows the visible frame, in whole pages. */
static void test_frame_span(void **state) {
	uint64_t start = 0, end = 0;

	(void)state;
	/* A mapping of both frames, the first one visible: its first half. */
	assert_true(fb_track_frame_span(MAP, 2 * FB, 0, 0, FB, PAGE, &start, &end));
	assert_true(start == MAP && end == MAP + FB);
	/* Panned to the second frame. */
	assert_true(fb_track_frame_span(MAP, 2 * FB, 0, FB, FB, PAGE, &start, &end));
	assert_true(start == MAP + FB && end == MAP + 2 * FB);
	/* A frame starting inside a page: the page is scanned whole. */
	assert_true(fb_track_frame_span(MAP, 2 * FB, 0, 100 * LINE, FB, PAGE, &start, &end));
	assert_true(start == MAP + 100 * LINE / PAGE * PAGE && end == MAP + (100 * LINE + FB + PAGE - 1) / PAGE * PAGE);
	/* A mapping of the second frame only, the first visible: nothing. */
	assert_false(fb_track_frame_span(MAP, FB, FB, 0, FB, PAGE, &start, &end));
	/* Wrapping or empty. */
	assert_false(fb_track_frame_span(MAP, FB, 0, UINT64_MAX - 10, FB, PAGE, &start, &end));
	assert_false(fb_track_frame_span(MAP, FB, 0, 0, 0, PAGE, &start, &end));
	assert_false(fb_track_frame_span(MAP, FB, 0, 0, FB, 3000, &start, &end));
}

/* A pagemap's name, wherever procfs is mounted; nothing else. */
static void test_pagemap_name(void **state) {
	(void)state;
	assert_true(fb_track_pagemap_name("/proc/1/pagemap"));
	assert_true(fb_track_pagemap_name("/proc/4194304/pagemap"));
	assert_true(fb_track_pagemap_name("/var/lib/machines/c1/proc/17/pagemap"));
	assert_false(fb_track_pagemap_name("/proc/self/pagemap"));
	assert_false(fb_track_pagemap_name("/proc//pagemap"));
	assert_false(fb_track_pagemap_name("/proc/1/pagemapx"));
	assert_false(fb_track_pagemap_name("/proc/1/maps"));
	assert_false(fb_track_pagemap_name("/proc/12345678901/pagemap"));
	assert_false(fb_track_pagemap_name("1/pagemap"));
	assert_true(fb_track_pagemap_name("/1/pagemap"));
	assert_false(fb_track_pagemap_name("pipe:[1234]"));
	assert_false(fb_track_pagemap_name("anon_inode:[userfaultfd]"));
	assert_false(fb_track_pagemap_name(""));
	assert_false(fb_track_pagemap_name("/pagemap"));
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_rate_goes_to_scanning),
		cmocka_unit_test(test_slower_than_refresh_stays_tracked),
		cmocka_unit_test(test_jittery_full_rate_is_busy),
		cmocka_unit_test(test_sparse_changes_stay_tracked),
		cmocka_unit_test(test_pause_resets_the_run),
		cmocka_unit_test(test_quiet_goes_back_to_tracking),
		cmocka_unit_test(test_unchanged_while_tracking),
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_page_rows),
		cmocka_unit_test(test_page_rows_clipped),
		cmocka_unit_test(test_scan_complete),
		cmocka_unit_test(test_pagemap_name),
		cmocka_unit_test(test_frame_span),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
