/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What the parts of populate share (populate/populate.h is the interface):
 * the plan the parent makes before it forks, and the jobs the helper
 * process works through in the container.
 */

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "populate/populate.h"
#include "populate/udev.h"
#include "idmap.h"
#include "populate/view-mounts.h"

struct libmnt_table;

#define POPULATE_MAX 128
#define POPULATE_SHARES 16
/* Mounts of the container that pass nothing on, looked at; past these, a mount is taken to pass mounts on. */
#define PLAN_PRIVATE_MOUNTS_MAX 4096
/* Peer groups of the host's and devnsd's mounts looked at; past these, every shared mount reaches them. */
#define PLAN_OUTSIDE_GROUPS_MAX 4096
/* Mounts of the container the helper may step onto; past these, none is. */
#define PLAN_TRUSTED_MOUNTS_MAX 4096
/* Mounts it may not, kept with their type and place to name them when met. */
#define PLAN_UNTRUSTED_NAMED 8

/* A mount of the container's: its id, the device number its table gives, its type and place. */
struct plan_mount {
	int id;
	dev_t dev;
	char type[16];
	char target[112];
};

struct entry {
	char host[PATH_MAX]; /* devnsd's node, /dev/devns/PERSONA/NAME */
	char path[PATH_MAX]; /* where it goes in the container, without the leading '/' */
	dev_t rdev;
	/* Its node_desc's kind: "input", "drm", ... */
	char kind[16];
	/* Whether it has a udev record (input nodes, a card with a sysfs entry), and the record's properties. */
	bool record;
	char udev[512];
	/* Its udev presentation in plan->nodes, or -1. */
	int node;
};

/* A host directory bound into the container at the same path. */
struct share {
	char path[256];  /* in devnsd's mount namespace */
	char where[256]; /* in the container: path, but for the endpoint's directory */
	struct stat st;
};

/* What the child works from: everything decided before it starts. */
struct plan {
	struct persona *persona;
	struct entry entries[POPULATE_MAX];
	size_t n;
	struct share shares[POPULATE_SHARES];
	size_t n_shares;
	/* devnsd's own /dev and /run: nothing is written on their file systems. */
	struct stat host_dev, host_run;
	struct idmap uids, gids;
	struct conf_group input_group, video_group;
	/* With result.host_groups: the host's gids of the groups' names (-1: none). */
	int64_t host_input_gid, host_video_gid;
	/* Input nodes and cards as the container's udev clients are to see them. */
	struct udev_node nodes[POPULATE_MAX];
	size_t n_nodes;
	/* A change of one node (hotplug): its udev event is for devnsd to send once the container follows. */
	bool node_job;
	/*
	 * The peer groups mounts of devnsd's namespace and of the host's first
	 * process are in or receive from (populate_plan_outside()): a mount
	 * laid on a container's mount in one of them would reach those
	 * namespaces. Without them (unread, or more than
	 * PLAN_OUTSIDE_GROUPS_MAX) every shared mount is taken to reach them.
	 */
	bool outside_known;
	unsigned int outside_groups[PLAN_OUTSIDE_GROUPS_MAX];
	size_t n_outside_groups;
	/*
	 * From the container's /proc/PID/mountinfo: whether it was read, and
	 * the ids of its mounts whose mounts reach no namespace outside it:
	 * those that pass nothing on to peers, and those whose peer group no
	 * mount of the host's or devnsd's is in or receives from (the
	 * container made them shared itself, as a machine booting systemd
	 * does). The others, and any past PLAN_PRIVATE_MOUNTS_MAX, get nothing
	 * laid on them.
	 */
	bool mounts_read;
	int private_mounts[PLAN_PRIVATE_MOUNTS_MAX];
	size_t n_private_mounts;
	/*
	 * Its mounts of local file systems, and of any the host has mounted
	 * itself (a superblock devnsd's mount namespace has too): the only
	 * ones the helper looks into (plan_mount_trusted()). The first of the
	 * others are named here for the message.
	 */
	struct plan_mount trusted_mounts[PLAN_TRUSTED_MOUNTS_MAX];
	size_t n_trusted_mounts;
	struct plan_mount untrusted_mounts[PLAN_UNTRUSTED_NAMED];
	size_t n_untrusted_mounts;
	/* Views of a devnsd that died, bound in the container: replaced by the live view's directory. */
	struct view_mount views[VIEW_MOUNTS_MAX];
	size_t n_views;
	char view_dir[PATH_MAX];
	struct populate_result result;
};

