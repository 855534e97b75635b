/* SPDX-License-Identifier: MIT */
/* Presenting frames on the headless display: damage reaches every buffer, flips alternate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "display-backend.h"
#include "util.h"

#define W 32
#define H 16

static uint8_t src[H][W * 4];

static const struct display_spares no_spares = { 0, UINT64_MAX }, one_spare = { 1, UINT64_MAX };

static void fill(uint8_t v, uint32_t y0, uint32_t y1) {
	for (uint32_t y = y0; y < y1; y++)
		memset(src[y], v, sizeof(src[y]));
}

static bool buffer_is(const struct display_buffer *buf, uint8_t frame[H][W * 4]) {
	for (uint32_t y = 0; y < H; y++)
		if (memcmp(buf->map + (size_t)y * buf->stride, frame[y], W * 4) != 0)
			return false;
	return true;
}

static bool front_is_src(struct display_output *b) {
	return buffer_is(display_output_front(b), src);
}

static void test_partial_updates(void **state) {
	struct display_output *b = NULL;

	(void)state;
	assert_int_equal(display_headless_new(W, H, &no_spares, &b), 0);
	fill(1, 0, H);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), 0);
	assert_true(front_is_src(b));
	/* Each partial update lands in the other buffer, which must catch up on the one before. */
	for (uint8_t i = 2; i < 10; i++) {
		fill(i, i % H, i % H + 1);
		assert_int_equal(display_output_present(b, &src[0][0], W * 4, i % H, i % H + 1), 0);
		assert_true(front_is_src(b));
	}
	assert_int_equal(b->n_flips, 9);
	/* Black when no source is given. */
	memset(src, 0, sizeof(src));
	assert_int_equal(display_output_present(b, NULL, W * 4, 0, H), 0);
	assert_true(front_is_src(b));
	display_output_free(b);
}

static void test_flip_pending(void **state) {
	struct display_output *b = NULL;

	(void)state;
	assert_int_equal(display_headless_new(W, H, &no_spares, &b), 0);
	b->flip_pending = true;
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), -EBUSY);
	display_output_flip_done(b);
	assert_false(b->flip_pending);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), 0);
	display_output_free(b);
	assert_int_equal(display_headless_new(0, H, &no_spares, &b), -EINVAL);
}

static void test_steps(void **state) {
	struct display_output *b = NULL;
	int r, steps = 0;

	(void)state;
	assert_int_equal(display_headless_new(W, H, &no_spares, &b), 0);
	fill(3, 0, H);
	assert_int_equal(display_output_begin(b, 0, H), 0);
	/* One copy at a time, and nothing shown before the frame is whole. */
	assert_int_equal(display_output_begin(b, 0, H), -EBUSY);
	assert_int_equal(display_output_finish(b, false), -EINVAL);
	while ((r = display_output_copy(b, &src[0][0], W * 4, 5)) == 0)
		steps++;
	assert_int_equal(r, 1);
	assert_int_equal(steps, (H + 4) / 5 - 1);
	assert_int_equal(b->n_flips, 0);
	assert_int_equal(display_output_finish(b, false), 0);
	assert_true(front_is_src(b));

	/* An abandoned copy leaves its rows stale: the next present copies them. */
	fill(4, 2, 6);
	assert_int_equal(display_output_begin(b, 2, 6), 0);
	assert_int_equal(display_output_copy(b, &src[0][0], W * 4, 1), 0);
	display_output_abort(b);
	fill(5, 10, 11);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 10, 11), 0);
	assert_true(front_is_src(b));
	display_output_free(b);
}

static void test_reuse_back(void **state) {
	struct display_output *b = NULL;

	(void)state;
	assert_int_equal(display_headless_new(W, H, &no_spares, &b), 0);
	/* Frame A, then frame B: the back buffer holds A. */
	fill(7, 0, H);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), 0);
	fill(8, 0, H);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), 0);
	/* Back to A without copying; the front buffer is no buffer to flip to. */
	assert_int_equal(display_output_begin_reuse(b, b->front), -EINVAL);
	assert_int_equal(display_output_begin_reuse(b, b->back), 0);
	assert_int_equal(display_output_finish(b, false), 0);
	fill(7, 0, H);
	assert_true(front_is_src(b));
	/* The buffer that held B is stale as a whole: a one-row change of A brings all of A into it. */
	fill(9, 0, 1);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, 1), 0);
	assert_true(front_is_src(b));
	display_output_free(b);
}

