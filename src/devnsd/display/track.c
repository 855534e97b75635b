/* SPDX-License-Identifier: MIT */
/*
 * Tracking a program's mapping of the framebuffer with the userfaultfd it
 * sent (devns-fb.h): write-protecting the mapping while devnsd has taken
 * the frame as it is, and lifting the protection of the whole mapping at
 * the first write, which wakes the writer. The frame is then scanned at
 * the next refresh (display/present.c), and protected again first.
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
 *
 * The ioctls on a userfaultfd, and its close, take the memory-map lock of
 * the program that made it, which that program can hold for as long as it
 * likes (a fault on a FUSE file it serves, in a kernel path that keeps the
 * lock). So each userfaultfd has a thread of its own that makes them: the
 * event loop hands it a request and waits for the answer at most
 * TRACK_WAIT_USEC. A request that takes longer ends the tracking (the
 * thread closes the userfaultfd once the program lets it), and the
 * persona's mappings are scanned from then on, so that no program can hold
 * the loop up more than once.
 *
 * Where the program's userfaultfd resolves write faults itself
 * (DEVNS_FB_TRACK_ASYNC, Linux 6.7) no write wakes devnsd: the program
 * sent its /proc/self/pagemap as well, and at each refresh the same
 * thread asks it for the pages written since the last time and protects
 * them again, atomically (PAGEMAP_SCAN with PM_SCAN_WP_MATCHING and
 * PM_SCAN_CHECK_WPASYNC). Only the rows of those pages are taken. The
 * vector of ranges is small and fixed; a full one, or a walk that stops
 * short, counts as the whole frame written, the range protected again
 * whole first. A pagemap that is not one, a scan that fails (a range not
 * registered for asynchronous protection) or one that takes longer than
 * TRACK_WAIT_USEC ends the tracking, as a userfaultfd would.
 *
 * A frame that stopped changing is not scanned on: the mapping is
 * parked. The program sent a second userfaultfd, made without
 * UFFD_FEATURE_WP_ASYNC; the range moves to it (unregistered from the
 * first, registered with the second and write-protected: the ioctls act
 * on the program's memory whoever makes them), so that the next write
 * faults and wakes devnsd as on kernels without asynchronous protection.
 * That wakeup moves the range back, wakes the writer (UFFDIO_WAKE) and
 * scanning resumes. What is written while the range changes hands is
 * found by hashing the whole frame once after parking, and by the first
 * scan after, which finds every page written.
 */
#include <fcntl.h>
#include <linux/stat.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "display/display-internal.h"
#include "fb-track.h"
#include "fd-closer.h"
#include "log.h"
#include "pagemap-scan.h"
#include "populate/mountinfo.h"
#include "util.h"

/* Wakeups without a write-protection in between before the userfaultfd is given up. */
#define TRACK_MAX_WAKEUPS 4
/* How long the event loop waits for an ioctl on a userfaultfd. */
#define TRACK_WAIT_USEC (100 * 1000)
/* The thread's stack: it makes ioctls and a close. */
#define TRACK_STACK_BYTES (256 * 1024)
/*
 * Workers alive at most, in all and per persona. A worker lives until its
 * close returns, which its program can put off: it holds a thread and a
 * descriptor meanwhile.
 */
#define TRACK_MAX_WORKERS 128u
#define TRACK_MAX_WORKERS_PER_PERSONA 16u
/* Ranges of written pages one scan returns at most; a full vector counts as everything written. */
#define TRACK_SCAN_RANGES 16u

/* A persona's workers alive; the persona and each of its workers hold it. */
struct track_budget {
	atomic_uint workers;
	atomic_uint refs;
};

static atomic_uint workers_alive;

