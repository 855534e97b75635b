/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "led-backend.h"
#include "util.h"

struct led_backend *led_backend_free(struct led_backend *b) {
	if (!b)
		return NULL;
	free(b->name);
	free(b->path);
	b->ops->destroy(b);
	return NULL;
}

int led_backend_set_brightness(struct led_backend *b, uint32_t value) {
	if (value > b->max_brightness)
		return -EINVAL;
	return b->ops->set_brightness(b, value);
}

int led_backend_set_trigger(struct led_backend *b, size_t index) {
	if (index >= b->triggers.n)
		return -EINVAL;
	return b->ops->set_trigger ? b->ops->set_trigger(b, index) : -EOPNOTSUPP;
}

int led_backend_set_power(struct led_backend *b, uint32_t power) {
	if (power > LED_BL_POWER_MAX)
		return -EINVAL;
	return b->ops->set_power ? b->ops->set_power(b, power) : -EOPNOTSUPP;
}

int led_backend_get_actual(struct led_backend *b, uint32_t *ret) {
	return b->ops->get_actual ? b->ops->get_actual(b, ret) : -EOPNOTSUPP;
}
