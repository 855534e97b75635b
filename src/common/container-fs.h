/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * Files inside a container's tree, reached from a directory fd of its root
 * and never by a path the container could redirect: every lookup stays
 * below that root and follows no symlink, magic link or "..". Whatever the
 * container planted (symlinks, FIFOs, device nodes, files where directories
 * belong) makes these calls fail; none blocks on a FIFO.
 */

/*
 * Mounts a walk may step onto. A file system the container mounted itself
 * may answer no request (FUSE): whoever looks into it waits, and once
 * killed waits on in the kernel. With a guard set (once, in a process that
 * works on one container), every directory and file the calls below reach
 * is first checked by its fd's mount id, which the kernel gives without
 * asking the file system (statx(), AT_STATX_DONT_SYNC):
 * nothing on a mount the guard refuses is looked up, opened or statted,
 * and the call returns -EMEDIUMTYPE.
 */
typedef bool (*cfs_mount_ok_fn)(uint64_t mnt_id, void *userdata);
void cfs_guard_mounts(cfs_mount_ok_fn ok, void *userdata);

/* 0 if fd is on a mount the guard takes (or there is no guard), -EMEDIUMTYPE if not, or a negative errno. */
int cfs_check_mount(int fd);

/*
 * Stats name in dir_fd, not following a symlink there (-ELOOP) and only
 * once its mount passed the guard (a mount point's file system is the
 * mounted one).
 */
int cfs_stat_at(int dir_fd, const char *name, struct stat *ret);

/* The largest file read as data (/etc/group). */
#define CFS_READ_MAX (1024 * 1024)

/*
 * Opens directory path (relative, below root_fd) as an O_PATH|O_DIRECTORY
 * fd; with create, makes missing components with mode (as the caller's
 * fsuid and umask). -ELOOP where a component is a symlink, -ENOTDIR where it
 * is not a directory, -EMEDIUMTYPE where it is on a mount the guard refuses.
 */
int cfs_open_dir(int root_fd, const char *path, int create, mode_t mode, int *ret_fd);

/*
 * Reads a regular file below root_fd as data: at most max bytes, -EFBIG
 * beyond, -EINVAL for anything but a regular file. The text is
 * NUL-terminated; the caller frees it.
 */
int cfs_read_file(int root_fd, const char *path, size_t max, char **ret, size_t *ret_len);

/*
 * Writes text as file name in dir_fd, replacing an older file of that name
 * (a symlink or FIFO planted there is replaced, never followed or opened).
 */
int cfs_write_file(int dir_fd, const char *name, const char *text, mode_t mode);

/* Creates an empty file name in dir_fd unless something is there. 0, or -EEXIST. */
int cfs_touch(int dir_fd, const char *name, mode_t mode);

/*
 * A place for a bind mount of character device rdev at name in dir_fd:
 * creates an empty file there and returns 0 with an O_PATH fd of it. When
 * name already is a character device with that number (a node devnsd made
 * before), returns 1 and no fd. -EEXIST when anything else is there.
 */
int cfs_mount_target(int dir_fd, const char *name, dev_t rdev, int *ret_fd);

/*
 * The gid of group name in the text of an /etc/group file. -ENOENT when no
 * well-formed line names it.
 */
int cfs_group_find(const char *text, size_t len, const char *name, uint32_t *ret_gid);
