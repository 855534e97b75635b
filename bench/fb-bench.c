/* SPDX-License-Identifier: MIT */
/*
 * Framebuffer benchmark, run in the guest by bench/fb-bench.py. Prints one
 * "key value" line per measurement (times in microseconds, per operation).
 *   fb-bench write DEV N       N full-frame writes (position 0 each time, lseek() where it works)
 *   fb-bench mmap DEV N        N full frames drawn through mmap, each followed by FBIOPAN_DISPLAY
 *   fb-bench hold DEV MS ROWS  a mapped frame kept MS ms, its first ROWS rows changed every 16 ms
 *   fb-bench ioctl DEV N       N FBIOGET_VSCREENINFO (two CUSE round trips: the struct goes out
 *                              through memory), then N DEVNS_FBIO_TELL (one; ENOTTY on the kernel's)
 *   fb-bench switch N static|redraw|busy P1 P2 [P3...]
 *                              N SwitchTo calls going round personas P1, P2, ... (median); with
 *                              redraw, each persona draws a new frame before it is switched to;
 *                              with busy, the last persona named draws one before each switch
 *                              and is never switched to
 *   fb-bench ping N [P]        N calls of a method that does nothing (org.freedesktop.DBus.Peer.Ping)
 *                              on devnsd's bus name (median): one D-Bus round trip; with P, persona
 *                              P draws a whole frame before each call, untimed
 */
#include <fcntl.h>
#include <linux/fb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "devns-fb.h"

static int open_fb(const char *dev, struct fb_var_screeninfo *var, struct fb_fix_screeninfo *fix) {
	int fd = open(dev, O_RDWR);

	if (fd < 0 || ioctl(fd, FBIOGET_VSCREENINFO, var) < 0 || ioctl(fd, FBIOGET_FSCREENINFO, fix) < 0)
		return -1;
	return fd;
}

static int bench_write(const char *dev, int n) {
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	int fd = open_fb(dev, &var, &fix);
	size_t size;
	uint8_t *buf[2];
	double t0;
	uint64_t zero = 0;
	bool seekable;

	if (fd < 0)
		return die(dev);
	size = (size_t)fix.line_length * var.yres;
	/* Two frames drawn beforehand, written in turns: only the write is timed. */
	for (int i = 0; i < 2; i++) {
		buf[i] = malloc(size);
		if (!buf[i])
			return die("malloc");
		memset(buf[i], 0x25 + i * 0x50, size);
	}
	/* A CUSE node does not seek (lseek() answers 0) unless libdevns-fbmmap.so is loaded: its ioctl does. */
	seekable = lseek(fd, 4096, SEEK_SET) == 4096;
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		if (seekable ? lseek(fd, 0, SEEK_SET) < 0 : ioctl(fd, DEVNS_FBIOSET_POS, &zero) < 0)
			return die("position");
		if (write(fd, buf[i % 2], size) != (ssize_t)size)
			return die("write");
	}
	printf("write_us %.1f\nframe_bytes %zu\n", (now_us() - t0) / n, size);
	return 0;
}

