/* SPDX-License-Identifier: MIT */
/*
 * Presenting: what of the active persona's frame reaches the screen, and
 * when. The files above tell it what changed: display/class.c (fb0's
 * writes and pans, card0's scanout), display/state.c (what a restart took
 * back) and the mmap sockets (display/socket.c, display/track.c).
 *
 * Every persona draws into its own shadow framebuffer (a memfd); only the
 * active persona's changes are presented. Presenting copies the changed
 * rows into the display's back buffer and flips, one flip at a time; what
 * changes while a copy or a flip is under way is presented after it.
 * Writes are presented once a refresh; pans, blanking and vsync waits of a
 * mapped frame at once. Their copy runs in steps between requests, so the
 * program that drew goes on drawing meanwhile. A switch presents the new
 * persona's whole visible frame in one go and one flip.
 *
 * A mapping whose program sent a userfaultfd is tracked
 * (display/track.c): write-protected while unchanged, so that
 * nothing runs until a write faults; the refresh after a fault protects
 * the mapping again and then scans the frame, once. Where the kernel
 * resolves write faults itself (asynchronous write-protection, 6.7) no
 * write wakes devnsd: each refresh asks the kernel which pages were
 * written since the last one (protecting them again) and takes only
 * their rows, without hashing the rest. After FB_TRACK_POLL_QUIET_SCANS
 * refreshes that found nothing the mappings are parked (display/track.c):
 * the next write faults, as without asynchronous protection, and the
 * frame is hashed whole once, for what was written meanwhile. While a
 * program changes its frame at (nearly) every refresh, or while any
 * mapping of the frame is not tracked, the frame is scanned every refresh
 * instead (fb-track.h says when tracking resumes).
 *
 * Scanning: each row of the mapped frame is hashed (XXH64) and compared
 * with the hash of the row as last taken (also at a vsync wait, when that
 * refresh has not scanned yet and the frame may have changed); changed
 * rows are taken into a copy of the frame and presented from that copy,
 * so the screen shows exactly what was hashed even while the program goes
 * on drawing. A frame that does not change costs one read of it a refresh
 * and no flip. A change whose row hashes the same as before (about one in
 * 2^64) waits for the next change of that row or the next pan. Pans
 * present the whole frame without hashing.
 *
 * Power follows the active persona's blanking, as DPMS follows FBIOBLANK
 * on the kernel's own fbdev: once the blanked persona's black frame is on
 * screen and nothing is under way, the display goes down; nothing is
 * presented while the active persona stays blanked, and the display comes
 * up again before anything else is shown.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "display/display-internal.h"
#include "display-backend.h"
#include "log.h"

/* Bytes copied per step of an incremental present: short enough not to hold a request up. */
#define COPY_STEP_BYTES (128u * 1024u)
/* Spans of written rows a scan of asynchronously tracked mappings returns at most; more count as the whole frame. */
#define WRITTEN_SPANS 32u

void display_add_damage(struct display_class *dc, uint32_t y0, uint32_t y1) {
	if (y0 >= y1)
		return;
	if (dc->damage.y0 >= dc->damage.y1)
		dc->damage = (struct fb_rows){ y0, y1 };
	else
		dc->damage = (struct fb_rows){ MIN(dc->damage.y0, y0), MAX(dc->damage.y1, y1) };
}

void display_damage_all(struct display_class *dc) {
	display_add_damage(dc, 0, dc->backend->mode.height);
}

/*
 * Takes the rows of the active persona's mapped frame that changed since
 * the last scan (every row when the last scan is not valid) into dc->snap,
 * with their hashes; *ret: the rows taken. False without room to keep them.
 */
