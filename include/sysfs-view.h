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
 * lookup or open in it asks may_access() first.
 */
struct sysfs_view;
struct sysfs_node;

/* Most bytes one write() hands to store; longer writes are taken in parts, as sysfs does. */
#define SYSFS_STORE_MAX 4096

struct sysfs_file_ops {
	/* Writes the attribute's text into buf (size bytes); returns its length or -errno. Mandatory. */
	int (*show)(void *data, char *buf, size_t size);
	/* Takes one write()'s bytes; 0 or -errno. NULL for a read-only attribute. */
	int (*store)(void *data, const char *buf, size_t len);
};

/* 0 if process pid may enter owner's subtree, else -errno (-EACCES). */
typedef int (*sysfs_access_fn)(void *userdata, void *owner, pid_t pid);

/* Mounts an empty tree at mountpoint. */
int sysfs_view_new(struct sysfs_view **ret, sd_event *event, const char *mountpoint, sysfs_access_fn may_access,
		   void *userdata);
struct sysfs_view *sysfs_view_free(struct sysfs_view *v);
static inline void sysfs_view_freep(struct sysfs_view **v) {
	sysfs_view_free(*v);
}

/* The root directory. */
struct sysfs_node *sysfs_view_root(struct sysfs_view *v);

/*
 * A directory below parent. Below the root, owner names whose subtree it
 * starts; deeper down the parent's owner is inherited and owner is ignored.
 * -EEXIST if the name is taken, -EINVAL for a name with '/' or a dot name.
 */
int sysfs_dir_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, void *owner,
		  struct sysfs_node **ret);

/* An attribute file below parent; mode is its permission bits (0644, 0444). */
int sysfs_file_add(struct sysfs_view *v, struct sysfs_node *parent, const char *name, mode_t mode,
		   const struct sysfs_file_ops *ops, void *data);

/* Removes a node and everything below it; open files then get ENOENT. */
void sysfs_node_remove(struct sysfs_view *v, struct sysfs_node *node);

/* Open files at or below a node. */
unsigned int sysfs_node_opened(const struct sysfs_node *node);
