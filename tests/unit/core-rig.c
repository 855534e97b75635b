/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core-rig.h"
#include "conf/conf.h"
#include "loop.h"

struct core_rig *core_rig_new(const char *conf_text) {
	struct core_rig *r = calloc(1, sizeof(*r));
	char conf_path[64] = "/tmp/devns-core-conf-XXXXXX", *error = NULL;
	FILE *f;
	int fd;

	assert_non_null(r);
	snprintf(r->state_dir, sizeof(r->state_dir), "/tmp/devns-core-state-XXXXXX");
	assert_non_null(mkdtemp(r->state_dir));
	/* Device numbers are kept here, not in the host's state directory. */
	assert_int_equal(setenv("DEVNS_STATE_DIR", r->state_dir, 1), 0);
	fd = mkstemp(conf_path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	assert_non_null(f);
	assert_true(fputs(conf_text, f) >= 0);
	assert_int_equal(fclose(f), 0);
	if (conf_load(conf_path, &r->conf, &error) < 0)
		fail_msg("configuration: %s", error ? error : "?");
	unlink(conf_path);
	assert_int_equal(sd_event_new(&r->event), 0);
	assert_int_equal(manager_new(&r->manager, r->event, r->conf), 0);
	return r;
}

void core_rig_free(struct core_rig *r) {
	char cmd[128];

	manager_free(r->manager);
	sd_event_unref(r->event);
	conf_free(r->conf);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", r->state_dir);
	(void)!system(cmd);
	free(r);
}

struct persona *core_rig_persona(struct core_rig *r, const char *name) {
	struct persona *p = manager_find_persona(r->manager, name);

	assert_non_null(p);
	return p;
}

void core_rig_run(struct core_rig *r) {
	for (int i = 0; i < 1000; i++)
		if (loop_iterate(r->manager->loop, 0) == 0)
			return;
	fail_msg("the event loop never went idle");
}
