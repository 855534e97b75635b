/* SPDX-License-Identifier: MIT */
/*
 * A switch as a transaction: the switch op's references and waiters, and
 * the real manager switching the display class's core on the headless
 * display, whose flips complete when the test says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core-rig.h"
#include "core/devnum.h"
#include "display-rig.h"
#include "display/display-internal.h"
#include "core/switch.h"
#include "display-backend.h"
#include "fb-node.h"

#define W 32
#define H 16

static const char conf_text[] = "[Persona a]\nActive=yes\n[Persona b]\n[Persona c]\n";

/* What a waiter was told. */
struct answer {
	unsigned int n;
	struct persona *shown;
};

static void answered(void *userdata, struct persona *shown) {
	struct answer *a = userdata;

	a->n++;
	a->shown = shown;
}

struct rig {
	struct core_rig *core;
	struct manager *m;
	struct display_class *dc;
	struct display_output *out;
	struct persona *a, *b, *c;
	struct listener active_changed;
	unsigned int n_active_changed;
};

static void on_active_changed(struct listener *l, void *data) {
	struct rig *r = container_of(l, struct rig, active_changed);

	assert_ptr_equal(data, r->m->active);
	r->n_active_changed++;
}

static struct display_node *node_of(struct rig *r, struct persona *p) {
	return display_rig_node(r->dc, p);
}

/* Fills persona p's visible frame with v. */
static void paint(struct rig *r, struct persona *p, uint8_t v) {
	struct display_node *dn = node_of(r, p);

	memset((uint8_t *)fb_node_visible(dn->fb), v, (size_t)dn->fb->state.fix.line_length * H);
	/* As a write through the node counts it: buffers holding the old frame are stale. */
	dn->gen++;
}

/* The screen (the front buffer) is all v. */
static bool screen_is(struct rig *r, uint8_t v) {
	return display_rig_screen_is(r->out, W, H, v);
}

static int rig_new(void **state, unsigned int spares) {
	struct rig *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->core = core_rig_new(conf_text);
	r->m = r->core->manager;
	r->a = core_rig_persona(r->core, "a");
	r->b = core_rig_persona(r->core, "b");
	r->c = core_rig_persona(r->core, "c");
	display_rig_class(r->core, W, H, spares, &r->out, &r->dc);
	/* The first frame is up; from now on flips wait for the test. */
	core_rig_run(r->core);
	assert_false(r->out->flip_pending);
	display_headless_hold_flips(r->out, true);
	paint(r, r->a, 0xaa);
	paint(r, r->b, 0xbb);
	paint(r, r->c, 0xcc);
	r->active_changed.notify = on_active_changed;
	signal_add(&r->m->events.active_changed, &r->active_changed);
	*state = r;
	return 0;
}

static int rig_setup(void **state) {
	return rig_new(state, 0);
}

/* Two spares: the frames of the two personas shown before the active one are kept. */
static int rig_setup_spares(void **state) {
	return rig_new(state, 2);
}

static int rig_teardown(void **state) {
	struct rig *r = *state;

	listener_remove(&r->active_changed);
	core_rig_free(r->core);
	free(r);
	return 0;
}

/* The vblank: the pending flip completes. */
static void vblank(struct rig *r) {
	assert_true(r->out->flip_pending);
	display_output_flip_done(r->out);
	core_rig_run(r->core);
}

static void test_op_references(void **state) {
	struct switch_op *op = NULL;
	struct answer a = { 0 }, extra = { 0 };
	struct persona *target = (struct persona *)&a;

	(void)state;
	assert_int_equal(switch_op_new(target, &op), 0);
	for (unsigned int i = 0; i < SWITCH_WAITERS_MAX; i++)
		assert_int_equal(switch_op_add_waiter(op, answered, &a), 0);
	/* Bounded: past SWITCH_WAITERS_MAX nobody is added. */
	assert_int_equal(switch_op_add_waiter(op, answered, &extra), -ENOBUFS);
	/* A class holds it; the starter lets go: not complete yet. */
	{
		struct switch_op *slot = NULL;

		switch_hold(&slot, op);
		switch_hold(&slot, op);
		assert_int_equal(op->n_ref, 2);
		switch_op_unref(op);
		assert_int_equal(a.n, 0);
		/* The last release completes it, every waiter once. */
		switch_release(&slot);
		assert_null(slot);
	}
	assert_int_equal(a.n, SWITCH_WAITERS_MAX);
	assert_ptr_equal(a.shown, target);
	assert_int_equal(extra.n, 0);
}

