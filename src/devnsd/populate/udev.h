/* SPDX-License-Identifier: MIT */
#pragma once

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * How a container's udev clients (libinput, sd-device, libdrm, logind) see
 * one of a persona's input nodes or its DRM card. The container keeps the
 * hardware device's sysfs directory (so enumerating the input or drm
 * subsystem finds it, as eventN or cardN, and
 * sd-device, which takes devices on sysfs only, accepts it), but its uevent
 * and dev files are bind mounts of files that give the persona's node
 * number and the node's path in the container; the container's
 * /sys/dev/char is a read-only tmpfs of links, its entry for the persona's
 * number leading to that directory. The udev database record is
 * kept under the persona's number, the number the container's node has.
 * So every lookup a client makes (enumerate, read the record, open DEVNAME,
 * fstat the fd and look the number up again) lands on the same device.
 *
 * A card's directory is that of the DRM card behind the display devnsd
 * drives, so /sys/dev/char/M:m/device/drm exists and device/subsystem is
 * the card's real bus: libdrm's drmGetDevices2() lists the persona's
 * node. Its record carries the tags seat, master-of-seat and uaccess and
 * the properties systemd-udevd's path_id and 71-seat.rules give a card
 * (udev_drm_properties()): populate computes them itself for a "drm"
 * node whose node_desc has no udev properties, so the display class need
 * not.
 */

#define UDEV_SYSPATH_MAX 512
#define UDEV_DEVNAME_MAX 256
#define UDEV_PROPERTIES_MAX 512
/* Entries copied from the host's /sys/dev/char at most. */
#define UDEV_DEVCHAR_MAX 4096

struct udev_node {
	/* The hardware's sysfs directory, "/sys/devices/.../input/inputM/eventN" or ".../drm/cardN". */
	char syspath[UDEV_SYSPATH_MAX];
	/* The node's path in the container below /dev, "input/eventN" or "dri/card0". */
	char devname[UDEV_DEVNAME_MAX];
	/* The kernel device's subsystem, "input" or "drm", and its DEVTYPE ("drm_minor"; "" if none). */
	char subsystem[16];
	char devtype[16];
	/* The persona's node, as the container's /dev has it. */
	dev_t devnum;
	/* The hardware device's own number (13:64+N, 226:N). */
	dev_t hw_devnum;
	/* "KEY=VALUE\n" lines (evdev_udev_properties(), udev_drm_properties()). */
	char properties[UDEV_PROPERTIES_MAX];
};

/*
 * Describes the node devnum of kind "input" or "drm" that stands for the
 * kernel device at source, to be found at /dev/DEVNAME in the container.
 * For "input", source is a /dev/input/eventN path (or a link to one). For
 * "drm", it is the display device devnsd drives: a DRM card
 * (/dev/dri/cardN), whose sysfs directory is taken, or a framebuffer
 * (/dev/fbN), whose parent device's DRM card is taken; with properties
 * NULL or "", a card's are udev_drm_properties() of its path. Runs in
 * devnsd's own mount namespace. -ENODEV when source is no such kernel
 * device (a fake backend's, a framebuffer without a DRM card).
 */
int udev_node_describe(const char *kind, const char *source, dev_t devnum, const char *devname,
		       const char *properties, struct udev_node *ret);

/*
 * The sysfs directory (realpath, below /sys/devices) of the DRM card behind
 * the display device at source, and the card's number: for /dev/dri/cardN
 * (or a link to it), its own; for a framebuffer /dev/fbN, the card its
 * parent device has (/sys/class/graphics/fbN/device/drm/cardM). -ENODEV
 * when there is none.
 */
int udev_drm_card_syspath(const char *source, char ret_syspath[static PATH_MAX], dev_t *ret_devnum);

/* The tags systemd's rules give a device of subsystem ("input", "drm"): NULL-terminated. */
const char *const *udev_tags(const char *subsystem);

/*
 * The udev device id of an evdev node's parent input device, from the
 * node's sysfs directory (".../input/input7/event3": "+input:input7"):
 * udevd tags that device "seat" (71-seat.rules), and systemd-logind takes
 * an evdev node for a session only when its parent is one of the seat's
 * devices. -EINVAL when the directory's parent is no inputN.
 */
#define UDEV_PARENT_ID_MAX 48
int udev_input_parent(const char *syspath, char buf[static UDEV_PARENT_ID_MAX]);

/*
 * The ID_PATH systemd-udevd's path_id builtin gives the device at syspath
 * (an absolute sysfs directory), from its parents' "subsystem" links: PCI,
 * platform and ACPI parents name it, the others are passed over.
 * -ENOENT when none names it (path_id gives nothing then), -ENOBUFS.
 */
int udev_path_id(const char *syspath, char *buf, size_t size);

/*
 * The properties systemd-udevd gives a DRM card whose ID_PATH is id_path:
 * ID_PATH, ID_PATH_TAG (path_id's tag of it) and ID_FOR_SEAT
 * (71-seat.rules, "drm-" and the tag): what logind needs, with the tags
 * seat and master-of-seat, to make seat0 graphical and hand the card to a
 * session. "" for id_path NULL. Returns the length or -ENOBUFS.
 */
int udev_drm_properties(const char *id_path, char *buf, size_t size);

/*
 * The udev database record for a node, as systemd-udevd writes it
 * (/run/udev/data/cMAJ:MIN): I: initialization time (CLOCK_MONOTONIC usec),
 * E: properties, G:/Q: tags (udev_tags()), V:1. Returns the length or
 * -ENOBUFS.
 */
int udev_db_record(const char *properties, const char *const *tags, uint64_t usec_initialized, char *buf,
		   size_t size);

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
