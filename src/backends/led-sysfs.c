/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>

#include "led-backend.h"
#include "sysfs-attr.h"
#include "util.h"

struct led_sysfs {
	struct led_backend base;
	int dirfd;
};

static const struct led_backend_ops led_sysfs_ops, backlight_sysfs_ops;

static struct led_sysfs *to_sysfs(struct led_backend *b) {
	return container_of(b, struct led_sysfs, base);
}

static void sysfs_destroy(struct led_backend *b) {
	struct led_sysfs *s = to_sysfs(b);

	closep(&s->dirfd);
	free(s);
}

static int sysfs_set_brightness(struct led_backend *b, uint32_t value) {
	return sysfs_attr_write_u32(to_sysfs(b)->dirfd, "brightness", value);
}

static int sysfs_set_trigger(struct led_backend *b, size_t index) {
	char buf[LED_TRIGGER_NAME_MAX + 2];

	snprintf(buf, sizeof(buf), "%s\n", b->triggers.names[index]);
	return sysfs_attr_write(to_sysfs(b)->dirfd, "trigger", buf);
}

static int sysfs_set_power(struct led_backend *b, uint32_t power) {
	return sysfs_attr_write_u32(to_sysfs(b)->dirfd, "bl_power", power);
}

static int sysfs_get_actual(struct led_backend *b, uint32_t *ret) {
	return sysfs_attr_read_u32(to_sysfs(b)->dirfd, "actual_brightness", ret);
}

static const struct led_backend_ops led_sysfs_ops = {
	.destroy = sysfs_destroy,
	.set_brightness = sysfs_set_brightness,
	.set_trigger = sysfs_set_trigger,
};

static const struct led_backend_ops backlight_sysfs_ops = {
	.destroy = sysfs_destroy,
	.set_brightness = sysfs_set_brightness,
	.set_power = sysfs_set_power,
	.get_actual = sysfs_get_actual,
};

/* Reads what every light has; the caller reads the rest. */
static int sysfs_open(const char *path, enum led_kind kind, const struct led_backend_ops *ops,
		      struct led_sysfs **ret) {
	_cleanup_(freep) char *copy = strdup(path);
	struct led_sysfs *s;
	int r;

	if (!copy)
		return -ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = ops;
	s->base.kind = kind;
	s->dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	s->base.path = strdup(path);
	s->base.name = strdup(basename(copy));
	if (s->dirfd < 0)
		r = -errno;
	else if (!s->base.path || !s->base.name)
		r = -ENOMEM;
	else
		r = sysfs_attr_read_u32(s->dirfd, "max_brightness", &s->base.max_brightness);
	if (r >= 0)
		r = sysfs_attr_read_u32(s->dirfd, "brightness", &s->base.brightness);
	if (r < 0) {
		led_backend_free(&s->base);
		return r;
	}
	s->base.brightness = MIN(s->base.brightness, s->base.max_brightness);
	led_triggers_parse("", &s->base.triggers, &s->base.trigger);
	*ret = s;
	return 0;
}

int led_sysfs_open(const char *path, struct led_backend **ret) {
	_cleanup_(freep) char *text = malloc(LED_TEXT_MAX * 4);
	struct led_sysfs *s;
	int r;

	if (!text)
		return -ENOMEM;
	r = sysfs_open(path, LED_KIND_LED, &led_sysfs_ops, &s);
	if (r < 0)
		return r;
	/* Since Linux 6.0 the list may be longer than a page. */
	r = sysfs_attr_read(s->dirfd, "trigger", text, LED_TEXT_MAX * 4);
	if (r < 0) {
		led_backend_free(&s->base);
		return r;
	}
	led_triggers_parse(text, &s->base.triggers, &s->base.trigger);
	*ret = &s->base;
	return 0;
}

int backlight_sysfs_open(const char *path, struct led_backend **ret) {
	uint32_t actual;
	struct led_sysfs *s;
	int r;

	r = sysfs_open(path, LED_KIND_BACKLIGHT, &backlight_sysfs_ops, &s);
	if (r < 0)
		return r;
	r = sysfs_attr_read_u32(s->dirfd, "bl_power", &s->base.bl_power);
	if (r >= 0)
		r = sysfs_attr_read_u32(s->dirfd, "actual_brightness", &actual);
	if (r >= 0 && s->base.bl_power > LED_BL_POWER_MAX)
		r = -EINVAL;
	if (r < 0) {
		led_backend_free(&s->base);
		return r;
	}
	*ret = &s->base;
	return 0;
}
