/* SPDX-License-Identifier: MIT */
/*
 * load-bench: a steady flood of input through devnsd to many personas while
 * the active persona changes, against the kernel delivering the same flood
 * to a direct reader, in one run.
 *
 * Usage: load-bench [options] --devns-uinput FD --direct-uinput FD
 *                   --direct NODE --stalled NODE [--spin NODE]... PERSONA:NODE...
 *
 * Two identical uinput devices, passed as open file descriptors: devnsd
 * owns the first, whose nodes for each persona are given as PERSONA:NODE,
 * and nobody but the direct reader reads the second (its own
 * /dev/input/eventN, --direct). Every tick (1 ms) the writer sends the same
 * packets to both devices in one write() each, in an order that alternates:
 * EV_MSC MSC_SCAN carrying a sequence number, then SYN_REPORT. Every
 * persona node has a reader thread that waits in poll() with no timeout, as
 * a program does, and reads as fast as it can; the direct node has one too.
 * --stalled is opened on a persona node as well and never read. A switcher
 * calls SwitchTo over D-Bus every --switch-ms, going round the personas in
 * order, so each of them is active in turn.
 *
 * Every packet goes to whichever persona is active when devnsd forwards it,
 * so the readers together must see each sequence number exactly once: lost
 * ones are numbers nobody read, duplicates numbers read twice. Latency is
 * from the tick's write() to the read() that returned the packet.
 *
 * Options:
 *   --rate N        events a second, SYN_REPORT included (default 100000)
 *   --seconds N     how long the writer writes (default 10)
 *   --switch-ms N   time between switches, 0 for none (default 100)
 *   --spin NODE     a hostile thread reads NODE non-blocking in a loop (each
 *                   read one request to devnsd); may be given up to 16 times
 *
 * Output on stdout, "key value" lines: written, the achieved rate, and for
 * each of "devns" and "direct": read, lost, duplicated, dropped (SYN_DROPPED
 * seen), p50_us, p99_us, max_us, reader_cpu_ms; switches,
 * switch_failures, and switch_avg_us and switch_max_us (how long a SwitchTo
 * call took, as its caller waited for the answer).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/input.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"

#define MAX_PERSONAS 64
#define TICK_NS 1000000L
#define READ_EVENTS 512
#define MAX_SPINNERS 16
#define HIST_BUCKETS 200000 /* 10 µs each: 2 s */
#define HIST_US 10

struct sink {
	const char *name;
	atomic_uint_least8_t *seen; /* per sequence number */
	atomic_uint_fast64_t hist[HIST_BUCKETS + 1];
	atomic_uint_fast64_t dropped;
	atomic_uint_fast64_t cpu_ns;
};

struct reader {
	pthread_t thread;
	const char *persona;
	const char *node;
	int fd;
	struct sink *sink;
};

static struct {
	int rate, seconds, switch_ms;
	int per_tick;
	uint64_t total;
	int devns_uinput, direct_uinput;
	_Atomic(double) *tick_us; /* when each tick's write began */
	atomic_bool stop;
	int stop_fd; /* an eventfd, readable once the readers are to end */
	atomic_uint_fast64_t written;
	struct sink devns, direct;
	struct reader readers[MAX_PERSONAS + 1];
	size_t n_personas;
	unsigned switches, switch_failures;
	const char *spin_nodes[MAX_SPINNERS];
	size_t n_spinners;
	atomic_uint_fast64_t spins;
	double switch_us_total, switch_us_max;
} B = {
	.rate = 100000,
	.seconds = 10,
	.switch_ms = 100,
	.devns_uinput = -1,
	.direct_uinput = -1,
	.stop_fd = -1,
};

/* A hostile program: non-blocking reads of a node as fast as it can, each one a request to devnsd. */
static void *spin_loop(void *arg) {
	const char *node = arg;
	struct input_event ev[READ_EVENTS];
	uint64_t n = 0;
	int fd = open(node, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		perror(node);
		return NULL;
	}
	while (!atomic_load(&B.stop)) {
		(void)!read(fd, ev, sizeof(ev));
		n++;
	}
	close(fd);
	atomic_fetch_add(&B.spins, n);
	return NULL;
}

static uint64_t thread_cpu_ns(void) {
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(struct sink *s, const struct input_event *ev, double now) {
	uint64_t seq = (uint32_t)ev->value, bucket;
	double lat;

	if (seq >= B.total)
		return;
	atomic_fetch_add(&s->seen[seq], 1);
	lat = now - atomic_load(&B.tick_us[seq / (uint64_t)B.per_tick]);
	bucket = lat < 0 ? 0 : (uint64_t)(lat / HIST_US);
	atomic_fetch_add(&s->hist[bucket > HIST_BUCKETS ? HIST_BUCKETS : bucket], 1);
}

static void *read_loop(void *arg) {
	struct reader *r = arg;
	struct input_event ev[READ_EVENTS];
	uint64_t cpu0 = thread_cpu_ns();

	for (;;) {
		/* As a program's reader waits: no timeout, woken only by its node (or the end). */
		struct pollfd p[2] = { { .fd = r->fd, .events = POLLIN }, { .fd = B.stop_fd, .events = POLLIN } };
		ssize_t n;
		double now;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!p[0].revents)
			continue;
		n = read(r->fd, ev, sizeof(ev));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		now = now_us();
		for (size_t i = 0; i < (size_t)n / sizeof(*ev); i++) {
			if (ev[i].type == EV_MSC && ev[i].code == MSC_SCAN)
				record(r->sink, &ev[i], now);
			else if (ev[i].type == EV_SYN && ev[i].code == SYN_DROPPED)
				atomic_fetch_add(&r->sink->dropped, 1);
		}
	}
	atomic_fetch_add(&r->sink->cpu_ns, thread_cpu_ns() - cpu0);
	return NULL;
}

