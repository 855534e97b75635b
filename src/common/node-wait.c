/* SPDX-License-Identifier: MIT */
/*
 * devtmpfs makes a device's node when its driver registers it, and any
 * directory on the way (/dev/dri comes with the first DRM device). So an
 * inotify watch on the deepest directory of the path that exists sees the
 * next step come, and the wait goes on from there.
 */
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <time.h>

#include "node-wait.h"
#include "util.h"

/* Watches the deepest directory of path that exists; returns the watch descriptor or a negative errno. */
static int watch_nearest(int inotify, const char *path) {
	char dir[PATH_MAX];
	char *slash;
	int wd;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	for (;;) {
		slash = strrchr(dir, '/');
		if (!slash)
			return -EINVAL;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		if (access(dir, F_OK) == 0)
			break;
		if (errno != ENOENT || slash == dir)
			return -errno;
	}
	wd = inotify_add_watch(inotify, dir, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
	return wd < 0 ? -errno : wd;
}

static void drain(int fd) {
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

int node_wait(const char *path, uint64_t timeout_usec) {
	_cleanup_(closep) int inotify = -1;
	_cleanup_(closep) int signals = -1;
	uint64_t deadline = monotonic_usec() + timeout_usec;
	sigset_t stop;

	if (access(path, F_OK) == 0)
		return 0;
	if (errno != ENOENT)
		return -errno;
	inotify = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (inotify < 0)
		return -errno;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	/* Readable while a stop is pending; taken here, the stop is the caller's to make. */
	signals = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
	if (signals < 0)
		return -errno;
	for (;;) {
		struct pollfd p[2] = { { .fd = inotify, .events = POLLIN }, { .fd = signals, .events = POLLIN } };
		int wd = watch_nearest(inotify, path), r;
		uint64_t now;

		if (wd < 0)
			return wd;
		/* It may have come before the watch began. */
		if (access(path, F_OK) == 0)
			return 0;
		now = monotonic_usec();
		if (now >= deadline)
			return -ETIMEDOUT;
		r = ppoll(p, 2, &(struct timespec){ .tv_sec = (time_t)((deadline - now) / 1000000u),
						    .tv_nsec = (long)((deadline - now) % 1000000u * 1000u) },
			  NULL);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (p[1].revents) {
			struct signalfd_siginfo si;

			(void)!read(signals, &si, sizeof(si));
			return -ECANCELED;
		}
		drain(inotify);
		(void)inotify_rm_watch(inotify, wd);
	}
}
