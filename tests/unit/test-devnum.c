/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test-util.h"

#include "core/devnum.h"

/* A major in the dynamic range that no driver holds in a test machine, kept by a state file. */
#define STATE_MAJOR 509

struct dir {
	char path[64];
};

static int dir_setup(void **state) {
	struct dir *d = calloc(1, sizeof(*d));

	assert_non_null(d);
	snprintf(d->path, sizeof(d->path), "/tmp/devns-devnum-XXXXXX");
	assert_non_null(mkdtemp(d->path));
	*state = d;
	return 0;
}

static int dir_teardown(void **state) {
	struct dir *d = *state;
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->path);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

static unsigned int minor_of(struct devnum *dn, const char *name) {
	unsigned int maj, min;

	assert_int_equal(devnum_get(dn, name, &maj, &min), 0);
	return min;
}

static void write_state(const struct dir *d, const char *text) {
	char path[96];
	FILE *f;

	snprintf(path, sizeof(path), "%s/devices", d->path);
	f = fopen(path, "we");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

/* Cards take minors below 64 (libdrm's primary nodes), other nodes 64 and up, each kept. */
static void test_fresh_ranges(void **state) {
	struct dir *d = *state;
	_cleanup_(devnum_freep) struct devnum *dn = NULL;

	assert_int_equal(devnum_new(&dn, d->path), 0);
	assert_int_equal(minor_of(dn, "devns/work/event3"), DEVNUM_CARD_MINORS);
	assert_int_equal(minor_of(dn, "devns/work/card0"), 0);
	assert_int_equal(minor_of(dn, "devns/work/fb0"), DEVNUM_CARD_MINORS + 1);
	assert_int_equal(minor_of(dn, "devns/personal/card0"), 1);
	assert_int_equal(minor_of(dn, "devns/personal/event3"), DEVNUM_CARD_MINORS + 2);
	/* Asked again: the same numbers; a name like a card but not one is another node. */
	assert_int_equal(minor_of(dn, "devns/work/card0"), 0);
	assert_int_equal(minor_of(dn, "devns/work/event3"), DEVNUM_CARD_MINORS);
	assert_int_equal(minor_of(dn, "devns/work/card0x"), DEVNUM_CARD_MINORS + 3);
	assert_int_equal(minor_of(dn, "devns/work/card"), DEVNUM_CARD_MINORS + 4);
	/* A second load (a restart) keeps every number. */
	devnum_free(dn);
	dn = NULL;
	assert_int_equal(devnum_new(&dn, d->path), 0);
	assert_int_equal(minor_of(dn, "devns/personal/card0"), 1);
	assert_int_equal(minor_of(dn, "devns/personal/event3"), DEVNUM_CARD_MINORS + 2);
	assert_int_equal(minor_of(dn, "devns/guest/card0"), 2);
}

/* A state file of a run before cards: its small minors stay, and cards take the free ones around them. */
static void test_old_state_keeps_its_numbers(void **state) {
	struct dir *d = *state;
	_cleanup_(devnum_freep) struct devnum *dn = NULL;
	unsigned int maj, min;
	char text[128];

	snprintf(text, sizeof(text), "major %u\n0 devns/work/event0\n1 devns/work/event1\n3 devns/work/fb0\n", STATE_MAJOR);
	write_state(d, text);
	assert_int_equal(devnum_new(&dn, d->path), 0);
	assert_int_equal(devnum_get(dn, "devns/work/event1", &maj, &min), 0);
	if (maj != STATE_MAJOR)
		skip(); /* someone holds the major here: the state was started over */
	assert_int_equal(min, 1);
	assert_int_equal(minor_of(dn, "devns/work/fb0"), 3);
	assert_int_equal(minor_of(dn, "devns/work/card0"), 2);
	assert_int_equal(minor_of(dn, "devns/personal/card0"), 4);
	assert_int_equal(minor_of(dn, "devns/personal/event0"), DEVNUM_CARD_MINORS);
}

/* A new devnum in d whose card minors are all given, to personas p0 to p63. */
static struct devnum *full_card_range(const struct dir *d) {
	struct devnum *dn;
	char name[64];

	assert_int_equal(devnum_new(&dn, d->path), 0);
	for (unsigned int i = 0; i < DEVNUM_CARD_MINORS; i++) {
		snprintf(name, sizeof(name), "devns/p%u/card0", i);
		assert_int_equal(minor_of(dn, name), i);
	}
	return dn;
}

/* The card range full: -ENOSPC, and nothing else suffers. */
static void test_card_range_full(void **state) {
	struct dir *d = *state;
	_cleanup_(devnum_freep) struct devnum *dn = NULL;
	unsigned int maj, min;

	dn = full_card_range(d);
	assert_int_equal(devnum_get(dn, "devns/late/card0", &maj, &min), -ENOSPC);
	assert_int_equal(minor_of(dn, "devns/late/event0"), DEVNUM_CARD_MINORS);
	assert_int_equal(minor_of(dn, "devns/p5/card0"), 5);
	/* A deleted persona's input node makes no room for a card: its minor is past their range. */
	devnum_release_persona(dn, "late");
	assert_int_equal(devnum_get(dn, "devns/late/card0", &maj, &min), -ENOSPC);
}

static bool all_but_p5(void *userdata, const char *persona) {
	(void)userdata;
	return strcmp(persona, "p5") != 0;
}

/* Personas come and go: a deleted persona's card minor goes to a new card once no other is free. */
static void test_card_minor_of_a_deleted_persona(void **state) {
	struct dir *d = *state;
	_cleanup_(devnum_freep) struct devnum *dn = NULL;
	unsigned int maj, min;

	dn = full_card_range(d);
	/* p1's nodes only, not p10's. */
	devnum_release_persona(dn, "p1");
	devnum_release_persona(dn, "nobody");
	assert_int_equal(minor_of(dn, "devns/late/card0"), 1);
	/* Held by late now: the next one finds none. */
	assert_int_equal(devnum_get(dn, "devns/later/card0", &maj, &min), -ENOSPC);
	/* The state file says so: after a restart, late keeps 1, and p1 is no more. */
	devnum_free(dn);
	dn = NULL;
	assert_int_equal(devnum_new(&dn, d->path), 0);
	/* Before any node asks: p5 is no persona now, its card is gone; the living keep theirs. */
	devnum_release_gone(dn, all_but_p5, NULL);
	assert_int_equal(minor_of(dn, "devns/new/card0"), 5);
	assert_int_equal(devnum_get(dn, "devns/newer/card0", &maj, &min), -ENOSPC);
	assert_int_equal(minor_of(dn, "devns/late/card0"), 1);
	assert_int_equal(minor_of(dn, "devns/p0/card0"), 0);
	/* Started: an earlier run's cards that no persona of this run took are free to go. */
	devnum_settle(dn);
	assert_int_equal(minor_of(dn, "devns/newer/card0"), 2);
	assert_int_equal(minor_of(dn, "devns/p0/card0"), 0);
	assert_int_equal(minor_of(dn, "devns/late/card0"), 1);
	assert_int_equal(minor_of(dn, "devns/new/card0"), 5);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fresh_ranges, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_old_state_keeps_its_numbers, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_card_range_full, dir_setup, dir_teardown),
		cmocka_unit_test_setup_teardown(test_card_minor_of_a_deleted_persona, dir_setup, dir_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
