/* SPDX-License-Identifier: MIT */
/*
 * The display class's part of a restart: each persona's framebuffer memory
 * is kept in the fd store as "fb-PERSONA" and adopted again, and its mode,
 * pan and blanking are an item of the state record; so is the hardware the
 * display is on, found again when its node has another name by then. The
 * buffer a persona's card0 shows is kept as "card-PERSONA", with where its
 * frame is in the record ("card"), so that a restarted devnsd still shows
 * it until card0 or fb0 changes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <drm_fourcc.h>

#include "display/display-internal.h"
#include "restart/state.h"
#include "display-backend.h"
#include "log.h"

#define PART "display"

static void fd_name(const struct persona *p, char *buf, size_t size) {
	snprintf(buf, size, "fb-%s", p->name);
}

static void card_fd_name(const struct persona *p, char *buf, size_t size) {
	snprintf(buf, size, "card-%s", p->name);
}

static void card_keep_fd(struct display_node *dn, int fd) {
	char name[16 + NAME_MAX_LEN];

	card_fd_name(dn->persona, name, sizeof(name));
	if (state_keep_fd(dn->class->base.manager, name, fd) < 0)
		dn->drm_kept = (struct display_card_kept){ 0 };
	state_changed(dn->class->base.manager);
}

void display_state_card_keep(struct display_node *dn) {
	struct manager *m = dn->class->base.manager;
	char name[16 + NAME_MAX_LEN];
	struct drm_scanout s;

	if (dn->drm_ghost)
		return;
	drm_node_scanout(dn->drm, &s);
	if (s.enabled && s.active && s.fb_id && s.memfd >= 0 && s.format == DRM_FORMAT_XRGB8888 &&
	    s.mode.hdisplay == dn->fb->mode.width && s.mode.vdisplay == dn->fb->mode.height) {
		if (s.mem_serial == dn->drm_kept.serial)
			return;
		dn->drm_kept = (struct display_card_kept){
			.serial = s.mem_serial,
			.size = s.mem_size,
			.width = s.mode.hdisplay,
			.height = s.mode.vdisplay,
			.pitch = s.pitch,
			.offset = s.offset + s.src_y * s.pitch + s.src_x * 4,
		};
		card_keep_fd(dn, s.memfd);
		return;
	}
	if (dn->drm_kept.serial == 0)
		return;
	dn->drm_kept = (struct display_card_kept){ 0 };
	card_fd_name(dn->persona, name, sizeof(name));
	state_forget_fd(m, name);
	state_changed(m);
}

static int on_card_keep(sd_event_source *s, uint64_t usec, void *userdata) {
	(void)s;
	(void)usec;
	display_state_card_keep(userdata);
	return 0;
}

int display_state_card_new(struct display_node *dn) {
	int r;

	r = sd_event_add_time(dn->class->base.manager->event, &dn->drm_keep, CLOCK_MONOTONIC, 0, 0, on_card_keep, dn);
	if (r < 0)
		return r;
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(dn->drm_keep, SD_EVENT_OFF);
	return 0;
}

void display_state_card_changed(struct display_node *dn, uint64_t mem_serial) {
	int enabled = SD_EVENT_OFF;

	if (mem_serial == dn->drm_kept.serial)
		return;
	(void)sd_event_source_get_enabled(dn->drm_keep, &enabled);
	if (enabled != SD_EVENT_OFF)
		return;
	(void)sd_event_source_set_time_relative(dn->drm_keep, DISPLAY_CARD_KEEP_USEC);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(dn->drm_keep, SD_EVENT_ONESHOT);
}

void display_state_card_free(struct display_node *dn) {
	dn->drm_keep = sd_event_source_disable_unref(dn->drm_keep);
}

int display_state_fb_new(struct display_class *dc, struct display_node *dn) {
	struct manager *m = dc->base.manager;
	const struct fb_mode *mode = &dc->backend->mode;
	char name[16 + NAME_MAX_LEN];
	int fd, r;

	fd_name(dn->persona, name, sizeof(name));
	if (state_take_fd(m, name, &fd) >= 0) {
		r = fb_node_adopt(&dn->fb, mode, dn->persona->name, fd);
		if (r >= 0) {
			log_info("%s: the framebuffer of the last run is back", dn->path);
			return 0;
		}
		if (r == -ESTALE)
			state_note(m, "%s: the framebuffer of the last run does not fit the display's %ux%u; it starts black",
				   dn->path, mode->width, mode->height);
		else
			state_note(m, "%s: cannot take back the framebuffer of the last run (%s); it starts black", dn->path,
				   strerror(-r));
	}
	r = fb_node_new(&dn->fb, mode, dn->persona->name);
	if (r < 0)
		return r;
	state_keep_fd(m, name, dn->fb->memfd);
	return 0;
}

void display_state_fb_renewed(struct display_node *dn) {
	char name[16 + NAME_MAX_LEN];

	fd_name(dn->persona, name, sizeof(name));
	state_keep_fd(dn->class->base.manager, name, dn->fb->memfd);
}

void display_state_fb_removed(struct display_class *dc, struct persona *p) {
	char name[16 + NAME_MAX_LEN];

	fd_name(p, name, sizeof(name));
	state_forget_fd(dc->base.manager, name);
}

static void save_hardware(struct display_class *dc, struct persona *p, struct state_record *rec) {
	char value[STATE_VALUE_MAX + 1];

	if (!dc->hardware ||
	    (size_t)snprintf(value, sizeof(value), "%s %s", dc->hardware_kind, dc->hardware) >= sizeof(value))
		return;
	(void)state_record_add_item(rec, p->name, PART, "hardware", value);
}

int display_hardware_last(struct manager *m, const struct conf *conf, char **ret_hardware, char **ret_kind) {
	const char *value = state_last_value(m, PART, "hardware"), *space;
	const char *want = conf->display == DISPLAY_FBDEV ? "fb" : "card";
	size_t len;

	if (!value || !(space = strchr(value, ' ')))
		return -ENOENT;
	len = (size_t)(space - value);
	/* Only what this file writes for this backend: its kind of node, a directory in sysfs. */
	if (len != strlen(want) || strncmp(value, want, len) != 0 || strncmp(space + 1, "/sys/devices/", 13) != 0 ||
	    strstr(space + 1, "/.") || strstr(space + 1, "//"))
		return -EINVAL;
	_cleanup_(freep) char *kind = strndup(value, len), *hardware = strdup(space + 1);
	if (!kind || !hardware)
		return -ENOMEM;
	*ret_hardware = TAKE_PTR(hardware);
	*ret_kind = TAKE_PTR(kind);
	return 0;
}

