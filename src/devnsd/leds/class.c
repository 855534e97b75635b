/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/input.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "watch/hostns.h"
#include "watch/hotplug.h"
#include "input/input.h"
#include "leds/leds.h"
#include "restart/state.h"
#include "light.h"
#include "log.h"
#include "sysfs-view.h"

/* Input devices with LEDs that may come at once (a hub of keyboards), waiting for their evdev devices. */
#define LEDS_PENDING_MAX 16

/* One configured LED or backlight; a free slot has no light. */
struct leds_light {
	struct leds_class *class;
	struct light *light;
	/* What views read and write: the light itself, or an LED of an owned input device. */
	struct light_source *source;
	/* The directory, as it resolved when the light was opened. */
	char *real;
};

/* One persona's view of one light: what its attribute files stand for. */
struct leds_view {
	struct leds_light *ll;
	struct persona *persona;
	struct sysfs_node *dir;
};

struct leds_persona {
	struct persona *persona;
	struct sysfs_node *root;
	struct sysfs_node *class_dir[2];
	struct leds_view *views;
	LIST_ENTRY(leds_persona) link;
};

struct leds_class {
	struct device_class base;
	/* The input class, whose devices' LEDs go through their evdev nodes; NULL without one. */
	struct input_class *input;
	struct sysfs_view *view;
	char *mountpoint;
	/* The views' file system, and whether a copy of its mount is in PID 1's mount namespace. */
	dev_t view_dev;
	bool published;
	/* Slots up to n_lights; lights that went leave free slots, which new ones take. */
	struct leds_light lights[LEDS_MAX_LIGHTS * 2];
	size_t n_lights;
	size_t n_kind[2];
	/* Whether [Leds] and [Backlight] name lights: their class directories are in every view. */
	bool configured[2];
	/* Lights come and go in the sysfs classes that [Leds] and [Backlight] name. */
	struct hotplug *hotplug;
	/* LEDs of input devices whose evdev device has not come yet (its handler may attach after the LED's). */
	struct pending_led {
		char sysname[NAME_MAX + 1];
		char syspath[256];
	} pending[LEDS_PENDING_MAX];
	size_t n_pending;
	/*
	 * The display is powered down: so are the backlights, as the kernel's
	 * fbdev blanking powers down the backlights it notifies.
	 */
	struct listener display_power;
	bool display_down;
	LIST_HEAD(, leds_persona) personas;
};

static const char *const kind_dir[] = {
	[LED_KIND_LED] = "leds",
	[LED_KIND_BACKLIGHT] = "backlight",
};

static struct leds_class *to_leds(struct device_class *dc) {
	return container_of(dc, struct leds_class, base);
}

/* The light in slot i, or NULL for a free slot. */
static struct leds_light *light_at(struct leds_class *lc, size_t i) {
	return lc->lights[i].light ? &lc->lights[i] : NULL;
}

static struct led_backend *backend_of(const struct leds_view *v) {
	return v->ll->light->backend;
}

static const struct light_state *state_of(const struct leds_view *v) {
	return light_state_of(v->ll->light, v->persona);
}

/* What a write changed, or why it failed: value errors go back to the writer alone. */
static int stored(const struct leds_view *v, const char *attr, int r) {
	/* -ENODEV: an input device's LED while the device is not there. */
	if (r < 0 && r != -EINVAL && r != -ENODEV)
		log_warning_errno(r, "%s/%s: writing for persona %s failed: %m", backend_of(v)->path, attr,
				  v->persona->name);
	if (r >= 0)
		state_changed(v->ll->class->base.manager);
	return r;
}

static int show_u32(char *buf, size_t size, uint32_t value) {
	return snprintf(buf, size, "%u\n", value);
}

static uint32_t brightness_of(const struct leds_view *v) {
	struct light_source *src = v->ll->source;

	return src->ops->brightness(src, v->persona);
}

static int brightness_show(void *data, char *buf, size_t size) {
	return show_u32(buf, size, brightness_of(data));
}

