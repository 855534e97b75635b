/* SPDX-License-Identifier: MIT */
/*
 * The display class's core: each persona's framebuffer memory, switching,
 * rebinding and revoking, without a transport (display/serve.c
 * serves the nodes and sockets). Presenting is in
 * display/present.c. What fb0's transport and card0 (display/drm.c, by
 * its scanout events) tell of a persona's node comes here, and goes on
 * to the present path and the restart (display/state.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "display/display-internal.h"
#include "restart/state.h"
#include "display-backend.h"
#include "fd-closer.h"
#include "log.h"
#include "util.h"

static struct display_class *to_display(struct device_class *dc) {
	return container_of(dc, struct display_class, base);
}

static void set_owner(struct display_node *dn) {
	const struct display_transport_ops *t = dn->class->transport;

	if (t && t->set_owner)
		t->set_owner(dn);
}

/* fb0 changed or dn was revoked: the last run's card0 frame is no longer shown, nor kept. */
static void end_ghost(struct display_node *dn) {
	if (!display_drm_end_ghost(dn))
		return;
	display_state_card_keep(dn);
	display_node_changed(dn, &(struct fb_rows){ 0, dn->fb->mode.height }, true);
}

/* card0's scanout changed (drm-node.h): dn shows it from now on, or fb0's frame again. */
static void on_scanout(struct listener *l, void *data) {
	struct display_node *dn = container_of(l, struct display_node, drm_scanout_listener);
	const struct drm_scanout_news *news = data;
	const struct drm_scanout *s = news->scanout;
	struct display_class *dc = dn->class;
	bool was_owned = dn->drm_shown.enabled, was_active = dn->drm_shown.active;
	bool whole = display_drm_moves(dn, s);
	struct fb_rows rows;

	/* The copy under way reads the buffer shown until now: it completes before that buffer may go. */
	if (dn == dc->active && dc->backend->copying && whole)
		display_complete_copy(dc, false);
	display_state_card_changed(dn, s->mem_serial);
	rows = display_drm_show(dn, news, &whole);
	if (was_owned != s->enabled || was_active != s->active)
		/* What is shown, fb0 or card0, is part of what a restart keeps. */
		state_changed(dc->base.manager);
	display_node_changed(dn, &rows, whole);
}

void display_node_written(struct display_node *dn, const struct fb_rows *rows) {
	struct display_class *dc = dn->class;
	struct fb_rows visible;
	unsigned int staged;

	end_ghost(dn);
	/* card0's scanout is shown: fb0's writes wait in its memory until it is shown again. */
	if (display_drm_owns(dn))
		return;
	/* Rows off the visible frame change nothing shown: a spare that keeps the frame still does. */
	if (!fb_node_visible_rows(dn->fb, rows, &visible))
		visible = (struct fb_rows){ 0, 0 };
	staged = dn != dc->active ? display_stage_written(dc, dn, &visible) : DISPLAY_NO_BUFFER;
	dn->gen++;
	if (staged != DISPLAY_NO_BUFFER)
		dc->backend->buffers[staged].owner_gen = dn->gen;
	if (dn != dc->active || visible.y0 >= visible.y1)
		return;
	/* What the last scan took lacks these rows: the next one takes the whole frame. */
	dc->scan_valid = false;
	/* Writes come in 128 KiB pieces: they are shown together, at the latest one refresh later. */
	display_add_damage(dn->class, visible.y0, visible.y1);
	display_update_tick(dn->class);
}

