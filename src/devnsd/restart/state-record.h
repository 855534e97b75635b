/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf/conf.h"
#include "util.h"

/*
 * What devnsd writes down so that a restart brings its personas back: which
 * personas exist and which one is active, which containers they were bound
 * to, and small per-persona items each device class keeps (LED states, the
 * framebuffer's mode and pan). Transport-free text, one record a line:
 *
 *   devnsd-state 1
 *   seq N
 *   active NAME
 *   view MAJOR:MINOR
 *   persona NAME configured|created
 *   attach NAME PID STARTTIME NSDEV NSINO
 *   item NAME PART KEY VALUE...
 *   end
 *
 * A record without its "end" line was cut short and is refused as a whole.
 */

#define STATE_RECORD_MAX_SIZE (1u << 20)
#define STATE_RECORD_MAX_LINE 512
#define STATE_RECORD_MAX_ITEMS 4096
#define STATE_PART_MAX 16
#define STATE_KEY_MAX 64
#define STATE_VALUE_MAX 256

struct state_persona {
	char name[NAME_MAX_LEN + 1];
	/* Made at runtime (CreatePersona), not by the configuration. */
	bool created;
	/* The container it was bound to: its pid, the pid's start time (clock ticks after boot), its pid namespace. */
	bool attached;
	pid_t pid;
	uint64_t start_time;
	uint64_t ns_dev, ns_ino;
};

struct state_item {
	char persona[NAME_MAX_LEN + 1];
	char part[STATE_PART_MAX + 1];
	char key[STATE_KEY_MAX + 1];
	char value[STATE_VALUE_MAX + 1];
};

struct state_record {
	/* Counts the records a run wrote: of two copies, the higher is the newer. */
	uint64_t seq;
	char active[NAME_MAX_LEN + 1];
	/* The device number of the sysfs views' file system, 0 if none. */
	uint64_t view_dev;
	struct state_persona personas[CONF_MAX_PERSONAS];
	size_t n_personas;
	struct state_item *items;
	size_t n_items;
};

void state_record_init(struct state_record *r);
void state_record_done(struct state_record *r);

/* The persona entry named name, or NULL. */
struct state_persona *state_record_persona(struct state_record *r, const char *name);
/* Adds (or returns) the entry for name. -EINVAL for a bad name, -E2BIG past CONF_MAX_PERSONAS. */
int state_record_add_persona(struct state_record *r, const char *name, struct state_persona **ret);

/*
 * Adds an item. Names and keys are [A-Za-z0-9_.:-]; a value is printable
 * text without newlines. -EINVAL otherwise, -E2BIG past the limits.
 */
int state_record_add_item(struct state_record *r, const char *persona, const char *part, const char *key,
			  const char *value);

/*
 * Parses text of len bytes (not NUL-terminated). -EBADMSG for anything
 * malformed, cut short or past a limit, with the reason (and line) in
 * error; r is left empty then.
 */
int state_record_parse(struct state_record *r, const char *text, size_t len, char *error, size_t error_size);

/* The record as text, in *ret (malloc'ed, NUL-terminated) of *ret_len bytes. */
int state_record_format(const struct state_record *r, char **ret, size_t *ret_len);