static void budget_unref(struct track_budget *b) {
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

void display_track_budget_drop(struct display_node *dn) {
	budget_unref(dn->track_budget);
	dn->track_budget = NULL;
}

/* What the worker is asked to do with the range. */
enum track_op {
	/* Change its protection. */
	TRACK_PROTECT,
	/* Scan it for written pages, protecting them again. */
	TRACK_SCAN,
	/* Move it to the synchronous userfaultfd, protected, and back. */
	TRACK_PARK,
	TRACK_UNPARK,
};

struct track_request {
	enum track_op op;
	struct uffdio_writeprotect protect;
};

/* The worker's descriptors: the userfaultfd the range is registered with first, the pagemap, the synchronous one. */
enum { TRACK_FD_UFFD, TRACK_FD_PAGEMAP, TRACK_FD_FAULT, TRACK_FDS };

/*
 * The thread that makes the ioctls on one userfaultfd (and its program's
 * pagemap) and closes them; the loop and the thread hold it.
 */
struct track_worker {
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	int fds[TRACK_FDS];
	struct track_request request;
	uint64_t asked, answered;
	int result;
	/* What the last scan returned: ranges written, and whether it saw the whole range. */
	struct page_region ranges[TRACK_SCAN_RANGES];
	size_t n_ranges;
	bool complete;
	bool quit;
	unsigned int refs;
	struct track_budget *budget;
};

struct display_track {
	struct display_node *node;
	struct track_worker *worker;
	/* The worker's userfaultfd, watched by the loop (-1: tracking is over). */
	int uffd;
	uint64_t addr, len, offset;
	sd_event_source *source;
	bool armed;
	/* The kernel resolves write faults; written pages are scanned for (DEVNS_FB_TRACK_ASYNC). */
	bool async;
	/* Async only: the range is registered with the synchronous userfaultfd, protected. */
	bool parked;
	unsigned int wakeups;
};

static void worker_unref(struct track_worker *w) {
	bool last;

	pthread_mutex_lock(&w->lock);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->wake);
	pthread_cond_destroy(&w->done);
	free(w);
}

/*
 * Moves range from the asynchronous userfaultfd to the synchronous one
 * and protects it there (park), or back (and then wakes the writes that
 * wait in the synchronous one).
 */
static int move_range(struct track_worker *w, const struct uffdio_range *range, bool park) {
	int from = w->fds[park ? TRACK_FD_UFFD : TRACK_FD_FAULT], to = w->fds[park ? TRACK_FD_FAULT : TRACK_FD_UFFD];
	struct uffdio_range unreg = *range;
	struct uffdio_register reg = { .range = *range, .mode = UFFDIO_REGISTER_MODE_WP };
	struct uffdio_writeprotect wp = { .range = *range, .mode = UFFDIO_WRITEPROTECT_MODE_WP };

	if (from < 0 || to < 0)
		return -EBADF;
	if (ioctl(from, UFFDIO_UNREGISTER, &unreg) < 0 || ioctl(to, UFFDIO_REGISTER, &reg) < 0)
		return -errno;
	if (!(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)))
		return -EINVAL;
	if (park && ioctl(to, UFFDIO_WRITEPROTECT, &wp) < 0)
		return -errno;
	/* Unregistering a write-protected range wakes nobody: the writes waiting there are answered here. */
	if (!park && ioctl(from, UFFDIO_WAKE, &unreg) < 0)
		return -errno;
	return 0;
}

static void *worker_main(void *arg) {
	struct track_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct page_region ranges[TRACK_SCAN_RANGES];
		struct track_request request;
		struct pm_scan_arg scan;
		uint64_t n;
		int r;

		while (w->asked == w->answered && !w->quit)
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->quit)
			break;
		request = w->request;
		n = w->asked;
		pthread_mutex_unlock(&w->lock);
		if (request.op == TRACK_SCAN) {
			scan = (struct pm_scan_arg){
				.size = sizeof(scan),
				.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
				.start = request.protect.range.start,
				.end = request.protect.range.start + request.protect.range.len,
				.vec = (uintptr_t)ranges,
				.vec_len = TRACK_SCAN_RANGES,
				.category_mask = PAGE_IS_WRITTEN,
				.return_mask = PAGE_IS_WRITTEN,
			};
			r = w->fds[TRACK_FD_PAGEMAP] < 0 ? -EBADF : ioctl(w->fds[TRACK_FD_PAGEMAP], PAGEMAP_SCAN, &scan);
			if (r < 0)
				r = -errno;
		} else if (request.op == TRACK_PARK || request.op == TRACK_UNPARK)
			r = move_range(w, &request.protect.range, request.op == TRACK_PARK);
		else
			r = ioctl(w->fds[TRACK_FD_UFFD], UFFDIO_WRITEPROTECT, &request.protect) < 0 ? -errno : 0;
		pthread_mutex_lock(&w->lock);
		if (request.op == TRACK_SCAN && r >= 0) {
			w->n_ranges = MIN((size_t)r, (size_t)TRACK_SCAN_RANGES);
			memcpy(w->ranges, ranges, w->n_ranges * sizeof(ranges[0]));
			w->complete = fb_track_scan_complete((uint64_t)r, TRACK_SCAN_RANGES, scan.walk_end, scan.end);
			r = 0;
		}
		w->result = r;
		w->answered = n;
		/*
		 * After the unlock, so that the loop, woken, does not wait for
		 * the lock as well; w is the worker's own until it quits.
		 */
		pthread_mutex_unlock(&w->lock);
		pthread_cond_signal(&w->done);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	/* The release takes the program's lock too. */
	for (int i = 0; i < TRACK_FDS; i++)
		if (w->fds[i] >= 0)
			close(w->fds[i]);
	atomic_fetch_sub(&w->budget->workers, 1);
	atomic_fetch_sub(&workers_alive, 1);
	budget_unref(w->budget);
	worker_unref(w);
	return NULL;
}

