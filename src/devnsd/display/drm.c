/* SPDX-License-Identifier: MIT */
/*
 * A persona's card0 in the display core: its KMS state (drm-node.h), what
 * its scanout shows, and its vblanks. It calls no other file of the class:
 * display/class.c hears of card0's scanout (drm-node.h's events) and
 * hands the news to this file, to the present path and to the restart.
 *
 * While card0's CRTC has a mode, the persona shows card0's scanout, as a
 * DRM master's scanout wins over the kernel's fbdev emulation; once it has
 * none (the master turned it off or went away), fb0's frame is shown again.
 * The scanout's buffer is mapped read-only into devnsd, and what a commit,
 * a flip or DIRTYFB changed reaches the present path (display/present.c)
 * as rows of the visible frame, like a write to fb0: the active persona's
 * go to the screen, a background persona's to the spare that keeps its
 * frame, if any.
 *
 * Vblanks are virtual, one a refresh, and run only while something waits
 * for one (a flip, a vblank event, a blocking WAIT_VBLANK): an idle
 * client costs no wakeups. The active persona's vblank also waits until
 * the present of its frame is on screen, so that a flip completes once
 * the real display shows it.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <drm_fourcc.h>

#include "display/display-internal.h"
#include "display-backend.h"
#include "log.h"
#include "util.h"

bool display_drm_owns(const struct display_node *dn) {
	return dn->drm && dn->drm_shown.enabled;
}

/* No buffer is current; the mappings stay for the next flip back to them. */
static void unmap_scanout(struct display_node *dn) {
	dn->drm_map = NULL;
	dn->drm_map_size = 0;
	dn->drm_map_serial = 0;
}

static void unmap_all(struct display_node *dn) {
	unmap_scanout(dn);
	for (size_t i = 0; i < DISPLAY_CARD_MAPS; i++) {
		struct display_card_map *m = &dn->drm_maps[i];

		if (m->map)
			munmap((void *)m->map, m->size);
		*m = (struct display_card_map){ 0 };
	}
}

/* Unmaps the buffers that are gone: what devnsd holds mapped is memory the persona's budget counts. */
static void unmap_gone(struct display_node *dn) {
	for (size_t i = 0; i < DISPLAY_CARD_MAPS; i++) {
		struct display_card_map *m = &dn->drm_maps[i];

		if (!m->map || m->map == dn->drm_map || drm_node_has_buffer(dn->drm, m->serial))
			continue;
		munmap((void *)m->map, m->size);
		*m = (struct display_card_map){ 0 };
	}
}

/* Makes memfd's mapping of serial current: one kept, or a new one in the least recently used slot. */
static bool map_buffer(struct display_node *dn, int memfd, uint64_t size, uint64_t serial) {
	struct display_card_map *slot = &dn->drm_maps[0];
	void *p;

	for (size_t i = 0; i < DISPLAY_CARD_MAPS; i++) {
		struct display_card_map *m = &dn->drm_maps[i];

		if (m->map && m->serial == serial) {
			slot = m;
			goto found;
		}
		if (!m->map || (slot->map && m->used < slot->used))
			slot = m;
	}
	if (memfd < 0 || size == 0 || size > SIZE_MAX)
		return false;
	/* Populated at once: a frame is read whole, and a fault a page costs more. */
	p = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED | MAP_POPULATE, memfd, 0);
	if (p == MAP_FAILED) {
		log_warning_errno(errno, "%s: cannot map the scanout's buffer: %m", dn->drm_path);
		return false;
	}
	if (slot->map)
		munmap((void *)slot->map, slot->size);
	*slot = (struct display_card_map){ .map = p, .size = (size_t)size, .serial = serial };
found:
	slot->used = ++dn->drm_maps_clock;
	dn->drm_map = slot->map;
	dn->drm_map_size = slot->size;
	dn->drm_map_serial = slot->serial;
	return true;
}

/* Maps the scanout's buffer, unless it is mapped already: false when it cannot be (shown black). */
static bool map_scanout(struct display_node *dn, const struct drm_scanout *s) {
	if (dn->drm_map && dn->drm_map_serial == s->mem_serial)
		return true;
	return map_buffer(dn, s->memfd, s->mem_size, s->mem_serial);
}