static bool take_rows(struct display_class *dc, struct fb_rows *ret) {
	uint32_t line = 0, height = dc->backend->mode.height, y0 = height, y1 = 0;
	size_t width = (size_t)dc->backend->mode.width * 4;
	const uint8_t *src = display_node_frame(dc->active, &line);
	uint64_t *hashes;
	uint8_t *snap;

	/* Only fb0's frame is scanned, while it is shown and not blanked. */
	if (!src || display_drm_owns(dc->active)) {
		dc->scan_valid = false;
		return false;
	}
	if (dc->scan_rows < height) {
		hashes = reallocarray(dc->scan, height, sizeof(*hashes));
		if (hashes)
			dc->scan = hashes;
		snap = hashes ? reallocarray(dc->snap, height, line) : NULL;
		if (!snap) {
			dc->scan_valid = false;
			return false;
		}
		dc->snap = snap;
		dc->scan_rows = height;
		dc->scan_valid = false;
	}
	for (uint32_t y = 0; y < height; y++) {
		size_t off = (size_t)y * line;
		if (dc->scan_valid && XXH64(src + off, width, 0) == dc->scan[y])
			continue;
		memcpy(dc->snap + off, src + off, width);
		/* The program may be drawing: the hash is of what was taken. */
		dc->scan[y] = XXH64(dc->snap + off, width, 0);
		y0 = MIN(y0, y);
		y1 = y + 1;
	}
	dc->scan_valid = true;
	*ret = (struct fb_rows){ y0, y1 };
	return true;
}

/*
 * Takes the rows of the spans the kernel says were written into dc->snap,
 * those whose hash changed; the rest of the frame is as the last scan took
 * it. The whole frame is scanned instead while the last scan is not valid.
 * A written row has most likely changed: it is copied first and hashed
 * once, as taken. One that hashes as before was taken unchanged and is
 * no damage.
 */
static bool take_written(struct display_class *dc, const struct fb_rows *spans, size_t n, struct fb_rows *ret) {
	uint32_t line = 0, height = dc->backend->mode.height, y0 = height, y1 = 0;
	size_t width = (size_t)dc->backend->mode.width * 4;
	const uint8_t *src = display_node_frame(dc->active, &line);

	if (!src || display_drm_owns(dc->active) || !dc->scan_valid || dc->scan_rows < height)
		return take_rows(dc, ret);
	for (size_t i = 0; i < n; i++)
		for (uint32_t y = spans[i].y0; y < MIN(spans[i].y1, height); y++) {
			size_t off = (size_t)y * line;
			uint64_t h;

			memcpy(dc->snap + off, src + off, width);
			h = XXH64(dc->snap + off, width, 0);
			if (h == dc->scan[y])
				continue;
			dc->scan[y] = h;
			y0 = MIN(y0, y);
			y1 = MAX(y1, y + 1);
		}
	*ret = (struct fb_rows){ y0, y1 };
	return true;
}

/*
 * Rows of the active persona's mapped frame that changed since the last
 * scan are taken into dc->snap and become damage. The first scan after a
 * switch, pan, blank, write or new mapping takes the whole frame. When
 * every mapping is tracked asynchronously only the rows of the pages
 * written since the last scan are looked at.
 */
bool display_scan_mapped(struct display_class *dc) {
	const struct display_transport_ops *t = dc->transport;
	struct fb_rows rows = { 0, 0 }, spans[WRITTEN_SPANS];
	size_t n = 0;
	bool taken;
	int r = -EOPNOTSUPP;

	dc->scanned = true;
	if (t && t->written && !display_drm_owns(dc->active))
		r = t->written(dc->active, dc->backend->mode.height, spans, ELEMENTSOF(spans), &n);
	taken = r == 0 ? take_written(dc, spans, n, &rows) : take_rows(dc, &rows);
	if (r == -EOPNOTSUPP)
		dc->poll_empty = 0;
	else
		dc->poll_empty = rows.y0 < rows.y1 || !taken ? 0 : dc->poll_empty + 1;
	if (taken && dc->poll_empty >= FB_TRACK_POLL_QUIET_SCANS && t->park) {
		struct fb_rows more;

		/* Unchanged for a while: the next write is to fault; what came before it is taken now. */
		t->park(dc->active);
		dc->poll_empty = 0;
		if (take_rows(dc, &more) && more.y0 < more.y1)
			rows = rows.y0 < rows.y1 ? (struct fb_rows){ MIN(rows.y0, more.y0), MAX(rows.y1, more.y1) } : more;
	}
	if (!taken) {
		/* Without room to compare, everything is new every time. */
		rows = (struct fb_rows){ 0, dc->backend->mode.height };
	}
	display_add_damage(dc, rows.y0, rows.y1);
	/* The frame is another one: no buffer holds it yet. */
	if (rows.y0 < rows.y1)
		dc->active->gen++;
	return rows.y0 < rows.y1;
}