static void test_switch_completes_at_the_flip(void **state) {
	struct rig *r = *state;
	struct answer a = { 0 };

	assert_int_equal(manager_switch(r->m, r->b, answered, &a), 1);
	/* b is active at once and its frame is submitted... */
	assert_ptr_equal(r->m->active, r->b);
	assert_int_equal(r->n_active_changed, 1);
	core_rig_run(r->core);
	/* ...but the caller waits for the flip. */
	assert_int_equal(a.n, 0);
	assert_non_null(r->m->switch_op);
	vblank(r);
	assert_int_equal(a.n, 1);
	assert_ptr_equal(a.shown, r->b);
	assert_true(screen_is(r, 0xbb));
	assert_null(r->m->switch_op);
}

static void test_switches_in_flight_join(void **state) {
	struct rig *r = *state;
	struct answer first = { 0 }, second = { 0 };

	assert_int_equal(manager_switch(r->m, r->b, answered, &first), 1);
	core_rig_run(r->core);
	/* b's frame waits for the vblank when c is asked for: the latest target wins. */
	assert_true(screen_is(r, 0xbb));
	assert_int_equal(manager_switch(r->m, r->c, answered, &second), 1);
	assert_ptr_equal(r->m->active, r->c);
	core_rig_run(r->core);
	/* That flip showed b: nobody is answered yet. */
	vblank(r);
	assert_int_equal(first.n, 0);
	assert_int_equal(second.n, 0);
	/* c's frame went up after it; its flip answers both, with the persona shown. */
	vblank(r);
	assert_true(screen_is(r, 0xcc));
	assert_int_equal(first.n, 1);
	assert_int_equal(second.n, 1);
	assert_ptr_equal(first.shown, r->c);
	assert_ptr_equal(second.shown, r->c);
	assert_null(r->m->switch_op);
	assert_int_equal(r->n_active_changed, 2);
}

static void test_switch_back_in_flight(void **state) {
	struct rig *r = *state;
	struct answer there = { 0 }, back = { 0 };

	assert_int_equal(manager_switch(r->m, r->b, answered, &there), 1);
	core_rig_run(r->core);
	assert_int_equal(manager_switch(r->m, r->a, answered, &back), 1);
	core_rig_run(r->core);
	vblank(r);
	assert_int_equal(there.n + back.n, 0);
	vblank(r);
	assert_true(screen_is(r, 0xaa));
	assert_int_equal(there.n, 1);
	assert_ptr_equal(there.shown, r->a);
	assert_int_equal(back.n, 1);
}

static void test_waiters_bounded(void **state) {
	struct rig *r = *state;
	struct answer a[SWITCH_WAITERS_MAX + 1] = { 0 };

	for (unsigned int i = 0; i <= SWITCH_WAITERS_MAX; i++)
		assert_true(manager_switch(r->m, r->b, answered, &a[i]) >= 0);
	core_rig_run(r->core);
	/* The one past the bound is answered at once; the others wait for the flip. */
	for (unsigned int i = 0; i < SWITCH_WAITERS_MAX; i++)
		assert_int_equal(a[i].n, 0);
	assert_int_equal(a[SWITCH_WAITERS_MAX].n, 1);
	vblank(r);
	for (unsigned int i = 0; i <= SWITCH_WAITERS_MAX; i++)
		assert_int_equal(a[i].n, 1);
}

static void test_switch_to_the_active_persona(void **state) {
	struct rig *r = *state;
	struct answer a = { 0 };

	/* Nothing to show: answered at once, no flip. */
	assert_int_equal(manager_switch(r->m, r->a, answered, &a), 0);
	assert_int_equal(a.n, 1);
	assert_ptr_equal(a.shown, r->a);
	assert_false(r->out->flip_pending);
	assert_int_equal(r->n_active_changed, 0);
}

static void test_free_in_flight(void **state) {
	struct rig *r = *state;
	struct answer a = { 0 };

	/* devnsd stops before the flip: the caller is still answered. */
	assert_int_equal(manager_switch(r->m, r->b, answered, &a), 1);
	core_rig_run(r->core);
	listener_remove(&r->active_changed);
	r->core->manager = manager_free(r->core->manager);
	assert_int_equal(a.n, 1);
}