static inline bool same_inode(const struct stat *a, const struct stat *b) {
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Whether st is on devnsd's own /dev or /run, where populate writes and mounts nothing. */
static inline bool on_devnsd_fs(const struct plan *plan, const struct stat *st) {
	return st->st_dev == plan->host_dev.st_dev || st->st_dev == plan->host_run.st_dev;
}

/* CLOCK_MONOTONIC in microseconds, the clock of udev's records and events. */
static inline uint64_t populate_now_usec(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* --- the plan, made in devnsd before the helper starts (populate/plan.c) --- */

/* A plan for persona p, knowing devnsd's own /dev and /run; NULL without memory. */
struct plan *populate_plan_new(struct persona *p);
/* Ids of the container's root, from the user namespace maps under its /proc/PID (proc_fd). */
int populate_plan_owner(struct plan *plan, int proc_fd);
/*
 * The peer groups of devnsd's own mount table own (read whole, or NULL:
 * not known) and of the host's first process (outside the container).
 */
void populate_plan_outside(struct plan *plan, struct libmnt_table *own);
/*
 * The container's mount table, from the kernel's text under its /proc/PID
 * (proc_fd), sorted with devnsd's own table own (NULL: not read); after
 * populate_plan_outside().
 */
void populate_plan_mountinfo(struct plan *plan, int proc_fd, struct libmnt_table *own);
/*
 * Sorts the container's mounts (its table tb) into those the helper may
 * look into and the others, knowing the superblocks of devnsd's own table
 * own (populate/mount-trust.c).
 */
void populate_plan_trust(struct plan *plan, struct libmnt_table *tb, struct libmnt_table *own);
/*
 * Whether the helper may step onto the container's mount mnt_id (a
 * cfs_mount_ok_fn, userdata the plan):
 * only a mount the plan found trusted. The first one refused is noted in
 * plan->result.untrusted_*.
 */
bool plan_mount_trusted(uint64_t mnt_id, void *userdata);
/* Plans node nd (a manager_foreach_node() callback, userdata the plan). */
void populate_plan_node(void *userdata, const struct node_desc *nd);
/* The persona's endpoint directory, bound at DEVNS_ENDPOINT_DIR, when it has one. */
void populate_plan_endpoint(struct plan *plan);
/* Plans node nd, a character device with number rdev, at its names in the container. */
void populate_plan_node_at(struct plan *plan, const struct node_desc *nd, dev_t rdev);

/* --- the helper process (populate/child.c) --- */

/* What the helper writes on its result pipe as it ends: its result and how it went (0 or a negative errno). */
struct child_report {
	struct populate_result result;
	int32_t r;
};

/* Refuses the helper the system calls it never needs (populate/seccomp.c): 0 or a negative errno. */
int populate_helper_seccomp(void);

/* What the helper runs: it writes a struct child_report to result_fd and exits, never returning. */
typedef void (*child_fn)(struct plan *plan, int result_fd, int root_fd, int mnt_fd);

/* Makes the plan's nodes, shares and views in the container whose root and mount namespace are given. */
_Noreturn void populate_child(struct plan *plan, int result_fd, int root_fd, int mnt_fd);
/* Takes the plan's nodes away from the container: only the bind mounts populate_child() made. */
_Noreturn void populate_child_remove(struct plan *plan, int result_fd, int root_fd, int mnt_fd);

/* --- the process that forks the helpers (populate/zygote.c) --- */

/* The functions a helper may run, by their index in a request to the zygote. */
enum zygote_fn {
	ZYGOTE_POPULATE, /* populate_child() */
	ZYGOTE_REMOVE,	 /* populate_child_remove() */
	_ZYGOTE_FN_MAX,
};

/*
 * Has z fork a helper that runs fn on a copy of plan, with the result
 * pipe's write end and the container's root and mount namespace: the
 * helper's pidfd. The helper is not devnsd's child: its end shows on the
 * pidfd (EPOLLIN), the zygote reaps it. -ENOTCONN without a zygote; a
 * zygote that answers wrongly or not in time is stopped (zygote_watch()
 * hears of it).
 */
int zygote_spawn(struct zygote *z, enum zygote_fn fn, const struct plan *plan, int result_fd, int root_fd,
		 int mnt_fd, int *ret_pidfd);

/* populate/places.c: a directory for path's last component, on none of devnsd's own file systems. */
int populate_open_dir_of(struct plan *plan, int root_fd, const char *path, int create, int *ret_fd,
			 const char **ret_name);

/* A mount the helper makes once it is in the container's mount namespace. */
struct mount_job {
	int tree_fd;
	int target_fd;
	bool node;
	/* Where a node's empty file was made, to take it away again if the mount fails. */
	int dir_fd;
	const char *name;
	bool view;
	/*
	 * The target is the root of an earlier endpoint directory's bind, removed
	 * since: unmounted first, and the place (where, below the container's
	 * root) opened again, since nothing can be mounted on a removed directory.
	 */
	bool stale;
	const char *where;
};

/* --- views of a devnsd that died (populate/views.c) --- */

/* Finds the views of a devnsd that died bound in the container (parent, before the fork). */
void populate_views_plan(struct manager *m, struct plan *plan, int proc_fd);
/* Opens the live view's directories that replace them (helper, still in devnsd's mount namespace). */
void populate_views_open(const struct plan *plan, int *trees);
/* Appends a mount for each dead view still at its place in the container; returns how many. */
size_t populate_views_jobs(const struct plan *plan, int root_fd, const int *trees, struct mount_job *jobs);

/* --- the container's udev database (populate/udev-db.c) --- */

/*
 * Writes e's record, its tags' entries (/run/udev/tags/TAG/cMAJ:MIN, which
 * enumerating by tag reads: logind's master-of-seat) and /run/udev/control,
 * as udevd does.
 */
int populate_udev_write(struct plan *plan, int root_fd, const struct entry *e);
/* Removes e's record and tags' entries, where they are regular files. */
void populate_udev_remove(struct plan *plan, int root_fd, const struct entry *e);

/* --- the container's sysfs (populate/sysfs.c, populate/udev.h) --- */

/* The overlays planned for the container's sysfs (populate/udev.h); fds -1 where there is none. */
struct sysfs_job {
	int overlay_fd, target_fd;
	/* The container's /sys/dev, for a node change: the overlay laid before is replaced there. */
	int parent_fd;
	int uevent_fd[POPULATE_MAX], dev_fd[POPULATE_MAX];
};

/*
 * Prepares the overlays that make the container's sysfs lead to the
 * persona's input nodes; plan->result.sysfs_left says why not, where not.
 */
void populate_sysfs_plan(struct plan *plan, int root_fd, struct sysfs_job *job);
/* In the container's mount namespace: lays the overlays populate_sysfs_plan() prepared. */
int populate_sysfs_lay(struct plan *plan, struct sysfs_job *job);
/* The device a removed node stood for, as the container's sysfs presents it: plan->result.announced. */
void populate_sysfs_describe_removed(struct plan *plan, int root_fd, const struct entry *e);
/* Lets the kernel drop a removed device's sysfs directory in the container, and what was laid on it. */
void populate_sysfs_forget(int root_fd, const char *syspath);
