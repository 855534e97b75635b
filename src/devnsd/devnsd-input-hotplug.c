/* SPDX-License-Identifier: MIT */
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devnsd-hotplug.h"
#include "devnsd-input-hotplug.h"
#include "devnsd-input.h"
#include "log.h"

/* Devices whose node is not in /dev yet, looked for again this often, for this long. */
#define WAITING_MAX 16
#define WAIT_POLL_USEC (50 * 1000ULL)
#define WAIT_MAX_USEC (2 * 1000000ULL)

struct waiting {
	char syspath[256];
	char devnode[64];
	uint64_t deadline;
};

struct input_hotplug {
	struct manager *manager;
	struct hotplug *hotplug;
	struct waiting waiting[WAITING_MAX];
	size_t n_waiting;
	sd_event_source *retry;
};

static bool path_matches(const char *pattern, const char *devnode) {
	glob_t g = { 0 };
	bool match = false;

	if (fnmatch(pattern, devnode, FNM_PATHNAME) == 0)
		return true;
	/* Links to the node (by-id, by-path) name it too. */
	if (glob(pattern, GLOB_NOCHECK, NULL, &g) != 0) {
		globfree(&g);
		return false;
	}
	for (size_t i = 0; i < g.gl_pathc && !match; i++) {
		_cleanup_(freep) char *real = realpath(g.gl_pathv[i], NULL);
		match = real && streq(real, devnode);
	}
	globfree(&g);
	return match;
}

static bool configured(const struct conf *conf, const char *devnode) {
	for (size_t i = 0; i < conf->input.n_patterns; i++)
		if (path_matches(conf->input.patterns[i], devnode))
			return true;
	return false;
}

/* 0 when done with the device (added, known, or not to be had), -ENOENT to look again. */
static int try_add(struct input_hotplug *ih, const char *syspath, const char *devnode) {
	int r = input_device_appeared(ih->manager, syspath, devnode);

	if (r == -ENOENT)
		return r;
	if (r == -ENODEV || r == -ENXIO)
		log_debug("%s: gone before it could be opened", devnode);
	else if (r == -EBUSY)
		log_warning("%s: another program has grabbed the device", devnode);
	else if (r < 0)
		log_warning_errno(r, "%s: cannot add the device: %m", devnode);
	return 0;
}

static void forget_waiting(struct input_hotplug *ih, size_t i) {
	ih->waiting[i] = ih->waiting[--ih->n_waiting];
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
	struct input_hotplug *ih = userdata;

	for (size_t i = 0; i < ih->n_waiting;) {
		struct waiting *w = &ih->waiting[i];

		if (try_add(ih, w->syspath, w->devnode) == -ENOENT && usec < w->deadline) {
			i++;
			continue;
		}
		if (usec >= w->deadline)
			log_warning("%s: its node did not appear in /dev", w->devnode);
		forget_waiting(ih, i);
	}
	if (ih->n_waiting == 0)
		return 0;
	(void)sd_event_source_set_time_relative(s, WAIT_POLL_USEC);
	return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

static void wait_for_node(struct input_hotplug *ih, const char *syspath, const char *devnode) {
	struct waiting *w;
	uint64_t now = 0;
	int r;

	if (ih->n_waiting == WAITING_MAX || strlen(syspath) >= sizeof(w->syspath) ||
	    strlen(devnode) >= sizeof(w->devnode)) {
		log_warning("%s: its node is not in /dev; not waiting for it", devnode);
		return;
	}
	(void)sd_event_now(sd_event_source_get_event(ih->retry), CLOCK_MONOTONIC, &now);
	w = &ih->waiting[ih->n_waiting++];
	snprintf(w->syspath, sizeof(w->syspath), "%s", syspath);
	snprintf(w->devnode, sizeof(w->devnode), "%s", devnode);
	w->deadline = now + WAIT_MAX_USEC;
	(void)sd_event_source_set_time_relative(ih->retry, WAIT_POLL_USEC);
	r = sd_event_source_set_enabled(ih->retry, SD_EVENT_ONESHOT);
	if (r < 0)
		log_warning_errno(r, "%s: cannot wait for its node: %m", devnode);
}

static void on_added(void *userdata, const char *syspath, const char *devnode) {
	struct input_hotplug *ih = userdata;

	if (!configured(ih->manager->conf, devnode))
		return;
	if (try_add(ih, syspath, devnode) == -ENOENT)
		wait_for_node(ih, syspath, devnode);
}

static void on_removed(void *userdata, const char *syspath, const char *devnode) {
	struct input_hotplug *ih = userdata;

	for (size_t i = 0; i < ih->n_waiting;) {
		if (streq(ih->waiting[i].syspath, syspath))
			forget_waiting(ih, i);
		else
			i++;
	}
	input_device_vanished(ih->manager, syspath, devnode);
}

static const struct hotplug_ops hotplug_ops = {
	.added = on_added,
	.removed = on_removed,
};

int input_hotplug_new(struct manager *m, struct input_hotplug **ret) {
	struct input_hotplug *ih;
	int r;

	ih = calloc(1, sizeof(*ih));
	if (!ih)
		return log_error_errno(ENOMEM, "out of memory");
	ih->manager = m;
	r = sd_event_add_time_relative(m->event, &ih->retry, CLOCK_MONOTONIC, WAIT_POLL_USEC, 0, on_retry, ih);
	if (r >= 0)
		r = sd_event_source_set_enabled(ih->retry, SD_EVENT_OFF);
	if (r >= 0)
		r = hotplug_new(&ih->hotplug, m->event, &hotplug_ops, ih);
	if (r < 0) {
		input_hotplug_free(ih);
		return log_error_errno(r, "Cannot watch for input devices: %m");
	}
	log_info("watching for input devices (%s events)", hotplug_source(ih->hotplug));
	*ret = ih;
	return 0;
}

struct input_hotplug *input_hotplug_free(struct input_hotplug *ih) {
	if (!ih)
		return NULL;
	hotplug_free(ih->hotplug);
	sd_event_source_disable_unref(ih->retry);
	free(ih);
	return NULL;
}
