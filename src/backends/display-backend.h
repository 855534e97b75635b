/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fb-state.h"

/*
 * A display devnsd scans frames out to: DRM/KMS, a kernel fbdev, or memory
 * (headless). A backend owns up to DISPLAY_MAX_BUFFERS XRGB8888 buffers;
 * presenting copies the rows that changed into a buffer that is not being
 * shown (the back buffer) and flips to it, so the screen never shows half a
 * frame. Further buffers, the spares, keep the frames shown before the
 * last switches, most recent first, so that switching back to any of them
 * is a flip.
 */

#define DISPLAY_MAX_SPARES 8
#define DISPLAY_MAX_BUFFERS (2 + DISPLAY_MAX_SPARES)
#define DISPLAY_NO_BUFFER UINT32_MAX

struct display_buffer {
	uint8_t *map;
	uint32_t stride;
	uint32_t id;         /* the backend's (a DRM framebuffer id) */
	uint32_t stale0, stale1; /* rows older than the latest frame */
	/* Whose frame the buffer holds (0: nobody's), and which version of it: the caller's numbers. */
	uint64_t owner, owner_gen;
};

struct display_output;

/* How many spares a backend allocates: at most count, and at most bytes of memory for them all. */
struct display_spares {
	unsigned int count;
	uint64_t bytes;
};

/* The number of spares of frame_bytes each that the wish allows. */
unsigned int display_spares_allowed(const struct display_spares *want, uint64_t frame_bytes);

struct display_output_ops {
	/*
	 * Mandatory. Shows buffers[i]. Returns 1 when it is shown already, 0
	 * when the backend calls display_output_flip_done() later, or -errno.
	 */
	int (*flip)(struct display_output *b, unsigned int i);
	/* Optional. Handles b->fd being readable (flip completions). */
	int (*dispatch)(struct display_output *b);
	/*
	 * Optional. Powers the display down (DPMS off) or up again, showing
	 * the front buffer. No flip is asked for while it is down.
	 */
	int (*set_power)(struct display_output *b, bool on);
	/*
	 * Optional. Whether the device behind b has gone away, its driver
	 * having let go of it: the kernel answers b->fd with ENODEV.
	 */
	bool (*gone)(struct display_output *b);
	/* Mandatory. Releases the hardware and frees b. */
	void (*destroy)(struct display_output *b);
};

struct display_output {
	const struct display_output_ops *ops;
	const char *kind; /* "drm", "fbdev", "headless" */
	struct fb_mode mode;
	/* The screen's size where it is larger than mode, whose frames are shown in its middle; else 0. */
	uint32_t screen_width, screen_height;
	int fd; /* to watch for dispatch(); -1: none */
	struct display_buffer buffers[DISPLAY_MAX_BUFFERS];
	unsigned int n_buffers;
	/* Indices into buffers: what is shown and what the next frame goes into. With one buffer back == front. */
	unsigned int front, back;
	/* The spares, the most recently shown first. */
	unsigned int spares[DISPLAY_MAX_SPARES];
	unsigned int n_spares;
	bool flip_pending;
	/* Powered down by display_output_set_power(). */
	bool powered_down;
	/* While a flip is pending: the buffer shown until then, which may still be on screen. */
	unsigned int leaving;
	/* Between display_output_begin() and display_output_finish(): rows [copy_y, copy_y1) are still to copy. */
	bool copying;
	uint32_t copy_y0, copy_y, copy_y1;
	uint64_t n_flips;
	void (*flip_done)(void *userdata);
	void *userdata;
};

/*
 * Opens a DRM device: becomes master, takes the first connected connector,
 * a CRTC and the preferred mode, and shows a black dumb buffer. With width
 * x height: the mode of that size, else the preferred one (or the first)
 * that is larger, whose middle then shows the frames (screen_width and
 * screen_height say so); -ENODEV without any. Master is dropped when it is
 * freed.
 */
int display_drm_open(const char *path, uint32_t width, uint32_t height, const struct display_spares *spares,
		     struct display_output **ret);