const uint8_t *display_drm_frame(const struct display_node *dn, uint32_t *ret_stride) {
	const struct drm_scanout *s = &dn->drm_shown;
	uint64_t at;

	if (!s->active || !s->fb_id || !dn->drm_map || dn->drm_map_serial != s->mem_serial)
		return NULL;
	at = (uint64_t)s->offset + (uint64_t)s->src_y * s->pitch + (uint64_t)s->src_x * 4;
	/* The node checked that the mode fits the framebuffer; this keeps a reader inside the mapping whatever it let through. */
	if (at + (uint64_t)(s->mode.vdisplay ? s->mode.vdisplay - 1 : 0) * s->pitch + (uint64_t)s->mode.hdisplay * 4 >
	    dn->drm_map_size)
		return NULL;
	*ret_stride = s->pitch;
	return dn->drm_map + at;
}

bool display_drm_dark(const struct display_node *dn) {
	return !dn->drm_shown.active;
}

/* The rows of the visible frame the damage covers (n_damage 0: all of them). */
static struct fb_rows damage_rows(const struct display_node *dn, const struct drm_scanout_news *news) {
	const struct drm_scanout *s = news->scanout;
	uint32_t height = s->mode.vdisplay, y0 = UINT32_MAX, y1 = 0;

	if (news->n_damage == 0)
		return (struct fb_rows){ 0, dn->class->backend->mode.height };
	for (size_t i = 0; i < news->n_damage; i++) {
		const struct drm_mode_rect *r = &news->damage[i];
		int64_t top = (int64_t)r->y1 - s->src_y, bottom = (int64_t)r->y2 - s->src_y;

		top = MAX(top, 0);
		bottom = MIN(bottom, (int64_t)height);
		if (top >= bottom)
			continue;
		y0 = MIN(y0, (uint32_t)top);
		y1 = MAX(y1, (uint32_t)bottom);
	}
	return y0 < y1 ? (struct fb_rows){ y0, y1 } : (struct fb_rows){ 0, 0 };
}

bool display_drm_moves(const struct display_node *dn, const struct drm_scanout *s) {
	return !dn->drm_shown.enabled || !s->enabled || dn->drm_shown.active != s->active ||
	       dn->drm_shown.mem_serial != s->mem_serial || dn->drm_shown.fb_id != s->fb_id ||
	       dn->drm_shown.src_x != s->src_x || dn->drm_shown.src_y != s->src_y;
}

struct fb_rows display_drm_show(struct display_node *dn, const struct drm_scanout_news *news, bool *whole) {
	const struct drm_scanout *s = news->scanout;

	if (dn->drm_ghost) {
		dn->drm_ghost = false;
		*whole = true;
	}
	dn->drm_shown = *s;
	dn->drm_shown.memfd = -1;
	if (s->enabled && s->active && s->fb_id)
		map_scanout(dn, s);
	else
		unmap_scanout(dn);
	unmap_gone(dn);
	return *whole ? (struct fb_rows){ 0, dn->class->backend->mode.height } : damage_rows(dn, news);
}

/* The active persona's present is under way: its vblank waits until the screen shows it. */
static bool present_pending(const struct display_node *dn) {
	const struct display_class *dc = dn->class;

	return dn == dc->active && (dc->backend->flip_pending || dc->backend->copying);
}

static void arm_vblank(struct display_node *dn, uint64_t usec) {
	sd_event_source_set_time(dn->drm_vblank, usec);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(dn->drm_vblank, SD_EVENT_ONESHOT);
}

static void vblank_now(struct display_node *dn, uint64_t now) {
	const struct display_transport_ops *t = dn->class->transport;

	dn->drm_vblank_held = false;
	drm_node_vblank(dn->drm, now);
	if (t && t->drm_vblank)
		t->drm_vblank(dn);
}

static int on_vblank(sd_event_source *s, uint64_t usec, void *userdata) {
	struct display_node *dn = userdata;
	uint64_t period = dn->class->refresh_usec, now = 0, next;

	(void)s;
	if (!drm_node_wants_vblank(dn->drm))
		return 0;
	if (present_pending(dn)) {
		/* display_drm_presented() gives it. */
		dn->drm_vblank_held = true;
		return 0;
	}
	(void)sd_event_now(dn->class->base.manager->event, CLOCK_MONOTONIC, &now);
	vblank_now(dn, now);
	if (!drm_node_wants_vblank(dn->drm))
		return 0;
	next = usec + period;
	if (next <= now)
		next = now + period - (now - usec) % period;
	arm_vblank(dn, next);
	return 0;
}