/* Switches to p and waits for the flip; whether it was shown from a kept frame (a flip without a copy). */
static bool switch_shown(struct rig *r, struct persona *p) {
	uint64_t kept, copied, kept_after, copied_after;
	struct answer a = { 0 };

	display_switches_shown(r->dc, &kept, &copied);
	assert_int_equal(manager_switch(r->m, p, answered, &a), 1);
	core_rig_run(r->core);
	vblank(r);
	assert_int_equal(a.n, 1);
	display_switches_shown(r->dc, &kept_after, &copied_after);
	assert_int_equal(kept_after + copied_after, kept + copied + 1);
	return kept_after == kept + 1;
}

/* p writes its whole frame as v, through the node: in the background, into the spare that keeps it. */
static void write_frame(struct rig *r, struct persona *p, uint8_t v) {
	struct display_node *dn = node_of(r, p);

	memset((uint8_t *)fb_node_visible(dn->fb), v, (size_t)dn->fb->state.fix.line_length * H);
	display_node_written(dn, &(struct fb_rows){ 0, H });
}

static void assert_kept(struct rig *r, struct persona *first, struct persona *second) {
	struct persona *kept[4];
	size_t n = display_kept_frames(r->dc, kept, 4);

	assert_int_equal(n, second ? 2 : first ? 1 : 0);
	if (first)
		assert_ptr_equal(kept[0], first);
	if (second)
		assert_ptr_equal(kept[1], second);
}

static void test_switch_to_kept_frames(void **state) {
	struct rig *r = *state;

	/* b, a (painted since it was shown), then c, each copied: the spares keep a and b. */
	assert_false(switch_shown(r, r->b));
	assert_false(switch_shown(r, r->a));
	assert_false(switch_shown(r, r->c));
	assert_true(screen_is(r, 0xcc));
	assert_kept(r, r->a, r->b);
	/* b writes in the background: its spare takes the frame, and stays kept. */
	write_frame(r, r->b, 0xb1);
	assert_true(screen_is(r, 0xcc));
	assert_kept(r, r->a, r->b);
	/* Either is a flip away, the least recent too, with its latest frame. */
	assert_true(switch_shown(r, r->b));
	assert_true(screen_is(r, 0xb1));
	assert_kept(r, r->c, r->a);
	assert_true(switch_shown(r, r->a));
	assert_true(screen_is(r, 0xaa));
	assert_kept(r, r->b, r->c);
	/* c's frame changes without its spare taking it (a pan, say): copied. */
	paint(r, r->c, 0xc1);
	assert_kept(r, r->b, NULL);
	assert_false(switch_shown(r, r->c));
	assert_true(screen_is(r, 0xc1));
	assert_kept(r, r->a, r->b);
}

static void test_write_while_leaving_is_not_kept(void **state) {
	struct rig *r = *state;
	struct answer a = { 0 };

	assert_false(switch_shown(r, r->b));
	assert_false(switch_shown(r, r->a));
	assert_kept(r, r->b, NULL);
	/* To b: the flip away from a's buffer is pending, and a may still be on screen. */
	assert_int_equal(manager_switch(r->m, r->b, answered, &a), 1);
	core_rig_run(r->core);
	assert_true(r->out->flip_pending);
	write_frame(r, r->a, 0xa2);
	vblank(r);
	assert_true(screen_is(r, 0xbb));
	/* The write could not go into that buffer: a's frame there is stale, and the switch copies. */
	assert_kept(r, NULL, NULL);
	assert_false(switch_shown(r, r->a));
	assert_true(screen_is(r, 0xa2));
}

/* p blanks its screen, or unblanks it, through the node. */
static void blank(struct rig *r, struct persona *p, unsigned long level) {
	struct display_node *dn = node_of(r, p);

	fb_state_blank(&dn->fb->state, level);
	display_node_effect(dn, FB_EFFECT_BLANK);
	core_rig_run(r->core);
}

