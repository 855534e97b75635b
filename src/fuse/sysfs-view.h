/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

/*
 * A tree of directories and attribute files served over FUSE with sysfs
 * semantics: every read shows the attribute afresh, every write() is one
 * store, attributes without a store refuse opening for writing with EACCES.
 * Each subtree below the root belongs to an owner (a persona) and every
 * lookup or open in it asks may_access() first. Every node has a user,
 * group and mode that the kernel checks (default_permissions), as it does
 * for sysfs; a caller with the kernel's permission may change them.
 */
struct sysfs_view;
struct sysfs_node;

/* Most bytes one write() hands to store; longer writes are taken in parts, as sysfs does. */
#define SYSFS_STORE_MAX 4096
/* Files open at once in one owner's subtree: by one user (the opener's uid), and by all together. */
#define SYSFS_OPEN_PER_UID 64
#define SYSFS_OPEN_PER_OWNER 1024

struct sysfs_file_ops {
	/* Writes the attribute's text into buf (size bytes); returns its length or -errno. Mandatory. */
	int (*show)(void *data, char *buf, size_t size);
	/* Takes one write()'s bytes; 0 or -errno. NULL for a read-only attribute. */
	int (*store)(void *data, const char *buf, size_t len);
};

/* 0 if process pid may enter owner's subtree, else -errno (-EACCES). */
typedef int (*sysfs_access_fn)(void *userdata, void *owner, pid_t pid);

/* Mounts an empty tree at mountpoint; the root directory belongs to devnsd's own user and group, 0755. */
int sysfs_view_new(struct sysfs_view **ret, sd_event *event, const char *mountpoint, sysfs_access_fn may_access,
		   void *userdata);
struct sysfs_view *sysfs_view_free(struct sysfs_view *v);
static inline void sysfs_view_freep(struct sysfs_view **v) {
	sysfs_view_free(*v);
}

/* The root directory. */
struct sysfs_node *sysfs_view_root(struct sysfs_view *v);

/*
 * A directory below parent, mode 0755. Below the root, owner names whose
 * subtree it starts; deeper down the parent's owner is inherited and owner
 * is ignored. The parent's user and group own it. -EEXIST if the name is
 * taken, -EINVAL for a name with '/' or a dot name.
 */
int sysfs_dir_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, void *owner,
		  struct sysfs_node **ret);

/* An attribute file below parent, owned by the parent's user and group; mode is its permission bits (0644, 0444). */
int sysfs_file_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, mode_t mode,
		   const struct sysfs_file_ops *ops, void *data);

/* Removes a node and everything below it; open files then get ENOENT. */
void sysfs_node_remove(struct sysfs_view *v, struct sysfs_node *node);

/* Files open at or below node get ENODEV from now on, and no longer count towards any limit. */
void sysfs_node_revoke(struct sysfs_view *v, struct sysfs_node *node);

/* Gives node and everything below it to uid:gid, each with the mode it was made with. */
void sysfs_node_set_owner(struct sysfs_view *v, struct sysfs_node *node, uid_t uid, gid_t gid);

/* Open files at or below a node. */
unsigned int sysfs_node_opened(const struct sysfs_node *node);