void display_node_effect(struct display_node *dn, enum fb_effect effect) {
	struct display_class *dc = dn->class;
	bool mapped = display_node_mappers(dn) > 0;

	if (effect != FB_EFFECT_VSYNC) {
		dn->gen++;
		end_ghost(dn);
	}
	if (effect == FB_EFFECT_VIEW || effect == FB_EFFECT_BLANK)
		state_changed(dc->base.manager);
	if (dn != dc->active) {
		display_update_tick(dc);
		return;
	}
	/* card0's scanout is shown: fb0's pans and blanking take effect once fb0 is shown again. */
	if (display_drm_owns(dn)) {
		if (effect == FB_EFFECT_VSYNC)
			display_update_tick(dc);
		return;
	}
	/*
	 * The program panned away from the frame being copied and, once
	 * answered, may draw into it: finish that frame from intact memory
	 * first. This runs before the answer.
	 */
	if (effect == FB_EFFECT_VIEW && dc->backend->copying && dc->copy_src != fb_node_visible(dn->fb))
		display_complete_copy(dc, false);
	if (effect == FB_EFFECT_VIEW || effect == FB_EFFECT_BLANK) {
		dc->presented_whole = mapped;
		dc->scan_valid = false;
		display_damage_all(dc);
		display_flush(dc);
	} else if (effect == FB_EFFECT_VSYNC && mapped) {
		/* At most one scan a refresh, however many wait. */
		if (!dc->scanned && display_mapped_unseen(dc))
			display_scan_mapped(dc);
		display_flush(dc);
	}
	if (effect == FB_EFFECT_VSYNC)
		display_update_tick(dc);
}

static void display_node_free(struct display_node *dn) {
	const struct display_transport_ops *t;

	if (!dn)
		return;
	t = dn->class->transport;
	if (dn->class->active == dn) {
		display_abort_copy(dn->class);
		dn->class->active = NULL;
	}
	LIST_REMOVE(dn, link);
	/* Files routed to the node answer ENODEV from now on. */
	if (t && t->node_removed)
		t->node_removed(dn);
	listener_remove(&dn->drm_scanout_listener);
	display_state_card_free(dn);
	display_drm_free(dn);
	fb_node_free(dn->fb);
	display_track_budget_drop(dn);
	fd_closer_quota_unref(dn->closer_quota);
	free(dn);
}

static int display_add_persona(struct device_class *base, struct persona *p) {
	struct display_class *dc = to_display(base);
	struct manager *m = base->manager;
	struct display_node *dn;
	int r;

	dn = calloc(1, sizeof(*dn));
	if (!dn)
		return log_error_errno(ENOMEM, "out of memory");
	dn->class = dc;
	dn->persona = p;
	dn->serial = ++dc->next_serial;
	LIST_INSERT_HEAD(&dc->nodes, dn, link);
	snprintf(dn->path, sizeof(dn->path), "/dev/%s/%s/fb0", DEVNS_DEV_DIR, p->name);
	snprintf(dn->socket_path, sizeof(dn->socket_path), "%s/%s/fb0", DISPLAY_RUN_DIR, p->name);
	snprintf(dn->socket_dir, sizeof(dn->socket_dir), "%s/%s", DISPLAY_RUN_DIR, p->name);

	r = display_state_fb_new(dc, dn);
	if (r < 0) {
		log_error_errno(r, "%s: cannot allocate the framebuffer: %m", dn->path);
		goto fail;
	}
	snprintf(dn->drm_path, sizeof(dn->drm_path), "/dev/%s/%s/card0", DEVNS_DEV_DIR, p->name);
	r = display_drm_new(dn);
	if (r >= 0) {
		dn->drm_scanout_listener.notify = on_scanout;
		signal_add(&drm_node_events(dn->drm)->scanout, &dn->drm_scanout_listener);
		r = display_state_card_new(dn);
	}
	if (r < 0) {
		log_error_errno(r, "%s: cannot set up the card: %m", dn->drm_path);
		goto fail;
	}
	if (dc->transport && dc->transport->node_added) {
		r = dc->transport->node_added(dn);
		if (r < 0)
			goto fail;
	}
	if (p == m->active) {
		dc->active = dn;
		display_damage_all(dc);
		display_flush(dc);
	}
	return 0;
fail:
	display_node_free(dn);
	return r;
}