static void save(void *userdata, struct persona *p, struct state_record *rec) {
	struct display_node *dn = display_node_of(userdata, p);
	const struct fb_var_screeninfo *v;
	char value[128];

	if (!dn)
		return;
	v = &dn->fb->state.var;
	snprintf(value, sizeof(value), "%u %u %u %u %u %u %d", v->xres, v->yres, v->xres_virtual, v->yres_virtual,
		 v->xoffset, v->yoffset, dn->fb->state.blank);
	(void)state_record_add_item(rec, p->name, PART, "var", value);
	if (dn->drm_kept.serial) {
		const struct display_card_kept *k = &dn->drm_kept;

		snprintf(value, sizeof(value), "%u %u %u %u %" PRIu64, k->width, k->height, k->pitch, k->offset, k->size);
		(void)state_record_add_item(rec, p->name, PART, "card", value);
	}
	save_hardware(userdata, p, rec);
}

/* card0's frame of the last run: its buffer is in the fd store. */
static int load_card(struct display_node *dn, const char *value) {
	struct display_card_kept kept = { 0 };
	char name[16 + NAME_MAX_LEN], tail;
	_cleanup_(closep) int fd = -1;
	int r;

	if (sscanf(value, "%" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu64 "%c", &kept.width, &kept.height,
		   &kept.pitch, &kept.offset, &kept.size, &tail) != 5)
		return -EINVAL;
	card_fd_name(dn->persona, name, sizeof(name));
	r = state_take_fd(dn->class->base.manager, name, &fd);
	if (r < 0)
		return r;
	r = display_drm_adopt_kept(dn, fd, &kept);
	if (r < 0)
		return r;
	/* Kept again under this run, for the next. */
	card_keep_fd(dn, fd);
	display_node_changed(dn, &(struct fb_rows){ 0, dn->fb->mode.height }, true);
	log_info("%s: the frame card0 showed in the last run is back", dn->drm_path);
	return 0;
}

static int load(void *userdata, struct persona *p, const char *key, const char *value) {
	struct display_class *dc = userdata;
	struct display_node *dn = display_node_of(dc, p);
	struct fb_state st;
	struct fb_var_screeninfo var;
	uint32_t w, h, xv, yv, xo, yo;
	int blank, r;
	char tail;

	if (dn && streq(key, "hardware"))
		/* Taken at start (display_hardware_last()). */
		return 0;
	if (dn && streq(key, "card"))
		return load_card(dn, value);
	if (!dn || !streq(key, "var"))
		return -ENOENT;
	if (sscanf(value, "%" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %" SCNu32 " %d%c", &w, &h, &xv,
		   &yv, &xo, &yo, &blank, &tail) != 7)
		return -EINVAL;
	st = dn->fb->state;
	if (w != st.var.xres || h != st.var.yres)
		return -ESTALE;
	/* Through the checks FBIOPUT_VSCREENINFO and FBIOPAN_DISPLAY make: nothing the node could not have had. */
	var = st.var;
	var.xres_virtual = xv;
	var.yres_virtual = yv;
	var.xoffset = xo;
	var.yoffset = yo;
	var.activate = FB_ACTIVATE_NOW;
	r = fb_state_put_var(&st, &var);
	if (r < 0)
		return -ESTALE;
	r = fb_state_pan(&st, &var);
	if (r < 0)
		return -ESTALE;
	fb_state_blank(&st, blank < 0 ? 0 : (unsigned long)blank);
	dn->fb->state = st;
	dn->gen++;
	if (dn == dc->active) {
		dc->scan_valid = false;
		display_damage_all(dc);
		display_flush(dc);
	}
	return 0;
}

int display_state_register(struct display_class *dc) {
	return state_register_part(dc->base.manager,
				   &(struct state_part){ .name = PART, .save = save, .load = load, .userdata = dc });
}
