/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/manager.h"

struct display_output;

/*
 * How often a blanked active persona may have the display powered down:
 * each time is a power sequence of the panel, and each one holds the event
 * loop (a blocking commit). Past the burst the display stays up, showing
 * black, until the next one is due.
 */
#define DISPLAY_POWER_DOWN_BURST 3
#define DISPLAY_POWER_DOWN_INTERVAL_USEC (2 * 1000000ull)

/*
 * How long devnsd waits at start for a display device that is not there
 * yet (its driver still loading): past that it fails, and its service
 * manager may start it again.
 */
#define DISPLAY_WAIT_SECONDS 10

/* The display class: its constructor, its core, and what the bus reads of it. Its files share display-internal.h. */
struct display_class;

/*
 * display/serve.c: the framebuffer class ([Display] set). Register it
 * with manager_add_class(display_class_base(dc)). Logs what fails.
 */
int display_class_new(struct manager *m, const struct conf *conf, struct display_class **ret);
/* What manager_add_class() takes. */
struct device_class *display_class_base(struct display_class *dc);
/*
 * Waits up to DISPLAY_WAIT_SECONDS for the display device the
 * configuration names, before anything of devnsd is up. 0 once it is
 * there (or with no device to wait for), or past the wait when the
 * personas' mode is known without it (Mode=, or the last run's mode after
 * a crash): display_class_new() then starts without it. -ETIMEDOUT,
 * -ECANCELED when devnsd is asked to stop meanwhile. Logs what fails.
 */
int display_wait_device(struct manager *m, const struct conf *conf);

/* The display device went away and has not come back: frames go to memory only. */
bool display_lost(const struct display_class *dc);

/* The display is powered down: its active persona blanked it. False without a display. */
bool display_powered_down(const struct display_class *dc);
/* Frames the display has shown since devnsd started (flips); 0 without a display (dc NULL). */
uint64_t display_frames_shown(const struct display_class *dc);
/* The display's buffers and the bytes of (video) memory they take; 0 without a display. */
unsigned int display_buffers(const struct display_class *dc, uint64_t *ret_bytes);
/*
 * The personas whose frames a switch shows with a flip, without copying
 * (at most max, into ret): the most recently shown first.
 */
size_t display_kept_frames(struct display_class *dc, struct persona **ret, size_t max);
/* Switches shown from a kept frame and by copying since devnsd started; 0 without a display. */
void display_switches_shown(const struct display_class *dc, uint64_t *ret_kept, uint64_t *ret_copied);

/*
 * A sealed memfd holding persona p's visible frame (XRGB8888), and its
 * size. -ENODEV when devnsd runs no display (dc NULL).
 */
int display_snapshot(struct display_class *dc, struct persona *p, int *ret_fd, uint32_t *ret_width,
		     uint32_t *ret_height, uint32_t *ret_stride);
