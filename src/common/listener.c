/* SPDX-License-Identifier: MIT */
#include "listener.h"

void signal_emit(struct signal_list *s, void *data) {
	struct listener *l, *next;

	/* The next one is taken first: the callback may take itself off the list. */
	for (l = LIST_FIRST(&s->listeners); l; l = next) {
		next = LIST_NEXT(l, link);
		l->notify(l, data);
	}
}