/* Off the loop, on the persona's closer: closing them might wait for the program. */
static void close_fds(struct fd_closer_quota *q, const int fds[TRACK_FDS]) {
	for (int i = 0; i < TRACK_FDS; i++)
		if (fds[i] >= 0)
			fd_closer_close_for(q, fds[i]);
}

/*
 * A worker for fds (TRACK_FD_*; -1 for none but the first), counted in
 * budget, which owns them from now on (closed on failure as well, on q's
 * closer).
 */
static int worker_new(const int fds[TRACK_FDS], struct track_budget *budget, struct fd_closer_quota *q,
		      struct track_worker **ret) {
	pthread_condattr_t cattr;
	struct track_worker *w;
	int r;

	w = calloc(1, sizeof(*w));
	if (!w) {
		close_fds(q, fds);
		return -ENOMEM;
	}
	memcpy(w->fds, fds, sizeof(w->fds));
	w->refs = 2;
	w->budget = budget;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->done, &cattr);
	pthread_condattr_destroy(&cattr);
	r = thread_start_detached(worker_main, w, TRACK_STACK_BYTES);
	if (r < 0) {
		close_fds(q, fds);
		w->refs = 1;
		worker_unref(w);
		return r;
	}
	atomic_fetch_add(&budget->refs, 1);
	atomic_fetch_add(&budget->workers, 1);
	atomic_fetch_add(&workers_alive, 1);
	*ret = w;
	return 0;
}

/* Has the worker make one ioctl: its result, or -ETIMEDOUT when it takes longer than TRACK_WAIT_USEC. */
static int worker_call(struct track_worker *w, const struct track_request *request) {
	struct timespec deadline;
	uint64_t n;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += (TRACK_WAIT_USEC % 1000000) * 1000;
	deadline.tv_sec += TRACK_WAIT_USEC / 1000000 + deadline.tv_nsec / 1000000000;
	deadline.tv_nsec %= 1000000000;
	pthread_mutex_lock(&w->lock);
	w->request = *request;
	n = ++w->asked;
	pthread_mutex_unlock(&w->lock);
	/*
	 * After the unlock, so that the worker, woken, does not wait for the
	 * lock as well; the caller's reference keeps w.
	 */
	pthread_cond_signal(&w->wake);
	pthread_mutex_lock(&w->lock);
	while (w->answered != n)
		if (pthread_cond_timedwait(&w->done, &w->lock, &deadline) == ETIMEDOUT)
			break;
	r = w->answered == n ? w->result : -ETIMEDOUT;
	pthread_mutex_unlock(&w->lock);
	return r;
}

/* The worker stops once its ioctl under way, if any, returns, and closes the userfaultfd. */
static void worker_stop(struct track_worker *w) {
	pthread_mutex_lock(&w->lock);
	w->quit = true;
	pthread_cond_signal(&w->wake);
	pthread_mutex_unlock(&w->lock);
	worker_unref(w);
}

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

/*
 * Whether fd looks like a process's pagemap, asked of nothing but the
 * kernel's own records (the link, and the cached attributes: statx() with
 * AT_STATX_DONT_SYNC does not ask a FUSE server): a regular file whose
 * name ends in /PID/pagemap (procfs mounted anywhere), and the id of its
 * mount in *ret_mnt_id, for pagemap_mount_is_procfs().
 */
