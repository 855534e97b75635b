/* SPDX-License-Identifier: MIT */
/*
 * A FUSE file system, empty, that answers no request of a process outside
 * its own pid namespace (the kernel gives their pid as 0): such a process
 * that looks up, opens or stats anything below its mount point waits for
 * good, and once it has been killed waits on in the kernel (state D) until
 * this server dies. Processes of its own namespace find it empty, so that
 * the container that mounts it over its /etc still runs its programs. It
 * mounts, then goes to the background.
 *   fuse-hang MOUNTPOINT
 */
#define FUSE_USE_VERSION 31
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Whether req comes from outside this server's pid namespace: it is never answered. */
static int from_outside(fuse_req_t req) {
	return fuse_req_ctx(req)->pid == 0;
}

static void hang_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
	(void)parent, (void)name;
	if (!from_outside(req))
		fuse_reply_err(req, ENOENT);
}

static void hang_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	struct stat st = { .st_ino = ino, .st_mode = S_IFDIR | 0755, .st_nlink = 2 };

	(void)fi;
	if (!from_outside(req))
		fuse_reply_attr(req, &st, 0);
}

static void hang_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
	(void)ino;
	if (!from_outside(req))
		fuse_reply_open(req, fi);
}

static void hang_statfs(fuse_req_t req, fuse_ino_t ino) {
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	if (!from_outside(req))
		fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = hang_lookup,
	.getattr = hang_getattr,
	.open = hang_open,
	.opendir = hang_open,
	.statfs = hang_statfs,
};

int main(int argc, char *argv[]) {
	char *args[] = { argv[0], NULL };
	struct fuse_args fargs = FUSE_ARGS_INIT(1, args);
	struct fuse_session *se;

	if (argc != 2)
		return 2;
	se = fuse_session_new(&fargs, &ops, sizeof(ops), NULL);
	if (!se || fuse_session_mount(se, argv[1]) != 0) {
		fprintf(stderr, "fuse-hang: cannot mount %s\n", argv[1]);
		return 1;
	}
	if (fuse_daemonize(0) != 0)
		return 1;
	return fuse_session_loop(se) != 0;
}
