/* SPDX-License-Identifier: MIT */
/*
 * input-latency: time from write() of an event to a uinput device until
 * read() returns it on an evdev node, for several paths in one run.
 *
 * Usage: input-latency [options] NAME:UINPUT_FD:NODE...
 *
 * Each path is a uinput device (an already created one, passed as an open
 * file descriptor) and the node where its events come out: the device's own
 * /dev/input/eventN, a devnsd persona node, an interception-tools mirror.
 * Every sample writes EV_KEY KEY_A (press and release alternating) and
 * SYN_REPORT in one write(), and ends when read() returns the SYN_REPORT.
 *
 * Paths are interleaved: each round takes one sample of every path, in an
 * order that rotates from round to round, so that drifts of the emulator
 * and of the guest are shared by all paths.
 *
 * Modes:
 *   blocked  a reader thread is already asleep in read() on the node when
 *            the event is written (what a real client does); t1 is taken in
 *            the reader right after read() returns.
 *   epoll    as a program's event loop reads (libinput's, through libevdev):
 *            a reader thread waits in epoll_wait() on the node, opened
 *            non-blocking, and then reads until read() fails with EAGAIN;
 *            t1 is taken when the read() that returns the SYN_REPORT does.
 *   inline   the same thread writes and then calls read() (no wakeup of a
 *            sleeping reader on the direct path).
 *
 * Options:
 *   --mode blocked|epoll|inline   (default blocked)
 *   --samples N             measured samples per path (default 3000)
 *   --warmup N              discarded samples per path first (default 300)
 *   --gap-us N              pause between the reader falling asleep and the
 *                           write, and between samples (default 1000)
 *   --raw FILE              every sample: "mode path index nanoseconds"
 *   --syscall-cost          only print what one clock_gettime() and one
 *                           getppid() system call cost here, in ns
 *
 * Output on stdout, one line per path:
 *   path=NAME mode=M n=N min=.. p50=.. p90=.. p99=.. max=.. mean=.. bad=B
 * (nanoseconds; bad counts samples whose event was not the one written).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_PATHS 8
#define READ_EVENTS 64
#define SAMPLE_TIMEOUT_S 10

enum mode { MODE_BLOCKED, MODE_EPOLL, MODE_INLINE };

static const char *const mode_names[] = { "blocked", "epoll", "inline" };

struct path {
	const char *name;
	int uinput_fd;
	int node_fd;
	const char *node;
	/* Epoll mode: the reader waits here on node_fd. */
	int epoll_fd;

	/* Blocked mode: the reader thread and its handshake. */
	pthread_t thread;
	pid_t tid;
	sem_t go, done;
	atomic_int armed;
	int want_value;
	uint64_t t1;
	bool bad_event;
	int error;

	uint64_t *samples;
	size_t n;
	unsigned int bad;
};

static enum mode mode = MODE_BLOCKED;
static unsigned long n_samples = 3000, n_warmup = 300, gap_us = 1000;
static atomic_bool stopping;