static bool looks_like_pagemap(int fd, uint64_t *ret_mnt_id) {
	char link[64], target[256];
	struct statx stx;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, target, sizeof(target));
	if (n < 0 || (size_t)n >= sizeof(target))
		return false;
	target[n] = '\0';
	if (!fb_track_pagemap_name(target))
		return false;
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_MNT_ID, &stx) < 0 ||
	    !S_ISREG(stx.stx_mode) || !(stx.stx_mask & STATX_MNT_ID))
		return false;
	*ret_mnt_id = stx.stx_mnt_id;
	return true;
}

/*
 * Whether mount mnt_id is a whole procfs (its root is procfs's root) in
 * the mount table of the program at the socket's other end: then a file
 * of it named /PID/pagemap is a pagemap, one the program could open. The
 * table is /proc/PID/mountinfo of devnsd's own procfs, found through the
 * program's pidfd (peer_pidfd, SO_PEERPIDFD: every kernel with
 * asynchronous write-protection gives it), at most MOUNTINFO_MAX of it. A
 * file named like a pagemap on any other file system (a FUSE mount whose
 * server never answers the scan), another procfs file bound there, or a
 * file of a mount the program does not have, is not one.
 */
static bool pagemap_mount_is_procfs(uint64_t mnt_id, int peer_pidfd) {
	_cleanup_(mnt_free_tablep) struct libmnt_table *tb = NULL;
	_cleanup_(closep) int proc_fd = -1;
	struct libmnt_iter *it;
	struct libmnt_fs *fs;
	bool found = false;

	if (peer_pidfd < 0 || pidfd_open_proc(peer_pidfd, &proc_fd, NULL) < 0 ||
	    mountinfo_read(proc_fd, "mountinfo", MOUNTINFO_MAX, &tb, NULL) < 0)
		return false;
	it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		return false;
	while (!found && mnt_table_next_fs(tb, it, &fs) == 0) {
		const char *type = mnt_fs_get_fstype(fs), *root = mnt_fs_get_root(fs);

		found = mnt_fs_get_id(fs) >= 0 && (uint64_t)mnt_fs_get_id(fs) == mnt_id && type && streq(type, "proc") &&
			root && streq(root, "/");
	}
	mnt_free_iter(it);
	return found;
}

/* Logged once: which way devnsd learns of writes to mapped frames. */
static void log_kind(bool async) {
	static bool logged_async, logged_faults;

	if (async && !logged_async)
		log_info("Tracking writes to mapped framebuffers with PAGEMAP_SCAN (asynchronous userfaultfd "
			 "write-protection): no wakeup per write, only written rows are copied");
	else if (!async && !logged_faults)
		log_info("Tracking writes to mapped framebuffers with userfaultfd write faults: one wakeup at the "
			 "first write, the whole frame is hashed");
	if (async)
		logged_async = true;
	else
		logged_faults = true;
}

/* Tracking is over: the worker closes the userfaultfd, which releases the mapping. */
static void track_end(struct display_track *t) {
	t->source = sd_event_source_disable_unref(t->source);
	if (t->worker)
		worker_stop(t->worker);
	t->worker = NULL;
	t->uffd = -1;
	t->armed = false;
}

/* Has the worker do op on [start, start + len) of the mapping. */
static int call_range(struct display_track *t, enum track_op op, bool wp, uint64_t start, uint64_t len) {
	struct track_request w = {
		.op = op,
		.protect = {
			.range = { .start = start, .len = len },
			.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
		},
	};
	int r;

	/* Once one of the persona's programs held devnsd up, none is waited for again. */
	if (t->node->track_refused)
		return -ETIMEDOUT;
	r = worker_call(t->worker, &w);
	if (r == -ETIMEDOUT) {
		t->node->track_refused = true;
		log_warning("%s: a program held devnsd's change of its mapping's write protection longer than %u ms; "
			    "the persona's mappings are scanned every refresh from now on",
			    t->node->path, TRACK_WAIT_USEC / 1000);
	}
	return r;
}

static int call(struct display_track *t, enum track_op op, bool wp) {
	return call_range(t, op, wp, t->addr, t->len);
}