static int brightness_store(void *data, const char *buf, size_t len) {
	struct leds_view *v = data;
	struct led_backend *b = backend_of(v);
	uint32_t value;
	int r;

	/* As the kernel: LEDs take decimal, backlights also 0x and 0 prefixes. */
	r = led_parse_value(buf, len, b->kind == LED_KIND_LED ? 10 : 0, b->max_brightness, &value);
	if (r < 0)
		return r;
	return stored(v, "brightness", v->ll->source->ops->set_brightness(v->ll->source, v->persona, value));
}

static int max_brightness_show(void *data, char *buf, size_t size) {
	return show_u32(buf, size, backend_of(data)->max_brightness);
}

static int trigger_show(void *data, char *buf, size_t size) {
	struct leds_view *v = data;

	return led_triggers_format(&backend_of(v)->triggers, state_of(v)->trigger, buf, size);
}

static int trigger_store(void *data, const char *buf, size_t len) {
	struct leds_view *v = data;
	int index = led_triggers_find(&backend_of(v)->triggers, buf, len);

	if (index < 0)
		return index;
	return stored(v, "trigger", v->ll->source->ops->set_trigger(v->ll->source, v->persona, (size_t)index));
}

static int actual_brightness_show(void *data, char *buf, size_t size) {
	struct leds_view *v = data;
	uint32_t value = state_of(v)->brightness;

	/* The persona the hardware shows reads the hardware; the others their own state. */
	if (v->ll->light->shown == v->persona && led_backend_get_actual(backend_of(v), &value) < 0)
		value = state_of(v)->brightness;
	return show_u32(buf, size, value);
}

static int bl_power_show(void *data, char *buf, size_t size) {
	return show_u32(buf, size, state_of(data)->bl_power);
}

static int bl_power_store(void *data, const char *buf, size_t len) {
	struct leds_view *v = data;
	uint32_t value;
	int r = led_parse_value(buf, len, 0, LED_BL_POWER_MAX, &value);

	if (r < 0)
		return r;
	return stored(v, "bl_power", light_set_power(v->ll->light, v->persona, value));
}

static const struct sysfs_file_ops brightness_ops = { .show = brightness_show, .store = brightness_store };
static const struct sysfs_file_ops max_brightness_ops = { .show = max_brightness_show };
static const struct sysfs_file_ops trigger_ops = { .show = trigger_show, .store = trigger_store };
static const struct sysfs_file_ops actual_brightness_ops = { .show = actual_brightness_show };
static const struct sysfs_file_ops bl_power_ops = { .show = bl_power_show, .store = bl_power_store };

static const struct attr {
	const char *name;
	mode_t mode;
	const struct sysfs_file_ops *ops;
} led_attrs[] = {
	{ "brightness", 0644, &brightness_ops },
	{ "max_brightness", 0444, &max_brightness_ops },
	{ "trigger", 0644, &trigger_ops },
	{ 0 },
}, backlight_attrs[] = {
	{ "actual_brightness", 0444, &actual_brightness_ops },
	{ "bl_power", 0644, &bl_power_ops },
	{ "brightness", 0644, &brightness_ops },
	{ "max_brightness", 0444, &max_brightness_ops },
	{ 0 },
};

static int add_light_view(struct leds_class *lc, struct leds_persona *lp, size_t i) {
	struct leds_light *ll = &lc->lights[i];
	struct led_backend *b = ll->light->backend;
	struct sysfs_node *dir;
	int r;

	lp->views[i] = (struct leds_view){ .ll = ll, .persona = lp->persona };
	r = light_add_owner(ll->light, lp->persona);
	if (r < 0)
		return r;
	r = sysfs_dir_add(lc->view, lp->class_dir[b->kind], b->name, NULL, &dir);
	if (r < 0)
		return r;
	lp->views[i].dir = dir;
	for (const struct attr *a = b->kind == LED_KIND_LED ? led_attrs : backlight_attrs; r >= 0 && a->name; a++)
		r = sysfs_file_add(lc->view, dir, a->name, a->mode, a->ops, &lp->views[i]);
	if (r >= 0)
		sysfs_node_set_owner(lc->view, dir, lp->persona->owner.uid, lp->persona->owner.gid);
	return r;
}

static struct leds_persona *persona_of(struct leds_class *lc, struct persona *p) {
	struct leds_persona *lp;