static uint64_t now_ns(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pause_us(unsigned long us) {
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void die(const char *fmt, const char *arg, int err) {
	fprintf(stderr, "input-latency: ");
	fprintf(stderr, fmt, arg);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	exit(1);
}

/* What a sample's reads returned so far: the key event written, then its SYN_REPORT, nothing else. */
struct packet_check {
	int want_value;
	bool seen_key, seen_report, bad;
};

static void check_events(struct packet_check *pc, const struct input_event *evs, size_t n) {
	for (size_t i = 0; i < n; i++) {
		const struct input_event *ev = &evs[i];

		if (pc->seen_report)
			pc->bad = true;
		else if (ev->type == EV_KEY) {
			if (ev->code != KEY_A || ev->value != pc->want_value || pc->seen_key)
				pc->bad = true;
			pc->seen_key = true;
		} else if (ev->type == EV_SYN && ev->code == SYN_REPORT) {
			if (!pc->seen_key)
				pc->bad = true;
			pc->seen_report = true;
		} else if (ev->type != EV_MSC) {
			pc->bad = true;
		}
	}
}

/* One read() of whole events: their number, or -errno (-EAGAIN when a non-blocking node has none). */
static ssize_t read_chunk(struct path *p, struct input_event *evs, size_t max) {
	ssize_t n;

	do
		n = read(p->node_fd, evs, max * sizeof(*evs));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0 || n % (ssize_t)sizeof(*evs) != 0)
		return -EIO;
	return n / (ssize_t)sizeof(*evs);
}

/* Reads until a SYN_REPORT arrives; returns 0, or -errno. Sets *bad if the events were not the ones written. */
static int read_packet(struct path *p, int want_value, uint64_t *t1, bool *bad) {
	struct input_event evs[READ_EVENTS];
	struct packet_check pc = { .want_value = want_value };

	while (!pc.seen_report) {
		ssize_t n = read_chunk(p, evs, READ_EVENTS);

		*t1 = now_ns();
		if (n < 0)
			return (int)n;
		check_events(&pc, evs, (size_t)n);
	}
	*bad = pc.bad;
	return 0;
}

/* Waits in epoll_wait(), then reads until EAGAIN, as an event loop does; t1 when the SYN_REPORT came. */
static int read_packet_epoll(struct path *p, int want_value, uint64_t *t1, bool *bad) {
	struct input_event evs[READ_EVENTS];
	struct packet_check pc = { .want_value = want_value };

	while (!pc.seen_report) {
		struct epoll_event ev;
		ssize_t n;

		if (epoll_wait(p->epoll_fd, &ev, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while ((n = read_chunk(p, evs, READ_EVENTS)) > 0) {
			uint64_t t = now_ns();
			bool before = pc.seen_report;

			check_events(&pc, evs, (size_t)n);
			if (!before && pc.seen_report)
				*t1 = t;
		}
		if (n != -EAGAIN)
			return (int)n;
	}
	*bad = pc.bad;
	return 0;
}

static int write_packet(struct path *p, int value) {
	struct input_event evs[2] = {
		{ .type = EV_KEY, .code = KEY_A, .value = value },
		{ .type = EV_SYN, .code = SYN_REPORT, .value = 0 },
	};
	ssize_t n = write(p->uinput_fd, evs, sizeof(evs));

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(evs) ? 0 : -EIO;
}

static void *reader_main(void *userdata) {
	struct path *p = userdata;

	p->tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		while (sem_wait(&p->go) < 0)
			;
		if (atomic_load(&stopping))
			return NULL;
		atomic_store(&p->armed, 1);
		p->error = mode == MODE_EPOLL ? read_packet_epoll(p, p->want_value, &p->t1, &p->bad_event)
					      : read_packet(p, p->want_value, &p->t1, &p->bad_event);
		atomic_store(&p->armed, 0);
		sem_post(&p->done);
	}
}

/* The task's state letter from /proc (S: asleep, e.g. in read()). */
static char task_state(pid_t tid) {
	char path[64], buf[512];
	ssize_t n;
	int fd;
	char *paren;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return '?';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return '?';
	buf[n] = 0;
	paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' ? paren[2] : '?';
}

static void wait_asleep(struct path *p) {
	uint64_t deadline = now_ns() + (uint64_t)SAMPLE_TIMEOUT_S * 1000000000u;

	while (!atomic_load(&p->armed))
		if (now_ns() > deadline)
			die("%s: the reader thread did not start", p->name, 0);
	for (;;) {
		char s = task_state(p->tid);
		if (s == 'S' || s == 'D')
			return;
		if (now_ns() > deadline)
			die("%s: the reader never fell asleep in read()", p->name, 0);
		sched_yield();
	}
}

static uint64_t sample_blocked(struct path *p, int value, bool *bad) {
	struct timespec deadline;
	uint64_t t0;
	int r;

	p->want_value = value;
	sem_post(&p->go);
	wait_asleep(p);
	/* Give the path time to settle: a CUSE read reaches devnsd and is parked there. */
	pause_us(gap_us);
	t0 = now_ns();
	r = write_packet(p, value);
	if (r < 0)
		die("%s: write to uinput", p->name, -r);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += SAMPLE_TIMEOUT_S;
	while ((r = sem_timedwait(&p->done, &deadline)) < 0 && errno == EINTR)
		;
	if (r < 0)
		die("%s: no event came back within the timeout", p->name, 0);
	if (p->error < 0)
		die("%s: read", p->name, -p->error);
	*bad = p->bad_event;
	return p->t1 - t0;
}

static uint64_t sample_inline(struct path *p, int value, bool *bad) {
	uint64_t t0, t1;
	int r;

	pause_us(gap_us);
	t0 = now_ns();
	r = write_packet(p, value);
	if (r < 0)
		die("%s: write to uinput", p->name, -r);
	r = read_packet(p, value, &t1, bad);
	if (r < 0)
		die("%s: read", p->name, -r);
	return t1 - t0;
}

/* Average cost of one clock_gettime() (a system call when the clock source has no vDSO) and one getppid(). */
static int syscall_cost(void) {
	const unsigned int n = 20000;
	struct timespec ts;
	uint64_t t0, t1, t2;

	for (unsigned int i = 0; i < n / 10; i++)
		clock_gettime(CLOCK_REALTIME, &ts);
	t0 = now_ns();
	for (unsigned int i = 0; i < n; i++)
		clock_gettime(CLOCK_REALTIME, &ts);
	t1 = now_ns();
	for (unsigned int i = 0; i < n; i++)
		syscall(SYS_getppid);
	t2 = now_ns();
	printf("syscall-cost clock_gettime=%llu getppid=%llu\n", (unsigned long long)((t1 - t0) / n),
	       (unsigned long long)((t2 - t1) / n));
	return 0;
}

static int cmp_u64(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static uint64_t percentile(const uint64_t *v, size_t n, double pct) {
	size_t rank = (size_t)((pct / 100.0) * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static void parse_path(struct path *p, char *spec) {
	char *c1 = strchr(spec, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *end;

	if (!c1 || !c2)
		die("bad path %s (want NAME:UINPUT_FD:NODE)", spec, 0);
	*c1 = *c2 = 0;
	p->name = spec;
	errno = 0;
	p->uinput_fd = (int)strtol(c1 + 1, &end, 10);
	if (errno || *end || p->uinput_fd < 0)
		die("bad uinput fd for %s", spec, 0);
	p->node = c2 + 1;
}

static unsigned long parse_ulong(const char *s) {
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end)
		die("bad number %s", s, 0);
	return v;
}

int main(int argc, char **argv) {
	struct path paths[MAX_PATHS] = { 0 };
	size_t n_paths = 0;
	const char *raw = NULL;
	FILE *rawf = NULL;
	unsigned long rounds;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--mode") && i + 1 < argc) {
			a = argv[++i];
			for (mode = MODE_BLOCKED; mode <= MODE_INLINE && strcmp(a, mode_names[mode]); mode++)
				;
			if (mode > MODE_INLINE)
				die("unknown mode %s", a, 0);
		} else if (!strcmp(a, "--samples") && i + 1 < argc) {
			n_samples = parse_ulong(argv[++i]);
		} else if (!strcmp(a, "--warmup") && i + 1 < argc) {
			n_warmup = parse_ulong(argv[++i]);
		} else if (!strcmp(a, "--gap-us") && i + 1 < argc) {
			gap_us = parse_ulong(argv[++i]);
		} else if (!strcmp(a, "--syscall-cost")) {
			return syscall_cost();
		} else if (!strcmp(a, "--raw") && i + 1 < argc) {
			raw = argv[++i];
		} else if (a[0] == '-') {
			die("unknown option %s", a, 0);
		} else {
			if (n_paths == MAX_PATHS)
				die("too many paths (at most %s)", "8", 0);
			parse_path(&paths[n_paths++], argv[i]);
		}
	}
	if (n_paths == 0 || n_samples == 0) {
		fprintf(stderr, "usage: input-latency [--mode blocked|epoll|inline] [--samples N] [--warmup N] "
				"[--gap-us N] [--raw FILE] NAME:UINPUT_FD:NODE...\n");
		return 2;
	}
	if (raw && !(rawf = fopen(raw, "w")))
		die("cannot write %s", raw, errno);

	for (size_t i = 0; i < n_paths; i++) {
		struct path *p = &paths[i];

		p->node_fd = open(p->node, O_RDONLY | O_CLOEXEC | (mode == MODE_EPOLL ? O_NONBLOCK : 0));
		if (p->node_fd < 0)
			die("cannot open %s", p->node, errno);
		if (mode == MODE_EPOLL) {
			p->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
			if (p->epoll_fd < 0 ||
			    epoll_ctl(p->epoll_fd, EPOLL_CTL_ADD, p->node_fd,
				      &(struct epoll_event){ .events = EPOLLIN }) < 0)
				die("%s: epoll", p->name, errno);
		}
		p->samples = calloc(n_samples, sizeof(*p->samples));
		if (!p->samples)
			die("%s", "out of memory", ENOMEM);
		if (mode != MODE_INLINE) {
			sem_init(&p->go, 0, 0);
			sem_init(&p->done, 0, 0);
			if (pthread_create(&p->thread, NULL, reader_main, p) != 0)
				die("%s: cannot start the reader thread", p->name, 0);
		}
	}

	rounds = n_warmup + n_samples;
	for (unsigned long r = 0; r < rounds; r++) {
		/* Key down on even rounds, up on odd ones: no key is left held. */
		int value = (r % 2 == 0) ? 1 : 0;

		for (size_t k = 0; k < n_paths; k++) {
			/* Rotate the order, and reverse it every other pair of rounds. */
			size_t idx = (k + r) % n_paths;
			struct path *p = &paths[(r / 2) % 2 ? n_paths - 1 - idx : idx];
			bool bad = false;
			uint64_t ns = mode == MODE_INLINE ? sample_inline(p, value, &bad)
							  : sample_blocked(p, value, &bad);

			if (r < n_warmup)
				continue;
			if (bad)
				p->bad++;
			if (rawf)
				fprintf(rawf, "%s %s %zu %llu\n", mode_names[mode], p->name,
					p->n, (unsigned long long)ns);
			p->samples[p->n++] = ns;
		}
	}

	if (mode != MODE_INLINE) {
		atomic_store(&stopping, true);
		for (size_t i = 0; i < n_paths; i++) {
			sem_post(&paths[i].go);
			pthread_join(paths[i].thread, NULL);
		}
	}
	if (rawf && fclose(rawf) != 0)
		die("cannot write %s", raw, errno);

	for (size_t i = 0; i < n_paths; i++) {
		struct path *p = &paths[i];
		long double sum = 0;

		qsort(p->samples, p->n, sizeof(*p->samples), cmp_u64);
		for (size_t j = 0; j < p->n; j++)
			sum += p->samples[j];
		printf("path=%s mode=%s n=%zu min=%llu p50=%llu p90=%llu p99=%llu max=%llu mean=%.0Lf bad=%u\n",
		       p->name, mode_names[mode], p->n,
		       (unsigned long long)p->samples[0], (unsigned long long)percentile(p->samples, p->n, 50),
		       (unsigned long long)percentile(p->samples, p->n, 90),
		       (unsigned long long)percentile(p->samples, p->n, 99),
		       (unsigned long long)p->samples[p->n - 1], sum / p->n, p->bad);
	}
	return 0;
}