/* Opens dev and maps its visible frame; -1 after saying why. */
static int map_fb(const char *dev, struct fb_var_screeninfo *var, uint8_t **ret_mem, size_t *ret_size) {
	struct fb_fix_screeninfo fix;
	int fd = open_fb(dev, var, &fix);

	if (fd < 0) {
		die(dev);
		return -1;
	}
	*ret_size = (size_t)fix.line_length * var->yres;
	*ret_mem = mmap(NULL, *ret_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (*ret_mem == MAP_FAILED) {
		die("mmap");
		return -1;
	}
	return fd;
}

static int bench_mmap(const char *dev, int n) {
	struct fb_var_screeninfo var;
	int fd;
	size_t size;
	uint8_t *mem;
	double t0;

	fd = map_fb(dev, &var, &mem, &size);
	if (fd < 0)
		return 1;
	t0 = now_us();
	for (int i = 0; i < n; i++) {
		memset(mem, i * 37, size);
		if (ioctl(fd, FBIOPAN_DISPLAY, &var) < 0)
			return die("pan");
	}
	printf("mmap_us %.1f\n", (now_us() - t0) / n);
	return 0;
}

static int bench_ioctl(const char *dev, int n) {
	struct fb_var_screeninfo var;
	double t0;
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return die(dev);
	t0 = now_us();
	for (int i = 0; i < n; i++)
		if (ioctl(fd, FBIOGET_VSCREENINFO, &var) < 0)
			return die("FBIOGET_VSCREENINFO");
	printf("getvar_us %.1f\n", (now_us() - t0) / n);
	t0 = now_us();
	for (int i = 0; i < n; i++)
		(void)ioctl(fd, DEVNS_FBIO_TELL, 0UL);
	printf("tell_us %.1f\n", (now_us() - t0) / n);
	close(fd);
	return 0;
}

/*
 * Maps the frame, draws it whole and pans once; then for ms milliseconds
 * changes the first `rows` rows through the mapping once every 16 ms,
 * without panning (rows 0: draws nothing more).
 */
static int bench_hold(const char *dev, int ms, int rows) {
	struct fb_var_screeninfo var;
	struct timespec tick = { .tv_nsec = 16 * 1000 * 1000 };
	int fd;
	size_t size;
	uint8_t *mem;
	double start, end;
	int i;

	fd = map_fb(dev, &var, &mem, &size);
	if (fd < 0)
		return 1;
	memset(mem, 0x40, size);
	if (ioctl(fd, FBIOPAN_DISPLAY, &var) < 0)
		return die("pan");
	start = now_us();
	end = start + ms * 1e3;
	for (i = 0; now_us() < end; i++) {
		if (rows > 0)
			memset(mem, i, size / var.yres * (size_t)rows);
		nanosleep(&tick, NULL);
	}
	printf("held_ms %d\n", ms);
	/* The frames it drew a second: a 16 ms sleep after each drawing makes fewer than 62.5. */
	printf("drawn_per_s %.1f\n", rows > 0 ? i / ((now_us() - start) / 1e6) : 0.0);
	return 0;
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Draws a whole frame of one value into persona p's fb0, untimed. */
static int redraw(const char *p, int value) {
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	char dev[256];
	uint64_t zero = 0;
	size_t size;
	uint8_t *buf;
	int fd, r = 0;

	snprintf(dev, sizeof(dev), "/dev/devns/%s/fb0", p);
	fd = open_fb(dev, &var, &fix);
	if (fd < 0)
		return -1;
	size = (size_t)fix.line_length * var.yres;
	buf = malloc(size);
	if (buf)
		memset(buf, value, size);
	if (!buf || ioctl(fd, DEVNS_FBIOSET_POS, &zero) < 0 || write(fd, buf, size) != (ssize_t)size)
		r = -1;
	free(buf);
	close(fd);
	return r;
}

/*
 * Bus calls timed until their answer; prints the median as key. With
 * names, SwitchTo calls going round those personas (devnsd answers once
 * the new frame is on screen): with redraw_first, the persona switched to
 * draws a new whole frame first (untimed), so every switch shows a frame
 * the screen has not shown; with other set, that persona draws one
 * instead, the same work before each switch with frames unchanged.
 * Without names, a method devnsd answers without doing anything (Ping).
 */
static int bench_calls(const char *key, char **names, int count, int n, bool redraw_first, const char *other) {
	sd_bus *bus = NULL;
	double *t = n > 0 ? calloc((size_t)n, sizeof(double)) : NULL;
	int r;

	r = sd_bus_open_system(&bus);
	if (r < 0 || !t)
		return die("bus");
	for (int i = 0; i < n + 2; i++) {
		sd_bus_error error = SD_BUS_ERROR_NULL;
		const char *to = names ? names[(i + 1) % count] : NULL;
		double t0;

		if (to && redraw_first && redraw(to, i * 37 + 1) < 0)
			return die("redraw");
		if (other && redraw(other, i * 37 + 1) < 0)
			return die("redraw");
		t0 = now_us();
		if (to)
			r = sd_bus_call_method(bus, "org.devns1", "/org/devns1", "org.devns1.Manager", "SwitchTo", &error,
					       NULL, "s", to);
		else
			r = sd_bus_call_method(bus, "org.devns1", "/org/devns1", "org.freedesktop.DBus.Peer", "Ping", &error,
					       NULL, "");
		if (r < 0) {
			fprintf(stderr, "%s: %s\n", to ? "SwitchTo" : "Ping", error.message);
			return 1;
		}
		/* The first two warm the path up. */
		if (i >= 2)
			t[i - 2] = now_us() - t0;
		sd_bus_error_free(&error);
	}
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	printf("%s %.1f\n", key, t[n / 2]);
	sd_bus_flush_close_unref(bus);
	free(t);
	return 0;
}

int main(int argc, char *argv[]) {
	if (argc == 4 && strcmp(argv[1], "write") == 0)
		return bench_write(argv[2], atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "mmap") == 0)
		return bench_mmap(argv[2], atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "ioctl") == 0)
		return bench_ioctl(argv[2], atoi(argv[3]));
	if ((argc == 3 || argc == 4) && strcmp(argv[1], "ping") == 0)
		return bench_calls("ping_us", NULL, 0, atoi(argv[2]), false, argc == 4 ? argv[3] : NULL);
	if (argc == 5 && strcmp(argv[1], "hold") == 0)
		return bench_hold(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc >= 6 && strcmp(argv[1], "switch") == 0 && strcmp(argv[3], "busy") != 0)
		return bench_calls("switch_us", argv + 4, argc - 4, atoi(argv[2]), strcmp(argv[3], "redraw") == 0, NULL);
	if (argc >= 7 && strcmp(argv[1], "switch") == 0)
		return bench_calls("switch_us", argv + 4, argc - 5, atoi(argv[2]), false, argv[argc - 1]);
	fprintf(stderr, "usage: fb-bench write|mmap DEV N | hold DEV MS ROWS | switch N static|redraw|busy P1 P2 [P3...] "
			"| ping N [P]\n");
	return 2;
}
