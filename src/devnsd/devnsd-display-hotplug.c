/* SPDX-License-Identifier: MIT */
/*
 * The display device going away and coming back: a GPU's driver unbound
 * or reloaded, a USB display unplugged. While it is gone the personas go
 * on drawing, switching and blanking, their frames kept in memory; when
 * the configured device comes back with the same mode, the active
 * persona's frame goes up on it.
 */
#include <stdlib.h>
#include <string.h>

#include "devnsd-display.h"
#include "devnsd-hotplug.h"
#include "display-backend.h"
#include "log.h"
#include "util.h"

struct display_hotplug {
	struct display_class *class;
	const struct conf *conf;
	struct hotplug *watch;
	/* The node the display was opened through, resolved: what a "remove" names. */
	char *devnode;
	/* Asks a device that came without a connected output again (DISPLAY_OUTPUT_RETRY_USEC). */
	sd_event_source *retry;
	uint64_t retry_until;
};

static const char *subsystem_of(const struct conf *conf) {
	return conf->display == DISPLAY_FBDEV ? "graphics" : "drm";
}

static void lose(struct display_hotplug *h) {
	struct display_class *dc = h->class;
	const struct fb_mode *mode = &dc->backend->mode;
	struct display_output *stand_in = NULL;
	int r;

	sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
	/* No spares: switches copy, into memory nobody sees. */
	r = display_headless_new(mode->width, mode->height, &(struct display_spares){ 0, 0 }, &stand_in);
	if (r >= 0)
		r = display_class_set_output(dc, stand_in, true);
	if (r < 0) {
		log_error_errno(r, "%s: gone, and devnsd cannot let go of it: %m", dc->device);
		return;
	}
	log_warning("%s: gone; the personas go on drawing in memory, shown when it comes back", dc->device);
}

static void try_open(struct display_hotplug *h) {
	struct display_class *dc = h->class;
	uint32_t width = dc->backend->mode.width, height = dc->backend->mode.height;
	struct display_output *b = NULL;
	uint64_t now = 0;
	int r;

	r = display_open_output(h->conf, width, height, &b);
	if (r == -ENODEV && sd_event_now(dc->base.manager->event, CLOCK_MONOTONIC, &now) >= 0 && now < h->retry_until) {
		/* Its connectors are not registered yet (see DISPLAY_OUTPUT_RETRY_USEC). */
		sd_event_source_set_time_relative(h->retry, DISPLAY_OUTPUT_RETRY_USEC);
		sd_event_source_set_enabled(h->retry, SD_EVENT_ONESHOT);
		return;
	}
	if (r >= 0)
		r = display_class_set_output(dc, b, false);
	if (r == -ENODEV || r == -EMEDIUMTYPE)
		log_error("%s: back, but without an output of %ux%u, the personas' mode; restart devnsd to take another",
			  dc->device, width, height);
	else if (r == -EBUSY)
		log_error("%s: back, but another program is its DRM master", dc->device);
	else if (r < 0)
		log_error_errno(r, "%s: back, but devnsd cannot drive it: %m", dc->device);
	else
		log_info("%s: back; showing persona %s", dc->device,
			 dc->base.manager->active ? dc->base.manager->active->name : "(none)");
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
	struct display_hotplug *h = userdata;

	(void)s;
	(void)usec;
	if (h->class->lost)
		try_open(h);
	return 0;
}

/* Whether node is the device the configuration names, as it resolves now (a udev symlink may name it). */
static bool is_configured(struct display_hotplug *h, const char *node) {
	_cleanup_(freep) char *now = realpath(h->class->device, NULL);

	return now && streq(now, node);
}

static void on_added(void *userdata, const struct hotplug_device *dev) {
	struct display_hotplug *h = userdata;
	uint64_t now = 0;

	if (!h->class->lost || !dev->devnode || !is_configured(h, dev->devnode))
		return;
	if (sd_event_now(h->class->base.manager->event, CLOCK_MONOTONIC, &now) < 0)
		return;
	h->retry_until = now + DISPLAY_OUTPUT_WAIT_USEC;
	try_open(h);
	/* Its node may have another name now: a "remove" names the node it came as. */
	if (!h->class->lost) {
		char *copy = strdup(dev->devnode);

		if (copy) {
			free(h->devnode);
			h->devnode = copy;
		}
	}
}

static void on_removed(void *userdata, const struct hotplug_device *dev) {
	struct display_hotplug *h = userdata;

	if (!dev->devnode || !streq(dev->devnode, h->devnode))
		return;
	if (!h->class->lost)
		lose(h);
	else
		/* Gone again before it showed an output. */
		sd_event_source_set_enabled(h->retry, SD_EVENT_OFF);
}

static const struct hotplug_ops display_hotplug_ops = {
	.added = on_added,
	.removed = on_removed,
};

int display_hotplug_new(struct display_class *dc, const struct conf *conf, struct display_hotplug **ret) {
	struct display_hotplug *h;
	int r;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->class = dc;
	h->conf = conf;
	/* A device not there yet is named as the configuration names it. */
	h->devnode = realpath(dc->device, NULL) ?: strdup(dc->device);
	r = h->devnode ? 0 : -ENOMEM;
	if (r >= 0)
		r = sd_event_add_time_relative(dc->base.manager->event, &h->retry, CLOCK_MONOTONIC,
					       DISPLAY_OUTPUT_RETRY_USEC, 0, on_retry, h);
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
	return 0;
}

struct display_hotplug *display_hotplug_free(struct display_hotplug *h) {
	if (!h)
		return NULL;
	hotplug_free(h->watch);
	sd_event_source_disable_unref(h->retry);
	free(h->devnode);
	free(h);
	return NULL;
}
