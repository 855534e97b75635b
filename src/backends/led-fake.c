/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "led-backend.h"
#include "util.h"

#define FAKE_LOG 256

struct led_fake {
	struct led_backend base;
	uint32_t shown;
	struct led_fake_write written[FAKE_LOG];
	size_t n_written;
};

static const struct led_backend_ops led_fake_ops;

static struct led_fake *to_fake(struct led_backend *b) {
	assert(b->ops == &led_fake_ops);
	return container_of(b, struct led_fake, base);
}

static void record(struct led_backend *b, int attr, uint32_t value) {
	struct led_fake *f = to_fake(b);

	if (f->n_written == FAKE_LOG) {
		memmove(f->written, f->written + 1, sizeof(f->written[0]) * (FAKE_LOG - 1));
		f->n_written--;
	}
	f->written[f->n_written++] = (struct led_fake_write){ .attr = attr, .value = value };
}

static void fake_destroy(struct led_backend *b) {
	free(to_fake(b));
}

static int fake_set_brightness(struct led_backend *b, uint32_t value) {
	to_fake(b)->shown = value;
	record(b, LED_FAKE_BRIGHTNESS, value);
	return 0;
}

static int fake_set_trigger(struct led_backend *b, size_t index) {
	record(b, LED_FAKE_TRIGGER, (uint32_t)index);
	return 0;
}

static int fake_set_power(struct led_backend *b, uint32_t power) {
	record(b, LED_FAKE_POWER, power);
	return 0;
}

static int fake_get_actual(struct led_backend *b, uint32_t *ret) {
	*ret = to_fake(b)->shown;
	return 0;
}

static const struct led_backend_ops led_fake_ops = {
	.destroy = fake_destroy,
	.set_brightness = fake_set_brightness,
	.set_trigger = fake_set_trigger,
	.set_power = fake_set_power,
	.get_actual = fake_get_actual,
};

int led_fake_new(enum led_kind kind, const char *name, uint32_t max_brightness, struct led_backend **ret) {
	struct led_fake *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->base.ops = &led_fake_ops;
	f->base.kind = kind;
	f->base.max_brightness = max_brightness;
	f->base.name = strdup(name);
	f->base.path = strdup(name);
	if (!f->base.name || !f->base.path) {
		led_backend_free(&f->base);
		return -ENOMEM;
	}
	led_triggers_parse(kind == LED_KIND_LED ? "[none] timer heartbeat" : "", &f->base.triggers, &f->base.trigger);
	*ret = &f->base;
	return 0;
}

size_t led_fake_written(struct led_backend *b, const struct led_fake_write **ret) {
	struct led_fake *f = to_fake(b);

	*ret = f->written;
	return f->n_written;
}

void led_fake_clear_written(struct led_backend *b) {
	to_fake(b)->n_written = 0;
}

uint32_t led_fake_brightness(struct led_backend *b) {
	return to_fake(b)->shown;
}