	LIST_FOREACH(lp, &lc->personas, link)
		if (lp->persona == p)
			return lp;
	return NULL;
}

static void leds_remove_persona(struct device_class *dc, struct persona *p) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp = persona_of(lc, p);

	if (!lp)
		return;
	for (size_t i = 0; i < lc->n_lights; i++) {
		struct leds_light *ll = light_at(lc, i);
		int r = ll ? light_remove_owner(ll->light, p) : 0;

		if (r < 0)
			log_warning_errno(r, "%s: cannot update the hardware: %m", ll->light->backend->path);
	}
	sysfs_node_remove(lc->view, lp->root);
	LIST_REMOVE(lp, link);
	free(lp->views);
	free(lp);
}

static int leds_add_persona(struct device_class *dc, struct persona *p) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp;
	struct sysfs_node *sys, *cls;
	int r;

	lp = calloc(1, sizeof(*lp));
	if (!lp)
		return log_error_errno(ENOMEM, "out of memory");
	lp->persona = p;
	lp->views = calloc(ELEMENTSOF(lc->lights), sizeof(*lp->views));
	LIST_INSERT_HEAD(&lc->personas, lp, link);
	r = lp->views ? sysfs_dir_add(lc->view, sysfs_view_root(lc->view), p->name, p, &lp->root) : -ENOMEM;
	if (r >= 0)
		r = sysfs_dir_add(lc->view, lp->root, "sys", NULL, &sys);
	if (r >= 0)
		r = sysfs_dir_add(lc->view, sys, "class", NULL, &cls);
	for (size_t k = 0; k < ELEMENTSOF(kind_dir) && r >= 0; k++)
		r = sysfs_dir_add(lc->view, cls, kind_dir[k], NULL, &lp->class_dir[k]);
	for (size_t i = 0; i < lc->n_lights && r >= 0; i++)
		if (light_at(lc, i))
			r = add_light_view(lc, lp, i);
	if (r >= 0)
		sysfs_node_set_owner(lc->view, lp->root, p->owner.uid, p->owner.gid);
	if (r < 0) {
		leds_remove_persona(dc, p);
		return log_error_errno(r, "%s/%s: cannot create the persona's view: %m", lc->mountpoint, p->name);
	}
	return 0;
}

static void leds_switch_to(struct device_class *dc, struct persona *from, struct persona *to, struct switch_op *op) {
	struct leds_class *lc = to_leds(dc);

	(void)from;
	(void)op;
	/* LEDs of input devices follow their evdev nodes, which the input class switches. */
	for (size_t i = 0; i < lc->n_lights; i++) {
		struct leds_light *ll = light_at(lc, i);
		int r = ll ? light_set_active(ll->light, to) : 0;

		if (r < 0)
			log_warning_errno(r, "%s: cannot apply persona %s's state: %m", ll->light->backend->path, to->name);
	}
}

static void leds_foreach_node(struct device_class *dc, struct persona *p, node_desc_fn fn, void *userdata) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp = persona_of(lc, p);

	if (!lp)
		return;
	for (size_t k = 0; k < ELEMENTSOF(kind_dir); k++) {
		char path[PATH_MAX], source[64];

		if (!lc->configured[k])
			continue;
		snprintf(path, sizeof(path), "%s/%s/sys/class/%s", lc->mountpoint, p->name, kind_dir[k]);
		snprintf(source, sizeof(source), "/sys/class/%s", kind_dir[k]);
		fn(userdata, &(struct node_desc){
			.path = path,
			.kind = kind_dir[k],
			.source = source,
			.opened = sysfs_node_opened(lp->class_dir[k]),
		});
	}
}

static void blank_backlights(struct leds_class *lc, bool down) {
	lc->display_down = down;
	for (size_t i = 0; i < lc->n_lights; i++) {
		struct leds_light *ll = light_at(lc, i);
		int r;

		if (!ll || ll->light->backend->kind != LED_KIND_BACKLIGHT)
			continue;
		r = light_set_blanked(ll->light, down);
		if (r < 0)
			log_warning_errno(r, "%s: cannot power the backlight %s with the display: %m", ll->light->backend->path,
					  down ? "down" : "up");
	}
}

