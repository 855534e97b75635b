/* SPDX-License-Identifier: MIT */
/*
 * The LED and backlight class: the configured lights, each persona's set
 * of views, switching, rebinding and revoking. The views are served by
 * serve.c and state.c keeps each persona's state for a restart, both below
 * this file; hotplug.c, above it, opens and closes the lights that come and
 * go, once whoever built the class starts the watch (leds_watch_lights()).
 */
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
#include "leds/leds-internal.h"
#include "restart/state.h"
#include "log.h"

const char *const leds_kind_dir[LED_KIND_BACKLIGHT + 1] = {
	[LED_KIND_LED] = "leds",
	[LED_KIND_BACKLIGHT] = "backlight",
};

static struct leds_class *to_leds(struct device_class *dc) {
	return container_of(dc, struct leds_class, base);
}

static void leds_remove_persona(struct device_class *dc, struct persona *p) {
	struct leds_class *lc = to_leds(dc);
	struct leds_persona *lp = leds_persona_of(lc, p);

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
	for (size_t k = 0; k < ELEMENTSOF(leds_kind_dir) && r >= 0; k++)
		r = sysfs_dir_add(lc->view, cls, leds_kind_dir[k], NULL, &lp->class_dir[k]);
	for (size_t i = 0; i < lc->n_lights && r >= 0; i++)
		if (light_at(lc, i))
			r = leds_add_light_view(lc, lp, i);
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
	struct leds_persona *lp = leds_persona_of(lc, p);

	if (!lp)
		return;
	for (size_t k = 0; k < ELEMENTSOF(leds_kind_dir); k++) {
		char path[PATH_MAX], source[64];

		if (!lc->configured[k])
			continue;
		snprintf(path, sizeof(path), "%s/%s/sys/class/%s", lc->mountpoint, p->name, leds_kind_dir[k]);
		snprintf(source, sizeof(source), "/sys/class/%s", leds_kind_dir[k]);
		fn(userdata, &(struct node_desc){
			.path = path,
			.kind = leds_kind_dir[k],
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
	struct leds_persona *lp = leds_persona_of(lc, p);

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

bool leds_light_known(struct leds_class *lc, const char *real, const char *name, enum led_kind kind) {
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
		r = leds_add_light_view(lc, lp, i);
		if (r < 0)
			return r;
	}
	return 0;
}

void leds_close_light(struct leds_class *lc, struct leds_light *ll) {
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
int leds_open_light(struct leds_class *lc, enum led_kind kind, const char *path, const struct conf_devices *d) {
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
	if (leds_light_known(lc, real, b->name, kind)) {
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
		leds_close_light(lc, ll);
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
bool leds_light_waits(struct leds_class *lc, enum led_kind kind, const char *sysname, const char *syspath) {
	char link[PATH_MAX];
	_cleanup_(freep) char *kdev = NULL;

	if (kind != LED_KIND_LED || !lc->input || input_led_code(sysname) < 0 ||
	    snprintf(link, sizeof(link), "%s/device", syspath) >= (int)sizeof(link))
		return false;
	kdev = realpath(link, NULL);
	return kdev && is_input_device(kdev) && !input_kdev_evdev(kdev, (char[64]){ 0 }, 64);
}

/* A light found at start that is an input LED waiting for its evdev device: leds_watch_lights() has it wait. */
static bool found_waiting(struct leds_class *lc, enum led_kind kind, const char *path) {
	_cleanup_(freep) char *real = realpath(path, NULL);
	const char *name = strrchr(path, '/');

	return real && name && strncmp(real, "/sys/", 5) == 0 && leds_light_waits(lc, kind, name + 1, real);
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
				r = leds_open_light(lc, kind, g.gl_pathv[j], d);
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
	lc->mountpoint = leds_view_dir();
	r = lc->mountpoint ? 0 : log_error_errno(ENOMEM, "out of memory");
	if (r >= 0)
		r = open_section(lc, LED_KIND_LED, &conf->leds);
	if (r >= 0)
		r = open_section(lc, LED_KIND_BACKLIGHT, &conf->backlight);
	if (r >= 0)
		r = leds_serve_views(lc);
	if (r >= 0) {
		r = leds_state_register(lc);
		if (r < 0)
			log_error_errno(r, "cannot keep the LEDs' state for a restart: %m");
	}
	if (r >= 0)
		leds_publish_views(lc);
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
	struct leds_persona *lp = lc ? leds_persona_of(lc, p) : NULL;

	for (size_t i = 0; lp && i < lc->n_lights; i++) {
		const struct leds_view *v = &lp->views[i];
		const struct light_state *s;
		struct led_backend *b;

		if (!light_at(lc, i))
			continue;
		s = state_of(v);
		b = backend_of(v);
		fn(userdata, &(struct light_desc){
			.kind = leds_kind_dir[b->kind],
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