static void test_blanking_powers_the_display_down(void **state) {
	struct rig *r = *state;
	struct answer a = { 0 };
	uint64_t flips;

	/* a blanks: its black frame is shown, and then the display goes down. */
	blank(r, r->a, FB_BLANK_POWERDOWN);
	assert_false(r->out->powered_down);
	vblank(r);
	assert_true(screen_is(r, 0));
	assert_true(r->out->powered_down);
	/* What a blanked persona writes is not presented, and the display stays down. */
	flips = r->out->n_flips;
	write_frame(r, r->a, 0xa1);
	display_flush(r->dc);
	assert_false(r->out->flip_pending);
	assert_int_equal(r->out->n_flips, flips);
	assert_true(r->out->powered_down);
	/* A background persona's blanking changes nothing; a switch to it leaves the display down, answered at once. */
	blank(r, r->b, FB_BLANK_NORMAL);
	assert_true(r->out->powered_down);
	assert_int_equal(manager_switch(r->m, r->b, answered, &a), 1);
	core_rig_run(r->core);
	assert_int_equal(a.n, 1);
	assert_ptr_equal(a.shown, r->b);
	assert_false(r->out->flip_pending);
	assert_true(r->out->powered_down);
	/* b unblanks: the display comes up, and shows b's frame. */
	blank(r, r->b, FB_BLANK_UNBLANK);
	assert_false(r->out->powered_down);
	vblank(r);
	assert_true(screen_is(r, 0xbb));
	/* To blanked a: black, then down. Back to b: up, with b's frame. */
	switch_shown(r, r->a);
	assert_true(screen_is(r, 0));
	assert_true(r->out->powered_down);
	switch_shown(r, r->b);
	assert_false(r->out->powered_down);
	assert_true(screen_is(r, 0xbb));
	/* a unblanks in the background: a switch to it shows what it wrote while blanked. */
	blank(r, r->a, FB_BLANK_UNBLANK);
	switch_shown(r, r->a);
	assert_false(r->out->powered_down);
	assert_true(screen_is(r, 0xa1));
}

/* Runs the loop until the display is down, for at most timeout microseconds: the time it took. */
static uint64_t wait_powered_down(struct rig *r, uint64_t timeout) {
	uint64_t start = 0, now = 0;

	assert_int_equal(sd_event_now(r->core->event, CLOCK_MONOTONIC, &start) >= 0, 1);
	for (now = start; !r->out->powered_down && now - start < timeout;) {
		assert_true(sd_event_run(r->core->event, timeout - (now - start)) >= 0);
		assert_int_equal(sd_event_now(r->core->event, CLOCK_MONOTONIC, &now) >= 0, 1);
	}
	return now - start;
}

static void test_power_downs_are_bounded(void **state) {
	struct rig *r = *state;
	uint64_t took;

	/* A burst of blank and unblank cycles each powers the display down and up. */
	for (unsigned int i = 0; i < DISPLAY_POWER_DOWN_BURST; i++) {
		blank(r, r->a, FB_BLANK_POWERDOWN);
		vblank(r);
		assert_true(r->out->powered_down);
		blank(r, r->a, FB_BLANK_UNBLANK);
		assert_false(r->out->powered_down);
		vblank(r);
		assert_true(screen_is(r, 0xaa));
	}
	/* Past it, blanking shows black, and the display stays up however often a asks. */
	for (unsigned int i = 0; i < 20; i++) {
		blank(r, r->a, FB_BLANK_POWERDOWN);
		vblank(r);
		assert_true(screen_is(r, 0));
		assert_false(r->out->powered_down);
		blank(r, r->a, FB_BLANK_UNBLANK);
		vblank(r);
		assert_true(screen_is(r, 0xaa));
	}
	blank(r, r->a, FB_BLANK_POWERDOWN);
	vblank(r);
	assert_false(r->out->powered_down);
	/* It goes down once the next power-down is due, with nothing more asked. */
	took = wait_powered_down(r, DISPLAY_POWER_DOWN_INTERVAL_USEC + 1000000);
	assert_true(r->out->powered_down);
	assert_true(took > 0);
	assert_true(screen_is(r, 0));
	/* Unblanking powers it up at once, as ever. */
	blank(r, r->a, FB_BLANK_UNBLANK);
	assert_false(r->out->powered_down);
	vblank(r);
	assert_true(screen_is(r, 0xaa));
}

/* The display_power events heard: powered down, powered up. */
struct power_heard {
	struct listener l;
	unsigned int down, up;
};

static void on_power(struct listener *l, void *data) {
	struct power_heard *p = container_of(l, struct power_heard, l);

	if (*(bool *)data)
		p->down++;
	else
		p->up++;
}

