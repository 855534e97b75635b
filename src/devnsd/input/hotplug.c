/* SPDX-License-Identifier: MIT */
#include <glob.h>
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/hotplug.h"
#include "input/hotplug.h"
#include "input/input.h"
#include "populate/populate.h"
#include "evdev-node.h"
#include "input-backend.h"
#include "log.h"

/* Devices whose node is not in /dev yet, looked for again this often, for this long. */
#define WAITING_MAX 16
#define WAIT_POLL_USEC (50 * 1000ULL)
#define WAIT_MAX_USEC (2 * 1000000ULL)
/* How often a device that went away looks whether its nodes' handles are closed. */
#define REAP_POLL_USEC (100 * 1000ULL)

struct waiting {
	char syspath[256];
	char devnode[64];
	uint64_t deadline;
};

struct input_hotplug {
	struct manager *manager;
	struct input_class *input;
	struct hotplug *hotplug;
	struct waiting waiting[WAITING_MAX];
	size_t n_waiting;
	sd_event_source *retry;
};

/* --- the input class's side ------------------------------------------------------ */

static void on_container_changed(struct persona *p, int r, const struct populate_result *res, void *userdata) {
	(void)userdata;
	if (r < 0 && r != -ECANCELED)
		log_warning_errno(r, "persona %s: its container's /dev did not follow a device (%s): %m", p->name,
				  res->failed);
}

/* An attached container gets the node, or loses it. */
static void node_to_container(struct input_node *in, bool remove) {
	struct manager *m = in->device->class->base.manager;
	int r = populate_node(m, in->persona,
			      &(struct node_desc){ .path = in->path, .kind = "input", .udev = in->device->udev,
						  .source = in->device->backend->path },
			      remove,
			      on_container_changed, NULL);

	if (r < 0)
		log_warning_errno(r, "%s: the container of persona %s cannot follow: %m", in->path, in->persona->name);
}

int input_hotplug_gone_while_down(struct manager *m, const char *devname, const char *udev) {
	char path[300], persona[NAME_MAX_LEN + 1];
	const char *name, *slash;
	struct persona *p;

	/* Only a persona's input node, devns/PERSONA/eventN, is in a container (a routed one is the host's). */
	if (strncmp(devname, DEVNS_DEV_DIR "/", strlen(DEVNS_DEV_DIR "/")) != 0)
		return 0;
	name = devname + strlen(DEVNS_DEV_DIR "/");
	slash = strchr(name, '/');
	if (!slash || (size_t)(slash - name) > NAME_MAX_LEN || strncmp(slash + 1, "event", 5) != 0 || strchr(slash + 1, '/'))
		return 0;
	snprintf(persona, sizeof(persona), "%.*s", (int)(slash - name), name);
	p = manager_find_persona(m, persona);
	if (!p || !udev[0])
		return 0;
	snprintf(path, sizeof(path), "/dev/%s", devname);
	return populate_node(m, p, &(struct node_desc){ .path = path, .kind = "input", .udev = udev }, true,
			     on_container_changed, NULL);
}

void input_hotplug_node_ready(struct input_node *in) {
	if (!in->device->gone)
		node_to_container(in, false);
}

static unsigned int open_handles(const struct input_device *d) {
	const struct input_node *in;
	unsigned int n = 0;

	LIST_FOREACH(in, &d->nodes, by_device)
		n += in->evdev->n_clients;
	return n;
}

/* The containers lose the nodes (while the nodes are still in /dev, to be recognised). */
static void device_unplug(struct input_device *d) {
	struct input_node *in;

	if (d->unplugged)
		return;
	d->unplugged = true;
	LIST_FOREACH(in, &d->nodes, by_device)
		if (in->ready)
			node_to_container(in, true);
}

static void device_reap(struct input_device *d) {
	log_info("%s: nodes removed", d->backend->path);
	d->reap = sd_event_source_disable_unref(d->reap);
	input_class_remove_device(d->class, d);
}

static int on_reap(sd_event_source *s, uint64_t usec, void *userdata) {
	struct input_device *d = userdata;

	device_unplug(d);
	if (open_handles(d) > 0 && usec < d->gone_deadline) {
		(void)sd_event_source_set_time_relative(s, REAP_POLL_USEC);
		return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
	}
	device_reap(d);
	return 0;
}

/* Gone: held keys released, readers get ENODEV; the rest happens from the loop. */
static void device_gone(struct input_device *d) {
	sd_event *event = d->class->base.manager->event;
	uint64_t now = 0;
	int r;

	input_device_set_gone(d);
	if (d->reap || d->unplugged)
		return;
	(void)sd_event_now(event, CLOCK_MONOTONIC, &now);
	d->gone_deadline = now + INPUT_GONE_LINGER_USEC;
	r = sd_event_add_time(event, &d->reap, CLOCK_MONOTONIC, now, 0, on_reap, d);
	if (r < 0)
		log_warning_errno(r, "%s: cannot schedule the removal of its nodes: %m", d->backend->path);
}

/* The device named eventN: the one in use, or (gone) one whose nodes are not removed yet. */
static struct input_device *device_named(struct input_class *ic, const char *name, bool gone) {
	struct input_device *d;

