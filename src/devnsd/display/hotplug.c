/* SPDX-License-Identifier: MIT */
/*
 * The display device going away and coming back: a GPU's driver unbound
 * or reloaded, a USB display unplugged. While it is gone the personas go
 * on drawing, switching and blanking, their frames kept in memory; when
 * the configured device comes back with the same mode, the active
 * persona's frame goes up on it. The device may come back under another
 * name: devnsd held the old one until it heard of the removal, so a driver
 * bound again meanwhile got the next free number (card1). Once opened, it
 * is known by the hardware it belongs to (its parent in sysfs, the GPU's
 * PCI device), and only that hardware is taken again, under any name; but
 * the firmware's framebuffer, which a GPU's driver takes over early in a
 * boot (simpledrm, efifb), is followed by the next device of its kind. The
 * hardware goes into the state record, so that a devnsd started again
 * finds the display under the name it has then.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "display/display-internal.h"
#include "watch/hotplug.h"
#include "restart/state.h"
#include "display-backend.h"
#include "log.h"
#include "util.h"

/* A device that came back with another program as its DRM master is asked again this often. */
#define DISPLAY_BUSY_RETRY_USEC (1000 * 1000u)

struct display_hotplug {
	struct display_class *class;
	const struct conf *conf;
	struct hotplug *watch;
	/* The node the display was opened through, resolved: what a "remove" names. */
	char *devnode;
	/* The hardware is the framebuffer the firmware set up. */
	bool firmware;
	/* While it is gone: the node an event named, tried in place of the configured path. */
	char *candidate;
	/* Asks the device again: while it shows no output yet (until retry_until), or while another program is master. */
	sd_event_source *retry;
	uint64_t retry_until;
	/* What the last try failed with, logged once. */
	int failed;
};

static const char *subsystem_of(const struct conf *conf) {
	return conf->display == DISPLAY_FBDEV ? "graphics" : "drm";
}

/* Remembers what the display now open through node is, for when it comes back, in this run or the next. */
static void know_hardware(struct display_hotplug *h, const char *node) {
	char *hardware = NULL, *kind = NULL;
	bool same;

	/* Not known: the configured name is taken again, whatever comes under it. */
	(void)display_hardware_of(node, &hardware, &kind);
	same = hardware && h->class->hardware && streq(hardware, h->class->hardware);
	free(h->class->hardware);
	free(h->class->hardware_kind);
	h->class->hardware = hardware;
	h->class->hardware_kind = kind;
	/* Asked now: its driver is gone with it. */
	h->firmware = hardware && display_hardware_is_firmware(hardware);
	if (!same)
		state_changed(h->class->base.manager);
}

/* Whether node is the device the configuration names, as it resolves now (a udev symlink may name it). */
static bool is_configured(struct display_hotplug *h, const char *node) {
	_cleanup_(freep) char *now = realpath(h->class->device, NULL);

	return now && streq(now, node);
}

/* Whether the display that is gone may be taken again through node (see the top of this file). */
static bool is_successor(struct display_hotplug *h, const char *node) {
	_cleanup_(freep) char *hardware = NULL, *kind = NULL;

	if (!h->class->hardware)
		return is_configured(h, node);
	if (display_hardware_of(node, &hardware, &kind) < 0 || !streq(kind, h->class->hardware_kind))
		return false;
	return streq(hardware, h->class->hardware) || h->firmware;
}

static void lose(struct display_hotplug *h) {
	struct display_class *dc = h->class;
	const struct fb_mode *mode = &dc->backend->mode;
	struct display_output *stand_in = NULL;
	int r;

	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
	r = display_stand_in_new(mode->width, mode->height, &stand_in);
	if (r >= 0)
		r = display_class_set_output(dc, stand_in, true);
	if (r < 0) {
		log_error_errno(r, "%s: gone, and devnsd cannot let go of it: %m", dc->device);
		return;
	}
	h->failed = 0;
	log_warning("%s: gone; the personas go on drawing in memory, shown when it comes back", dc->device);
}

static void retry_in(struct display_hotplug *h, uint64_t usec) {
	sd_event_source_set_time_relative(h->retry, usec);
	/* Cannot fail while the loop runs: turning a timer on makes no system call. */
	(void)sd_event_source_set_enabled(h->retry, SD_EVENT_ONESHOT);
}

/* node: what was tried, named when it is not the configured device. */
static void log_failure(struct display_hotplug *h, const char *node, int r, uint32_t width, uint32_t height) {
	const char *device = h->class->device, *as = is_configured(h, node) ? "" : " as ";

	if (!*as)
		node = "";
	if (r == h->failed)
		return;
	h->failed = r;
	if (r == -ENODEV)
		log_error("%s: back%s%s, but without an output of %ux%u (the personas' mode) or larger; restart devnsd to take another",
			  device, as, node, width, height);
	else if (r == -EMEDIUMTYPE)
		log_error("%s: back%s%s, but not a 32-bit XRGB framebuffer of %ux%u, the personas' mode; restart devnsd to take another",
			  device, as, node, width, height);
	else if (r == -EBUSY)
		log_error("%s: back%s%s, but another program is its DRM master; asking again every %u s", device, as, node,
			  (unsigned int)(DISPLAY_BUSY_RETRY_USEC / 1000000u));
	else
		log_error_errno(r, "%s: back%s%s, but devnsd cannot drive it: %m", device, as, node);
}

