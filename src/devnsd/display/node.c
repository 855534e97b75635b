/* SPDX-License-Identifier: MIT */
/*
 * A persona's node as the rest of the display class sees it: what it
 * shows, fb0's frame or card0's scanout (display/drm.c), and the
 * transport's counts of its programs.
 */
#include "display/display-internal.h"
#include "display-backend.h"

struct display_node *display_node_of(struct display_class *dc, struct persona *p) {
	struct display_node *dn;

	LIST_FOREACH(dn, &dc->nodes, link)
		if (dn->persona == p)
			return dn;
	return NULL;
}

const uint8_t *display_node_frame(const struct display_node *dn, uint32_t *ret_stride) {
	if (display_drm_owns(dn))
		return display_drm_frame(dn, ret_stride);
	if (dn->fb->state.blank != FB_BLANK_UNBLANK)
		return NULL;
	*ret_stride = dn->fb->state.fix.line_length;
	return fb_node_visible(dn->fb);
}

bool display_node_dark(const struct display_node *dn) {
	return display_drm_owns(dn) ? display_drm_dark(dn) : dn->fb->state.blank != FB_BLANK_UNBLANK;
}

unsigned int display_node_mappers(struct display_node *dn) {
	const struct display_transport_ops *t = dn->class->transport;

	return t && t->n_mappers ? t->n_mappers(dn) : 0;
}

unsigned int display_node_vsync_waiters(struct display_node *dn) {
	const struct display_transport_ops *t = dn->class->transport;

	return t && t->vsync_waiters ? t->vsync_waiters(dn) : 0;
}

void display_node_vsync(struct display_node *dn) {
	const struct display_transport_ops *t = dn->class->transport;

	if (t && t->vsync)
		t->vsync(dn);
}
