/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "core/manager.h"
#include "restart/state-record.h"

/*
 * Restart without loss: devnsd writes down its personas, the active one,
 * their containers and each class's per-persona state (restart/state-record.h),
 * and keeps the framebuffers' memory in an fd store (restart/fdstore.h), so
 * that after a crash the next devnsd takes all of it back.
 *
 * The record is written to DIR/state (DIR: $DEVNS_STATE_DIR or
 * /run/devnsd) atomically, a short while after each change; under systemd
 * it also goes to the fd store as "state". A clean stop forgets it all.
 */
struct state;

/* Saves are at least this far apart: a client writing LEDs in a loop costs one write per interval. */
#define STATE_SAVE_INTERVAL_USEC (20 * 1000ull)
/* The record's file in the state directory. */
#define STATE_FILE "state"

/*
 * What a device class keeps of a persona. save() adds p's items with
 * state_record_add_item(rec, p->name, part->name, key, value); load() takes
 * one back after every class has made p's nodes, returning -ENOENT for a
 * key it no longer knows (a device or light no longer configured) and
 * -ESTALE for a value that no longer fits (the display mode changed):
 * both are logged as not restored.
 */
struct state_part {
	const char *name;
	void (*save)(void *userdata, struct persona *p, struct state_record *rec);
	int (*load)(void *userdata, struct persona *p, const char *key, const char *value);
	void *userdata;
};

/*
 * Loads what the last run left (a bad record is logged and ignored), sets
 * up the fd store, and listens to the manager's switches, personas and
 * attachments; it frees itself once the manager's classes are gone.
 * Call before any device is opened. Logs what fails; on failure nothing
 * of it is left (m->state is NULL) and devnsd runs on without keeping
 * anything.
 */
int state_new(struct manager *m, const char *dir);
/* Frees the state; what is kept stays kept for the next run. */
void state_free(struct manager *m);
/* devnsd stops cleanly: the record and the kept fds are forgotten, so the next start is fresh. */
void state_forget_all(struct manager *m);

/* A class's part; parts live as long as the manager. */
int state_register_part(struct manager *m, const struct state_part *part);
/* Something worth keeping changed: a save follows shortly. */
void state_changed(struct manager *m);

/* The fd the last run kept under name; -ENOENT if none. */
int state_take_fd(struct manager *m, const char *name, int *ret_fd);
/* Keeps fd under name for the next run (logged when that fails), or forgets name. */
int state_keep_fd(struct manager *m, const char *name, int fd);
void state_forget_fd(struct manager *m, const char *name);
/* The names the last run kept and this one has not taken; NULL after the last. */
const char *state_left_over_fd(struct manager *m, size_t i);
/* How many more fds the store can keep. */
size_t state_fd_room(struct manager *m);
/* Returns once what was forgotten is closed. */
void state_sync_fds(struct manager *m);
/* Drops what the last run kept under names starting with prefix and this run did not take. */
void state_drop_left_over_fds(struct manager *m, const char *prefix);

/*
 * What the last run recorded under part and key for some persona (the
 * first found), before the classes take it back; NULL if nothing.
 */
const char *state_last_value(struct manager *m, const char *part, const char *key);
/* Before the classes: the personas created at runtime come back, and the active persona. */
void state_restore_personas(struct manager *m);
/* After every class made every persona's nodes: each part takes its items back. */
void state_restore_items(struct manager *m);
/*
 * Binds p to process pid's container again and populates it (what
 * populate_restore_attachments() passes: manager_attach_container()).
 */
typedef int (*state_attach_fn)(struct manager *m, struct persona *p, int pidfd);
/*
 * Once the bus is up: personas bound to a container are bound again with
 * attach, if that process is still the one, as soon as every node is in
 * /dev (so the container gets them all again).
 */
void state_restore_attachments(struct manager *m, state_attach_fn attach);

/*
 * What the last restart could not take back (a persona no longer
 * configured, a mode that no longer fits, a container gone...): logged as
 * a warning and kept, at most STATE_NOTES_MAX of them, for devnsctl status.
 * The i-th note, or NULL after the last.
 */
#define STATE_NOTES_MAX 32
#define STATE_NOTE_MAX 200
void state_note(struct manager *m, const char *fmt, ...) _printf_(2, 3);
const char *state_restart_note(struct manager *m, size_t i);

/* p was bound to the container of process pid (pidfd: the same, for looking it up), or unbound. */
void state_note_attached(struct manager *m, struct persona *p, pid_t pid, int pidfd);

/*
 * Where the sysfs views are mounted (dir, kept as a pointer) and their file
 * system now; the live views' directory (NULL without views) and the file
 * system of the last run's (0 if none): populate covers its dead mounts.
 */
void state_set_view(struct manager *m, const char *dir, dev_t dev);
const char *state_view_dir(struct manager *m);
dev_t state_old_view_dev(struct manager *m);