/* Something waits for a vblank: the next one is a refresh from now. */
static void on_wants_vblank(struct listener *l, void *data) {
	struct display_node *dn = container_of(l, struct display_node, drm_vblank_listener);
	int enabled = SD_EVENT_OFF;
	uint64_t now = 0;

	(void)data;
	if (dn->drm_vblank_held)
		return;
	(void)sd_event_source_get_enabled(dn->drm_vblank, &enabled);
	if (enabled != SD_EVENT_OFF)
		return;
	(void)sd_event_now(dn->class->base.manager->event, CLOCK_MONOTONIC, &now);
	arm_vblank(dn, now + dn->class->refresh_usec);
}

void display_drm_presented(struct display_class *dc) {
	struct display_node *dn = dc->active;
	uint64_t now = 0;

	/* The display's flip is the active persona's vblank: what waits for one completes now. */
	if (!dn || !dn->drm || !(dn->drm_vblank_held || drm_node_wants_vblank(dn->drm)) || present_pending(dn))
		return;
	(void)sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now);
	vblank_now(dn, now);
	if (drm_node_wants_vblank(dn->drm))
		arm_vblank(dn, now + dc->refresh_usec);
}

void display_drm_released(struct display_node *dn) {
	/* A held vblank of a persona no longer active is due at once. */
	if (dn->drm && dn->drm_vblank_held && !present_pending(dn))
		arm_vblank(dn, 0);
}

int display_drm_new(struct display_node *dn) {
	struct display_class *dc = dn->class;
	int r;

	r = drm_node_new(&dn->drm, &(struct drm_node_config){
					   .mode = dn->fb->mode,
					   .one_mode = true,
					   .name = dn->persona->name,
					   .budget = dc->drm_budget,
					   .memory = dc->udmabuf >= 0 ? &drm_udmabuf_ops : NULL,
					   .memory_userdata = &dc->udmabuf,
					   .prime_caps = dc->udmabuf >= 0 ? DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT : 0,
				   });
	if (r < 0)
		return r;
	dn->drm_shown.memfd = -1;
	dn->drm_vblank_listener.notify = on_wants_vblank;
	signal_add(&drm_node_events(dn->drm)->vblank, &dn->drm_vblank_listener);
	r = sd_event_add_time(dc->base.manager->event, &dn->drm_vblank, CLOCK_MONOTONIC, 0, 1, on_vblank, dn);
	if (r < 0)
		return r;
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(dn->drm_vblank, SD_EVENT_OFF);
	return 0;
}

int display_drm_adopt_kept(struct display_node *dn, int fd, const struct display_card_kept *kept) {
	const struct fb_mode *mode = &dn->fb->mode;
	struct stat st;

	if (!dn->drm || dn->drm_shown.enabled)
		return -EBUSY;
	if (kept->width != mode->width || kept->height != mode->height || kept->pitch < (uint64_t)kept->width * 4)
		return -ESTALE;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0 || (uint64_t)st.st_size != kept->size ||
	    (uint64_t)kept->offset + (uint64_t)(kept->height - 1) * kept->pitch + (uint64_t)kept->width * 4 > kept->size)
		return -ESTALE;
	/* A serial of no buffer of this run: card0's first news replaces it. */
	if (!map_buffer(dn, fd, kept->size, UINT64_MAX))
		return -ENOMEM;
	dn->drm_shown = (struct drm_scanout){
		.enabled = true,
		.active = true,
		.mode = { .hdisplay = (uint16_t)kept->width, .vdisplay = (uint16_t)kept->height },
		.fb_id = UINT32_MAX,
		.format = DRM_FORMAT_XRGB8888,
		.fb_width = kept->width,
		.fb_height = kept->height,
		.pitch = kept->pitch,
		.offset = kept->offset,
		.memfd = -1,
		.mem_size = kept->size,
		.mem_serial = UINT64_MAX,
	};
	dn->drm_ghost = true;
	dn->drm_kept = *kept;
	dn->drm_kept.serial = UINT64_MAX;
	return 0;
}

bool display_drm_end_ghost(struct display_node *dn) {
	if (!dn->drm_ghost)
		return false;
	dn->drm_ghost = false;
	dn->drm_shown = (struct drm_scanout){ .memfd = -1 };
	unmap_all(dn);
	return true;
}

void display_drm_free(struct display_node *dn) {
	listener_remove(&dn->drm_vblank_listener);
	dn->drm_vblank = sd_event_source_disable_unref(dn->drm_vblank);
	dn->drm = drm_node_free(dn->drm);
	unmap_all(dn);
}
