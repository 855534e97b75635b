/* SPDX-License-Identifier: MIT */
/*
 * The display class: each persona's fb0 node, its socket and its memory;
 * switching, rebinding and revoking. Presenting is in
 * devnsd-display-present.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cuse-fb.h"
#include "devnsd-display.h"
#include "devnsd-state.h"
#include "display-backend.h"
#include "log.h"
#include "util.h"

static struct display_class *to_display(struct device_class *dc) {
	return container_of(dc, struct display_class, base);
}

/* The node and the socket take the persona's owner. */
static void apply_owner(struct display_node *dn) {
	const struct persona_owner *o = &dn->persona->owner;
	int r;

	r = display_socket_set_owner(dn->socket, o->uid, o->video_gid);
	if (r < 0)
		log_warning_errno(r, "%s: cannot give the socket to %u:%u: %m", dn->socket_path, (unsigned int)o->uid,
				  (unsigned int)o->video_gid);
	/* A node not in /dev yet gets its owner when it appears. */
	r = dn->cuse ? cuse_fb_set_owner(dn->cuse, o->uid, o->video_gid, 0660) : 0;
	if (r < 0)
		log_warning_errno(r, "%s: cannot give the node to %u:%u: %m", dn->path, (unsigned int)o->uid,
				  (unsigned int)o->video_gid);
}

static void node_ready(void *userdata) {
	struct display_node *dn = userdata;

	if (dn->ready)
		return;
	dn->ready = true;
	log_debug("%s: ready", dn->path);
	apply_owner(dn);
	manager_node_ready(dn->class->base.manager);
}

static int node_may_open(void *userdata, pid_t pid) {
	struct display_node *dn = userdata;

	return manager_check_access(dn->class->base.manager, dn->persona, pid);
}

static void node_written(void *userdata, const struct fb_rows *rows) {
	struct display_node *dn = userdata;
	struct display_class *dc = dn->class;
	struct fb_rows visible;
	bool staged = dn != dc->active && display_stage_written(dc, dn, rows);

	dn->gen++;
	if (staged)
		display_output_spare(dc->backend)->owner_gen = dn->gen;
	if (dn != dc->active || !fb_node_visible_rows(dn->fb, rows, &visible))
		return;
	/* What the last scan took lacks these rows: the next one takes the whole frame. */
	dc->scan_valid = false;
	/* Writes come in 128 KiB pieces: they are shown together, at the latest one refresh later. */
	display_add_damage(dn->class, visible.y0, visible.y1);
	display_update_tick(dn->class);
}

static void node_effect(void *userdata, enum fb_effect effect) {
	struct display_node *dn = userdata;
	struct display_class *dc = dn->class;
	bool mapped = display_socket_n_mappers(dn->socket) > 0;

	if (effect != FB_EFFECT_VSYNC)
		dn->gen++;
	if (effect == FB_EFFECT_VIEW || effect == FB_EFFECT_BLANK)
		state_changed(dc->base.manager);
	if (dn != dc->active) {
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
		if (!dc->scanned)
			display_scan_mapped(dc);
		display_flush(dc);
	}
	if (effect == FB_EFFECT_VSYNC)
		display_update_tick(dc);
}

static const struct cuse_fb_hooks node_hooks = {
	.ready = node_ready,
	.may_open = node_may_open,
	.written = node_written,
	.effect = node_effect,
};

static void display_node_free(struct display_node *dn) {
	if (!dn)
		return;
	if (dn->class->active == dn) {
		display_abort_copy(dn->class);
		dn->class->active = NULL;
	}
	LIST_REMOVE(dn, link);
	display_socket_free(dn->socket);
	/* Files routed to the node answer ENODEV from now on. */
	cuse_fb_free(dn->cuse);
	fb_node_free(dn->fb);
	free(dn);
}

static struct display_node *node_of(struct display_class *dc, struct persona *p) {
	struct display_node *dn;

	LIST_FOREACH(dn, &dc->nodes, link)
		if (dn->persona == p)
			return dn;
	return NULL;
}

