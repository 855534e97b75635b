/* SPDX-License-Identifier: MIT */
/*
 * The display class as devnsd runs it: the configured display, and each
 * persona's framebuffer served as an fb0 node over CUSE and an mmap
 * socket, its card0, and the routed /dev/devns/fb0 and /dev/devns/card0.
 * The core is display/class.c.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cuse-drm.h"
#include "drm-node.h"
#include "cuse-fb.h"
#include "display/display-internal.h"
#include "restart/state.h"
#include "display-backend.h"
#include "log.h"
#include "node-wait.h"
#include "util.h"

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
	r = dn->drm_cuse ? cuse_drm_set_owner(dn->drm_cuse, o->uid, o->video_gid, 0660) : 0;
	if (r < 0)
		log_warning_errno(r, "%s: cannot give the node to %u:%u: %m", dn->drm_path, (unsigned int)o->uid,
				  (unsigned int)o->video_gid);
}

static void node_ready(void *userdata) {
	struct display_node *dn = userdata;

	if (dn->ready)
		return;
	dn->ready = true;
	log_debug("%s: ready", dn->path);
	apply_owner(dn);
	manager_node_ready(dn->class->base.manager, dn->persona);
}

static int node_may_open(void *userdata, pid_t pid) {
	struct display_node *dn = userdata;

	return manager_check_access(dn->class->base.manager, dn->persona, pid);
}

static void node_written(void *userdata, const struct fb_rows *rows) {
	display_node_written(userdata, rows);
}

static void node_effect(void *userdata, enum fb_effect effect) {
	display_node_effect(userdata, effect);
}

static const struct cuse_fb_hooks node_hooks = {
	.ready = node_ready,
	.may_open = node_may_open,
	.written = node_written,
	.effect = node_effect,
};

static void card_ready(void *userdata) {
	struct display_node *dn = userdata;

	if (dn->drm_ready)
		return;
	dn->drm_ready = true;
	log_debug("%s: ready", dn->drm_path);
	apply_owner(dn);
	manager_node_ready(dn->class->base.manager, dn->persona);
}

static const struct cuse_drm_hooks card_hooks = {
	.ready = card_ready,
	.may_open = node_may_open,
};

/* /dev/devns/PERSONA/card0, a primary DRM node's number: libdrm takes the node's kind from its minor. */
static int add_card(struct display_node *dn) {
	struct manager *m = dn->class->base.manager;
	unsigned int major, minor;
	int r;

	manager_node_numbers(m, dn->drm_path + strlen("/dev/"), &major, &minor);
	dn->drm_rdev = major ? makedev(major, minor) : 0;
	r = cuse_drm_new(&dn->drm_cuse, m->event, dn->drm_path + strlen("/dev/"), major, minor, dn->drm,
			 dn->socket_path, &card_hooks, dn);
	if (r < 0)
		return log_error_errno(r, "%s: cannot create the node: %m", dn->drm_path);
	manager_node_added(m, dn->persona);
	return 0;
}

static int serve_node_added(struct display_node *dn) {
	struct manager *m = dn->class->base.manager;
	unsigned int major, minor;
	int r;

	r = display_socket_new(&dn->socket, dn);
	if (r < 0)
		return log_error_errno(r, "%s: cannot listen: %m", dn->socket_path);
	manager_node_numbers(m, dn->path + strlen("/dev/"), &major, &minor);
	dn->rdev = major ? makedev(major, minor) : 0;
	r = cuse_fb_new(&dn->cuse, m->event, dn->path + strlen("/dev/"), major, minor, dn->fb, dn->socket_path,
			&node_hooks, dn);
	if (r < 0)
		return log_error_errno(r, "%s: cannot create the node: %m", dn->path);
	manager_node_added(m, dn->persona);
	return add_card(dn);
}

