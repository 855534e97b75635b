/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * How a container's udev clients (libinput, sd-device) see one of a
 * persona's input nodes. The container keeps the hardware device's sysfs
 * directory (so enumerating the input subsystem finds it, as eventN, and
 * sd-device, which takes devices on sysfs only, accepts it), but its uevent
 * and dev files are bind mounts of files that give the persona's node
 * number and the node's path in the container; the container's
 * /sys/dev/char is a read-only tmpfs of links, its entry for the persona's
 * number leading to that directory. The udev database record is
 * kept under the persona's number, the number the container's node has.
 * So every lookup a client makes (enumerate, read the record, open DEVNAME,
 * fstat the fd and look the number up again) lands on the same device.
 */

#define UDEV_SYSPATH_MAX 512
#define UDEV_DEVNAME_MAX 256
#define UDEV_PROPERTIES_MAX 512
/* Entries copied from the host's /sys/dev/char at most. */
#define UDEV_DEVCHAR_MAX 4096

struct udev_node {
	/* The hardware's sysfs directory, "/sys/devices/.../input/inputM/eventN". */
	char syspath[UDEV_SYSPATH_MAX];
	/* The node's path in the container below /dev, "input/eventN". */
	char devname[UDEV_DEVNAME_MAX];
	/* The persona's node, as the container's /dev has it. */
	dev_t devnum;
	/* The hardware device's own number (13:64+N). */
	dev_t hw_devnum;
	/* "KEY=VALUE\n" lines (evdev_udev_properties()). */
	char properties[UDEV_PROPERTIES_MAX];
};

/*
 * Describes the node devnum that stands for the kernel input device at
 * source (a /dev/input/eventN path, or a link to one), to be found at
 * /dev/DEVNAME in the container. Runs in devnsd's own mount namespace.
 * -ENODEV when source is not a kernel input device (a fake backend's).
 */
int udev_node_describe(const char *source, dev_t devnum, const char *devname, const char *properties,
		       struct udev_node *ret);

/*
 * The udev database record for n, as systemd-udevd writes it
 * (/run/udev/data/cMAJ:MIN): I: initialization time (CLOCK_MONOTONIC usec),
 * E: properties, G:/Q: the seat and uaccess tags, V:1. Returns the length or
 * -ENOBUFS.
 */
int udev_db_record(const char *properties, uint64_t usec_initialized, char *buf, size_t size);

/* The record's file name below /run/udev/data: "cMAJ:MIN". */
void udev_db_name(dev_t devnum, char buf[static 32]);

/*
 * The sysfs uevent file the container sees for n: host_uevent (the
 * hardware's) with MAJOR, MINOR and DEVNAME replaced. Returns the length or
 * -ENOBUFS.
 */
int udev_uevent_file(const struct udev_node *n, const char *host_uevent, char *buf, size_t size);

/*
 * The overlay for a container's /sys/dev/char: a detached tmpfs mount with
 * the links of directory from_fd (at most UDEV_DEVCHAR_MAX; the container's
 * current /sys/dev/char, so that what was laid there before stays, the
 * targets being the container's business), each of nodes' persona
 * numbers leading to its hardware directory, and, staged in hidden
 * directories, the uevent and dev files each node's sysfs directory is to
 * show. Needs CAP_SYS_ADMIN in the caller's mount namespace; reads the
 * host's sysfs. Once it is mounted in the container's mount namespace (a
 * file of a detached mount cannot be bound elsewhere), the caller, there
 * too, binds each node's files with udev_overlay_bind() and then calls
 * udev_overlay_seal().
 */
int udev_overlay_new(int from_fd, const struct udev_node *nodes, size_t n_nodes, int *ret_mount_fd);

/*
 * Binds node i's staged uevent and dev files over the files uevent_fd and
 * dev_fd (O_PATH fds of the container's sysfs files) name.
 */
int udev_overlay_bind(int overlay_fd, size_t i, int uevent_fd, int dev_fd);

/* Removes the staged files (their binds stay) and makes the overlay read-only. */
int udev_overlay_seal(int overlay_fd, size_t n_nodes);