	LIST_FOREACH(d, &ic->devices, link)
		if (d->gone == gone && !(gone && d->unplugged && !d->reap) && streq(d->backend->name, name))
			return d;
	return NULL;
}

/* 1 when added, 0 when known already, or a negative errno (-ENOENT while the node is not in /dev). */
static int device_appeared(struct input_class *ic, const char *syspath, const char *devnode) {
	const char *name = strrchr(devnode, '/');
	struct input_backend *b;
	struct input_device *d;
	int r;

	if (!name)
		return 0;
	name++;
	d = device_named(ic, name, false);
	if (d && (!d->syspath[0] || streq(d->syspath, syspath)))
		return 0;
	/* An older device of that name is gone, whether or not its removal was seen. */
	if (d)
		device_gone(d);
	/* Its nodes end now: the new ones take the same names and numbers. */
	while ((d = device_named(ic, name, true))) {
		device_unplug(d);
		device_reap(d);
	}
	r = input_evdev_open(devnode, &b);
	if (r < 0)
		return r;
	log_info("%s: %s (added)", devnode, libevdev_get_name(b->desc));
	r = input_class_add_device(ic, b, &d);
	if (r < 0)
		return r;
	d->hotplugged = true;
	snprintf(d->syspath, sizeof(d->syspath), "%s", syspath);
	return 1;
}

static void device_vanished(struct input_class *ic, const char *syspath, const char *devnode) {
	const char *name = strrchr(devnode, '/');
	struct input_device *d;

	if (!name)
		return;
	name++;
	d = device_named(ic, name, false);
	if (!d)
		d = device_named(ic, name, true);
	if (d && (!d->syspath[0] || streq(d->syspath, syspath)))
		device_gone(d);
}

/* --- the watch ------------------------------------------------------------------- */

/* 0 when done with the device (added, known, or not to be had), -ENOENT to look again. */
static int try_add(struct input_hotplug *ih, const char *syspath, const char *devnode) {
	int r = device_appeared(ih->input, syspath, devnode);

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

/* An evdev device (eventN), which has a node. */
static bool is_evdev(const struct hotplug_device *dev) {
	return dev->devnode && strncmp(dev->sysname, "event", 5) == 0;
}

static void on_added(void *userdata, const struct hotplug_device *dev) {
	struct input_hotplug *ih = userdata;

	if (!is_evdev(dev) || !input_conf_wants(ih->manager->conf, dev->devnode))
		return;
	if (try_add(ih, dev->syspath, dev->devnode) == -ENOENT)
		wait_for_node(ih, dev->syspath, dev->devnode);
}

static void on_removed(void *userdata, const struct hotplug_device *dev) {
	struct input_hotplug *ih = userdata;

	if (!is_evdev(dev))
		return;
	for (size_t i = 0; i < ih->n_waiting;) {
		if (streq(ih->waiting[i].syspath, dev->syspath))
			forget_waiting(ih, i);
		else
			i++;
	}
	device_vanished(ih->input, dev->syspath, dev->devnode);
}

static const struct hotplug_ops hotplug_ops = {
	.added = on_added,
	.removed = on_removed,
};

/*
 * Devices that came after the class opened the configured ones and before
 * the watch began: added now (the watch reports what comes after).
 */
static void catch_up(struct input_hotplug *ih) {
	const struct conf *conf = ih->manager->conf;

	for (size_t i = 0; i < conf->input.n_patterns; i++) {
		glob_t g = { 0 };

		if (glob(conf->input.patterns[i], 0, NULL, &g) == 0)
			for (size_t j = 0; j < g.gl_pathc; j++) {
				_cleanup_(freep) char *node = realpath(g.gl_pathv[j], NULL), *sys = NULL;
				char path[64];

				if (!node || strncmp(node, "/dev/input/event", 16) != 0)
					continue;
				snprintf(path, sizeof(path), "/sys/class/input/%s", node + 11);
				sys = realpath(path, NULL);
				if (sys)
					(void)try_add(ih, sys, node);
			}
		globfree(&g);
	}
}

int input_hotplug_new(struct manager *m, struct input_class *ic, struct input_hotplug **ret) {
	struct input_hotplug *ih;
	int r;

	ih = calloc(1, sizeof(*ih));
	if (!ih)
		return log_warning_errno(ENOMEM, "Cannot watch for input devices; those that appear later will not be shared: %m");
	ih->manager = m;
	ih->input = ic;
	r = sd_event_add_time_relative(m->event, &ih->retry, CLOCK_MONOTONIC, WAIT_POLL_USEC, 0, on_retry, ih);
	if (r >= 0)
		r = sd_event_source_set_enabled(ih->retry, SD_EVENT_OFF);
	if (r >= 0)
		r = hotplug_new(&ih->hotplug, m->event, (const char *const[]){ "input", NULL }, "input hotplug", &hotplug_ops,
				ih);
	if (r < 0) {
		input_hotplug_free(ih);
		return log_warning_errno(r, "Cannot watch for input devices; those that appear later will not be shared: %m");
	}
	log_info("watching for input devices (%s events)", hotplug_source(ih->hotplug));
	catch_up(ih);
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