static void *write_loop(void *arg) {
	struct input_event *pkt = calloc((size_t)B.per_tick * 2, sizeof(*pkt));
	uint64_t ticks = B.total / (uint64_t)B.per_tick;
	struct timespec next;

	(void)arg;
	if (!pkt)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (uint64_t t = 0; t < ticks; t++) {
		int first = t % 2 ? B.direct_uinput : B.devns_uinput;
		int second = t % 2 ? B.devns_uinput : B.direct_uinput;

		for (int i = 0; i < B.per_tick; i++) {
			pkt[2 * i] = (struct input_event){ .type = EV_MSC, .code = MSC_SCAN,
							   .value = (int32_t)(t * (uint64_t)B.per_tick + (uint64_t)i) };
			pkt[2 * i + 1] = (struct input_event){ .type = EV_SYN, .code = SYN_REPORT };
		}
		atomic_store(&B.tick_us[t], now_us());
		if (write(first, pkt, (size_t)B.per_tick * 2 * sizeof(*pkt)) < 0 ||
		    write(second, pkt, (size_t)B.per_tick * 2 * sizeof(*pkt)) < 0) {
			perror("write to uinput");
			break;
		}
		atomic_fetch_add(&B.written, (uint64_t)B.per_tick);
		next.tv_nsec += TICK_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		/* A late writer catches up without sleeping: the rate is kept on average. */
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	free(pkt);
	return NULL;
}

static void *switch_loop(void *arg) {
	sd_bus *bus = NULL;
	size_t i = 0;

	(void)arg;
	if (sd_bus_open_system(&bus) < 0)
		return NULL;
	while (!atomic_load(&B.stop) && B.switch_ms > 0) {
		sd_bus_error error = SD_BUS_ERROR_NULL;
		const char *to = B.readers[++i % B.n_personas].persona;
		double t0, took;
		int r;

		usleep((useconds_t)B.switch_ms * 1000);
		if (atomic_load(&B.stop))
			break;
		t0 = now_us();
		r = sd_bus_call_method(bus, "org.devns1", "/org/devns1", "org.devns1.Manager", "SwitchTo", &error,
				       NULL, "s", to);
		took = now_us() - t0;
		if (r < 0)
			B.switch_failures++;
		else {
			B.switches++;
			B.switch_us_total += took;
			if (took > B.switch_us_max)
				B.switch_us_max = took;
		}
		sd_bus_error_free(&error);
	}
	sd_bus_flush_close_unref(bus);
	return NULL;
}

static double percentile(const struct sink *s, double q) {
	uint64_t total = 0, seen = 0;

	for (size_t i = 0; i <= HIST_BUCKETS; i++)
		total += atomic_load(&s->hist[i]);
	for (size_t i = 0; i <= HIST_BUCKETS; i++) {
		seen += atomic_load(&s->hist[i]);
		if (total && (double)seen >= q * (double)total)
			return (double)(i * HIST_US + HIST_US / 2);
	}
	return 0;
}

static double max_latency(const struct sink *s) {
	for (size_t i = HIST_BUCKETS + 1; i-- > 0;)
		if (atomic_load(&s->hist[i]))
			return (double)(i * HIST_US + HIST_US);
	return 0;
}

static void report(const struct sink *s, uint64_t written) {
	uint64_t read = 0, lost = 0, dup = 0;

	for (uint64_t q = 0; q < written; q++) {
		unsigned v = atomic_load(&s->seen[q]);

		read += v;
		lost += v == 0;
		dup += v > 1 ? v - 1 : 0;
	}
	printf("%s_read %" PRIu64 "\n%s_lost %" PRIu64 "\n%s_duplicated %" PRIu64 "\n", s->name, read, s->name, lost,
	       s->name, dup);
	printf("%s_dropped %" PRIuFAST64 "\n", s->name, atomic_load(&s->dropped));
	printf("%s_p50_us %.0f\n%s_p99_us %.0f\n%s_max_us %.0f\n", s->name, percentile(s, 0.50), s->name,
	       percentile(s, 0.99), s->name, max_latency(s));
	printf("%s_reader_cpu_ms %.1f\n", s->name, (double)atomic_load(&s->cpu_ns) / 1e6);
}

static int open_reader(struct reader *r, const char *persona, const char *node, struct sink *sink) {
	r->persona = persona;
	r->node = node;
	r->sink = sink;
	r->fd = open(node, O_RDONLY | O_CLOEXEC);
	return r->fd < 0 ? -errno : 0;
}

int main(int argc, char **argv) {
	static const struct option opts[] = {
		{ "rate", required_argument, NULL, 'r' },	   { "seconds", required_argument, NULL, 's' },
		{ "switch-ms", required_argument, NULL, 'w' },	   { "devns-uinput", required_argument, NULL, 'u' },
		{ "direct-uinput", required_argument, NULL, 'U' }, { "direct", required_argument, NULL, 'd' },
		{ "stalled", required_argument, NULL, 'x' },	   { "spin", required_argument, NULL, 'S' },
		{},
	};
	const char *direct = NULL, *stalled = NULL;
	pthread_t writer, switcher, spinners[MAX_SPINNERS];
	struct reader direct_reader;
	int stalled_fd, c;
	double t0, t1;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
		switch (c) {
		case 'r': B.rate = atoi(optarg); break;
		case 's': B.seconds = atoi(optarg); break;
		case 'w': B.switch_ms = atoi(optarg); break;
		case 'u': B.devns_uinput = atoi(optarg); break;
		case 'U': B.direct_uinput = atoi(optarg); break;
		case 'd': direct = optarg; break;
		case 'x': stalled = optarg; break;
		case 'S':
			if (B.n_spinners == MAX_SPINNERS)
				return 2;
			B.spin_nodes[B.n_spinners++] = optarg;
			break;
		default: return 2;
		}
	B.per_tick = B.rate / 2 / 1000;
	if (B.per_tick < 1 || B.seconds < 1 || B.devns_uinput < 0 || B.direct_uinput < 0 || !direct || !stalled ||
	    optind == argc || argc - optind > MAX_PERSONAS) {
		fprintf(stderr, "usage: load-bench [--rate N] [--seconds N] [--switch-ms N] --devns-uinput FD "
				"--direct-uinput FD --direct NODE --stalled NODE [--spin NODE]... PERSONA:NODE...\n");
		return 2;
	}
	B.total = (uint64_t)B.per_tick * 1000u * (uint64_t)B.seconds;
	B.tick_us = calloc(B.total / (uint64_t)B.per_tick, sizeof(*B.tick_us));
	B.devns = (struct sink){ .name = "devns", .seen = calloc(B.total, 1) };
	B.direct = (struct sink){ .name = "direct", .seen = calloc(B.total, 1) };
	if (!B.tick_us || !B.devns.seen || !B.direct.seen)
		return die("calloc");
	B.stop_fd = eventfd(0, EFD_CLOEXEC);
	if (B.stop_fd < 0)
		return die("eventfd");

	for (int i = optind; i < argc; i++) {
		char *sep = strchr(argv[i], ':');

		if (!sep)
			return 2;
		*sep = '\0';
		if (open_reader(&B.readers[B.n_personas++], argv[i], sep + 1, &B.devns) < 0)
			return die(sep + 1);
	}
	if (open_reader(&direct_reader, "direct", direct, &B.direct) < 0)
		return die(direct);
	stalled_fd = open(stalled, O_RDONLY | O_CLOEXEC);
	if (stalled_fd < 0)
		return die(stalled);

	for (size_t i = 0; i < B.n_personas; i++)
		pthread_create(&B.readers[i].thread, NULL, read_loop, &B.readers[i]);
	pthread_create(&direct_reader.thread, NULL, read_loop, &direct_reader);
	pthread_create(&switcher, NULL, switch_loop, NULL);
	for (size_t i = 0; i < B.n_spinners; i++)
		pthread_create(&spinners[i], NULL, spin_loop, (void *)B.spin_nodes[i]);
	usleep(200000);

	t0 = now_us();
	pthread_create(&writer, NULL, write_loop, NULL);
	pthread_join(writer, NULL);
	t1 = now_us();
	/* What is still on its way. */
	usleep(1000000);
	atomic_store(&B.stop, true);
	if (eventfd_write(B.stop_fd, 1) < 0)
		return die("eventfd_write");
	pthread_join(switcher, NULL);
	for (size_t i = 0; i < B.n_spinners; i++)
		pthread_join(spinners[i], NULL);
	for (size_t i = 0; i < B.n_personas; i++)
		pthread_join(B.readers[i].thread, NULL);
	pthread_join(direct_reader.thread, NULL);
	close(stalled_fd);

	printf("written %" PRIuFAST64 "\n", atomic_load(&B.written));
	printf("events_per_s %.0f\n", (double)atomic_load(&B.written) * 2 * 1e6 / (t1 - t0));
	printf("personas %zu\nswitches %u\nswitch_failures %u\n", B.n_personas, B.switches, B.switch_failures);
	printf("spinners %zu\nspin_reads %" PRIuFAST64 "\n", B.n_spinners, atomic_load(&B.spins));
	printf("switch_avg_us %.0f\nswitch_max_us %.0f\n", B.switches ? B.switch_us_total / B.switches : 0.0,
	       B.switch_us_max);
	report(&B.devns, atomic_load(&B.written));
	report(&B.direct, atomic_load(&B.written));
	return 0;
}