static void on_display_power(struct listener *l, void *data) {
	struct leds_class *lc = container_of(l, struct leds_class, display_power);

	blank_backlights(lc, *(bool *)data);
}

static void leds_class_free(struct device_class *dc) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp;

	while ((lp = LIST_FIRST(&lc->personas))) {
		LIST_REMOVE(lp, link);
		free(lp->views);
		free(lp);
	}
	/* Unmounts first: no request can reach a light being freed. */
	if (lc->published) {
		int r = hostns_unpublish(lc->mountpoint, lc->view_dev);
		if (r < 0)
			log_warning_errno(r, "%s: cannot unmount the persona views outside devnsd: %m", lc->mountpoint);
	}
	listener_remove(&lc->display_power);
	/* devnsd leaves the display powered up when it stops: the backlights come up with it. */
	if (lc->display_down)
		blank_backlights(lc, false);
	hotplug_free(lc->hotplug);
	sysfs_view_free(lc->view);
	for (size_t i = 0; i < lc->n_lights; i++) {
		leds_evdev_source_free(lc->lights[i].source);
		light_free(lc->lights[i].light);
		free(lc->lights[i].real);
	}
	free(lc->mountpoint);
	free(lc);
}

/* As in sysfs, the attributes belong to root: here the container's. */
static void leds_rebind(struct device_class *dc, struct persona *p, bool revoke) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp = persona_of(lc, p);

	if (!lp)
		return;
	sysfs_node_set_owner(lc->view, lp->root, p->owner.uid, p->owner.gid);
	if (revoke) {
		sysfs_node_revoke(lc->view, lp->root);
		log_info("persona %s: every file open in its sysfs view revoked", p->name);
	}
}

static const struct device_class_ops leds_class_ops = {
	.add_persona = leds_add_persona,
	.remove_persona = leds_remove_persona,
	.switch_to = leds_switch_to,
	.foreach_node = leds_foreach_node,
	.rebind = leds_rebind,
	.free = leds_class_free,
};

/* The LED code of an input LED class device, named "inputN::capslock" by the kernel; -1 if none. */
static int input_led_code(const char *name) {
	static const char *const names[] = {
		[LED_NUML] = "numlock", [LED_CAPSL] = "capslock", [LED_SCROLLL] = "scrolllock",
		[LED_COMPOSE] = "compose", [LED_KANA] = "kana", [LED_SLEEP] = "sleep",
		[LED_SUSPEND] = "suspend", [LED_MUTE] = "mute", [LED_MISC] = "misc",
		[LED_MAIL] = "mail", [LED_CHARGING] = "charging",
	};
	const char *function = strstr(name, "::");

	if (!function)
		return -1;
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (names[i] && streq(function + 2, names[i]))
			return (int)i;
	return -1;
}

static bool name_listed(const struct conf_devices *d, const char *name) {
	for (size_t i = 0; i < d->n_shared; i++)
		if (streq(d->shared[i], name))
			return true;
	return false;
}

static bool light_known(struct leds_class *lc, const char *real, const char *name, enum led_kind kind) {
	for (size_t i = 0; i < lc->n_lights; i++) {
		struct leds_light *ll = light_at(lc, i);

		if (ll && ll->light->backend->kind == kind && (streq(ll->light->backend->name, name) || streq(ll->real, real)))
			return true;
	}
	return false;
}

/* Routes an LED of an input device the input class owns, or will own, through its evdev nodes. */
static int route_input_led(struct leds_class *lc, struct leds_light *ll, bool shared) {
	struct led_backend *b = ll->light->backend;
	_cleanup_(freep) char *device = NULL;
	char link[PATH_MAX];
	int code = input_led_code(b->name), r;

	if (code < 0 || !lc->input || snprintf(link, sizeof(link), "%s/device", ll->real) >= (int)sizeof(link))
		return 0;
	device = realpath(link, NULL);
	if (!device || !input_class_owns(lc->input, device))
		return 0;
	r = leds_evdev_source_new(ll->light, lc->input, device, (unsigned int)code, &ll->source);
	if (r < 0)
		return r;
	if (shared)
		log_warning("%s: an LED of an input device devnsd owns follows the active persona; Shared= ignored",
			    b->path);
	log_info("%s: driven through the input device's persona nodes", b->path);
	return 0;
}

