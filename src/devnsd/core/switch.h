/* SPDX-License-Identifier: MIT */
#pragma once

#include "listener.h"

struct persona;

/*
 * A switch between personas, as one transaction (systemd-machined's
 * Operation, seatd's disable-then-activate): the manager starts it and
 * holds a reference while every class switches; a class that cannot finish
 * at once (the display, until the flip) takes a reference of its own and
 * drops it when done. The last release completes the switch: its done
 * listeners hear of it (data: the op), then every waiter is called with
 * the persona it brought on, and the op is freed.
 */

/* Callers waiting for one switch; more are answered at once. */
#define SWITCH_WAITERS_MAX 16

/* A waiter: the switch is complete and shown shows. */
typedef void (*switch_done_fn)(void *userdata, struct persona *shown);

struct switch_waiter {
	switch_done_fn fn;
	void *userdata;
};

struct switch_op {
	unsigned int n_ref;
	/* The persona the switch brings on; the latest target when switches were joined. */
	struct persona *target;
	struct signal_list done;
	struct switch_waiter waiters[SWITCH_WAITERS_MAX];
	unsigned int n_waiters;
};

/* A switch to target, with one reference held by the caller. */
int switch_op_new(struct persona *target, struct switch_op **ret);
struct switch_op *switch_op_ref(struct switch_op *op);
/* Drops a reference; the last one completes the switch. Accepts NULL; returns NULL. */
struct switch_op *switch_op_unref(struct switch_op *op);
static inline void switch_op_unrefp(struct switch_op **op) {
	switch_op_unref(*op);
}
/* Calls fn(userdata, shown) on completion. -ENOBUFS with SWITCH_WAITERS_MAX waiting. */
int switch_op_add_waiter(struct switch_op *op, switch_done_fn fn, void *userdata);

/*
 * For classes: *slot holds a reference on op (one, however often it is
 * held); holding another op there releases the one before. switch_release()
 * drops what *slot holds.
 */
void switch_hold(struct switch_op **slot, struct switch_op *op);
void switch_release(struct switch_op **slot);