static void try_open(struct display_hotplug *h) {
	struct display_class *dc = h->class;
	uint32_t width = dc->backend->mode.width, height = dc->backend->mode.height;
	/* The node an event named, or the configured path as it leads now: a "remove" names that. */
	_cleanup_(freep) char *node = realpath(h->candidate ?: dc->device, NULL);
	struct display_output *b = NULL;
	uint64_t now = 0;
	bool renamed;
	int r;

	if (!node || !is_successor(h, node))
		/* Not there (any more), or its number taken by another device already: the next "add" tries again. */
		return;
	r = display_open_output(h->conf, node, width, height, &b);
	if (r == -ENODEV && sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now) >= 0 && now < h->retry_until) {
		/* Its connectors are not registered yet (see DISPLAY_OUTPUT_RETRY_USEC). */
		retry_in(h, DISPLAY_OUTPUT_RETRY_USEC);
		return;
	}
	if (r >= 0)
		r = display_class_set_output(dc, b, false);
	if (r < 0) {
		log_failure(h, node, r, width, height);
		if (r == -EBUSY)
			retry_in(h, DISPLAY_BUSY_RETRY_USEC);
		return;
	}
	h->failed = 0;
	free(h->devnode);
	h->devnode = TAKE_PTR(node);
	h->candidate = mfree(h->candidate);
	know_hardware(h, h->devnode);
	renamed = !is_configured(h, h->devnode);
	log_info("%s: back%s%s; showing persona %s%s", dc->device, renamed ? " as " : "", renamed ? h->devnode : "",
		 dc->base.manager->active ? dc->base.manager->active->name : "(none)",
		 b->screen_width ? " in the middle of a larger mode" : "");
}

/* The device came, or changed (a connector plugged in): tried now, and for a while if it shows no output yet. */
static void start_trying(struct display_hotplug *h) {
	uint64_t now = 0;

	if (sd_event_now(h->class->base.manager->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	h->retry_until = now + DISPLAY_OUTPUT_WAIT_USEC;
	try_open(h);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
	struct display_hotplug *h = userdata;

	(void)s;
	(void)usec;
	if (h->class->lost)
		try_open(h);
	return 0;
}

/* Tries node from now on, in place of the configured path. */
static void try_through(struct display_hotplug *h, const char *node) {
	char *candidate = strdup(node);

	if (!candidate)
		return;
	free(h->candidate);
	h->candidate = candidate;
	start_trying(h);
}

static void on_added(void *userdata, const struct hotplug_device *dev) {
	struct display_hotplug *h = userdata;

	if (h->class->lost && dev->devnode && is_successor(h, dev->devnode))
		try_through(h, dev->devnode);
}

static void on_removed(void *userdata, const struct hotplug_device *dev) {
	struct display_hotplug *h = userdata;
	bool there;

	if (!dev->devnode)
		return;
	if (h->class->lost) {
		if (!streq(dev->devnode, h->candidate ?: h->devnode))
			return;
		/* Gone again before devnsd could take it. */
		h->candidate = mfree(h->candidate);
		/* Cannot fail: sd-event reports no failure turning a source off. */
		(void)sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
		return;
	}
	if (!streq(dev->devnode, h->devnode))
		return;
	/*
	 * The kernel sends "remove" on request too (a write to the device's
	 * uevent file): gone is a device whose node is no more, or whose file
	 * answers ENODEV. A framebuffer's number is free again at once, so
	 * another may be there under the same name already: tried at once.
	 */
	there = access(h->devnode, F_OK) == 0;
	if (there && !display_output_gone(h->class->backend))
		return;
	lose(h);
	if (there)
		try_through(h, h->devnode);
}

static const struct hotplug_ops display_hotplug_ops = {
	.added = on_added,
	.changed = on_added,
	.removed = on_removed,
};

int display_hotplug_new(struct display_class *dc, const struct conf *conf, const char *node,
			struct display_hotplug **ret) {
	struct display_hotplug *h;
	int r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->class = dc;
	h->conf = conf;
	/* A device not there yet is named as the configuration names it. */
	h->devnode = realpath(node ?: dc->device, NULL) ?: strdup(dc->device);
	r = h->devnode ? 0 : -ENOMEM;
	if (r >= 0 && !dc->lost)
		know_hardware(h, h->devnode);
	else if (r >= 0 && display_hardware_last(dc->base.manager, conf, &dc->hardware, &dc->hardware_kind) >= 0) {
		/* Not there now: the last run's display is taken under whatever name it comes with. */
		h->firmware = display_hardware_is_firmware(dc->hardware);
		/* Or has already, and could not be taken at start (another master): tried below. */
		(void)display_hardware_find(dc->hardware, dc->hardware_kind, &h->candidate);
	}
	if (r >= 0)
		r = sd_event_add_time_relative(dc->base.manager->event, &h->retry, CLOCK_MONOTONIC,
					       DISPLAY_OUTPUT_RETRY_USEC, 1, on_retry, h);
	if (r >= 0)
		r = sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
	if (r >= 0)
		r = hotplug_new(&h->watch, dc->base.manager->event, (const char *const[]){ subsystem_of(conf), NULL },
				"display hotplug", &display_hotplug_ops, h);
	if (r < 0) {
		display_hotplug_free(h);
		return r;
	}
	*ret = h;
	/* Started without it: it may have come between the start's look and the watch. */
	if (dc->lost)
		start_trying(h);
	return 0;
}

struct display_hotplug *display_hotplug_free(struct display_hotplug *h) {
	if (!h)
		return NULL;
	hotplug_free(h->watch);
	sd_event_source_disable_unref(h->retry);
	free(h->devnode);
	h->class->hardware = mfree(h->class->hardware);
	h->class->hardware_kind = mfree(h->class->hardware_kind);
	free(h->candidate);
	free(h);
	return NULL;
}