/*
 * The active persona's mapped frame was shown from a buffer that kept it
 * (unchanged since, every mapping write-protected): the scan starts from
 * it, so that the next refresh finds nothing new to copy.
 */
static void scan_kept(struct display_class *dc) {
	struct fb_rows rows;

	dc->scan_valid = false;
	take_rows(dc, &rows);
}

bool display_mapped_unseen(struct display_class *dc) {
	const struct display_transport_ops *t = dc->transport;

	if (!dc->active || display_node_mappers(dc->active) == 0 || display_drm_owns(dc->active))
		return false;
	return !dc->scan_valid || !t || !t->n_unseen || t->n_unseen(dc->active) > 0;
}

/*
 * The refresh's scan of the active persona's mapped frame. Tracked
 * mappings are protected first, so that what is written after the scan
 * faults; while the frame is scanned every refresh, they are not.
 */
static void scan_refresh(struct display_class *dc, uint64_t usec) {
	const struct display_transport_ops *t = dc->transport;
	struct display_node *dn = dc->active;
	bool trackable = t && t->arm && t->n_untracked && t->n_untracked(dn) == 0;
	bool changed;

	if (t && t->arm)
		t->arm(dn, trackable && !dc->track.scanning);
	changed = display_scan_mapped(dc);
	if (trackable && fb_track_policy_scanned(&dc->track, usec, dc->refresh_usec, changed))
		t->arm(dn, false);
}

/* The last switch is on screen (or cannot get there): its callers get their answers. */
void display_switch_shown(struct display_class *dc) {
	switch_release(&dc->switch_flip);
	switch_release(&dc->switch_copy);
}

/* The copy under way is complete: flip to it. switching: it shows the last switch. */
static void finish_copy(struct display_class *dc, bool switching) {
	struct display_output *b = dc->backend;
	int r;

	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(dc->copy, SD_EVENT_OFF);
	r = display_output_finish(b, switching);
	if (r < 0)
		log_warning_errno(r, "%s: cannot show the frame: %m", dc->device);
	else {
		b->buffers[b->front].owner = dc->copy_owner;
		b->buffers[b->front].owner_gen = dc->copy_gen;
	}
	if (switching) {
		if (b->flip_pending) {
			/* Shown once the flip completes. */
			switch_hold(&dc->switch_flip, dc->switch_copy);
			switch_release(&dc->switch_copy);
		} else
			display_switch_shown(dc);
	}
	/* A backend that shows at once has nothing to wait for. */
	if (!b->flip_pending) {
		display_flush(dc);
		display_drm_presented(dc);
	}
}

/* Completes the copy under way from the frame it started with. */
void display_complete_copy(struct display_class *dc, bool switching) {
	if (!dc->backend->copying)
		return;
	display_output_copy(dc->backend, dc->copy_src, dc->copy_stride, UINT32_MAX);
	finish_copy(dc, switching);
}

int display_on_copy(sd_event_source *s, void *userdata) {
	struct display_class *dc = userdata;

	(void)s;
	if (!dc->backend->copying) {
		/* Cannot fail: sd-event reports no failure turning a source off. */
		(void)sd_event_source_set_enabled(dc->copy, SD_EVENT_OFF);
		return 0;
	}
	if (display_output_copy(dc->backend, dc->copy_src, dc->copy_stride, dc->copy_rows) > 0)
		finish_copy(dc, false);
	return 0;
}

/* Gives up the copy under way, when its frame is no longer the one to show. */
void display_abort_copy(struct display_class *dc) {
	display_output_abort(dc->backend);
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(dc->copy, SD_EVENT_OFF);
}

/*
 * Whether every change of dn's frame counts in dn->gen: its writes and
 * pans do, and so do its mappings' while each is tracked and
 * write-protected (a fault counts). Other mappings change it unseen.
 */
static bool node_changes_seen(struct display_node *dn) {
	const struct display_transport_ops *t = dn->class->transport;

	if (display_node_mappers(dn) == 0)
		return true;
	return t && t->n_unseen && t->n_unseen(dn) == 0;
}

/*
 * Buffer i holds the persona's frame as it is: shown before and unchanged
 * since, or kept up to date in a spare.
 */