/* The slot a new light takes: a free one, or the next; NULL when full. */
static struct leds_light *free_slot(struct leds_class *lc) {
	for (size_t i = 0; i < lc->n_lights; i++)
		if (!light_at(lc, i))
			return &lc->lights[i];
	if (lc->n_lights == ELEMENTSOF(lc->lights))
		return NULL;
	return &lc->lights[lc->n_lights++];
}

/* Gives every persona a view of the light in slot i. */
static int add_views(struct leds_class *lc, size_t i) {
	struct leds_persona *lp;
	int r;

	LIST_FOREACH(lp, &lc->personas, link) {
		r = add_light_view(lc, lp, i);
		if (r < 0)
			return r;
	}
	return 0;
}

static void close_light(struct leds_class *lc, struct leds_light *ll) {
	size_t i = (size_t)(ll - lc->lights);
	struct leds_persona *lp;

	LIST_FOREACH(lp, &lc->personas, link) {
		if (lp->views[i].dir)
			sysfs_node_remove(lc->view, lp->views[i].dir);
		lp->views[i] = (struct leds_view){ 0 };
	}
	lc->n_kind[ll->light->backend->kind]--;
	leds_evdev_source_free(ll->source);
	light_free(ll->light);
	free(ll->real);
	*ll = (struct leds_light){ 0 };
	while (lc->n_lights > 0 && !light_at(lc, lc->n_lights - 1))
		lc->n_lights--;
}

/*
 * Opens the light at path. Returns 0 when it is open (or known already, or
 * one too many: warned), or a negative errno, logged.
 */
static int open_light(struct leds_class *lc, enum led_kind kind, const char *path, const struct conf_devices *d) {
	_cleanup_(freep) char *real = realpath(path, NULL);
	struct led_backend *b;
	struct leds_light *ll;
	bool shared;
	int r;

	if (!real)
		return log_error_errno(errno, "%s: %m", path);
	if (lc->n_kind[kind] == LEDS_MAX_LIGHTS) {
		log_warning("%s: more than %d lights in [%s]; ignored", path, LEDS_MAX_LIGHTS,
			    kind == LED_KIND_LED ? "Leds" : "Backlight");
		return 0;
	}
	r = kind == LED_KIND_LED ? led_sysfs_open(path, &b) : backlight_sysfs_open(path, &b);
	if (r == -ENOENT || r == -EINVAL)
		return log_error_errno(r, "%s: not a sysfs %s directory: %m", path, kind == LED_KIND_LED ? "LED" : "backlight");
	if (r < 0)
		return log_error_errno(r, "%s: cannot open: %m", path);
	if (light_known(lc, real, b->name, kind)) {
		log_warning("%s: a light named %s is already configured; ignored", path, b->name);
		led_backend_free(b);
		return 0;
	}
	shared = name_listed(d, b->name);
	ll = free_slot(lc);
	if (!ll) {
		log_warning("%s: no room for more lights; ignored", path);
		led_backend_free(b);
		return 0;
	}
	*ll = (struct leds_light){ .class = lc, .real = TAKE_PTR(real) };
	r = light_new(&ll->light, b, shared ? LIGHT_SHARED : LIGHT_EXCLUSIVE);
	if (r < 0) {
		free(ll->real);
		*ll = (struct leds_light){ 0 };
		return log_error_errno(r, "out of memory");
	}
	ll->source = &ll->light->source;
	lc->n_kind[kind]++;
	r = kind == LED_KIND_LED ? route_input_led(lc, ll, shared) : 0;
	if (r >= 0)
		r = add_views(lc, (size_t)(ll - lc->lights));
	if (r < 0) {
		log_error_errno(r, "%s: cannot give the personas their views: %m", path);
		close_light(lc, ll);
		return r;
	}
	if (kind == LED_KIND_BACKLIGHT)
		ll->light->blanked = lc->display_down;
	light_set_active(ll->light, lc->base.manager->active);
	log_info("%s: %s, max brightness %u, %s", path, b->name, b->max_brightness,
		 ll->light->policy == LIGHT_SHARED ? "shared" : "exclusive");
	return 0;
}