static void display_remove_persona(struct device_class *base, struct persona *p) {
	struct display_node *dn = display_node_of(to_display(base), p);

	if (dn)
		display_node_free(dn);
	display_state_fb_removed(to_display(base), p);
}

static void display_switch_to(struct device_class *base, struct persona *from, struct persona *to,
			      struct switch_op *op) {
	struct display_class *dc = to_display(base);

	display_abort_copy(dc);
	/* A flip under way shows an older frame: this switch is shown by the flip after it. */
	switch_hold(&dc->switch_copy, op);
	switch_release(&dc->switch_flip);
	dc->active = display_node_of(dc, to);
	if (from && display_node_of(dc, from))
		display_drm_released(display_node_of(dc, from));
	dc->scan_valid = false;
	dc->presented_whole = false;
	fb_track_policy_reset(&dc->track);
	/* The new persona's whole frame, copied in one go and shown in one flip: now, or when the pending one completes. */
	dc->urgent = true;
	display_damage_all(dc);
	display_flush(dc);
	display_update_tick(dc);
}

static void display_foreach_node(struct device_class *base, struct persona *p, node_desc_fn fn, void *userdata) {
	struct display_class *dc = to_display(base);
	struct display_node *dn = display_node_of(dc, p);

	const struct display_transport_ops *t = dc->transport;

	if (!dn)
		return;
	fn(userdata, &(struct node_desc){
		.path = dn->path,
		.kind = "fb",
		.source = dc->device,
		.opened = t && t->n_open ? t->n_open(dn) : 0,
		.share = dn->socket_dir,
	});
	fn(userdata, &(struct node_desc){
		.path = dn->drm_path,
		.kind = "drm",
		.source = dc->device,
		.opened = t && t->drm_n_open ? t->drm_n_open(dn) : 0,
		.share = dn->socket_dir,
	});
}

void display_class_free(struct display_class *dc) {
	struct display_node *dn;

	if (!dc)
		return;
	display_switch_shown(dc);
	if (dc->transport && dc->transport->class_removed)
		dc->transport->class_removed(dc);
	while ((dn = LIST_FIRST(&dc->nodes)))
		display_node_free(dn);
	sd_event_source_disable_unref(dc->tick);
	sd_event_source_disable_unref(dc->power_due);
	sd_event_source_disable_unref(dc->copy);
	sd_event_source_disable_unref(dc->backend_source);
	display_output_free(dc->backend);
	if (dc->udmabuf >= 0)
		close(dc->udmabuf);
	free(dc->scan);
	free(dc->snap);
	free(dc->device);
	free(dc);
}

static void display_class_free_base(struct device_class *base) {
	display_class_free(to_display(base));
}

/*
 * dn's persona left its container: every file, ticket and mapping of the
 * old one stops working, and the persona starts over on fresh memory, so
 * what old mappings draw is neither shown nor seen by the new container.
 */
static void revoke_node(struct display_class *dc, struct display_node *dn) {
	int r;

	if (dc->transport && dc->transport->revoke)
		dc->transport->revoke(dn);
	/* The old container's frame is not the new one's. */
	end_ghost(dn);
	/* A copy under way reads memory about to go. */
	if (dc->backend->copying && dc->copy_owner == dn->serial)
		display_abort_copy(dc);
	r = fb_node_renew(dn->fb);
	if (r < 0) {
		log_error_errno(r, "%s: no fresh memory for the persona, the old container's mappings still reach it: %m",
				dn->path);
		memset(dn->fb->mem, 0, dn->fb->size);
		fb_state_init(&dn->fb->state, &dn->fb->mode, "devns");
	} else
		display_state_fb_renewed(dn);
	/* No buffer holds this persona's frame any more, the spares included. */
	dn->serial = ++dc->next_serial;
	/* What held devnsd up was the old container's. */
	dn->track_refused = false;
	dn->gen++;
	if (dn == dc->active) {
		dc->scan_valid = false;
		dc->presented_whole = false;
		display_damage_all(dc);
		display_flush(dc);
	}
	display_update_tick(dc);
	log_info("%s: revoked what was opened and mapped before; the persona has fresh memory", dn->path);
}

