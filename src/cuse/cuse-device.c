/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuse-device.h"
#include "util.h"

/* Requests handled per wakeup before other sources get their turn. */
#define CUSE_BATCH 32

struct cuse_device {
	struct fuse_session *se;
	sd_event_source *source;
};

/* One receive buffer serves every session: the loop handles one request at a time. */
static struct fuse_buf shared_buf;
static unsigned int shared_users;

static int on_request(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct cuse_device *d = userdata;

	(void)fd;
	(void)revents;
	for (int i = 0; i < CUSE_BATCH; i++) {
		int r = fuse_session_receive_buf(d->se, &shared_buf);

		if (r == -EAGAIN || r == -EINTR)
			return 0;
		if (r <= 0 || fuse_session_exited(d->se)) {
			/* The kernel closed the device: stop listening. */
			sd_event_source_set_enabled(s, SD_EVENT_OFF);
			return 0;
		}
		fuse_session_process_buf(d->se, &shared_buf);
	}
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

struct cuse_device *cuse_device_free(struct cuse_device *d) {
	if (!d)
		return NULL;
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