static void serve_node_removed(struct display_node *dn) {
	dn->socket = display_socket_free(dn->socket);
	dn->cuse = cuse_fb_retire(dn->cuse, dn->persona->name);
	dn->drm_cuse = cuse_drm_retire(dn->drm_cuse, dn->persona->name);
}

static void serve_revoke(struct display_node *dn) {
	cuse_fb_revoke(dn->cuse);
	if (dn->drm_cuse)
		cuse_drm_revoke(dn->drm_cuse);
	display_socket_revoke(dn->socket);
}

static void serve_drm_vblank(struct display_node *dn) {
	if (dn->drm_cuse)
		cuse_drm_vblank(dn->drm_cuse);
}

static unsigned int serve_drm_n_open(struct display_node *dn) {
	return dn->drm_cuse ? cuse_drm_n_open(dn->drm_cuse) : 0;
}

static unsigned int serve_n_open(struct display_node *dn) {
	return dn->cuse ? cuse_fb_n_open(dn->cuse) : 0;
}

static unsigned int serve_n_mappers(struct display_node *dn) {
	return display_socket_n_mappers(dn->socket);
}

static unsigned int serve_n_untracked(struct display_node *dn) {
	return display_socket_n_untracked(dn->socket, false);
}

static unsigned int serve_n_unseen(struct display_node *dn) {
	return display_socket_n_untracked(dn->socket, true);
}

static void serve_arm(struct display_node *dn, bool arm) {
	if (dn->socket)
		display_socket_arm(dn->socket, arm);
}

static int serve_written(struct display_node *dn, uint32_t height, struct fb_rows *ret_rows, size_t max, size_t *ret_n) {
	return display_socket_written(dn->socket, fb_state_visible_offset(&dn->fb->state), dn->fb->state.fix.line_length,
				      height, ret_rows, max, ret_n);
}

static void serve_park(struct display_node *dn) {
	if (dn->socket)
		display_socket_park(dn->socket);
}

static unsigned int serve_vsync_waiters(struct display_node *dn) {
	return dn->cuse ? cuse_fb_vsync_waiters(dn->cuse) : 0;
}

static void serve_vsync(struct display_node *dn) {
	if (dn->cuse)
		cuse_fb_vsync(dn->cuse);
}

static void serve_class_removed(struct display_class *dc) {
	dc->hotplug = display_hotplug_free(dc->hotplug);
	dc->routed = cuse_fb_free(dc->routed);
	dc->routed_card = cuse_drm_free(dc->routed_card);
}

static const struct display_transport_ops serve_transport = {
	.node_added = serve_node_added,
	.node_removed = serve_node_removed,
	.set_owner = apply_owner,
	.revoke = serve_revoke,
	.n_open = serve_n_open,
	.n_mappers = serve_n_mappers,
	.n_untracked = serve_n_untracked,
	.n_unseen = serve_n_unseen,
	.arm = serve_arm,
	.written = serve_written,
	.park = serve_park,
	.vsync_waiters = serve_vsync_waiters,
	.vsync = serve_vsync,
	.class_removed = serve_class_removed,
	.drm_vblank = serve_drm_vblank,
	.drm_n_open = serve_drm_n_open,
};

static void routed_ready(void *userdata) {
	struct display_class *dc = userdata;

	if (dc->routed_ready)
		return;
	dc->routed_ready = true;
	manager_node_ready(dc->base.manager, NULL);
}

/* The framebuffer of the opener's persona; host processes get the active persona's. */
static int routed_route(void *userdata, pid_t pid, struct cuse_fb **ret, uint32_t *ret_owner) {
	struct display_class *dc = userdata;
	struct manager *m = dc->base.manager;
	struct display_node *dn;
	struct persona *p;
	int r;

	r = manager_route(m, "/dev/" DEVNS_DEV_DIR "/fb0", pid, &p, ret_owner);
	if (r < 0)
		return r;
	dn = display_node_of(dc, p);
	if (!dn || !dn->cuse)
		return -ENODEV;
	*ret = dn->cuse;
	return 0;
}

