/* SPDX-License-Identifier: MIT */
/*
 * Tracking a program's mapping of the framebuffer with the userfaultfd it
 * sent (devns-fb.h): write-protecting the mapping while devnsd has taken
 * the frame as it is, and lifting the protection of the whole mapping at
 * the first write, which wakes the writer. The frame is then scanned at
 * the next refresh (devnsd-display-present.c), and protected again first.
 *
 * devnsd never reads the userfaultfd: the program may have kept a copy of
 * it, and could then take the fault messages itself and clear O_NONBLOCK
 * on the file they share, so that a read() would wait for the program.
 * Readable means some write waits; lifting the protection of the whole
 * range answers every write waiting there. Which pages were written is not
 * needed: the scan finds the rows that changed. A userfaultfd that stays
 * readable all the same (writes waiting outside the range the program
 * named, after an mremap() for example) ends the tracking: devnsd closes
 * it, which releases the program's mapping and whatever waits on it.
 */
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "devnsd-display.h"
#include "fb-track.h"
#include "fd-closer.h"
#include "util.h"

/* Wakeups without a write-protection in between before the userfaultfd is given up. */
#define TRACK_MAX_WAKEUPS 4

struct display_track {
	struct display_node *node;
	int uffd;
	uint64_t addr, len;
	sd_event_source *source;
	bool armed;
	unsigned int wakeups;
};

/*
 * Whether fd is a userfaultfd: an anonymous inode by that name. A file's
 * link starts with '/', so no file system can name one so. Nothing here
 * asks the file's file system (fstat() on a FUSE file would wait for its
 * server).
 */
static bool is_userfaultfd(int fd) {
	char link[64], target[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return strcmp(target, "anon_inode:[userfaultfd]") == 0;
}

static int protect(struct display_track *t, bool wp) {
	struct uffdio_writeprotect w = {
		.range = { .start = t->addr, .len = t->len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};

	return ioctl(t->uffd, UFFDIO_WRITEPROTECT, &w) < 0 ? -errno : 0;
}

/* Tracking is over: the userfaultfd is closed, which releases the mapping. */
static void track_end(struct display_track *t) {
	t->source = sd_event_source_disable_unref(t->source);
	closep(&t->uffd);
	t->uffd = -1;
	t->armed = false;
}

static int on_fault(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct display_track *t = userdata;

	(void)s;
	(void)fd;
	(void)revents;
	t->armed = false;
	if (++t->wakeups > TRACK_MAX_WAKEUPS || protect(t, false) < 0)
		track_end(t);
	display_node_mapped_written(t->node);
	return 0;
}

int display_track_new(struct display_node *dn, const struct devns_fb_track *msg, int fd,
		      struct display_track **ret) {
	struct display_track *t;
	long page = sysconf(_SC_PAGESIZE);
	int r;

	if (fd < 0)
		return -EBADF;
	if (!is_userfaultfd(fd)) {
		/* Whatever it is, closing it might wait for the program. */
		fd_closer_close(fd);
		return -EBADF;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		close(fd);
		return -ENOMEM;
	}
	*t = (struct display_track){ .node = dn, .uffd = fd, .addr = msg->addr, .len = msg->len };
	r = fb_track_check_range(msg->addr, msg->len, msg->offset, dn->fb->size, page > 0 ? (uint64_t)page : 4096);
	/* Lifting a protection that is not there changes nothing, and fails unless the range is registered for it. */
	if (r >= 0 && protect(t, false) < 0)
		r = -EINVAL;
	if (r >= 0)
		r = sd_event_add_io(dn->class->base.manager->event, &t->source, t->uffd, EPOLLIN, on_fault, t);
	if (r < 0) {
		display_track_free(t);
		return r;
	}
	*ret = t;
	return 0;
}

struct display_track *display_track_free(struct display_track *t) {
	if (!t)
		return NULL;
	track_end(t);
	free(t);
	return NULL;
}

bool display_track_live(const struct display_track *t) {
	return t && t->uffd >= 0;
}

bool display_track_armed(const struct display_track *t) {
	return t && t->armed;
}

void display_track_arm(struct display_track *t, bool arm) {
	if (!display_track_live(t) || t->armed == arm)
		return;
	if (protect(t, arm) < 0) {
		track_end(t);
		return;
	}
	t->armed = arm;
	t->wakeups = 0;
}
