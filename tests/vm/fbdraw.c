/* SPDX-License-Identifier: MIT */
/*
 * A plain fbdev client, the way programs draw: open the framebuffer device,
 * read its screen info, mmap it, draw, pan. Usage:
 *   fbdraw DEVICE SEED [--no-pan] [--flicker MS] [--change-on-signal SEED2 Y0 Y1] [--hold MS] [--report]
 * Pixel (x, y) becomes seed_color(x, y, SEED) (see fbrig.pattern_frame()).
 * --flicker first clears the frame and draws it again, over and over, for
 * MS milliseconds (the way a program without double buffering redraws).
 * With --change-on-signal, once SIGUSR1 arrives rows [Y0, Y1) are drawn
 * again with SEED2, through the mapping only. --hold keeps the mapping MS
 * milliseconds longer. --report prints "drawn" once the first frame is
 * drawn, and after the change "after change: ok", or "after change: errno
 * N" when the device refused FBIOGET_VSCREENINFO then (a revoked file).
 * Exit status 0, or 1 with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(unsigned int ms) {
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void draw(uint8_t *mem, const struct fb_var_screeninfo *var, const struct fb_fix_screeninfo *fix,
		 unsigned int seed, uint32_t y0, uint32_t y1) {
	for (uint32_t y = y0; y < y1 && y < var->yres; y++) {
		uint32_t *row = (uint32_t *)(void *)(mem + (size_t)(y + var->yoffset) * fix->line_length);
		for (uint32_t x = 0; x < var->xres; x++) {
			uint32_t r = (x + seed) & 0xff, g = (y + 2 * seed) & 0xff, b = ((x ^ y) + seed) & 0xff;
			row[x] = r << var->red.offset | g << var->green.offset | b << var->blue.offset;
		}
	}
}

static int die(const char *what) {
	perror(what);
	return 1;
}

int main(int argc, char *argv[]) {
	struct fb_var_screeninfo var;
	struct fb_fix_screeninfo fix;
	unsigned int seed, seed2 = 0, hold_ms = 0, flicker_ms = 0;
	uint32_t change_y0 = 0, change_y1 = 0;
	int pan = 1, report = 0, fd;
	uint8_t *mem;

	if (argc < 3) {
		fprintf(stderr, "usage: fbdraw DEVICE SEED [--no-pan] [--flicker MS] [--change-on-signal SEED2 Y0 Y1] "
				"[--hold MS] [--report]\n");
		return 2;
	}
	seed = (unsigned int)strtoul(argv[2], NULL, 0);
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--no-pan") == 0)
			pan = 0;
		else if (strcmp(argv[i], "--report") == 0)
			report = 1;
		else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
			hold_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--flicker") == 0 && i + 1 < argc)
			flicker_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--change-on-signal") == 0 && i + 3 < argc) {
			seed2 = (unsigned int)strtoul(argv[++i], NULL, 0);
			change_y0 = (uint32_t)strtoul(argv[++i], NULL, 0);
			change_y1 = (uint32_t)strtoul(argv[++i], NULL, 0);
		}
	}
	if (change_y1 > change_y0) {
		sigset_t set;

		/* Blocked before anyone can send it, so that sigwait() takes it. */
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
	}
	fd = open(argv[1], O_RDWR);
	if (fd < 0)
		return die("open");
	if (ioctl(fd, FBIOGET_VSCREENINFO, &var) < 0 || ioctl(fd, FBIOGET_FSCREENINFO, &fix) < 0)
		return die("screen info");
	if (var.bits_per_pixel != 32) {
		fprintf(stderr, "fbdraw: %u bits per pixel\n", var.bits_per_pixel);
		return 1;
	}
	mem = mmap(NULL, fix.smem_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED)
		return die("mmap");
	if (flicker_ms) {
		struct timespec start, now;

		clock_gettime(CLOCK_MONOTONIC, &start);
		do {
			memset(mem + (size_t)var.yoffset * fix.line_length, 0, (size_t)var.yres * fix.line_length);
			draw(mem, &var, &fix, seed, 0, var.yres);
			clock_gettime(CLOCK_MONOTONIC, &now);
		} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < (long)flicker_ms);
	}
	draw(mem, &var, &fix, seed, 0, var.yres);
	if (pan && ioctl(fd, FBIOPAN_DISPLAY, &var) < 0)
		return die("pan");
	if (report) {
		printf("drawn\n");
		fflush(stdout);
	}
	if (change_y1 > change_y0) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigwait(&set, &sig);
		draw(mem, &var, &fix, seed2, change_y0, change_y1);
		if (report) {
			struct fb_var_screeninfo now;

			if (ioctl(fd, FBIOGET_VSCREENINFO, &now) < 0)
				printf("after change: errno %d\n", errno);
			else
				printf("after change: ok\n");
			fflush(stdout);
		}
	}
	sleep_ms(hold_ms);
	munmap(mem, fix.smem_len);
	close(fd);
	return 0;
}