static const struct cuse_fb_hooks routed_hooks = {
	.ready = routed_ready,
	.route = routed_route,
};

static void routed_card_ready(void *userdata) {
	struct display_class *dc = userdata;

	if (dc->routed_card_ready)
		return;
	dc->routed_card_ready = true;
	manager_node_ready(dc->base.manager, NULL);
}

/* The card of the opener's persona; host processes get the active persona's. */
static int routed_card_route(void *userdata, pid_t pid, struct cuse_drm **ret, uint32_t *ret_owner) {
	struct display_class *dc = userdata;
	struct display_node *dn;
	struct persona *p;
	int r;

	r = manager_route(dc->base.manager, "/dev/" DEVNS_DEV_DIR "/card0", pid, &p, ret_owner);
	if (r < 0)
		return r;
	dn = display_node_of(dc, p);
	if (!dn || !dn->drm_cuse)
		return -ENODEV;
	*ret = dn->drm_cuse;
	return 0;
}

static const struct cuse_drm_hooks routed_card_hooks = {
	.ready = routed_card_ready,
	.route = routed_card_route,
};

static int add_routed(struct display_class *dc) {
	struct manager *m = dc->base.manager;
	const char *devname = DEVNS_DEV_DIR "/fb0", *card = DEVNS_DEV_DIR "/card0";
	unsigned int major, minor;
	int r;

	manager_node_numbers(m, devname, &major, &minor);
	r = cuse_fb_new(&dc->routed, m->event, devname, major, minor, NULL, NULL, &routed_hooks, dc);
	if (r < 0)
		return log_error_errno(r, "/dev/%s: cannot create the routed node: %m", devname);
	/* One persona's files and requests never take another's place. */
	r = cuse_fb_set_shares(dc->routed, ROUTED_SHARES);
	if (r < 0)
		return log_error_errno(r, "/dev/%s: cannot split the routed node among personas: %m", devname);
	manager_node_added(m, NULL);
	/* A primary DRM node's number, as the personas' cards have. */
	manager_node_numbers(m, card, &major, &minor);
	r = cuse_drm_new(&dc->routed_card, m->event, card, major, minor, NULL, NULL, &routed_card_hooks, dc);
	if (r < 0)
		return log_error_errno(r, "/dev/%s: cannot create the routed node: %m", card);
	r = cuse_drm_set_shares(dc->routed_card, ROUTED_SHARES);
	if (r < 0)
		return log_error_errno(r, "/dev/%s: cannot split the routed node among personas: %m", card);
	manager_node_added(m, NULL);
	return 0;
}

_Static_assert(CONF_MAX_SPARE_FRAMES <= DISPLAY_MAX_SPARES, "SpareFrames= asks for more spares than a display keeps");

/*
 * The personas' mode when a DRM device is not there, so that devnsd can
 * start without it: Mode=, or the mode of the last run when devnsd starts
 * again after a crash. NULL when it is not known, else where it comes from.
 */
static const char *mode_without_device(struct manager *m, const struct conf *conf, uint32_t *ret_width,
				       uint32_t *ret_height) {
	const char *var;

	if (conf->display != DISPLAY_DRM)
		return NULL;
	if (conf->display_width > 0) {
		*ret_width = conf->display_width;
		*ret_height = conf->display_height;
		return "Mode=";
	}
	var = state_last_value(m, "display", "var");
	if (var && sscanf(var, "%" SCNu32 " %" SCNu32, ret_width, ret_height) == 2 && *ret_width > 0 &&
	    *ret_height > 0 && *ret_width <= FB_STATE_MAX_SIDE && *ret_height <= FB_STATE_MAX_SIDE)
		return "the last run's mode";
	return NULL;
}

/*
 * The node the last run's display has now, when the configured device is
 * not there: the kernel may have named it anew (card1) while devnsd held
 * the old one. NULL if none.
 */
