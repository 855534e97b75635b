/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "watch/hostns.h"
#include "util.h"

#define HOST_NS "/proc/1/ns/mnt"

/* 1 when devnsd's mount namespace is PID 1's, 0 when not, or a negative errno. */
static int in_host_ns(void) {
	struct stat self, host;

	if (stat("/proc/self/ns/mnt", &self) < 0 || stat(HOST_NS, &host) < 0)
		return -errno;
	return self.st_dev == host.st_dev && self.st_ino == host.st_ino;
}

/* A dead FUSE mount of an earlier run answers ENOTCONN: detach it; make a missing directory. */
static int prepare(const char *path) {
	struct stat st;

	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno == ENOTCONN)
		return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 ? -errno : 0;
	if (errno != ENOENT)
		return -errno;
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int publish_there(const char *path, int tree, dev_t dev) {
	int r = prepare(path);

	(void)dev;
	if (r < 0)
		return r;
	return move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH) < 0 ? -errno : 0;
}

/* Cached attributes only: the mount may be devnsd's own, and devnsd waits for this. */
static int unpublish_there(const char *path, int tree, dev_t dev) {
	struct statx stx;

	(void)tree;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
		return -errno;
	if (makedev(stx.stx_dev_major, stx.stx_dev_minor) != dev)
		return 0;
	return umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 ? -errno : 0;
}

/*
 * Runs fn in a child that entered PID 1's mount namespace (a multithreaded
 * process cannot), and waits for it: a few system calls on the host's tmpfs.
 * The child shares devnsd's file table (CLONE_FILES), so that its exit
 * closes nothing: a copy of a descriptor a client sent, closed there, would
 * flush it, which on a FUSE file waits for the client's server.
 */
static int run_in_host_ns(int (*fn)(const char *, int, dev_t), const char *path, int tree, dev_t dev) {
	_cleanup_(closep) int ns = open(HOST_NS, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int status;
	pid_t pid;

	if (ns < 0)
		return -errno;
	pid = (pid_t)syscall(SYS_clone, CLONE_FILES | SIGCHLD, 0, NULL, NULL, 0);
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int r = setns(ns, CLONE_NEWNS) < 0 ? -errno : fn(path, tree, dev);
		_exit(r < 0 ? -r : 0);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(status))
		return -ECHILD;
	return -WEXITSTATUS(status);
}

int hostns_publish(const char *path) {
	_cleanup_(closep) int tree = -1;
	int r = in_host_ns();

	if (r != 0)
		return r;
	tree = (int)open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -errno;
	return run_in_host_ns(publish_there, path, tree, 0);
}

int hostns_unpublish(const char *path, dev_t dev) {
	int r = in_host_ns();

	if (r != 0)
		return r < 0 ? r : 0;
	return run_in_host_ns(unpublish_there, path, -1, dev);
}
