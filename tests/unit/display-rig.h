/* SPDX-License-Identifier: MIT */
#pragma once

/* What the display core's tests look at: a persona's node, and what the headless display shows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core-rig.h"
#include "display/display-internal.h"
#include "display-backend.h"

/* Persona p's display node; fails the test without one. */
static inline struct display_node *display_rig_node(struct display_class *dc, struct persona *p) {
	struct display_node *dn;

	LIST_FOREACH(dn, &dc->nodes, link)
		if (dn->persona == p)
			return dn;
	fail_msg("no node for %s", p->name);
	return NULL;
}

/* Whether the screen (the front buffer's width x height) is all v. */
static inline bool display_rig_screen_is(struct display_output *out, uint32_t width, uint32_t height, uint8_t v) {
	const struct display_buffer *front = display_output_front(out);

	for (uint32_t y = 0; y < height; y++)
		for (uint32_t x = 0; x < width * 4; x++)
			if (front->map[(size_t)y * front->stride + x] != v)
				return false;
	return true;
}

/* The display class's core over a headless display of width x height with spares, registered with core's manager. */
static inline void display_rig_class(struct core_rig *core, uint32_t width, uint32_t height, unsigned int spares,
				     struct display_output **ret_out, struct display_class **ret_dc) {
	assert_int_equal(display_headless_new(width, height, &(struct display_spares){ spares, UINT64_MAX }, ret_out), 0);
	assert_int_equal(display_class_new_core(core->manager, *ret_out, "headless", NULL, ret_dc), 0);
	assert_int_equal(manager_add_class(core->manager, &(*ret_dc)->base), 0);
}
