/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "conf/conf.h"
#include "core/manager.h"

/*
 * devnsd's real manager on its own event loop, with the personas of a
 * configuration text and no device class: tests register the real class
 * cores, over the fake backends, as devnsd.c registers the served ones.
 */
struct core_rig {
	sd_event *event;
	struct conf *conf;
	struct manager *manager;
	char state_dir[64];
};

/* A rig for conf_text; fails the test if anything does not work. */
struct core_rig *core_rig_new(const char *conf_text);
void core_rig_free(struct core_rig *r);

/* The persona named name, which must exist. */
struct persona *core_rig_persona(struct core_rig *r, const char *name);

/* Runs the event loop until nothing is left to do at once. */
void core_rig_run(struct core_rig *r);