static void display_rebind(struct device_class *base, struct persona *p, bool revoke) {
	struct display_class *dc = to_display(base);
	struct display_node *dn = display_node_of(dc, p);

	if (!dn)
		return;
	if (revoke)
		revoke_node(dc, dn);
	set_owner(dn);
}

static const struct device_class_ops display_class_ops = {
	.add_persona = display_add_persona,
	.remove_persona = display_remove_persona,
	.switch_to = display_switch_to,
	.foreach_node = display_foreach_node,
	.rebind = display_rebind,
	.free = display_class_free_base,
};

int display_class_new_core(struct manager *m, struct display_output *b, const char *device,
			   const struct display_transport_ops *transport, struct display_class **ret) {
	struct display_class *dc;
	int r;

	dc = calloc(1, sizeof(*dc));
	if (!dc) {
		display_output_free(b);
		return -ENOMEM;
	}
	dc->base.ops = &display_class_ops;
	dc->base.manager = m;
	dc->backend = b;
	dc->transport = transport;
	dc->udmabuf = -1;
	LIST_INIT(&dc->nodes);
	b->flip_done = display_on_flip_done;
	b->userdata = dc;
	dc->refresh_usec = 1000000u / (b->mode.refresh_hz ? b->mode.refresh_hz : 60);
	dc->power_downs = RATELIMIT_INIT(DISPLAY_POWER_DOWN_INTERVAL_USEC, DISPLAY_POWER_DOWN_BURST);
	dc->device = strdup(device);
	r = dc->device ? 0 : -ENOMEM;
	if (r >= 0 && b->fd >= 0 && b->ops->dispatch)
		r = sd_event_add_io(m->event, &dc->backend_source, b->fd, EPOLLIN, display_on_backend, dc);
	/* Accuracy 1 µs: sd-event's default (0) lets a timer slip by up to 250 ms. */
	if (r >= 0)
		r = sd_event_add_time_relative(m->event, &dc->tick, CLOCK_MONOTONIC, dc->refresh_usec, 1,
					       display_on_tick, dc);
	if (r >= 0)
		r = sd_event_source_set_enabled(dc->tick, SD_EVENT_OFF);
	if (r >= 0)
		r = sd_event_add_time(m->event, &dc->power_due, CLOCK_MONOTONIC, 0, 1000, display_on_power_due, dc);
	if (r >= 0)
		r = sd_event_source_set_enabled(dc->power_due, SD_EVENT_OFF);
	/* Copy steps yield to requests: the lowest priority. */
	if (r >= 0)
		r = sd_event_add_defer(m->event, &dc->copy, display_on_copy, dc);
	if (r >= 0)
		r = sd_event_source_set_priority(dc->copy, SD_EVENT_PRIORITY_IDLE);
	if (r >= 0)
		r = sd_event_source_set_enabled(dc->copy, SD_EVENT_OFF);
	if (r < 0) {
		display_class_free(dc);
		return r;
	}
	*ret = dc;
	return 0;
}

