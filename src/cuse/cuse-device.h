/* SPDX-License-Identifier: MIT */
#pragma once

#define FUSE_USE_VERSION 35
#include <cuse_lowlevel.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/*
 * One CUSE character device served from the sd-event loop (or from a
 * loop of loop.h): its /dev/cuse session fd is an event source, requests
 * are processed as they arrive, and freeing it removes the node.
 */
struct cuse_device;

/*
 * Creates /dev/DEVNAME (e.g. "devns/work/event3") with the given operations;
 * fuse_req_userdata() returns userdata. major 0 asks the kernel for one.
 * The node exists once ops->init_done has been called (from the event
 * loop, never from inside this call).
 *
 * With a keeper set and a fixed number (major not 0), the device's
 * connection is kept for the next run, and a connection the last run
 * kept for this number is taken over: the node never leaves /dev, and
 * the handles opened before are answered ENODEV (see cuse_device_set_keeper()).
 */
int cuse_device_new(struct cuse_device **ret, sd_event *event, const char *devname, unsigned int major,
		    unsigned int minor, const struct cuse_lowlevel_ops *ops, void *userdata);
struct cuse_device *cuse_device_free(struct cuse_device *d);

/*
 * As cuse_device_new(), with the session polled by loop (loop.h) instead:
 * requests whose FUSE opcode is in quiet (CUSE_QUIET(FUSE_READ) | ...)
 * are answered straight from it, so the device's operations for them
 * must be quiet in loop.h's sense. Every other request is handed to
 * sd-event's loop, and the session is not read until it has been
 * answered there.
 */
struct loop;
#define CUSE_QUIET(opcode) (UINT64_C(1) << (opcode))
int cuse_device_new_on_loop(struct cuse_device **ret, struct loop *loop, uint64_t quiet, const char *devname,
			    unsigned int major, unsigned int minor, const struct cuse_lowlevel_ops *ops,
			    void *userdata);

/* Tries to give the node in /dev its owner this long after the first attempt found no node. */
#define CUSE_OWNER_RETRY_USEC (10 * 1000000ULL)

/*
 * Gives the node in /dev owner uid:gid and mode (permission bits). The
 * kernel makes the node (devtmpfs) once the device is set up; until it is
 * there, this is retried from the event loop for up to
 * CUSE_OWNER_RETRY_USEC. The node is reached below /dev through no
 * symlink, and is changed only when it is a character device with the
 * device's number. Returns 0 once applied, -ENOENT while waiting for the
 * node, or another negative errno (nothing is retried then).
 */
int cuse_device_set_owner(struct cuse_device *d, uid_t uid, gid_t gid, mode_t mode);
/*
 * Where devices' connections are kept across a restart of the daemon (an
 * fd store). take() hands over what the last run kept under a name, keep()
 * keeps a duplicate, forget() drops one, and sync() returns once what was
 * forgotten is closed, so that its number is free to register again.
 * Names start with CUSE_KEEP_PREFIX.
 *
 * Beside each connection a small memory file records the requests read
 * and not yet answered, and the open handles with their poll handles. A
 * run that takes the connection over answers those requests ENODEV, wakes
 * those pollers, and answers ENODEV to every later request on a handle it
 * did not open (0 to its release). A request is recorded before the
 * device's operations see it, so one that kills the daemon is answered,
 * not run again. Requests other than releases past
 * CUSE_DEVICE_MAX_REQUESTS - CUSE_DEVICE_MAX_FILES in flight get EBUSY
 * (the rest is kept for releases, which the kernel waits for), and opens
 * past CUSE_DEVICE_MAX_FILES handles get EMFILE.
 */
struct cuse_keeper {
	int (*take)(void *userdata, const char *name, int *ret_fd);
	int (*keep)(void *userdata, const char *name, int fd);
	void (*forget)(void *userdata, const char *name);
	void (*sync)(void *userdata);
	void *userdata;
};
#define CUSE_KEEP_PREFIX "cuse."
#define CUSE_DEVICE_MAX_REQUESTS 4096
#define CUSE_DEVICE_MAX_FILES 1024