static void test_spare(void **state) {
	static uint8_t a[H][W * 4], bframe[H][W * 4];
	struct display_output *b = NULL;
	unsigned int a_buffer;

	(void)state;
	assert_int_equal(display_headless_new(W, H, &one_spare, &b), 0);
	assert_int_equal(b->n_buffers, 3);
	assert_int_equal(b->n_spares, 1);
	assert_true(b->front != b->back && b->back != b->spares[0] && b->spares[0] != b->front);
	/* A is shown; a switch to B keeps A's buffer as the spare. */
	fill(1, 0, H);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, H), 0);
	a_buffer = b->front;
	memcpy(a, src, sizeof(a));
	fill(2, 0, H);
	display_headless_hold_flips(b, true);
	assert_int_equal(display_output_begin(b, 0, H), 0);
	display_output_copy(b, &src[0][0], W * 4, UINT32_MAX);
	assert_int_equal(display_output_finish(b, true), 0);
	assert_int_equal(b->spares[0], a_buffer);
	/* A writes rows in the background: they go to the spare, but not while the flip away from it is pending. */
	memset(a[4], 9, sizeof(a[4]));
	assert_true(b->flip_pending);
	assert_int_equal(display_output_stage(b, a_buffer, &a[0][0], W * 4, 4, 5), -EBUSY);
	display_output_flip_done(b);
	assert_true(front_is_src(b));
	assert_int_equal(display_output_stage(b, a_buffer, &a[0][0], W * 4, 4, 5), 0);
	/* B draws on: the spare is left alone, the buffers B flips between catch up with each other. */
	for (uint8_t i = 3; i < 6; i++) {
		fill(i, i, i + 2);
		assert_int_equal(display_output_begin(b, i, i + 2), 0);
		display_output_copy(b, &src[0][0], W * 4, UINT32_MAX);
		assert_int_equal(display_output_finish(b, false), 0);
		/* A flip between B's buffers is pending: A's spare is not on screen, so it takes A's rows. */
		assert_int_equal(display_output_stage(b, a_buffer, &a[0][0], W * 4, 4, 5), 0);
		display_output_flip_done(b);
		assert_true(front_is_src(b));
		assert_int_equal(b->spares[0], a_buffer);
	}
	display_headless_hold_flips(b, false);
	/* Switching back to A is a flip to the spare, and B's frame becomes the spare. */
	memcpy(bframe, src, sizeof(bframe));
	assert_int_equal(display_output_begin_reuse(b, b->spares[0]), 0);
	assert_int_equal(display_output_finish(b, true), 0);
	assert_int_equal(b->front, a_buffer);
	assert_true(buffer_is(display_output_front(b), a));
	assert_true(buffer_is(&b->buffers[b->spares[0]], bframe));
	memcpy(src, a, sizeof(a));
	/* The next frame of A goes into the third buffer, whole. */
	fill(7, 0, 1);
	assert_int_equal(display_output_present(b, &src[0][0], W * 4, 0, 1), 0);
	assert_true(front_is_src(b));
	display_output_free(b);

	/* Without a spare nothing is staged: neither the front nor the back buffer is one. */
	assert_int_equal(display_headless_new(W, H, &no_spares, &b), 0);
	assert_int_equal(b->n_spares, 0);
	assert_int_equal(display_output_stage(b, b->back, &a[0][0], W * 4, 0, H), -EINVAL);
	assert_int_equal(display_output_stage(b, b->front, &a[0][0], W * 4, 0, H), -EINVAL);
	display_output_free(b);
}

/* Shows persona frame v, switching to it by copying it whole. */
static void switch_copying(struct display_output *b, uint8_t v) {
	fill(v, 0, H);
	assert_int_equal(display_output_begin(b, 0, H), 0);
	display_output_copy(b, &src[0][0], W * 4, UINT32_MAX);
	assert_int_equal(display_output_finish(b, true), 0);
	b->buffers[b->front].owner = v;
	assert_true(front_is_src(b));
}

