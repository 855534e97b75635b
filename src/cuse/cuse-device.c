/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#include "cuse-device.h"
#include "util.h"

/* How often a node that is not in /dev yet is looked for. */
#define OWNER_POLL_USEC (20 * 1000ULL)

struct cuse_device {
	struct fuse_session *se;
	sd_event_source *source;
	sd_event *event;
	char devname[256];
	unsigned int major, minor;
	/* The node's owner and mode, while waiting for it to appear. */
	uid_t uid;
	gid_t gid;
	mode_t mode;
	sd_event_source *owner_retry;
	uint64_t owner_deadline;
};

/* One receive buffer serves every session: the loop handles one request at a time. */
static struct fuse_buf shared_buf;
static unsigned int shared_users;

/*
 * One request per wakeup: the kernel queues one per read(), and a read
 * past the last would only fail with EAGAIN. The fd is watched
 * level-triggered, so a second queued request wakes the loop again.
 */
static int on_request(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct cuse_device *d = userdata;
	int r;

	(void)fd;
	(void)revents;
	r = fuse_session_receive_buf(d->se, &shared_buf);
	if (r == -EAGAIN || r == -EINTR)
		return 0;
	if (r <= 0 || fuse_session_exited(d->se)) {
		/* The kernel closed the device: stop listening. */
		sd_event_source_set_enabled(s, SD_EVENT_OFF);
		return 0;
	}
	fuse_session_process_buf(d->se, &shared_buf);
	return 0;
}

int cuse_device_new(struct cuse_device **ret, sd_event *event, const char *devname, unsigned int major,
		    unsigned int minor, const struct cuse_lowlevel_ops *ops, void *userdata) {
	_cleanup_(cuse_device_freep) struct cuse_device *d = NULL;
	_cleanup_(closep) int fd = -1;
	char *argv[] = { (char *)"devnsd", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(1, argv);
	char info[64 + 256], mnt[32];
	const char *dev_info[] = { info };
	struct cuse_info ci = {
		.dev_major = major,
		.dev_minor = minor,
		.dev_info_argc = 1,
		.dev_info_argv = dev_info,
		.flags = CUSE_UNRESTRICTED_IOCTL,
	};
	int r;

	if (snprintf(info, sizeof(info), "DEVNAME=%s", devname) >= (int)sizeof(info))
		return -ENAMETOOLONG;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	shared_users++;
	d->event = event;
	d->major = major;
	d->minor = minor;
	snprintf(d->devname, sizeof(d->devname), "%s", devname);

	fd = open("/dev/cuse", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	d->se = cuse_lowlevel_new(&args, &ci, ops, userdata);
	/* Option parsing may have copied the arguments. */
	fuse_opt_free_args(&args);
	if (!d->se)
		return -ENOMEM;
	snprintf(mnt, sizeof(mnt), "/dev/fd/%d", fd);
	if (fuse_session_mount(d->se, mnt) < 0)
		return -EIO;
	/* The session owns the fd from here on. */
	r = sd_event_add_io(event, &d->source, take_fd(&fd), EPOLLIN, on_request, d);
	if (r < 0)
		return r;

	*ret = TAKE_PTR(d);
	return 0;
}

/* The node below /dev, never through a symlink; checked to be this device's. */
static int apply_owner(struct cuse_device *d) {
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	_cleanup_(closep) int dev = -1, fd = -1;
	struct stat st;

	dev = open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dev, d->devname, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* With a number the kernel chose (major 0), any character device there is taken for ours. */
	if (!S_ISCHR(st.st_mode) || (d->major && st.st_rdev != makedev(d->major, d->minor)))
		return -ENODEV;
	return fd_set_owner(fd, d->uid, d->gid, d->mode);
}

static int on_owner_retry(sd_event_source *s, uint64_t usec, void *userdata) {
	struct cuse_device *d = userdata;

	if (apply_owner(d) != -ENOENT || usec >= d->owner_deadline)
		return 0;
	(void)sd_event_source_set_time_relative(s, OWNER_POLL_USEC);
	return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

int cuse_device_set_owner(struct cuse_device *d, uid_t uid, gid_t gid, mode_t mode) {
	uint64_t now;
	int r;

	d->uid = uid;
	d->gid = gid;
	d->mode = mode & 07777;
	if (d->owner_retry)
		(void)sd_event_source_set_enabled(d->owner_retry, SD_EVENT_OFF);
	r = apply_owner(d);
	if (r != -ENOENT)
		return r;
	if (sd_event_now(d->event, CLOCK_MONOTONIC, &now) < 0)
		now = 0;
	d->owner_deadline = now + CUSE_OWNER_RETRY_USEC;
	if (!d->owner_retry) {
		int q = sd_event_add_time_relative(d->event, &d->owner_retry, CLOCK_MONOTONIC, OWNER_POLL_USEC, 0,
						   on_owner_retry, d);
		return q < 0 ? q : r;
	}
	(void)sd_event_source_set_time_relative(d->owner_retry, OWNER_POLL_USEC);
	(void)sd_event_source_set_enabled(d->owner_retry, SD_EVENT_ONESHOT);
	return r;
}

struct cuse_device *cuse_device_free(struct cuse_device *d) {
	if (!d)
		return NULL;
	sd_event_source_disable_unref(d->owner_retry);
	sd_event_source_disable_unref(d->source);
	if (d->se)
		fuse_session_destroy(d->se);
	free(d);
	if (--shared_users == 0) {
		free(shared_buf.mem);
		shared_buf = (struct fuse_buf){ 0 };
	}
	return NULL;
}