static char *last_run_node(struct manager *m, const struct conf *conf) {
	_cleanup_(freep) char *hardware = NULL, *kind = NULL;
	char *node = NULL;

	if (display_hardware_last(m, conf, &hardware, &kind) < 0 || display_hardware_find(hardware, kind, &node) < 0)
		return NULL;
	return node;
}

int display_wait_device(struct manager *m, const struct conf *conf) {
	uint32_t width, height;
	const char *known;
	const char *device = display_device_of(conf);
	_cleanup_(freep) char *last = NULL;
	int r;

	if (!device || access(device, F_OK) == 0)
		return 0;
	last = last_run_node(m, conf);
	if (last) {
		log_info("%s: not there; the last run's display is %s now", device, last);
		return 0;
	}
	log_info("%s: not there yet; waiting up to %d s for it", device, DISPLAY_WAIT_SECONDS);
	r = node_wait(device, (uint64_t)DISPLAY_WAIT_SECONDS * 1000000u);
	known = r == -ETIMEDOUT ? mode_without_device(m, conf, &width, &height) : NULL;
	if (known) {
		log_warning("%s: still not there after %d s; starting without it, at %ux%u (%s)", device,
			    DISPLAY_WAIT_SECONDS, width, height, known);
		return 0;
	}
	if (r == -ETIMEDOUT)
		return log_error_errno(r, "%s: still not there after %d s", device, DISPLAY_WAIT_SECONDS);
	if (r == -ECANCELED)
		log_info("%s: asked to stop while waiting for it", device);
	else if (r < 0)
		log_error_errno(r, "%s: cannot wait for it: %m", device);
	else
		log_info("%s: there", device);
	return r;
}

/* At start a DRM device that has just come may not show its connectors yet (DISPLAY_OUTPUT_RETRY_USEC). */
static int open_output(const struct conf *conf, const char *device, struct display_output **ret) {
	for (uint64_t waited = 0;; waited += DISPLAY_OUTPUT_RETRY_USEC) {
		int r = display_open_output(conf, device, 0, 0, ret);

		if (r != -ENODEV || conf->display != DISPLAY_DRM || waited >= DISPLAY_OUTPUT_WAIT_USEC)
			return r;
		if (waited == 0)
			log_info("%s: no connected output yet; asking again for up to %u ms", device,
				 (unsigned int)(DISPLAY_OUTPUT_WAIT_USEC / 1000));
		usleep(DISPLAY_OUTPUT_RETRY_USEC);
	}
}

/*
 * Returns 0, or 1 when the DRM device is not there and *ret, in memory,
 * stands in for it until it comes. *ret_node: the node opened when it is
 * not the configured device but the last run's display under a new name.
 */
static int open_backend(struct manager *m, const struct conf *conf, struct display_output **ret, char **ret_node) {
	const char *device = display_device_of(conf);
	_cleanup_(freep) char *last = NULL;
	uint32_t width, height;
	int r;

	r = open_output(conf, device, ret);
	if (r == -ENOENT && (last = last_run_node(m, conf))) {
		int q = open_output(conf, last, ret);

		if (q >= 0) {
			log_info("%s: taking %s, where the last run's display is now", device, last);
			*ret_node = TAKE_PTR(last);
			return 0;
		}
		/* As if it were not there: it is tried again when it changes. */
		log_warning_errno(q, "%s: cannot take %s, where the last run's display is now: %m", device, last);
	}
	switch (conf->display) {
	case DISPLAY_DRM:
		if (r == -ENOENT && mode_without_device(m, conf, &width, &height)) {
			/* Shown once the device comes (display/hotplug.c). */
			r = display_stand_in_new(width, height, ret);
			return r < 0 ? log_error_errno(r, "%s: cannot start without it: %m", device) : 1;
		}
		if (r == -EBUSY)
			return log_error_errno(r, "%s: another program is the DRM master", device);
		if (r == -ENODEV)
			return log_error_errno(r, "%s: no connected output with a usable mode", device);
		return r < 0 ? log_error_errno(r, "%s: cannot drive the display: %m", device) : 0;
	case DISPLAY_FBDEV:
		if (r == -EMEDIUMTYPE)
			return log_error_errno(r, "%s: only 32-bit XRGB framebuffers are supported", device);
		return r < 0 ? log_error_errno(r, "%s: cannot open the framebuffer: %m", device) : 0;
	default:
		return r < 0 ? log_error_errno(r, "headless display %ux%u: %m", conf->display_width,
					       conf->display_height) :
			       0;
	}
}