static int display_add_persona(struct device_class *base, struct persona *p) {
	struct display_class *dc = to_display(base);
	struct manager *m = base->manager;
	struct display_node *dn;
	unsigned int major, minor;
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
	if (!dc->serve)
		goto done;
	r = display_socket_new(&dn->socket, dn);
	if (r < 0) {
		log_error_errno(r, "%s: cannot listen: %m", dn->socket_path);
		goto fail;
	}
	manager_node_numbers(m, dn->path + strlen("/dev/"), &major, &minor);
	dn->rdev = major ? makedev(major, minor) : 0;
	r = cuse_fb_new(&dn->cuse, m->event, dn->path + strlen("/dev/"), major, minor, dn->fb, dn->socket_path,
			&node_hooks, dn);
	if (r < 0) {
		log_error_errno(r, "%s: cannot create the node: %m", dn->path);
		goto fail;
	}
	manager_node_added(m);
done:
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
	struct display_node *dn = node_of(to_display(base), p);

	if (dn)
		display_node_free(dn);
	display_state_fb_removed(to_display(base), p);
}

static void display_switch_to(struct device_class *base, struct persona *from, struct persona *to,
			      struct switch_op *op) {
	struct display_class *dc = to_display(base);

	(void)from;
	display_abort_copy(dc);
	/* A flip under way shows an older frame: this switch is shown by the flip after it. */
	switch_hold(&dc->switch_copy, op);
	switch_release(&dc->switch_flip);
	dc->active = node_of(dc, to);
	dc->scan_valid = false;
	dc->presented_whole = false;
	/* The new persona's whole frame, copied in one go and shown in one flip: now, or when the pending one completes. */
	dc->urgent = true;
	display_damage_all(dc);
	display_flush(dc);
	display_update_tick(dc);
}

static void display_foreach_node(struct device_class *base, struct persona *p, node_desc_fn fn, void *userdata) {
	struct display_class *dc = to_display(base);
	struct display_node *dn = node_of(dc, p);

	if (dn)
		fn(userdata, &(struct node_desc){
			.path = dn->path,
			.kind = "fb",
			.source = dc->device,
			.opened = dn->cuse ? cuse_fb_n_open(dn->cuse) : 0,
			.share = dn->socket_dir,
		});
}

static void display_class_free(struct device_class *base) {
	struct display_class *dc = to_display(base);
	struct display_node *dn;

	display_switch_shown(dc);
	dc->routed = cuse_fb_free(dc->routed);
	while ((dn = LIST_FIRST(&dc->nodes)))
		display_node_free(dn);
	sd_event_source_disable_unref(dc->tick);
	sd_event_source_disable_unref(dc->copy);
	sd_event_source_disable_unref(dc->backend_source);
	display_output_free(dc->backend);
	free(dc->scan);
	free(dc->snap);
	free(dc->device);
	free(dc);
}

static void routed_ready(void *userdata) {
	struct display_class *dc = userdata;

	if (dc->routed_ready)
		return;
	dc->routed_ready = true;
	manager_node_ready(dc->base.manager);
}

/* The framebuffer of the opener's persona; host processes get the active persona's. */
static int routed_route(void *userdata, pid_t pid, struct cuse_fb **ret) {
	struct display_class *dc = userdata;
	struct manager *m = dc->base.manager;
	struct display_node *dn;
	struct persona *p;
	int r;

	r = manager_route(m, "/dev/" DEVNS_DEV_DIR "/fb0", pid, &p);
	if (r < 0)
		return r;
	dn = node_of(dc, p);
	if (!dn || !dn->cuse)
		return -ENODEV;
	*ret = dn->cuse;
	return 0;
}

static const struct cuse_fb_hooks routed_hooks = {
	.ready = routed_ready,
	.route = routed_route,
};

static int add_routed(struct display_class *dc) {
	struct manager *m = dc->base.manager;
	const char *devname = DEVNS_DEV_DIR "/fb0";
	unsigned int major, minor;
	int r;

	manager_node_numbers(m, devname, &major, &minor);
	r = cuse_fb_new(&dc->routed, m->event, devname, major, minor, NULL, NULL, &routed_hooks, dc);
	if (r < 0)
		return log_error_errno(r, "/dev/%s: cannot create the routed node: %m", devname);
	manager_node_added(m);
	return 0;
}

/*
 * dn's persona left its container: every file, ticket and mapping of the
 * old one stops working, and the persona starts over on fresh memory, so
 * what old mappings draw is neither shown nor seen by the new container.
 */
static void revoke_node(struct display_class *dc, struct display_node *dn) {
	int r;

	cuse_fb_revoke(dn->cuse);
	display_socket_revoke(dn->socket);
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
	/* No buffer holds this persona's frame any more, the spare included. */
	dn->serial = ++dc->next_serial;
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
	struct display_node *dn = node_of(dc, p);

	if (!dn)
		return;
	if (revoke)
		revoke_node(dc, dn);
	apply_owner(dn);
}

