/* SPDX-License-Identifier: MIT */
/*
 * What devnsd reads back after a crash: the state record (restart/state-record.c)
 * and a container's mount table as re-attaching reads it (populate/view-mounts.c).
 * A record the parser accepts must hold only valid names, and must come out
 * of formatting and parsing again unchanged; one it refuses must come with
 * a reason.
 */
#include <sys/sysmacros.h>

#include "fuzz-input.h"
#include "restart/state-record.h"
#include "populate/view-mounts.h"

static void check_record(const struct state_record *r) {
	fuzz_assert(!r->active[0] || name_is_valid(r->active));
	fuzz_assert(r->n_personas <= CONF_MAX_PERSONAS && r->n_items <= STATE_RECORD_MAX_ITEMS);
	for (size_t i = 0; i < r->n_personas; i++) {
		fuzz_assert(name_is_valid(r->personas[i].name));
		fuzz_assert(!r->personas[i].attached || r->personas[i].pid > 0);
	}
	for (size_t i = 0; i < r->n_items; i++)
		fuzz_assert(name_is_valid(r->items[i].persona) && r->items[i].key[0] && r->items[i].value[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct state_record r, again;
	struct view_mount vm[VIEW_MOUNTS_MAX];
	char error[256] = "", *text;
	size_t len, n;

	if (state_record_parse(&r, (const char *)data, size, error, sizeof(error)) < 0) {
		fuzz_assert(error[0] && r.n_personas == 0 && r.n_items == 0 && !r.items);
	} else {
		check_record(&r);
		fuzz_assert(state_record_format(&r, &text, &len) == 0);
		fuzz_assert(state_record_parse(&again, text, len, error, sizeof(error)) == 0);
		fuzz_assert(again.n_personas == r.n_personas && again.n_items == r.n_items &&
			    streq(again.active, r.active) && again.view_dev == r.view_dev);
		for (size_t i = 0; i < r.n_items; i++)
			fuzz_assert(streq(again.items[i].value, r.items[i].value));
		free(text);
		state_record_done(&again);
		state_record_done(&r);
	}
	n = view_mounts_find((const char *)data, size, makedev(0, 52), "work", vm, VIEW_MOUNTS_MAX);
	fuzz_assert(n <= VIEW_MOUNTS_MAX);
	for (size_t i = 0; i < n; i++)
		fuzz_assert(vm[i].target[0] && vm[i].target[0] != '/' && strncmp(vm[i].root, "work", 4) == 0 &&
			    !strstr(vm[i].root, "/.."));
	return 0;
}