static int protect(struct display_track *t, bool wp) {
	return call(t, TRACK_PROTECT, wp);
}

/*
 * The range goes back to the asynchronous userfaultfd. The synchronous
 * one is not watched until the range is parked again: the write its
 * unregistering answered stays queued there until the writer runs.
 */
static int unpark(struct display_track *t) {
	int r;

	t->parked = false;
	/* Cannot fail: sd-event reports no failure turning a source off. */
	(void)sd_event_source_set_enabled(t->source, SD_EVENT_OFF);
	r = call(t, TRACK_UNPARK, false);
	return r;
}

static int on_fault(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
	struct display_track *t = userdata;

	(void)s;
	(void)fd;
	(void)revents;
	t->armed = false;
	if (t->async) {
		/* A parked range faulted: back to the asynchronous userfaultfd, which answers the write. */
		if (++t->wakeups > TRACK_MAX_WAKEUPS || (t->parked && unpark(t) < 0))
			track_end(t);
		display_node_mapped_written(t->node);
		return 0;
	}
	if (++t->wakeups > TRACK_MAX_WAKEUPS || protect(t, false) < 0)
		track_end(t);
	display_node_mapped_written(t->node);
	return 0;
}

int display_track_new(struct display_node *dn, const struct devns_fb_track *msg, const int fds_in[3],
		      int peer_pidfd, struct display_track **ret) {
	bool async = msg->flags & DEVNS_FB_TRACK_ASYNC;
	int fds[TRACK_FDS] = { fds_in[0], async ? fds_in[1] : -1, async ? fds_in[2] : -1 };
	struct display_track *t;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t mnt_id = 0;
	bool ok;
	int r;

	/* Whatever they are, closing them might wait for the program. */
	for (int i = 1; i < TRACK_FDS && !async; i++)
		if (fds_in[i] >= 0)
			fd_closer_close_for(dn->closer_quota, fds_in[i]);
	ok = fds[TRACK_FD_UFFD] >= 0 && is_userfaultfd(fds[TRACK_FD_UFFD]) && !(msg->flags & ~DEVNS_FB_TRACK_ASYNC) &&
	     (!async || (fds[TRACK_FD_FAULT] >= 0 && is_userfaultfd(fds[TRACK_FD_FAULT]) && fds[TRACK_FD_PAGEMAP] >= 0 &&
			 looks_like_pagemap(fds[TRACK_FD_PAGEMAP], &mnt_id)));
	r = dn->track_refused ? -ETIMEDOUT :
	    fb_track_check_range(msg->addr, msg->len, msg->offset, dn->fb->size, page > 0 ? (uint64_t)page : 4096);
	if (ok && r >= 0 && !dn->track_budget) {
		dn->track_budget = calloc(1, sizeof(*dn->track_budget));
		if (dn->track_budget)
			atomic_init(&dn->track_budget->refs, 1);
		else
			r = -ENOMEM;
	}
	if (ok && r >= 0 && (atomic_load(&workers_alive) >= TRACK_MAX_WORKERS ||
			     atomic_load(&dn->track_budget->workers) >= TRACK_MAX_WORKERS_PER_PERSONA))
		r = -EBUSY;
	/* Last, the one check that reads a table whose size the program's container chose. */
	if (ok && r >= 0 && async)
		ok = pagemap_mount_is_procfs(mnt_id, peer_pidfd);
	if (!ok) {
		for (int i = 0; i < TRACK_FDS; i++)
			if (fds[i] >= 0)
				fd_closer_close_for(dn->closer_quota, fds[i]);
		return -EBADF;
	}
	t = r >= 0 ? calloc(1, sizeof(*t)) : NULL;
	if (!t) {
		close_fds(dn->closer_quota, fds);
		return r < 0 ? r : -ENOMEM;
	}
	/* The loop watches the userfaultfd whose faults wait: the synchronous one. */
	*t = (struct display_track){
		.node = dn, .uffd = fds[async ? TRACK_FD_FAULT : TRACK_FD_UFFD], .addr = msg->addr, .len = msg->len,
		.offset = msg->offset, .async = async
	};
	r = worker_new(fds, dn->track_budget, dn->closer_quota, &t->worker);
	if (r < 0) {
		free(t);
		return r;
	}
	/* Lifting a protection that is not there changes nothing, and fails unless the range is registered for it. */
	r = protect(t, false);
	if (r < 0 && r != -ETIMEDOUT)
		r = -EINVAL;
	if (r >= 0)
		r = sd_event_add_io(dn->class->base.manager->event, &t->source, t->uffd, EPOLLIN, on_fault, t);
	/* Watched while parked only. */
	if (r >= 0 && async)
		r = sd_event_source_set_enabled(t->source, SD_EVENT_OFF);
	if (r < 0) {
		display_track_free(t);
		return r;
	}
	log_kind(async);
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
	/* No write to an asynchronously tracked mapping wakes devnsd unless it is parked: else it is scanned. */
	return t && (t->async ? t->parked : t->armed);
}