static bool buffer_holds(struct display_class *dc, unsigned int i, struct display_node *dn) {
	const struct display_buffer *buf;

	if (i == DISPLAY_NO_BUFFER || i == dc->backend->front)
		return false;
	buf = &dc->backend->buffers[i];
	return buf->owner == dn->serial && buf->owner_gen == dn->gen && node_changes_seen(dn);
}

/* The spare that holds the persona's frame, or DISPLAY_NO_BUFFER. */
static unsigned int spare_holding(struct display_class *dc, struct display_node *dn) {
	const struct display_output *b = dc->backend;

	for (unsigned int k = 0; k < b->n_spares; k++)
		if (buffer_holds(dc, b->spares[k], dn))
			return b->spares[k];
	return DISPLAY_NO_BUFFER;
}

/* A buffer that holds the persona's frame already: a spare, or the back buffer. */
static unsigned int buffer_holding(struct display_class *dc, struct display_node *dn) {
	unsigned int i = spare_holding(dc, dn);

	if (i != DISPLAY_NO_BUFFER)
		return i;
	if (buffer_holds(dc, dc->backend->back, dn))
		return dc->backend->back;
	return DISPLAY_NO_BUFFER;
}

size_t display_kept_frames(struct display_class *dc, struct persona **ret, size_t max) {
	const struct display_output *b = dc->backend;
	unsigned int order[DISPLAY_MAX_BUFFERS];
	size_t n_order = 0, n = 0;
	struct display_node *dn;

	for (unsigned int k = 0; k < b->n_spares; k++)
		order[n_order++] = b->spares[k];
	if (b->back != b->front)
		order[n_order++] = b->back;
	for (size_t k = 0; k < n_order && n < max; k++)
		LIST_FOREACH(dn, &dc->nodes, link)
			if (dn != dc->active && buffer_holds(dc, order[k], dn)) {
				ret[n++] = dn->persona;
				break;
			}
	return n;
}

static bool active_dark(struct display_class *dc) {
	return dc->active && display_node_dark(dc->active);
}

/*
 * Down once the blanked persona's black frame is shown and nothing is under
 * way, as often as power_downs lets it.
 */
static void power_settle(struct display_class *dc) {
	struct display_output *b = dc->backend;
	uint64_t now = 0;
	int r;

	if (dc->stays_up || b->powered_down || !active_dark(dc) || b->flip_pending || b->copying ||
	    dc->damage.y0 < dc->damage.y1)
		return;
	sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now);
	if (!ratelimit_take(&dc->power_downs, now)) {
		/* Black until the next power-down is due. */
		sd_event_source_set_time(dc->power_due, ratelimit_next(&dc->power_downs));
		/* Cannot fail while the loop runs: turning a timer on makes no system call. */
		(void)sd_event_source_set_enabled(dc->power_due, SD_EVENT_ONESHOT);
		return;
	}
	r = display_output_set_power(b, false);
	if (r >= 0) {
		signal_emit(&dc->base.manager->events.display_power, &(bool){ true });
		return;
	}
	dc->stays_up = true;
	if (r != -EOPNOTSUPP)
		log_warning_errno(r, "%s: cannot power the display down; it stays up, showing black: %m", dc->device);
}

/*
 * While the display is down: true if the active persona is blanked still,
 * so that nothing is to be shown; else powers it up.
 */
static bool power_stays_down(struct display_class *dc) {
	int r;

	if (!dc->backend->powered_down)
		return false;
	if (active_dark(dc)) {
		/* Its frames are black, and nobody sees them: a switch to it is shown already. */
		dc->damage = (struct fb_rows){ 0, 0 };
		if (dc->urgent) {
			dc->urgent = false;
			display_switch_shown(dc);
		}
		return true;
	}
	r = display_output_set_power(dc->backend, true);
	if (r < 0) {
		log_warning_errno(r, "%s: cannot power the display up; it is no longer powered down: %m", dc->device);
		dc->stays_up = true;
	}
	signal_emit(&dc->base.manager->events.display_power, &(bool){ false });
	return false;
}

/*
 * Starts presenting the active persona's pending rows unless a copy or a
 * flip is under way. An urgent present (a switch) copies in one go, or
 * flips to the back buffer at once when that holds the frame already.
 */