/* Whether the resolved kernel device kdev is an input device (.../inputN). */
static bool is_input_device(const char *kdev) {
	char link[PATH_MAX];
	_cleanup_(freep) char *subsystem = NULL;
	const char *name;

	if (snprintf(link, sizeof(link), "%s/subsystem", kdev) >= (int)sizeof(link))
		return false;
	subsystem = realpath(link, NULL);
	name = subsystem ? strrchr(subsystem, '/') : NULL;
	return name && streq(name, "/input");
}

/*
 * An LED of an input device that has no evdev device yet waits for it:
 * whether the input class owns the device, so that the LED goes through
 * its evdev nodes, depends on the evdev node's name.
 */
static bool led_waits(struct leds_class *lc, enum led_kind kind, const char *sysname, const char *syspath) {
	char link[PATH_MAX];
	_cleanup_(freep) char *kdev = NULL;

	if (kind != LED_KIND_LED || !lc->input || input_led_code(sysname) < 0 ||
	    snprintf(link, sizeof(link), "%s/device", syspath) >= (int)sizeof(link))
		return false;
	kdev = realpath(link, NULL);
	return kdev && is_input_device(kdev) && !input_kdev_evdev(kdev, (char[64]){ 0 }, 64);
}

/* A light found at start that is an input LED waiting for its evdev device: watch_lights() has it wait. */
static bool found_waiting(struct leds_class *lc, enum led_kind kind, const char *path) {
	_cleanup_(freep) char *real = realpath(path, NULL);
	const char *name = strrchr(path, '/');

	return real && name && strncmp(real, "/sys/", 5) == 0 && led_waits(lc, kind, name + 1, real);
}

static int open_section(struct leds_class *lc, enum led_kind kind, const struct conf_devices *d) {
	int r = 0;

	lc->configured[kind] = d->n_patterns > 0;
	for (size_t i = 0; i < d->n_patterns && r >= 0; i++) {
		glob_t g = { 0 };
		int gr = glob(d->patterns[i], 0, NULL, &g);

		if (gr == GLOB_NOMATCH)
			log_warning("%s: matches no light", d->patterns[i]);
		else if (gr != 0)
			r = log_error_errno(ENOMEM, "%s: cannot expand the pattern", d->patterns[i]);
		for (size_t j = 0; gr == 0 && j < g.gl_pathc && r >= 0; j++)
			if (!found_waiting(lc, kind, g.gl_pathv[j]))
				r = open_light(lc, kind, g.gl_pathv[j], d);
		globfree(&g);
	}
	for (size_t i = 0; i < d->n_shared && r >= 0; i++) {
		bool found = false;
		for (size_t j = 0; j < lc->n_lights; j++)
			found = found || (light_at(lc, j) && streq(lc->lights[j].light->backend->name, d->shared[i]));
		if (!found)
			log_warning("Shared=%s: no such light", d->shared[i]);
	}
	return r;
}

/* --- lights that come and go --------------------------------------------------- */

static const struct conf_devices *section_of(struct leds_class *lc, enum led_kind kind) {
	const struct conf *conf = lc->base.manager->conf;

	return kind == LED_KIND_LED ? &conf->leds : &conf->backlight;
}