int display_class_new(struct manager *m, const struct conf *conf, struct display_class **ret) {
	struct display_class *dc;
	const char *device = display_device_of(conf) ?: "headless";
	_cleanup_(freep) char *node = NULL;
	struct display_output *b;
	unsigned int want;
	bool lost;
	int r;

	r = open_backend(m, conf, &b, &node);
	if (r < 0)
		return r;
	lost = r > 0;
	r = display_class_new_core(m, b, device, &serve_transport, &dc);
	if (r < 0)
		return log_error_errno(r, "%s: cannot set up the display: %m", device);
	dc->lost = lost;
	dc->drm_budget = conf->display_card_bytes;
	dc->udmabuf = open("/dev/udmabuf", O_RDWR | O_CLOEXEC | O_NOCTTY);
	r = dc->udmabuf < 0 ? -errno : drm_udmabuf_probe(dc->udmabuf);
	if (r < 0) {
		log_full_errno(LOG_INFO, r, "card0: PRIME is off, %s: %m: programs that share dumb buffers as dma-bufs (wlroots) "
			       "cannot run", dc->udmabuf < 0 ? "no /dev/udmabuf" : "dma-bufs cannot be made or told apart");
		if (dc->udmabuf >= 0)
			close(dc->udmabuf);
		dc->udmabuf = -1;
	} else
		log_info("card0: PRIME through /dev/udmabuf: dumb buffers are exported and imported as dma-bufs");
	r = display_state_register(dc);
	if (r < 0) {
		display_class_free(dc);
		return log_error_errno(r, "cannot keep the display's state for a restart: %m");
	}
	if (display_device_of(conf)) {
		r = display_hotplug_new(dc, conf, node, &dc->hotplug);
		if (r < 0 && lost) {
			/* Nothing would ever bring the display. */
			display_class_free(dc);
			return log_error_errno(r, "%s: cannot watch for it to come: %m", device);
		}
		if (r < 0)
			/* The display is driven still; only its going away is not followed. */
			log_warning_errno(r, "%s: cannot watch for the device going away and coming back: %m", device);
	}
	if (conf->routed) {
		r = add_routed(dc);
		if (r < 0) {
			display_class_free(dc);
			return r;
		}
	}
	/* The watch's first look may have taken the device already, freeing the stand-in. */
	b = dc->backend;
	if (dc->lost) {
		log_warning("%s: not there; the personas draw in memory at %ux%u, shown once it comes", device,
			    b->mode.width, b->mode.height);
		*ret = dc;
		return 0;
	}
	want = display_spares_allowed(&(struct display_spares){ conf->display_spares, conf->display_spare_bytes },
				      display_output_frame_bytes(b));
	if (b->screen_width)
		log_info("%s: no %ux%u mode; the personas' frames are shown in the middle of %ux%u", device,
			 b->mode.width, b->mode.height, b->screen_width, b->screen_height);
	log_info("%s: %s display, %ux%u at %u Hz, %u buffers of %" PRIu64 " KiB in all, %u spares%s", device, b->kind,
		 b->mode.width, b->mode.height, b->mode.refresh_hz, b->n_buffers, display_output_memory(b) / 1024,
		 b->n_spares, conf->display != DISPLAY_FBDEV && b->n_spares < want ? " (video memory has no room for more)" : "");
	*ret = dc;
	return 0;
}