void display_flush(struct display_class *dc) {
	struct display_node *dn = dc->active;
	unsigned int held;
	int r;

	if (!dn) {
		/* Nothing to show for the persona switched to. */
		if (dc->urgent) {
			dc->urgent = false;
			display_switch_shown(dc);
		}
		return;
	}
	if (power_stays_down(dc))
		return;
	if (dc->damage.y0 >= dc->damage.y1 || dc->backend->flip_pending || dc->backend->copying) {
		power_settle(dc);
		return;
	}
	dc->copy_owner = dn->serial;
	dc->copy_gen = dn->gen;
	held = dc->urgent ? buffer_holding(dc, dn) : DISPLAY_NO_BUFFER;
	if (held != DISPLAY_NO_BUFFER && display_output_begin_reuse(dc->backend, held) == 0) {
		dc->damage = (struct fb_rows){ 0, 0 };
		dc->urgent = false;
		dc->switches_kept++;
		finish_copy(dc, true);
		/*
		 * After the flip is asked for: the scan's copy of the frame is no
		 * part of the switch. A flip shown at once may have answered the
		 * switch and let another one start: then dn is no longer active.
		 */
		if (display_node_mappers(dn) > 0 && !display_drm_owns(dn) && dn->fb->state.blank == FB_BLANK_UNBLANK &&
		    dc->active == dn)
			scan_kept(dc);
		return;
	}
	r = display_output_begin(dc->backend, dc->damage.y0, dc->damage.y1);
	if (r < 0)
		return;
	/* Until the copy completes the back buffer holds nobody's frame whole. */
	display_output_back(dc->backend)->owner = 0;
	dc->damage = (struct fb_rows){ 0, 0 };
	/* A scanned mapped frame is shown from what the scan took. */
	dc->copy_src = display_node_frame(dn, &dc->copy_stride);
	if (!dc->copy_src)
		dc->copy_stride = dc->backend->mode.width * 4;
	else if (dc->scan_valid && display_node_mappers(dn) > 0 && !display_drm_owns(dn))
		dc->copy_src = dc->snap;
	if (dc->urgent) {
		dc->urgent = false;
		dc->switches_copied++;
		display_complete_copy(dc, true);
		return;
	}
	dc->copy_rows = MAX(1u, COPY_STEP_BYTES / MAX(1u, dc->copy_stride));
	/* Cannot fail while the loop runs: turning a defer source on makes no system call. */
	(void)sd_event_source_set_enabled(dc->copy, SD_EVENT_ON);
}

static bool tick_wanted(struct display_class *dc) {
	struct display_node *dn;

	if (display_mapped_unseen(dc))
		return true;
	if (dc->damage.y0 < dc->damage.y1)
		return true;
	LIST_FOREACH(dn, &dc->nodes, link)
		if (display_node_vsync_waiters(dn) > 0)
			return true;
	return false;
}

void display_update_tick(struct display_class *dc) {
	int enabled = SD_EVENT_OFF;

	sd_event_source_get_enabled(dc->tick, &enabled);
	if (enabled != SD_EVENT_OFF || !tick_wanted(dc))
		return;
	sd_event_source_set_time_relative(dc->tick, dc->refresh_usec);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(dc->tick, SD_EVENT_ONESHOT);
}

/* The tick after the one due at usec: one period later, whatever the tick's own work took. */
static void next_tick(struct display_class *dc, uint64_t usec) {
	uint64_t now = 0, next = usec + dc->refresh_usec;

	if (!tick_wanted(dc))
		return;
	sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now);
	/* Behind by a period or more: the next period boundary after now. */
	if (next <= now)
		next += (now - next) / dc->refresh_usec * dc->refresh_usec + dc->refresh_usec;
	sd_event_source_set_time(dc->tick, next);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(dc->tick, SD_EVENT_ONESHOT);
}

