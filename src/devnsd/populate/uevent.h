/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct udev_node;

/*
 * Device events as systemd-udevd broadcasts them once a device is set up:
 * the libudev monitor format (a "libudev" header with the magic 0xfeedcafe,
 * hashes of the subsystem and device type and a bloom filter of the tags,
 * then the properties as NUL-separated KEY=VALUE), sent to netlink group 2
 * of NETLINK_KOBJECT_UEVENT in a container's network namespace. libudev
 * monitors there (libinput's udev backend, udevadm monitor --udev) take
 * them as udev's own.
 */

/* The netlink multicast group udev's processed events go to. */
#define UEVENT_GROUP_UDEV 2
/* The largest message built. */
#define UEVENT_MESSAGE_MAX 8192

struct uevent_device {
	const char *devpath;   /* the sysfs path without "/sys": "/devices/.../input5/event3" */
	const char *subsystem; /* "input" */
	const char *devtype;   /* NULL if none */
	const char *devname;   /* "/dev/input/event3" */
	dev_t devnum;
	const char *properties; /* "KEY=VALUE\n" lines: ID_INPUT... */
	uint64_t usec_initialized;
	const char *const *tags; /* NULL-terminated: "seat", "uaccess" */
};

/* MurmurHash2 of s with seed 0: the hash udev's filters compare. */
uint32_t uevent_hash32(const char *s);

/*
 * Builds the message for action ("add", "remove", "change") into buf.
 * Returns its length, -EINVAL for a missing field, or -ENOBUFS.
 */
int uevent_message(const char *action, uint64_t seqnum, const struct uevent_device *dev, uint8_t *buf, size_t size);

/* Room for "/dev/" and a udev_node's devname. */
#define UEVENT_DEVNAME_MAX 272

/*
 * dev for one of a persona's input nodes or its card, as a container sees
 * it (populate/udev.h), with its subsystem's tags (udev_tags()); its
 * strings point into n and devname (filled here), which must outlive ret.
 */
void uevent_device_for_node(const struct udev_node *n, uint64_t usec_initialized, char devname[static UEVENT_DEVNAME_MAX],
			    struct uevent_device *ret);

/* An fd of the network namespace of the process behind pidfd, looked up through it alone; -ESRCH once it is gone. */
int uevent_netns_of_pidfd(int pidfd, int *ret_fd);

/*
 * Whether the network namespace netns_fd names is devnsd's own or the
 * host's (that of pid 1): events sent there would reach the host's udev
 * clients, so none are. 1 or 0, or a negative errno.
 */
int uevent_netns_is_shared(int netns_fd);

/*
 * Sends one event to UEVENT_GROUP_UDEV in the network namespace netns_fd
 * (an nsfs fd, /proc/PID/ns/net). The socket is made in that namespace by
 * a short-lived thread; the sending thread never leaves devnsd's. The
 * message carries the credentials uid/gid, which must be the host ids of
 * the container's root: receivers drop messages whose sender is not root
 * as their user namespace sees it. Never blocks (a receiver with a full
 * queue loses the message). Returns 1 when sent, 0 when netns_fd is shared
 * (uevent_netns_is_shared()) and nothing was sent, or a negative errno.
 */
int uevent_send_to_netns(int netns_fd, uid_t uid, gid_t gid, const char *action, const struct uevent_device *dev);