int display_class_set_output(struct display_class *dc, struct display_output *b, bool lost) {
	struct display_output *old = dc->backend;
	sd_event_source *source = NULL;
	bool was_down = old->powered_down;
	uint64_t kept, copied;
	int r;

	if (b->mode.width != old->mode.width || b->mode.height != old->mode.height) {
		display_output_free(b);
		return -EMEDIUMTYPE;
	}
	if (b->fd >= 0 && b->ops->dispatch) {
		r = sd_event_add_io(dc->base.manager->event, &source, b->fd, EPOLLIN, display_on_backend, dc);
		if (r < 0) {
			display_output_free(b);
			return r;
		}
	}
	display_abort_copy(dc);
	/* The old display's pending flip never completes: a switch it was to show is shown by b. */
	if (dc->switch_flip) {
		switch_hold(&dc->switch_copy, dc->switch_flip);
		switch_release(&dc->switch_flip);
	}
	sd_event_source_disable_unref(dc->backend_source);
	dc->backend_source = source;
	/* FramesShown counts on. */
	b->n_flips = old->n_flips;
	display_output_free(old);
	b->flip_done = display_on_flip_done;
	b->userdata = dc;
	dc->backend = b;
	dc->lost = lost;
	dc->refresh_usec = 1000000u / (b->mode.refresh_hz ? b->mode.refresh_hz : 60);
	dc->stays_up = false;
	if (lost)
		/* What stands in for the display keeps its power as it was: nothing is powered either way. */
		b->powered_down = was_down;
	else if (was_down)
		/* A display that comes back comes up; a blanked active persona powers it down again. */
		signal_emit(&dc->base.manager->events.display_power, &(bool){ false });
	dc->scan_valid = false;
	dc->presented_whole = false;
	/* The active persona's whole frame, shown in one flip: the way a switch goes up, but not one. */
	kept = dc->switches_kept;
	copied = dc->switches_copied;
	dc->urgent = true;
	display_damage_all(dc);
	display_flush(dc);
	dc->switches_kept = kept;
	dc->switches_copied = copied;
	display_update_tick(dc);
	return 0;
}

bool display_lost(const struct display_class *dc) {
	return dc && dc->lost;
}

bool display_powered_down(const struct display_class *dc) {
	return dc && dc->backend->powered_down;
}

uint64_t display_frames_shown(const struct display_class *dc) {
	return dc ? dc->backend->n_flips : 0;
}

void display_switches_shown(const struct display_class *dc, uint64_t *ret_kept, uint64_t *ret_copied) {
	*ret_kept = dc ? dc->switches_kept : 0;
	*ret_copied = dc ? dc->switches_copied : 0;
}

unsigned int display_buffers(const struct display_class *dc, uint64_t *ret_bytes) {
	*ret_bytes = dc ? display_output_memory(dc->backend) : 0;
	return dc ? dc->backend->n_buffers : 0;
}

/* What card0 shows, as a sealed memfd of its mode's size; black while it shows nothing. */
static int drm_snapshot(struct display_node *dn, int *ret_fd, uint32_t *ret_width, uint32_t *ret_height,
			uint32_t *ret_stride) {
	uint32_t width = dn->drm_shown.mode.hdisplay, height = dn->drm_shown.mode.vdisplay, stride = 0;
	const uint8_t *src = display_node_frame(dn, &stride);
	_cleanup_(closep) int fd = -1;
	size_t line = (size_t)width * 4;
	int r;

	r = memfd_sized("devns-screenshot", (uint64_t)line * height, MFD_ALLOW_SEALING, &fd);
	if (r < 0)
		return r;
	for (uint32_t y = 0; src && y < height; y++)
		if (pwrite(fd, src + (size_t)y * stride, line, (off_t)((size_t)y * line)) != (ssize_t)line)
			return errno ? -errno : -EIO;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	*ret_width = width;
	*ret_height = height;
	*ret_stride = (uint32_t)line;
	return 0;
}

int display_snapshot(struct display_class *dc, struct persona *p, int *ret_fd, uint32_t *ret_width,
		     uint32_t *ret_height, uint32_t *ret_stride) {
	struct display_node *dn = dc ? display_node_of(dc, p) : NULL;
	int r;

	if (!dn)
		return -ENODEV;
	if (display_drm_owns(dn))
		return drm_snapshot(dn, ret_fd, ret_width, ret_height, ret_stride);
	r = fb_node_snapshot(dn->fb, ret_fd);
	if (r < 0)
		return r;
	*ret_width = dn->fb->state.var.xres;
	*ret_height = dn->fb->state.var.yres;
	*ret_stride = dn->fb->state.fix.line_length;
	return 0;
}

struct device_class *display_class_base(struct display_class *dc) {
	return &dc->base;
}
