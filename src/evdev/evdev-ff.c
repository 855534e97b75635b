/* SPDX-License-Identifier: MIT */
/*
 * Force feedback on a persona's node, with the rules of the kernel's
 * ff-core: effect ids belong to the open file that uploaded them, plays
 * address any uploaded id, and a file's effects go when it closes. The
 * effects live here; the hardware holds them only while the node is
 * active, under ids of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "evdev-node.h"

int evdev_node_set_ff_max(struct evdev_node *n, unsigned int max) {
	struct evdev_ff_slot *slots;

	if (!bit_test(n->caps.ev, EV_FF) || max == 0 || n->ff.slots)
		return 0;
	max = MIN(max, (unsigned int)EVDEV_FF_MAX_EFFECTS);
	slots = calloc(max, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (unsigned int i = 0; i < max; i++)
		slots[i].hw_id = -1;
	n->ff.slots = slots;
	n->ff.max = max;
	return 0;
}

static bool on_hardware(const struct evdev_node *n) {
	return n->active && !n->gone && n->ops;
}

static int hw_upload(struct evdev_node *n, struct ff_effect *effect) {
	return n->ops->ff_upload ? n->ops->ff_upload(n->userdata, effect) : -ENOSYS;
}

static int hw_erase(struct evdev_node *n, int hw_id) {
	return n->ops->ff_erase ? n->ops->ff_erase(n->userdata, hw_id) : -ENOSYS;
}

static int hw_event(struct evdev_node *n, uint16_t code, int32_t value) {
	struct input_event ev = { .type = EV_FF, .code = code, .value = value };

	return n->ops->forward ? n->ops->forward(n->userdata, &ev) : 0;
}

/* As the kernel's check_effect_access(); c NULL: any owner will do. */
static int check_access(const struct evdev_node *n, int id, const struct evdev_client *c) {
	if (id < 0 || (unsigned int)id >= n->ff.max || !n->ff.slots[id].owner)
		return -EINVAL;
	if (c && n->ff.slots[id].owner != c)
		return -EACCES;
	return 0;
}

/*
 * The type, and a periodic effect's wave form, must be the device's.
 * FF_CUSTOM is refused: its samples sit behind a pointer into the
 * container's memory, which devnsd does not follow.
 */
static int check_type(const struct evdev_node *n, const struct ff_effect *effect) {
	if (effect->type < FF_EFFECT_MIN || effect->type > FF_EFFECT_MAX || !bit_test(n->caps.ff, effect->type))
		return -EINVAL;
	if (effect->type != FF_PERIODIC)
		return 0;
	if (effect->u.periodic.waveform < FF_WAVEFORM_MIN || effect->u.periodic.waveform > FF_WAVEFORM_MAX ||
	    !bit_test(n->caps.ff, effect->u.periodic.waveform) || effect->u.periodic.waveform == FF_CUSTOM)
		return -EINVAL;
	return 0;
}

static bool compatible(const struct ff_effect *a, const struct ff_effect *b) {
	return a->type == b->type && (a->type != FF_PERIODIC || a->u.periodic.waveform == b->u.periodic.waveform);
}

int evdev_ff_upload(struct evdev_node *n, struct evdev_client *c, struct ff_effect *effect) {
	struct evdev_ff_slot *slot;
	int id = effect->id, r;

	if (!bit_test(n->caps.ev, EV_FF) || n->ff.max == 0)
		return -ENOSYS;
	r = check_type(n, effect);
	if (r < 0)
		return r;
	if (id == -1) {
		for (id = 0; (unsigned int)id < n->ff.max && n->ff.slots[id].owner; id++)
			;
		if ((unsigned int)id >= n->ff.max)
			return -ENOSPC;
	} else {
		r = check_access(n, id, c);
		if (r < 0)
			return r;
		if (!compatible(effect, &n->ff.slots[id].effect))
			return -EINVAL;
	}
	slot = &n->ff.slots[id];

	if (on_hardware(n)) {
		struct ff_effect hw = *effect;

		hw.id = (int16_t)slot->hw_id;
		r = hw_upload(n, &hw);
		if (r < 0)
			return r;
		slot->hw_id = hw.id;
	}
	effect->id = (int16_t)id;
	slot->effect = *effect;
	slot->owner = c;
	return 0;
}

