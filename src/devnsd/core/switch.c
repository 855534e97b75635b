/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "core/switch.h"

int switch_op_new(struct persona *target, struct switch_op **ret) {
	struct switch_op *op = calloc(1, sizeof(*op));

	if (!op)
		return -ENOMEM;
	op->n_ref = 1;
	op->target = target;
	signal_init(&op->done);
	*ret = op;
	return 0;
}

struct switch_op *switch_op_ref(struct switch_op *op) {
	if (op)
		op->n_ref++;
	return op;
}

static void complete(struct switch_op *op) {
	/* Listeners may start the next switch; the waiters of this one hear of the persona it showed. */
	signal_emit(&op->done, op);
	for (unsigned int i = 0; i < op->n_waiters; i++)
		op->waiters[i].fn(op->waiters[i].userdata, op->target);
	free(op);
}

struct switch_op *switch_op_unref(struct switch_op *op) {
	if (op && --op->n_ref == 0)
		complete(op);
	return NULL;
}

int switch_op_add_waiter(struct switch_op *op, switch_done_fn fn, void *userdata) {
	if (op->n_waiters >= SWITCH_WAITERS_MAX)
		return -ENOBUFS;
	op->waiters[op->n_waiters++] = (struct switch_waiter){ fn, userdata };
	return 0;
}

void switch_hold(struct switch_op **slot, struct switch_op *op) {
	if (*slot == op)
		return;
	switch_op_ref(op);
	switch_release(slot);
	*slot = op;
}

void switch_release(struct switch_op **slot) {
	struct switch_op *op = *slot;

	/* Cleared first: completing may run code that looks at the slot. */
	*slot = NULL;
	switch_op_unref(op);
}