static const struct device_class_ops display_class_ops = {
	.add_persona = display_add_persona,
	.remove_persona = display_remove_persona,
	.switch_to = display_switch_to,
	.foreach_node = display_foreach_node,
	.rebind = display_rebind,
	.free = display_class_free,
};

static int open_backend(const struct conf *conf, struct display_output **ret, const char **ret_device) {
	const char *device = conf->display_device;
	int r;

	switch (conf->display) {
	case DISPLAY_DRM:
		device = device ? device : "/dev/dri/card0";
		*ret_device = device;
		r = display_drm_open(device, conf->display_width, conf->display_height, conf->display_spare, ret);
		if (r == -EBUSY)
			return log_error_errno(r, "%s: another program is the DRM master", device);
		if (r == -ENODEV)
			return log_error_errno(r, "%s: no connected output with a usable mode", device);
		return r < 0 ? log_error_errno(r, "%s: cannot drive the display: %m", device) : 0;
	case DISPLAY_FBDEV:
		device = device ? device : "/dev/fb0";
		*ret_device = device;
		r = display_fbdev_open(device, ret);
		if (r == -EMEDIUMTYPE)
			return log_error_errno(r, "%s: only 32-bit XRGB framebuffers are supported", device);
		return r < 0 ? log_error_errno(r, "%s: cannot open the framebuffer: %m", device) : 0;
	default:
		*ret_device = "headless";
		r = display_headless_new(conf->display_width, conf->display_height, conf->display_spare, ret);
		return r < 0 ? log_error_errno(r, "headless display %ux%u: %m", conf->display_width,
					       conf->display_height) :
			       0;
	}
}

int display_class_new_core(struct manager *m, struct display_output *b, const char *device, bool serve,
			   struct display_class **ret) {
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
	dc->serve = serve;
	LIST_INIT(&dc->nodes);
	b->flip_done = display_on_flip_done;
	b->userdata = dc;
	dc->refresh_usec = 1000000u / (b->mode.refresh_hz ? b->mode.refresh_hz : 60);
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
	/* Copy steps yield to requests: the lowest priority. */
	if (r >= 0)
		r = sd_event_add_defer(m->event, &dc->copy, display_on_copy, dc);
	if (r >= 0)
		r = sd_event_source_set_priority(dc->copy, SD_EVENT_PRIORITY_IDLE);
	if (r >= 0)
		r = sd_event_source_set_enabled(dc->copy, SD_EVENT_OFF);
	if (r < 0) {
		display_class_free(&dc->base);
		return r;
	}
	*ret = dc;
	return 0;
}

int display_class_new(struct manager *m, const struct conf *conf, struct display_class **ret) {
	struct display_class *dc;
	const char *device = NULL;
	struct display_output *b;
	int r;

	r = open_backend(conf, &b, &device);
	if (r < 0)
		return r;
	r = display_class_new_core(m, b, device, true, &dc);
	if (r < 0)
		return log_error_errno(r, "%s: cannot set up the display: %m", device);
	r = display_state_register(dc);
	if (r < 0) {
		display_class_free(&dc->base);
		return log_error_errno(r, "cannot keep the display's state for a restart: %m");
	}
	if (conf->routed) {
		r = add_routed(dc);
		if (r < 0) {
			display_class_free(&dc->base);
			return r;
		}
	}
	log_info("%s: %s display, %ux%u at %u Hz, %u buffers%s", device, b->kind, b->mode.width, b->mode.height,
		 b->mode.refresh_hz, b->n_buffers,
		 conf->display_spare && conf->display == DISPLAY_DRM && b->n_buffers < 3 ? " (no room for a spare)" : "");
	*ret = dc;
	return 0;
}

uint64_t display_frames_shown(const struct display_class *dc) {
	return dc ? dc->backend->n_flips : 0;
}

int display_snapshot(struct display_class *dc, struct persona *p, int *ret_fd, uint32_t *ret_width,
		     uint32_t *ret_height, uint32_t *ret_stride) {
	struct display_node *dn = dc ? node_of(dc, p) : NULL;
	int r;

	if (!dn)
		return -ENODEV;
	r = fb_node_snapshot(dn->fb, ret_fd);
	if (r < 0)
		return r;
	*ret_width = dn->fb->state.var.xres;
	*ret_height = dn->fb->state.var.yres;
	*ret_stride = dn->fb->state.fix.line_length;
	return 0;
}

struct display_node *display_node_of(struct display_class *dc, struct persona *p) {
	return node_of(dc, p);
}
