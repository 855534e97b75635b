/* SPDX-License-Identifier: MIT */
/*
 * The LED class's persona views: each persona's /sys/class/leds and
 * /sys/class/backlight, served over FUSE (sysfs-view.h) at
 * /run/devns/PERSONA. A persona's write to a light's attribute is handled
 * here and goes to the light (src/leds/light.c), or through the evdev
 * node for an LED of an input device (leds/evdev.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "watch/hostns.h"
#include "restart/state.h"
#include "leds/leds-internal.h"
#include "log.h"

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

int leds_add_light_view(struct leds_class *lc, struct leds_persona *lp, size_t i) {
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

static int may_access(void *userdata, void *owner, pid_t pid) {
	struct leds_class *lc = userdata;

	return manager_check_access(lc->base.manager, owner, pid);
}

/* Under a sandboxed unit, containers' managers bind the views from the host's namespace. */
void leds_publish_views(struct leds_class *lc) {
	int r = hostns_publish(lc->mountpoint);

	if (r < 0)
		log_warning_errno(r, "%s: the persona views are not visible outside devnsd's mount namespace: %m",
				  lc->mountpoint);
	else if (r == 0)
		log_info("%s: persona views also mounted in PID 1's mount namespace", lc->mountpoint);
	lc->published = r == 0;
}

/* $DEVNS_VIEW_DIR when set to an absolute path, else DEVNS_VIEW_DIR. */
char *leds_view_dir(void) {
	const char *e = getenv("DEVNS_VIEW_DIR");

	return strdup(e && e[0] == '/' ? e : DEVNS_VIEW_DIR);
}

int leds_serve_views(struct leds_class *lc) {
	int r = sysfs_view_new(&lc->view, lc->base.manager->event, lc->mountpoint, may_access, lc);

	if (r < 0)
		log_error_errno(r, "%s: cannot mount the persona views: %m", lc->mountpoint);
	return r;
}

