/* SPDX-License-Identifier: MIT */
/*
 * input-relay: the leanest forwarder a userspace program can be, as a floor
 * for the input latency benchmark.
 *
 * Usage: input-relay SOURCE_NODE UINPUT_FD
 *
 * Grabs SOURCE_NODE (an evdev node) and copies every event it reads to the
 * uinput device behind UINPUT_FD, an already created device passed as an
 * open file descriptor: one blocking read() and one write() per wakeup, no
 * event loop, no clock reads, no queue. Whatever it costs beyond the kernel's
 * own path is the price of one hop through userspace: the wakeup of the
 * forwarder, then the wakeup of the reader.
 *
 * Runs until the source node goes away or it is signalled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/input.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct input_event ev[512];
	char *end;
	long out;
	int in;

	if (argc != 3) {
		fprintf(stderr, "usage: input-relay SOURCE_NODE UINPUT_FD\n");
		return 2;
	}
	errno = 0;
	out = strtol(argv[2], &end, 10);
	if (errno || *end || out < 0 || out > 1 << 20) {
		fprintf(stderr, "input-relay: bad descriptor '%s'\n", argv[2]);
		return 2;
	}
	in = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		fprintf(stderr, "input-relay: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (ioctl(in, EVIOCGRAB, 1) < 0) {
		fprintf(stderr, "input-relay: grab %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = read(in, ev, sizeof(ev));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n < 0)
				fprintf(stderr, "input-relay: read: %s\n", strerror(errno));
			return n < 0;
		}
		if (write((int)out, ev, (size_t)n) != n) {
			fprintf(stderr, "input-relay: write: %s\n", strerror(errno));
			return 1;
		}
	}
}
