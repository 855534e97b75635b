/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <stdlib.h>

#include "input-backend.h"
#include "util.h"

struct input_backend *input_backend_free(struct input_backend *b) {
	if (!b)
		return NULL;
	libevdev_free(b->desc);
	free(b->name);
	free(b->path);
	b->ops->destroy(b);
	return NULL;
}

int input_backend_next_event(struct input_backend *b, struct input_event *ret_ev) {
	return b->ops->next_event(b, ret_ev);
}

int input_backend_write_event(struct input_backend *b, const struct input_event *ev) {
	return b->ops->write_event(b, ev);
}

int input_backend_set_repeat(struct input_backend *b, int delay, int period) {
	return b->ops->set_repeat ? b->ops->set_repeat(b, delay, period) : -EOPNOTSUPP;
}

int input_backend_get_keycode(struct input_backend *b, struct input_keymap_entry *ke) {
	return b->ops->get_keycode ? b->ops->get_keycode(b, ke) : -EINVAL;
}

int input_backend_ff_upload(struct input_backend *b, struct ff_effect *effect) {
	return b->ops->ff_upload ? b->ops->ff_upload(b, effect) : -ENOSYS;
}

int input_backend_ff_erase(struct input_backend *b, int id) {
	return b->ops->ff_erase ? b->ops->ff_erase(b, id) : -ENOSYS;
}
