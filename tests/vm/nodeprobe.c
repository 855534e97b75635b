/* SPDX-License-Identifier: MIT */
/*
 * Looks at device nodes from inside a container whose tree holds nothing but
 * this program (linked statically) and a shell:
 *
 *   nodeprobe event PATH COUNT   prints "name NAME", then "ready", then the
 *                                first COUNT key events read (within 30 s)
 *                                as "key CODE VALUE"
 *   nodeprobe fb PATH            prints "fb XRES YRES BPP"
 *   nodeprobe open PATH          prints "opened", or "refused ERRNO"
 *
 * A node that cannot be opened prints "error ERRNO" (exit 2); a timeout exits 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fb.h>
#include <linux/input.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define EVENT_TIMEOUT_MS 30000

static int open_or_report(const char *path, int flags) {
	int fd = open(path, flags | O_CLOEXEC);

	if (fd < 0)
		printf("error %d\n", errno);
	return fd;
}

static int probe_event(const char *path, long count) {
	char name[256] = "";
	struct input_event ev;
	struct pollfd pfd;
	int fd = open_or_report(path, O_RDONLY | O_NONBLOCK);

	if (fd < 0)
		return 2;
	if (ioctl(fd, EVIOCGNAME(sizeof(name) - 1), name) < 0)
		return printf("error %d\n", errno), 2;
	printf("name %s\nready\n", name);
	fflush(stdout);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	while (count > 0) {
		ssize_t n;

		if (poll(&pfd, 1, EVENT_TIMEOUT_MS) <= 0)
			return printf("timeout\n"), 1;
		n = read(fd, &ev, sizeof(ev));
		if (n < 0 && errno == EAGAIN)
			continue;
		if (n != (ssize_t)sizeof(ev))
			return printf("error %d\n", n < 0 ? errno : EIO), 2;
		if (ev.type != EV_KEY)
			continue;
		printf("key %u %d\n", ev.code, ev.value);
		fflush(stdout);
		count--;
	}
	return 0;
}

static int probe_fb(const char *path) {
	struct fb_var_screeninfo var;
	int fd = open_or_report(path, O_RDWR);

	if (fd < 0)
		return 2;
	if (ioctl(fd, FBIOGET_VSCREENINFO, &var) < 0)
		return printf("error %d\n", errno), 2;
	printf("fb %u %u %u\n", var.xres, var.yres, var.bits_per_pixel);
	return 0;
}

static int probe_open(const char *path) {
	int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		printf("refused %d\n", errno);
	else
		printf("opened\n");
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 4 && strcmp(argv[1], "event") == 0)
		return probe_event(argv[2], strtol(argv[3], NULL, 10));
	if (argc == 3 && strcmp(argv[1], "fb") == 0)
		return probe_fb(argv[2]);
	if (argc == 3 && strcmp(argv[1], "open") == 0)
		return probe_open(argv[2]);
	fprintf(stderr, "usage: nodeprobe event PATH COUNT | fb PATH | open PATH\n");
	return 64;
}
