/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/queue.h>

/*
 * Upward news, as wlroots' wl_signal carries it: a module owns a signal for
 * each event it announces, and the modules above it add listeners. A
 * listener is embedded in its owner's struct and finds it with
 * container_of(). A callback may remove its own listener (not others);
 * listeners added during an emission hear the next one.
 */

struct listener;

typedef void (*listener_fn)(struct listener *l, void *data);

struct listener {
	listener_fn notify;
	LIST_ENTRY(listener) link;
	/* Set while the listener is on a signal's list. */
	struct signal_list *signal;
};

struct signal_list {
	LIST_HEAD(, listener) listeners;
};

static inline void signal_init(struct signal_list *s) {
	LIST_INIT(&s->listeners);
}

/* Adds l (notify set by the caller) to s; l must not be on a list yet. */
static inline void signal_add(struct signal_list *s, struct listener *l) {
	LIST_INSERT_HEAD(&s->listeners, l, link);
	l->signal = s;
}

/* Takes l off its signal's list; a listener on none is left alone. */
static inline void listener_remove(struct listener *l) {
	if (!l->signal)
		return;
	LIST_REMOVE(l, link);
	l->signal = NULL;
}

/* Calls every listener of s with data, newest first. */
void signal_emit(struct signal_list *s, void *data);