static void test_display_goes_and_comes_back(void **state) {
	struct rig *r = *state;
	struct display_output *other = NULL, *stand_in = NULL, *back = NULL;
	struct power_heard power = { .l.notify = on_power };
	struct answer a = { 0 }, c = { 0 };
	uint64_t flips, kept, copied, kept_after, copied_after;

	signal_add(&r->m->events.display_power, &power.l);
	/* A display of another mode does not fit the personas' frames: refused, and the display stays. */
	assert_int_equal(display_headless_new(W + 1, H, &(struct display_spares){ 0, 0 }, &other), 0);
	assert_int_equal(display_class_set_output(r->dc, other, false), -EMEDIUMTYPE);
	assert_false(display_lost(r->dc));

	/* The display goes while a switch waits for its flip, which never comes: what stands in shows the switch. */
	assert_int_equal(manager_switch(r->m, r->b, answered, &a), 1);
	core_rig_run(r->core);
	assert_true(r->out->flip_pending);
	assert_int_equal(display_headless_new(W, H, &(struct display_spares){ 0, 0 }, &stand_in), 0);
	assert_int_equal(display_class_set_output(r->dc, stand_in, true), 0);
	r->out = stand_in;
	core_rig_run(r->core);
	assert_true(display_lost(r->dc));
	assert_int_equal(a.n, 1);
	assert_ptr_equal(a.shown, r->b);
	assert_true(screen_is(r, 0xbb));

	/* Meanwhile switches are answered at once, and a blanked persona's power-down is kept. */
	blank(r, r->c, FB_BLANK_POWERDOWN);
	assert_int_equal(manager_switch(r->m, r->c, answered, &c), 1);
	core_rig_run(r->core);
	assert_int_equal(c.n, 1);
	assert_true(r->out->powered_down);
	assert_int_equal(power.down, 1);

	/* It comes back: up at first, then, once c's black frame is shown, down again. */
	assert_int_equal(display_headless_new(W, H, &(struct display_spares){ 1, UINT64_MAX }, &back), 0);
	display_headless_hold_flips(back, true);
	flips = display_frames_shown(r->dc);
	display_switches_shown(r->dc, &kept, &copied);
	assert_int_equal(display_class_set_output(r->dc, back, false), 0);
	/* The frames shown count on, and the display coming back is no switch. */
	assert_true(display_frames_shown(r->dc) >= flips);
	display_switches_shown(r->dc, &kept_after, &copied_after);
	assert_int_equal(kept_after, kept);
	assert_int_equal(copied_after, copied);
	r->out = back;
	core_rig_run(r->core);
	assert_false(display_lost(r->dc));
	assert_int_equal(power.up, 1);
	assert_false(r->out->powered_down);
	vblank(r);
	assert_true(screen_is(r, 0));
	assert_true(r->out->powered_down);
	assert_int_equal(power.down, 2);

	/* c unblanks: its frame goes up on the display that came back, and switches flip there again. */
	blank(r, r->c, FB_BLANK_UNBLANK);
	vblank(r);
	assert_false(r->out->powered_down);
	assert_true(screen_is(r, 0xcc));
	assert_false(switch_shown(r, r->a));
	assert_true(screen_is(r, 0xaa));
	assert_true(switch_shown(r, r->c));
	assert_true(screen_is(r, 0xcc));
	listener_remove(&power.l);
}

#define T(name) cmocka_unit_test_setup_teardown(name, rig_setup, rig_teardown)
#define TS(name) cmocka_unit_test_setup_teardown(name, rig_setup_spares, rig_teardown)

/* CreatePersona's names: with Routed=yes, none of the routed nodes' in /dev/devns/. */
static void test_created_persona_names(void **state) {
	struct core_rig *routed = core_rig_new("[Daemon]\nRouted=yes\n[Persona a]\n"), *plain;
	struct persona *p;

	(void)state;
	assert_int_equal(manager_create_persona(routed->manager, "card0", &p), -EINVAL);
	assert_int_equal(manager_create_persona(routed->manager, "fb0", &p), -EINVAL);
	assert_int_equal(manager_create_persona(routed->manager, "event3", &p), -EINVAL);
	assert_int_equal(manager_create_persona(routed->manager, "event3x", &p), 0);
	core_rig_free(routed);
	plain = core_rig_new("[Persona a]\n");
	assert_int_equal(manager_create_persona(plain->manager, "card0", &p), 0);
	core_rig_free(plain);
}

/* A class with one card per persona, numbered by the manager as the served display numbers its cards. */
struct card_class {
	struct device_class base;
	char paths[CONF_MAX_PERSONAS + 1][64];
	unsigned int minors[CONF_MAX_PERSONAS + 1];
	size_t n;
};

