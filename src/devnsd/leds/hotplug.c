/* SPDX-License-Identifier: MIT */
/*
 * LEDs and backlights that come and go in the sysfs classes [Leds] and
 * [Backlight] name (watch/hotplug.c), and LEDs of input devices that wait
 * for their evdev device.
 */
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "watch/hotplug.h"
#include "restart/state.h"
#include "leds/leds-internal.h"
#include "log.h"

static const struct conf_devices *section_of(struct leds_class *lc, enum led_kind kind) {
	const struct conf *conf = lc->base.manager->conf;

	return kind == LED_KIND_LED ? &conf->leds : &conf->backlight;
}

static bool kind_of(const char *subsystem, enum led_kind *ret) {
	for (size_t k = 0; k < ELEMENTSOF(leds_kind_dir); k++)
		if (streq(subsystem, leds_kind_dir[k])) {
			*ret = (enum led_kind)k;
			return true;
		}
	return false;
}

/* Whether a pattern of the section names the light: its class path, or a path that resolves to it. */
static bool section_names(const struct conf_devices *d, const char *class_path, const char *syspath) {
	for (size_t i = 0; i < d->n_patterns; i++)
		if (pattern_names(d->patterns[i], class_path, syspath))
			return true;
	return false;
}

static void forget_pending(struct leds_class *lc, const char *syspath) {
	for (size_t i = 0; i < lc->n_pending;)
		if (streq(lc->pending[i].syspath, syspath))
			lc->pending[i] = lc->pending[--lc->n_pending];
		else
			i++;
}

static void light_appeared(struct leds_class *lc, enum led_kind kind, const struct hotplug_device *dev) {
	const struct conf_devices *d = section_of(lc, kind);
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "/sys/class/%s/%s", leds_kind_dir[kind], dev->sysname) >= (int)sizeof(path) ||
	    !section_names(d, path, dev->syspath) || leds_light_known(lc, dev->syspath, dev->sysname, kind))
		return;
	if (leds_light_waits(lc, kind, dev->sysname, dev->syspath)) {
		struct pending_led *w;

		forget_pending(lc, dev->syspath);
		/* Room from those that went, should their removal have been missed. */
		for (size_t i = 0; lc->n_pending == LEDS_PENDING_MAX && i < lc->n_pending;)
			if (access(lc->pending[i].syspath, F_OK) < 0)
				lc->pending[i] = lc->pending[--lc->n_pending];
			else
				i++;
		if (lc->n_pending == LEDS_PENDING_MAX || strlen(dev->sysname) >= sizeof(w->sysname) ||
		    strlen(dev->syspath) >= sizeof(w->syspath)) {
			log_warning("%s: too many LEDs wait for their input devices; ignored", path);
			return;
		}
		w = &lc->pending[lc->n_pending++];
		strcpy(w->sysname, dev->sysname);
		strcpy(w->syspath, dev->syspath);
		return;
	}
	if (leds_open_light(lc, kind, path, d) >= 0)
		state_changed(lc->base.manager);
}

/* An evdev device came: the LEDs of its input device that waited for it come now. */
static void evdev_appeared(struct leds_class *lc, const struct hotplug_device *dev) {
	_cleanup_(freep) char *parent = NULL;
	struct pending_led due[LEDS_PENDING_MAX];
	size_t n_due = 0;
	char link[PATH_MAX];

	if (lc->n_pending == 0 || strncmp(dev->sysname, "event", 5) != 0 ||
	    snprintf(link, sizeof(link), "%s/..", dev->syspath) >= (int)sizeof(link))
		return;
	parent = realpath(link, NULL);
	for (size_t i = 0; parent && i < lc->n_pending;) {
		_cleanup_(freep) char *kdev = NULL;

		if (snprintf(link, sizeof(link), "%s/device", lc->pending[i].syspath) >= (int)sizeof(link) ||
		    !(kdev = realpath(link, NULL)) || !streq(kdev, parent)) {
			i++;
			continue;
		}
		due[n_due++] = lc->pending[i];
		lc->pending[i] = lc->pending[--lc->n_pending];
	}
	/* Taken off the list first: one whose evdev device went again meanwhile waits anew, once. */
	for (size_t i = 0; i < n_due; i++)
		light_appeared(lc, LED_KIND_LED, &(struct hotplug_device){ .subsystem = "leds", .sysname = due[i].sysname,
									  .syspath = due[i].syspath });
}

static void on_light_added(void *userdata, const struct hotplug_device *dev) {
	struct leds_class *lc = userdata;
	enum led_kind kind;

	if (streq(dev->subsystem, "input"))
		evdev_appeared(lc, dev);
	else if (kind_of(dev->subsystem, &kind))
		light_appeared(lc, kind, dev);
}

static void on_light_removed(void *userdata, const struct hotplug_device *dev) {
	struct leds_class *lc = userdata;
	enum led_kind kind;

	if (!kind_of(dev->subsystem, &kind))
		return;
	forget_pending(lc, dev->syspath);
	for (size_t i = 0; i < lc->n_lights; i++) {
		struct leds_light *ll = light_at(lc, i);

		if (ll && ll->light->backend->kind == kind && streq(ll->real, dev->syspath)) {
			log_info("%s: gone; its views are removed", ll->light->backend->path);
			leds_close_light(lc, ll);
			state_changed(lc->base.manager);
			return;
		}
	}
}

static const struct hotplug_ops light_hotplug_ops = {
	.added = on_light_added,
	.removed = on_light_removed,
};

/*
 * Watches the classes the configuration names. Lights that came after the
 * sections were opened and before the watch began are opened now; patterns
 * that name no sysfs class (plain files standing in for it) get nothing.
 */
static int watch_lights(struct leds_class *lc) {
	const char *subsystems[4] = { 0 };
	size_t n = 0;
	int r;

	for (size_t k = 0; k < ELEMENTSOF(leds_kind_dir); k++)
		if (lc->configured[k])
			subsystems[n++] = leds_kind_dir[k];
	/* Evdev devices, for the input LEDs that wait for theirs. */
	if (lc->configured[LED_KIND_LED] && lc->input)
		subsystems[n++] = "input";
	r = hotplug_new(&lc->hotplug, lc->base.manager->event, subsystems, "light hotplug", &light_hotplug_ops, lc);
	if (r < 0)
		return r;
	for (size_t k = 0; k < ELEMENTSOF(leds_kind_dir); k++) {
		const struct conf_devices *d = section_of(lc, (enum led_kind)k);

		for (size_t i = 0; i < d->n_patterns; i++) {
			glob_t g = { 0 };

			if (glob(d->patterns[i], 0, NULL, &g) == 0)
				for (size_t j = 0; j < g.gl_pathc; j++) {
					_cleanup_(freep) char *real = realpath(g.gl_pathv[j], NULL);
					const char *name = strrchr(g.gl_pathv[j], '/');

					if (!real || !name || leds_light_known(lc, real, name + 1, (enum led_kind)k))
						continue;
					/* A class device may be an input LED that waits for its evdev device. */
					if (strncmp(real, "/sys/", 5) == 0)
						light_appeared(lc, (enum led_kind)k,
							       &(struct hotplug_device){ .subsystem = leds_kind_dir[k],
											 .sysname = name + 1,
											 .syspath = real });
					else
						(void)leds_open_light(lc, (enum led_kind)k, g.gl_pathv[j], d);
				}
			globfree(&g);
		}
	}
	return 0;
}

void leds_watch_lights(struct leds_class *lc) {
	int r = watch_lights(lc);

	if (r < 0)
		log_warning_errno(r, "cannot watch for lights that come and go: %m");
}
