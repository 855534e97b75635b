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
 */
#include <fcntl.h>
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

/* The thread that makes the ioctls on one userfaultfd and closes it; the loop and the thread hold it. */
struct track_worker {
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	int uffd;
	struct uffdio_writeprotect request;
	uint64_t asked, answered;
	int result;
	bool quit;
	unsigned int refs;
	struct track_budget *budget;
};

struct display_track {
	struct display_node *node;
	struct track_worker *worker;
	/* The worker's userfaultfd, watched by the loop (-1: tracking is over). */
	int uffd;
	uint64_t addr, len;
	sd_event_source *source;
	bool armed;
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

static void *worker_main(void *arg) {
	struct track_worker *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct uffdio_writeprotect request;
		uint64_t n;
		int r;

		while (w->asked == w->answered && !w->quit)
			pthread_cond_wait(&w->wake, &w->lock);
		if (w->quit)
			break;
		request = w->request;
		n = w->asked;
		pthread_mutex_unlock(&w->lock);
		r = ioctl(w->uffd, UFFDIO_WRITEPROTECT, &request) < 0 ? -errno : 0;
		pthread_mutex_lock(&w->lock);
		w->result = r;
		w->answered = n;
		pthread_cond_signal(&w->done);
	}
	pthread_mutex_unlock(&w->lock);
	/* The release takes the program's lock too. */
	close(w->uffd);
	atomic_fetch_sub(&w->budget->workers, 1);
	atomic_fetch_sub(&workers_alive, 1);
	budget_unref(w->budget);
	worker_unref(w);
	return NULL;
}

/* A worker for uffd, counted in budget, which owns uffd from now on (closed on failure as well, off the loop). */
static int worker_new(int uffd, struct track_budget *budget, struct track_worker **ret) {
	pthread_condattr_t cattr;
	struct track_worker *w;
	int r;

	w = calloc(1, sizeof(*w));
	if (!w) {
		fd_closer_close(uffd);
		return -ENOMEM;
	}
	w->uffd = uffd;
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
		fd_closer_close(uffd);
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
static int worker_call(struct track_worker *w, const struct uffdio_writeprotect *request) {
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
	pthread_cond_signal(&w->wake);
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

/* Tracking is over: the worker closes the userfaultfd, which releases the mapping. */
static void track_end(struct display_track *t) {
	t->source = sd_event_source_disable_unref(t->source);
	if (t->worker)
		worker_stop(t->worker);
	t->worker = NULL;
	t->uffd = -1;
	t->armed = false;
}

static int protect(struct display_track *t, bool wp) {
	struct uffdio_writeprotect w = {
		.range = { .start = t->addr, .len = t->len },
		.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
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
	/* Whatever it is, closing it might wait for the program. */
	if (!is_userfaultfd(fd)) {
		fd_closer_close_for(dn->closer_quota, fd);
		return -EBADF;
	}
	r = dn->track_refused ? -ETIMEDOUT :
	    fb_track_check_range(msg->addr, msg->len, msg->offset, dn->fb->size, page > 0 ? (uint64_t)page : 4096);
	if (r >= 0 && !dn->track_budget) {
		dn->track_budget = calloc(1, sizeof(*dn->track_budget));
		if (dn->track_budget)
			atomic_init(&dn->track_budget->refs, 1);
		else
			r = -ENOMEM;
	}
	if (r >= 0 && (atomic_load(&workers_alive) >= TRACK_MAX_WORKERS ||
		       atomic_load(&dn->track_budget->workers) >= TRACK_MAX_WORKERS_PER_PERSONA))
		r = -EBUSY;
	t = r >= 0 ? calloc(1, sizeof(*t)) : NULL;
	if (!t) {
		fd_closer_close(fd);
		return r < 0 ? r : -ENOMEM;
	}
	*t = (struct display_track){ .node = dn, .uffd = fd, .addr = msg->addr, .len = msg->len };
	r = worker_new(fd, dn->track_budget, &t->worker);
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