static bool kind_of(const char *subsystem, enum led_kind *ret) {
	for (size_t k = 0; k < ELEMENTSOF(kind_dir); k++)
		if (streq(subsystem, kind_dir[k])) {
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

	if (snprintf(path, sizeof(path), "/sys/class/%s/%s", kind_dir[kind], dev->sysname) >= (int)sizeof(path) ||
	    !section_names(d, path, dev->syspath) || light_known(lc, dev->syspath, dev->sysname, kind))
		return;
	if (led_waits(lc, kind, dev->sysname, dev->syspath)) {
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
	if (open_light(lc, kind, path, d) >= 0)
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
			close_light(lc, ll);
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

	for (size_t k = 0; k < ELEMENTSOF(kind_dir); k++)
		if (lc->configured[k])
			subsystems[n++] = kind_dir[k];
	/* Evdev devices, for the input LEDs that wait for theirs. */
	if (lc->configured[LED_KIND_LED] && lc->input)
		subsystems[n++] = "input";
	r = hotplug_new(&lc->hotplug, lc->base.manager->event, subsystems, "light hotplug", &light_hotplug_ops, lc);
	if (r < 0)
		return r;
	for (size_t k = 0; k < ELEMENTSOF(kind_dir); k++) {
		const struct conf_devices *d = section_of(lc, (enum led_kind)k);

		for (size_t i = 0; i < d->n_patterns; i++) {
			glob_t g = { 0 };

			if (glob(d->patterns[i], 0, NULL, &g) == 0)
				for (size_t j = 0; j < g.gl_pathc; j++) {
					_cleanup_(freep) char *real = realpath(g.gl_pathv[j], NULL);
					const char *name = strrchr(g.gl_pathv[j], '/');

					if (!real || !name || light_known(lc, real, name + 1, (enum led_kind)k))
						continue;
					/* A class device may be an input LED that waits for its evdev device. */
					if (strncmp(real, "/sys/", 5) == 0)
						light_appeared(lc, (enum led_kind)k,
							       &(struct hotplug_device){ .subsystem = kind_dir[k],
											 .sysname = name + 1,
											 .syspath = real });
					else
						(void)open_light(lc, (enum led_kind)k, g.gl_pathv[j], d);
				}
			globfree(&g);
		}
	}
	return 0;
}

/* --- restart: each persona's state of each light ------------------------------ */

static void leds_state_save(void *userdata, struct persona *p, struct state_record *rec) {
	struct leds_class *lc = userdata;
	struct leds_persona *lp = persona_of(lc, p);

	for (size_t i = 0; lp && i < lc->n_lights; i++) {
		const struct leds_view *v = &lp->views[i];
		const struct light_state *s;
		struct led_backend *b;
		char key[STATE_KEY_MAX + 1], value[STATE_VALUE_MAX + 1];

		if (!light_at(lc, i) || !(s = state_of(v)))
			continue;
		b = backend_of(v);
		snprintf(key, sizeof(key), "%s:%s", kind_dir[b->kind], b->name);
		snprintf(value, sizeof(value), "%u %u %s", s->brightness, s->bl_power, b->triggers.names[s->trigger]);
		/* A light whose name the record cannot hold is not kept. */
		(void)state_record_add_item(rec, p->name, "leds", key, value);
	}
}

static int leds_state_load(void *userdata, struct persona *p, const char *key, const char *value) {
	struct leds_class *lc = userdata;
	struct leds_light *ll = NULL;
	char trigger[LED_TRIGGER_NAME_MAX + 1];
	uint32_t brightness, power;
	int index, r;

	_Static_assert(LED_TRIGGER_NAME_MAX == 47, "the trigger's width in sscanf()");
	for (size_t i = 0; i < lc->n_lights && !ll; i++) {
		struct led_backend *b;
		char name[STATE_KEY_MAX + 1];

		if (!light_at(lc, i))
			continue;
		b = lc->lights[i].light->backend;
		snprintf(name, sizeof(name), "%s:%s", kind_dir[b->kind], b->name);
		if (streq(name, key))
			ll = &lc->lights[i];
	}
	if (!ll || !persona_of(lc, p))
		return -ENOENT;
	if (sscanf(value, "%" SCNu32 " %" SCNu32 " %47s", &brightness, &power,
		   trigger) != 3)
		return -EINVAL;
	/* An LED of an input device has its brightness in the persona's evdev node, which the input class keeps. */
	r = ll->source != &ll->light->source ? 0 : light_set_brightness(ll->light, p, brightness);
	if (r >= 0 && ll->light->backend->kind == LED_KIND_BACKLIGHT)
		r = light_set_power(ll->light, p, power);
	if (r == -EINVAL)
		return -ESTALE;
	index = led_triggers_find(&ll->light->backend->triggers, trigger, strlen(trigger));
	if (r >= 0 && index > 0)
		r = light_set_trigger(ll->light, p, (size_t)index);
	return r;
}

static int leds_state_register(struct leds_class *lc) {
	struct statx stx;

	/* Cached attributes only: devnsd serves this mount and cannot answer itself now. */
	if (statx(AT_FDCWD, lc->mountpoint, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) >= 0) {
		lc->view_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
		state_set_view(lc->base.manager, lc->mountpoint, lc->view_dev);
	}
	return state_register_part(lc->base.manager, &(struct state_part){ .name = "leds",
									   .save = leds_state_save,
									   .load = leds_state_load,
									   .userdata = lc });
}

static int may_access(void *userdata, void *owner, pid_t pid) {
	struct leds_class *lc = userdata;

	return manager_check_access(lc->base.manager, owner, pid);
}

/* Under a sandboxed unit, containers' managers bind the views from the host's namespace. */
static void publish_views(struct leds_class *lc) {
	int r = hostns_publish(lc->mountpoint);

	if (r < 0)
		log_warning_errno(r, "%s: the persona views are not visible outside devnsd's mount namespace: %m",
				  lc->mountpoint);
	else if (r == 0)
		log_info("%s: persona views also mounted in PID 1's mount namespace", lc->mountpoint);
	lc->published = r == 0;
}

/* $DEVNS_VIEW_DIR when set to an absolute path, else DEVNS_VIEW_DIR. */
static char *view_dir(void) {
	const char *e = getenv("DEVNS_VIEW_DIR");

	return strdup(e && e[0] == '/' ? e : DEVNS_VIEW_DIR);
}

int leds_class_new(struct manager *m, const struct conf *conf, struct input_class *input, struct leds_class **ret) {
	struct leds_class *lc;
	int r;

	if (conf->leds.n_patterns == 0 && conf->backlight.n_patterns == 0) {
		*ret = NULL;
		return 0;
	}
	lc = calloc(1, sizeof(*lc));
	if (!lc)
		return log_error_errno(ENOMEM, "out of memory");
	lc->base.ops = &leds_class_ops;
	lc->base.manager = m;
	lc->display_power.notify = on_display_power;
	signal_add(&m->events.display_power, &lc->display_power);
	lc->input = input;
	LIST_INIT(&lc->personas);
	lc->mountpoint = view_dir();
	r = lc->mountpoint ? 0 : log_error_errno(ENOMEM, "out of memory");
	if (r >= 0)
		r = open_section(lc, LED_KIND_LED, &conf->leds);
	if (r >= 0)
		r = open_section(lc, LED_KIND_BACKLIGHT, &conf->backlight);
	if (r >= 0) {
		r = sysfs_view_new(&lc->view, m->event, lc->mountpoint, may_access, lc);
		if (r < 0)
			log_error_errno(r, "%s: cannot mount the persona views: %m", lc->mountpoint);
	}
	if (r >= 0)
		r = leds_state_register(lc);
	if (r >= 0) {
		r = watch_lights(lc);
		if (r < 0)
			log_warning_errno(r, "cannot watch for lights that come and go: %m");
		r = 0;
	}
	if (r >= 0)
		publish_views(lc);
	if (r < 0) {
		leds_class_free(&lc->base);
		return r;
	}
	log_info("%s: sysfs views of %zu LEDs and %zu backlights", lc->mountpoint, lc->n_kind[LED_KIND_LED],
		 lc->n_kind[LED_KIND_BACKLIGHT]);
	*ret = lc;
	return 0;
}

void leds_foreach_light(struct leds_class *lc, struct persona *p, light_desc_fn fn, void *userdata) {
	struct leds_persona *lp = lc ? persona_of(lc, p) : NULL;

	for (size_t i = 0; lp && i < lc->n_lights; i++) {
		const struct leds_view *v = &lp->views[i];
		const struct light_state *s;
		struct led_backend *b;

		if (!light_at(lc, i))
			continue;
		s = state_of(v);
		b = backend_of(v);
		fn(userdata, &(struct light_desc){
			.kind = kind_dir[b->kind],
			.name = b->name,
			.source = b->path,
			.policy = v->ll->light->policy == LIGHT_SHARED ? "shared" : "exclusive",
			.brightness = brightness_of(v),
			.max_brightness = b->max_brightness,
			.trigger = b->kind == LED_KIND_LED ? b->triggers.names[s->trigger] : "",
			.bl_power = s->bl_power,
			.shown = v->ll->source->ops->shows(v->ll->source, p),
		});
	}
}

struct device_class *leds_class_base(struct leds_class *lc) {
	return &lc->base;
}