/* Once a refresh: written and mapped changes of the active persona go to the screen, vsync waiters wake up. */
int display_on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
	struct display_class *dc = userdata;
	struct display_node *dn;

	(void)s;
	dc->tick_due_usec = usec;
	dc->scanned = false;
	if (dc->active && display_node_mappers(dc->active) > 0) {
		/* While a program pans, each refresh presents its whole frame, as each pan does. */
		if (dc->presented_whole) {
			dc->presented_whole = false;
			dc->scan_valid = false;
			display_damage_all(dc);
		} else if (display_mapped_unseen(dc))
			scan_refresh(dc, usec);
	}
	display_flush(dc);
	LIST_FOREACH(dn, &dc->nodes, link)
		/* The active persona's waiters wake when the present under way completes. */
		if (!(dn == dc->active && (dc->backend->flip_pending || dc->backend->copying)))
			display_node_vsync(dn);
	next_tick(dc, usec);
	return 0;
}

int display_on_power_due(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)s;
	(void)usec;
	display_flush(userdata);
	return 0;
}

void display_on_flip_done(void *userdata) {
	struct display_class *dc = userdata;

	if (dc->switch_flip)
		display_switch_shown(dc);
	if (dc->active)
		display_node_vsync(dc->active);
	display_flush(dc);
	display_drm_presented(dc);
}

int display_on_backend(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct display_class *dc = userdata;
	int r;

	(void)s;
	(void)fd;
	(void)revents;
	r = display_output_dispatch(dc->backend);
	if (r < 0)
		log_warning_errno(r, "%s: %m", dc->device);
	return 0;
}

void display_node_mappers_changed(struct display_node *dn) {
	struct display_class *dc = dn->class;

	dn->gen++;
	if (dn == dc->active) {
		dc->scan_valid = false;
		display_damage_all(dc);
		display_flush(dc);
	}
	display_update_tick(dc);
}

/*
 * A tracked mapping was written to: the tick comes at the next beat of
 * the refresh, as it would while scanning, so that a program drawing
 * slower than the display has each frame taken once, whether tracked or
 * scanned.
 */
void display_node_mapped_written(struct display_node *dn) {
	struct display_class *dc = dn->class;
	uint64_t now = 0, due;
	int enabled = SD_EVENT_OFF;

	/* A background persona's kept frame is stale from now on. */
	dn->gen++;
	if (dn != dc->active)
		return;
	sd_event_source_get_enabled(dc->tick, &enabled);
	if (enabled != SD_EVENT_OFF || !tick_wanted(dc))
		return;
	sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now);
	if (dc->tick_due_usec && dc->tick_due_usec <= now)
		due = now + dc->refresh_usec - (now - dc->tick_due_usec) % dc->refresh_usec;
	else
		due = now + dc->refresh_usec;
	sd_event_source_set_time(dc->tick, due);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(dc->tick, SD_EVENT_ONESHOT);
}

/*
 * A background persona wrote rows: when a spare keeps its frame, they go
 * there too, so that switching to it stays a flip. Returns the spare that
 * holds the frame as written, or DISPLAY_NO_BUFFER.
 */
unsigned int display_stage_written(struct display_class *dc, struct display_node *dn, const struct fb_rows *visible) {
	unsigned int i = spare_holding(dc, dn);
	uint32_t stride = 0;
	const uint8_t *src;

	if (i == DISPLAY_NO_BUFFER)
		return i;
	/* A blanked persona shows black whatever it writes. */
	src = display_node_frame(dn, &stride);
	if (!src || visible->y0 >= visible->y1)
		return i;
	if (display_output_stage(dc->backend, i, src, stride, visible->y0, visible->y1) < 0)
		return DISPLAY_NO_BUFFER;
	return i;
}

void display_node_changed(struct display_node *dn, const struct fb_rows *visible, bool whole) {
	struct display_class *dc = dn->class;
	unsigned int staged = DISPLAY_NO_BUFFER;

	dn->gen++;
	if (dn != dc->active) {
		staged = whole ? DISPLAY_NO_BUFFER : display_stage_written(dc, dn, visible);
		if (staged != DISPLAY_NO_BUFFER)
			dc->backend->buffers[staged].owner_gen = dn->gen;
		display_update_tick(dc);
		return;
	}
	if (whole) {
		dc->scan_valid = false;
		display_damage_all(dc);
		display_flush(dc);
		display_update_tick(dc);
		return;
	}
	display_add_damage(dc, visible->y0, visible->y1);
	display_flush(dc);
	display_update_tick(dc);
}