/* The spare holding persona v's frame, or DISPLAY_NO_BUFFER. */
static unsigned int spare_of(struct display_output *b, uint8_t v) {
	for (unsigned int k = 0; k < b->n_spares; k++)
		if (b->buffers[b->spares[k]].owner == v)
			return b->spares[k];
	return DISPLAY_NO_BUFFER;
}

static void test_recent_spares(void **state) {
	const struct display_spares three = { 3, UINT64_MAX };
	struct display_output *b = NULL;
	uint8_t order[] = { 3, 1, 4, 2, 3, 4 };

	(void)state;
	assert_int_equal(display_headless_new(W, H, &three, &b), 0);
	assert_int_equal(b->n_buffers, 5);
	assert_int_equal(b->n_spares, 3);
	assert_int_equal(display_output_memory(b), 5u * W * 4 * H);
	for (uint8_t v = 1; v <= 4; v++)
		switch_copying(b, v);
	/* 4 is shown; the spares hold 3, 2, 1, the most recent first. */
	for (uint8_t v = 1; v <= 3; v++)
		assert_int_equal(b->spares[3 - v], spare_of(b, v));
	/* Any of the three is a flip away, and the one shown becomes the most recent spare. */
	for (size_t n = 0; n < sizeof(order); n++) {
		uint8_t v = order[n], was = b->buffers[b->front].owner;
		unsigned int i = spare_of(b, v);

		assert_int_not_equal(i, DISPLAY_NO_BUFFER);
		assert_int_equal(display_output_begin_reuse(b, i), 0);
		assert_int_equal(display_output_finish(b, true), 0);
		assert_int_equal(b->front, i);
		fill(v, 0, H);
		assert_true(front_is_src(b));
		assert_int_equal(b->buffers[b->spares[0]].owner, was);
	}
	/* A fifth persona takes the back buffer; the least recently shown frame (1) is no spare's now. */
	switch_copying(b, 5);
	assert_int_equal(spare_of(b, 1), DISPLAY_NO_BUFFER);
	for (uint8_t v = 2; v <= 4; v++)
		assert_int_not_equal(spare_of(b, v), DISPLAY_NO_BUFFER);
	/* Drawing on flips between two buffers only: the spares keep their frames. */
	for (uint8_t i = 0; i < 4; i++) {
		fill(6 + i, i, i + 1);
		assert_int_equal(display_output_present(b, &src[0][0], W * 4, i, i + 1), 0);
		assert_true(front_is_src(b));
		for (uint8_t v = 2; v <= 4; v++) {
			static uint8_t frame[H][W * 4];
			unsigned int k = spare_of(b, v);

			assert_int_not_equal(k, DISPLAY_NO_BUFFER);
			memset(frame, v, sizeof(frame));
			assert_true(buffer_is(&b->buffers[k], frame));
		}
	}
	display_output_free(b);
}

static void test_spare_budget(void **state) {
	const uint64_t frame = (uint64_t)W * 4 * H;
	struct display_output *b = NULL;

	(void)state;
	assert_int_equal(display_spares_allowed(&(struct display_spares){ 3, UINT64_MAX }, frame), 3);
	assert_int_equal(display_spares_allowed(&(struct display_spares){ 3, 2 * frame + frame / 2 }, frame), 2);
	assert_int_equal(display_spares_allowed(&(struct display_spares){ 3, frame - 1 }, frame), 0);
	assert_int_equal(display_spares_allowed(&(struct display_spares){ 100, UINT64_MAX }, frame), DISPLAY_MAX_SPARES);
	assert_int_equal(display_headless_new(W, H, &(struct display_spares){ 8, 2 * frame }, &b), 0);
	assert_int_equal(b->n_buffers, 4);
	assert_int_equal(b->n_spares, 2);
	display_output_free(b);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_partial_updates),
		cmocka_unit_test(test_flip_pending),
		cmocka_unit_test(test_steps),
		cmocka_unit_test(test_reuse_back),
		cmocka_unit_test(test_spare),
		cmocka_unit_test(test_recent_spares),
		cmocka_unit_test(test_spare_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