/* Frees one id; its effect leaves the hardware, which stops it first. */
static int erase_slot(struct evdev_node *n, struct evdev_ff_slot *slot) {
	if (slot->hw_id >= 0 && on_hardware(n)) {
		int r = hw_erase(n, slot->hw_id);
		if (r < 0)
			return r;
	}
	slot->hw_id = -1;
	slot->owner = NULL;
	return 0;
}

int evdev_ff_erase(struct evdev_node *n, struct evdev_client *c, int id) {
	int r;

	if (!bit_test(n->caps.ev, EV_FF) || n->ff.max == 0)
		return -ENOSYS;
	r = check_access(n, id, c);
	if (r < 0)
		return r;
	return erase_slot(n, &n->ff.slots[id]);
}

void evdev_ff_flush(struct evdev_node *n, struct evdev_client *c) {
	for (unsigned int id = 0; id < n->ff.max; id++) {
		struct evdev_ff_slot *slot = &n->ff.slots[id];

		if (slot->owner != c)
			continue;
		/* The file is going: its ids are freed even if the hardware refuses. */
		if (erase_slot(n, slot) < 0) {
			slot->hw_id = -1;
			slot->owner = NULL;
		}
	}
}

int evdev_ff_event(struct evdev_node *n, uint16_t code, int32_t value) {
	if (!bit_test(n->caps.ev, EV_FF) || value < 0)
		return 0;
	switch (code) {
	case FF_GAIN:
		if (!bit_test(n->caps.ff, FF_GAIN) || value > 0xffff)
			return 0;
		n->ff.gain = value;
		break;
	case FF_AUTOCENTER:
		if (!bit_test(n->caps.ff, FF_AUTOCENTER) || value > 0xffff)
			return 0;
		n->ff.autocenter = value;
		break;
	default:
		if (check_access(n, code, NULL) < 0)
			return 0;
		/* A background persona's play is dropped: it never reaches the hardware. */
		if (!on_hardware(n) || n->ff.slots[code].hw_id < 0)
			return 0;
		return hw_event(n, (uint16_t)n->ff.slots[code].hw_id, value);
	}
	return on_hardware(n) ? hw_event(n, code, value) : 0;
}

void evdev_ff_activate(struct evdev_node *n) {
	if (!on_hardware(n) || !bit_test(n->caps.ev, EV_FF))
		return;
	for (unsigned int id = 0; id < n->ff.max; id++) {
		struct evdev_ff_slot *slot = &n->ff.slots[id];
		struct ff_effect hw;

		if (!slot->owner)
			continue;
		hw = slot->effect;
		hw.id = -1;
		/* An effect the hardware refuses now stays the persona's; its plays are dropped. */
		slot->hw_id = hw_upload(n, &hw) < 0 ? -1 : hw.id;
	}
	if (bit_test(n->caps.ff, FF_GAIN))
		hw_event(n, FF_GAIN, n->ff.gain);
	if (bit_test(n->caps.ff, FF_AUTOCENTER) && n->ff.autocenter >= 0)
		hw_event(n, FF_AUTOCENTER, n->ff.autocenter);
}

void evdev_ff_deactivate(struct evdev_node *n) {
	for (unsigned int id = 0; id < n->ff.max; id++) {
		struct evdev_ff_slot *slot = &n->ff.slots[id];

		if (slot->hw_id >= 0 && on_hardware(n))
			hw_erase(n, slot->hw_id);
		slot->hw_id = -1;
	}
}
