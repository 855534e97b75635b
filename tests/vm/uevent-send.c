/* SPDX-License-Identifier: MIT */
/*
 * Sends one udev monitor event for a persona's input node into the network
 * namespace of a container's process, with devnsd's sender:
 *   uevent-send PID UID GID ACTION PERSONA_NODE HW_NODE DEVNAME
 * (DEVNAME below /dev, "input/event3"). Prints "sent" or "not sent".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <time.h>

#include "populate/udev.h"
#include "populate/uevent.h"
#include "util.h"

int main(int argc, char **argv) {
	_cleanup_(closep) int netns = -1;
	char devname[UEVENT_DEVNAME_MAX];
	struct uevent_device dev;
	struct udev_node n;
	struct timespec ts;
	struct stat st;
	int r;

	if (argc != 8) {
		fprintf(stderr, "usage: %s PID UID GID ACTION PERSONA_NODE HW_NODE DEVNAME\n", argv[0]);
		return 2;
	}
	if (stat(argv[5], &st) < 0) {
		perror(argv[5]);
		return 1;
	}
	r = udev_node_describe("input", argv[6], st.st_rdev, argv[7], "ID_INPUT=1\nID_INPUT_KEY=1\nID_INPUT_KEYBOARD=1\n", &n);
	if (r >= 0) {
		int pidfd = (int)syscall(SYS_pidfd_open, atoi(argv[1]), 0);

		r = pidfd < 0 ? -errno : uevent_netns_of_pidfd(pidfd, &netns);
	}
	if (r < 0) {
		fprintf(stderr, "%s\n", strerror(-r));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uevent_device_for_node(&n, (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000, devname, &dev);
	r = uevent_send_to_netns(netns, (uid_t)atoi(argv[2]), (gid_t)atoi(argv[3]), argv[4], &dev);
	if (r < 0) {
		fprintf(stderr, "sending: %s\n", strerror(-r));
		return 1;
	}
	puts(r > 0 ? "sent" : "not sent");
	return 0;
}