/* Opens a kernel framebuffer device (XRGB8888 only) and draws into it directly. */
int display_fbdev_open(const char *path, struct display_output **ret);
/* A display in memory only, of the given size. */
int display_headless_new(uint32_t width, uint32_t height, const struct display_spares *spares,
			 struct display_output **ret);
/*
 * With hold, the headless display's flips stay pending until the caller
 * completes them with display_output_flip_done(), as a real display's do
 * at the next vblank.
 */
void display_headless_hold_flips(struct display_output *b, bool hold);

/*
 * Shows a frame: rows [y0, y1) of src (stride bytes a line, mode-sized)
 * changed since the last call; NULL src shows black. Copies what the next
 * buffer lacks and flips. -EBUSY while a flip is pending: call again
 * after flip_done.
 */
int display_output_present(struct display_output *b, const uint8_t *src, uint32_t stride, uint32_t y0,
			    uint32_t y1);

/*
 * The same in steps, so that a frame can be copied while other work goes
 * on: begin() takes the changed rows (-EBUSY while a flip is pending or a
 * copy is under way); copy() copies at most max_rows more of src and
 * returns 1 once the back buffer holds the whole frame, 0 before; finish()
 * flips to it. abort() gives up a copy under way: the back buffer keeps
 * those rows marked stale. src must stay the same frame from begin() to
 * finish().
 *
 * finish() with switching set shows another persona's frame: the frame
 * shown until then becomes the most recent spare, where there are spares,
 * and the least recent spare the back buffer.
 */
int display_output_begin(struct display_output *b, uint32_t y0, uint32_t y1);
int display_output_copy(struct display_output *b, const uint8_t *src, uint32_t stride, uint32_t max_rows);
int display_output_finish(struct display_output *b, bool switching);
/*
 * Instead of begin(): buffer i (the back buffer or a spare) holds the frame
 * to show already (a persona switched back to), every other buffer is
 * wholly stale. Nothing to copy: finish() flips to it, and the back buffer
 * until then becomes the least recent spare. -EBUSY as for begin(),
 * -EINVAL for the front buffer.
 */
int display_output_begin_reuse(struct display_output *b, unsigned int i);
/* The buffer that finish() flips to. */
struct display_buffer *display_output_back(struct display_output *b);
/* Whether buffer i is a spare. */
bool display_output_is_spare(const struct display_output *b, unsigned int i);
/*
 * Copies rows [y0, y1) of src into spare i, which must not be on screen:
 * -EBUSY while a flip away from it is pending (it may still be shown),
 * -EINVAL when i is not a spare.
 */
int display_output_stage(struct display_output *b, unsigned int i, const uint8_t *src, uint32_t stride, uint32_t y0,
			 uint32_t y1);
/* Bytes of (video) memory one buffer takes (a whole screen, where frames are shown in its middle). */
uint64_t display_output_frame_bytes(const struct display_output *b);
/* Bytes of (video) memory the buffers take. */
uint64_t display_output_memory(const struct display_output *b);
void display_output_abort(struct display_output *b);

/* The frame on screen (the front buffer), for tests and screenshots. */
const struct display_buffer *display_output_front(const struct display_output *b);

/* For backends: the pending flip completed. Calls b->flip_done. */
void display_output_flip_done(struct display_output *b);

/* For backends: marks every buffer wholly stale. */
void display_output_init_buffers(struct display_output *b);

/* Handles b->fd becoming readable. */
int display_output_dispatch(struct display_output *b);

/*
 * Powers the display down, or up showing the front buffer. -EBUSY while a
 * flip is pending or a copy is under way; -EOPNOTSUPP for a backend that
 * cannot, which then stays up. A display that fails to come up is taken to
 * be up all the same.
 */
int display_output_set_power(struct display_output *b, bool on);

/* Whether the device behind b has gone away; never for a backend that cannot tell (headless). */
bool display_output_gone(struct display_output *b);

struct display_output *display_output_free(struct display_output *b);
static inline void display_output_freep(struct display_output **b) {
	display_output_free(*b);
}