static int card_add_persona(struct device_class *dc, struct persona *p) {
	struct card_class *cc = (struct card_class *)dc;
	unsigned int major;

	assert_true(cc->n <= CONF_MAX_PERSONAS);
	snprintf(cc->paths[cc->n], sizeof(cc->paths[cc->n]), "/dev/devns/%s/card0", p->name);
	manager_node_numbers(dc->manager, cc->paths[cc->n] + strlen("/dev/"), &major, &cc->minors[cc->n]);
	assert_int_not_equal(major, 0);
	/* A persona whose nodes cannot all be made, after its card has its numbers. */
	if (strncmp(p->name, "fail", 4) == 0)
		return -EIO;
	cc->n++;
	return 0;
}

static void card_remove_persona(struct device_class *dc, struct persona *p) {
	(void)dc;
	(void)p;
}

static void card_switch_to(struct device_class *dc, struct persona *from, struct persona *to, struct switch_op *op) {
	(void)dc;
	(void)from;
	(void)to;
	(void)op;
}

/* Only the cards it made, as the display reports no node of a persona whose card failed. */
static void card_foreach_node(struct device_class *dc, struct persona *p, node_desc_fn fn, void *userdata) {
	struct card_class *cc = (struct card_class *)dc;
	char path[64];

	snprintf(path, sizeof(path), "/dev/devns/%s/card0", p->name);
	for (size_t i = 0; i < cc->n; i++)
		if (strcmp(cc->paths[i], path) == 0)
			fn(userdata, &(struct node_desc){ .path = cc->paths[i], .kind = "drm" });
}

static void card_rebind(struct device_class *dc, struct persona *p, bool revoke) {
	(void)dc;
	(void)p;
	(void)revoke;
}

static void card_free(struct device_class *dc) {
	(void)dc;
}

static const struct device_class_ops card_ops = {
	.add_persona = card_add_persona,
	.remove_persona = card_remove_persona,
	.switch_to = card_switch_to,
	.foreach_node = card_foreach_node,
	.rebind = card_rebind,
	.free = card_free,
};

/*
 * Personas created and deleted, and personas whose creation failed, more in
 * all than card minors below 64 (libdrm's primary nodes): each new card
 * still gets one, a deleted persona's, while the living keep theirs.
 */
static void test_cards_of_deleted_personas(void **state) {
	struct core_rig *r = core_rig_new("[Persona a]\nActive=yes\n");
	struct card_class cc = { .base.ops = &card_ops };
	struct persona *p;
	char name[16];

	(void)state;
	assert_int_equal(manager_add_class(r->manager, &cc.base), 0);
	assert_int_equal(cc.n, 1);
	for (unsigned int i = 0; i < 3 * DEVNUM_CARD_MINORS; i++) {
		snprintf(name, sizeof(name), "p%u", i);
		assert_int_equal(manager_create_persona(r->manager, name, &p), 0);
		assert_in_range(cc.minors[1], 0, DEVNUM_CARD_MINORS - 1);
		assert_int_not_equal(cc.minors[1], cc.minors[0]);
		assert_int_equal(manager_remove_persona(r->manager, p), 0);
		cc.n = 1;
		snprintf(name, sizeof(name), "fail%u", i);
		assert_int_equal(manager_create_persona(r->manager, name, &p), -EIO);
	}
	/* As many living personas as minors: each its own, a's kept. */
	bool taken[DEVNUM_CARD_MINORS] = { [0] = false };
	taken[cc.minors[0]] = true;
	for (unsigned int i = 1; i < DEVNUM_CARD_MINORS; i++) {
		snprintf(name, sizeof(name), "q%u", i);
		assert_int_equal(manager_create_persona(r->manager, name, &p), 0);
		assert_in_range(cc.minors[i], 0, DEVNUM_CARD_MINORS - 1);
		assert_false(taken[cc.minors[i]]);
		taken[cc.minors[i]] = true;
	}
	core_rig_free(r);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_op_references),
		cmocka_unit_test(test_created_persona_names),
		cmocka_unit_test(test_cards_of_deleted_personas),
		T(test_switch_completes_at_the_flip),
		T(test_switches_in_flight_join),
		T(test_switch_back_in_flight),
		T(test_waiters_bounded),
		T(test_switch_to_the_active_persona),
		T(test_free_in_flight),
		TS(test_switch_to_kept_frames),
		TS(test_write_while_leaving_is_not_kept),
		T(test_blanking_powers_the_display_down),
		TS(test_blanking_powers_the_display_down),
		T(test_power_downs_are_bounded),
		T(test_display_goes_and_comes_back),
	};

	return cmocka_run_group_tests_name("switch transaction", tests, NULL, NULL);
}