/*
 * A node that several owners open (a routed node: every persona's
 * containers, and the host) is split in n shares: each owner may hold at
 * most CUSE_DEVICE_MAX_FILES / n handles and have at most
 * (CUSE_DEVICE_MAX_REQUESTS - CUSE_DEVICE_MAX_FILES) / n requests other
 * than releases in flight; past them, EMFILE and EBUSY, as past the
 * device's own limits. n owners filling their shares still leave room for
 * each other. n 0 (the default) counts the device as one owner; at most
 * CUSE_DEVICE_MAX_FILES.
 */
int cuse_device_set_shares(struct cuse_device *d, unsigned int n);
/*
 * From a device's open operation, before it answers: the handle being
 * opened belongs to owner (a number from 1 the caller chooses, e.g. a
 * persona's; 0 is the owner of requests that name no handle).
 * -EMFILE when owner holds its share of handles already (the open is then
 * to be answered with it). Does nothing on a device without shares.
 */
int cuse_device_open_owner(struct cuse_device *d, uint32_t owner);
/* The handles owner holds on d, and its requests in flight other than releases. */
unsigned int cuse_device_owner_files(const struct cuse_device *d, uint32_t owner);
unsigned int cuse_device_owner_requests(const struct cuse_device *d, uint32_t owner);

/*
 * Opens a new connection (a non-blocking fd): /dev/cuse, unless connect is
 * set (a test plays the kernel's side); NULL restores /dev/cuse.
 */
void cuse_device_set_connector(int (*connect)(void *userdata), void *userdata);

/* Sets (or with NULL, clears) the keeper for devices created from now on. */
void cuse_device_set_keeper(const struct cuse_keeper *k);

/*
 * Keeps a short text with the device's connection, for the run that finds
 * its node gone (cuse_device_end_kept()); at most CUSE_DEVICE_NOTE_MAX
 * bytes are kept.
 */
#define CUSE_DEVICE_NOTE_MAX 511
void cuse_device_set_note(struct cuse_device *d, const char *note);

/* What the last run noted of a node that is no more. */
struct cuse_kept_node {
	char devname[256];
	char note[CUSE_DEVICE_NOTE_MAX + 1];
};

/* How long the connection of a node that is no more answers ENODEV before it ends. */
#define CUSE_DEVICE_GONE_USEC (2 * 1000000ULL)

/*
 * Takes over the connection the last run kept under keep (a name with
 * CUSE_KEEP_PREFIX; -EINVAL for its record's) for a node this run does not have: a
 * device unplugged meanwhile, a persona no longer configured. Its clients
 * get ENODEV, as from a device that went away, for CUSE_DEVICE_GONE_USEC;
 * then it ends and its node leaves /dev. ret_node gets what the last run
 * noted of it. -ENOENT if nothing usable was kept.
 */
int cuse_device_end_kept(sd_event *event, const char *keep, struct cuse_kept_node *ret_node);

/*
 * Ends the device as hardware ends (an input device unplugged, a persona
 * removed), in place of cuse_device_free(): its node leaves /dev now, and
 * its connection stays, answering every request on the handles still open
 * as the kernel's drivers answer a device that went (ENODEV; a poll
 * POLLERR|POLLHUP, its pollers woken; 0 to a flush and a release), until
 * the last handle is released; then it ends. The device's operations are
 * never called again, and nothing of it is kept for the next run. group
 * (a persona's name, "" or NULL for none) bounds how many linger: past
 * CUSE_DEVICE_MAX_RETIRED_PER_GROUP of a group, or CUSE_DEVICE_MAX_RETIRED
 * in all, the oldest ends, and its handles get the kernel's ENOTCONN. A
 * device made later under the same node name or number ends the one
 * lingering there first (the kernel gives each to one connection). d may
 * be NULL.
 */
#define CUSE_DEVICE_GROUP_MAX 63
#define CUSE_DEVICE_MAX_RETIRED_PER_GROUP 32
#define CUSE_DEVICE_MAX_RETIRED 256
void cuse_device_retire(struct cuse_device *d, const char *group);
/* Ends the retired devices of group (NULL: all of them), as devnsd stops. */
void cuse_device_end_retired(const char *group);
/* How many retired devices of group (NULL: all) still answer their handles. */
unsigned int cuse_device_n_retired(const char *group);

static inline void cuse_device_freep(struct cuse_device **d) {
	cuse_device_free(*d);
}
