/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "fuse-fs.h"
#include "util.h"

/* Requests handled per wakeup before other sources get their turn. */
#define FUSE_FS_BATCH 32

struct fuse_fs {
	struct fuse_session *se;
	sd_event_source *source;
	struct fuse_buf buf;
	bool mounted;
};

static int on_request(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct fuse_fs *fs = userdata;

	(void)fd;
	(void)revents;
	for (int i = 0; i < FUSE_FS_BATCH; i++) {
		int r = fuse_session_receive_buf(fs->se, &fs->buf);

		if (r == -EAGAIN || r == -EINTR)
			break;
		if (r <= 0 || fuse_session_exited(fs->se)) {
			/* Unmounted from outside: stop listening. */
			/* Cannot fail: sd-event reports no failure turning a source off. */
			(void)sd_event_source_set_enabled(s, SD_EVENT_OFF);
			break;
		}
		fuse_session_process_buf(fs->se, &fs->buf);
	}
	return 0;
}

/* Makes the mount point usable: created if missing, a dead mount of a previous run detached. */
static int prepare_mountpoint(const char *mountpoint) {
	struct stat st;

	if (stat(mountpoint, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno == ENOTCONN)
		return umount2(mountpoint, MNT_DETACH) < 0 ? -errno : 0;
	if (errno != ENOENT)
		return -errno;
	return mkdir(mountpoint, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

int fuse_fs_new(struct fuse_fs **ret, sd_event *event, const char *mountpoint, const struct fuse_lowlevel_ops *ops,
		void *userdata) {
	_cleanup_(fuse_fs_freep) struct fuse_fs *fs = NULL;
	char *argv[] = { (char *)"devnsd", (char *)"-o", NULL, NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, argv);
	int fd, flags, r;

	argv[2] = geteuid() == 0 ? (char *)"fsname=devns,subtype=devns,default_permissions,allow_other"
				 : (char *)"fsname=devns,subtype=devns,default_permissions";
	r = prepare_mountpoint(mountpoint);
	if (r < 0)
		return r;
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return -ENOMEM;
	fs->se = fuse_session_new(&args, ops, sizeof(*ops), userdata);
	fuse_opt_free_args(&args);
	if (!fs->se)
		return -EINVAL;
	if (fuse_session_mount(fs->se, mountpoint) < 0)
		return -EIO;
	fs->mounted = true;
	fd = fuse_session_fd(fs->se);
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	r = sd_event_add_io(event, &fs->source, fd, EPOLLIN, on_request, fs);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(fs);
	return 0;
}

struct fuse_fs *fuse_fs_free(struct fuse_fs *fs) {
	if (!fs)
		return NULL;
	sd_event_source_disable_unref(fs->source);
	if (fs->se) {
		if (fs->mounted)
			fuse_session_unmount(fs->se);
		fuse_session_destroy(fs->se);
	}
	free(fs->buf.mem);
	free(fs);
	return NULL;
}