bool display_track_async(const struct display_track *t) {
	return display_track_live(t) && t->async;
}

int display_track_written(struct display_track *t, uint64_t frame_offset, uint32_t line, uint32_t height,
			  struct fb_rows *ret_rows, size_t max, size_t *ret_n) {
	struct track_worker *w = t->worker;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t start, end;
	size_t n = 0;
	bool complete;
	int r;

	if (!display_track_async(t))
		return -EOPNOTSUPP;
	/*
	 * Nothing was written: the first write would have unparked it. Or
	 * the mapping does not show the visible frame: its pages, unscanned,
	 * stay as written, and the first scan once it does takes them all.
	 */
	if (t->parked || !fb_track_frame_span(t->addr, t->len, t->offset, frame_offset, (uint64_t)line * height,
					       page > 0 ? (uint64_t)page : 4096, &start, &end)) {
		*ret_n = 0;
		return 0;
	}
	r = call_range(t, TRACK_SCAN, false, start, end - start);
	/* The program is gone, its mapping with it: nothing to say. */
	if (r == -ESRCH) {
		track_end(t);
		return r;
	}
	if (r < 0) {
		if (r != -ETIMEDOUT)
			log_notice("%s: a program's mapping cannot be scanned for written pages (%s); its persona's "
				   "mappings are scanned every refresh", t->node->path, strerror(-r));
		track_end(t);
		return r;
	}
	/* Answered, so the worker waits for the next request: what it returned stays as it is. */
	pthread_mutex_lock(&w->lock);
	complete = w->complete;
	for (size_t i = 0; complete && i < w->n_ranges; i++) {
		uint32_t y0, y1;

		if (!fb_track_page_rows(w->ranges[i].start, w->ranges[i].end, t->addr, t->len, t->offset, frame_offset,
					line, height, &y0, &y1))
			continue;
		/* Ranges come in address order: a row shared with the last one extends it. */
		if (n > 0 && y0 <= ret_rows[n - 1].y1)
			ret_rows[n - 1].y1 = MAX(ret_rows[n - 1].y1, y1);
		else if (n < max)
			ret_rows[n++] = (struct fb_rows){ y0, y1 };
		else
			complete = false;
	}
	pthread_mutex_unlock(&w->lock);
	t->armed = true;
	if (complete) {
		*ret_n = n;
		return 0;
	}
	/* Some written pages may be left unprotected and unreported: protect the whole range, then take it all. */
	r = protect(t, true);
	if (r < 0) {
		track_end(t);
		return r;
	}
	return -E2BIG;
}

void display_track_park(struct display_track *t) {
	if (!display_track_async(t) || t->parked)
		return;
	if (call(t, TRACK_PARK, false) < 0) {
		track_end(t);
		return;
	}
	t->parked = true;
	t->wakeups = 0;
	/* Cannot fail while the loop runs: turning an io source on makes no system call. */
	(void)sd_event_source_set_enabled(t->source, SD_EVENT_ON);
}

void display_track_arm(struct display_track *t, bool arm) {
	if (!display_track_live(t))
		return;
	/*
	 * Asynchronous tracking protects what it scans, at each scan, and
	 * parks on its own; while the frame is scanned every refresh anyway,
	 * a parked range goes back, so that no write waits.
	 */
	if (t->async) {
		if (!arm && t->parked && unpark(t) < 0)
			track_end(t);
		return;
	}
	if (t->armed == arm)
		return;
	if (protect(t, arm) < 0) {
		track_end(t);
		return;
	}
	t->armed = arm;
	t->wakeups = 0;
}
