/* SPDX-License-Identifier: MIT */
/* A DRM card as systemd-udevd presents it: its sysfs directory, ID_PATH and the properties of a seat's master. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "populate/udev.h"
#include "util.h"

#define DRM_MAJOR 226
#define FB_MAJOR 29
/* Minors of DRM primary nodes (cardN); libdrm takes the node type from minor >> 6. */
#define DRM_PRIMARY_MINORS 64
/* Parents looked at at most, from a card up to /sys/devices. */
#define PATH_ID_DEPTH 64

/* Whether name is "cardN". */
static bool card_name(const char *name, unsigned int *ret_n) {
	int end = 0;

	return sscanf(name, "card%u%n", ret_n, &end) == 1 && name[end] == '\0' && name[4] >= '0' && name[4] <= '9';
}

/* The card in a framebuffer's parent device: /sys/class/graphics/fbN/device/drm/cardM. */
static int fb_card(unsigned int fb, char real[static PATH_MAX], dev_t *ret_devnum) {
	char dir_path[96], path[sizeof(dir_path) + 1 + sizeof(((struct dirent *)0)->d_name)];
	DIR *dir;
	struct dirent *de;
	int r = -ENODEV;

	snprintf(dir_path, sizeof(dir_path), "/sys/class/graphics/fb%u/device/drm", fb);
	dir = opendir(dir_path);
	if (!dir)
		return -ENODEV;
	while (r < 0 && (de = readdir(dir))) {
		unsigned int n;

		if (!card_name(de->d_name, &n) || n >= DRM_PRIMARY_MINORS)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir_path, de->d_name);
		if (realpath(path, real)) {
			*ret_devnum = makedev(DRM_MAJOR, n);
			r = 0;
		}
	}
	closedir(dir);
	return r;
}

int udev_drm_card_syspath(const char *source, char ret_syspath[static PATH_MAX], dev_t *ret_devnum) {
	char link[64], real[PATH_MAX];
	struct stat st;
	dev_t devnum;
	int r;

	if (!source || stat(source, &st) < 0 || !S_ISCHR(st.st_mode))
		return -ENODEV;
	if (major(st.st_rdev) == FB_MAJOR) {
		r = fb_card(minor(st.st_rdev), real, &devnum);
		if (r < 0)
			return r;
	} else if (major(st.st_rdev) == DRM_MAJOR && minor(st.st_rdev) < DRM_PRIMARY_MINORS) {
		snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", DRM_MAJOR, minor(st.st_rdev));
		if (!realpath(link, real))
			return -ENODEV;
		devnum = st.st_rdev;
	} else
		return -ENODEV;
	memcpy(ret_syspath, real, PATH_MAX);
	*ret_devnum = devnum;
	return 0;
}

/* The last component of the "subsystem" link in directory path; "" if none. */
static void subsystem_of(const char *path, char *buf, size_t size) {
	char link[PATH_MAX + 16], target[PATH_MAX];
	const char *slash;
	ssize_t n;

	buf[0] = '\0';
	snprintf(link, sizeof(link), "%s/subsystem", path);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	slash = strrchr(target, '/');
	slash = slash ? slash + 1 : target;
	if (strlen(slash) < size)
		memcpy(buf, slash, strlen(slash) + 1);
}

/* Cuts path's last component; false at the top ("/sys/devices" or shorter is never walked). */
static bool to_parent(char *path) {
	char *slash = strrchr(path, '/');

	if (!slash || slash == path)
		return false;
	*slash = '\0';
	return true;
}

/* Prepends "prefix-name" to buf, joined to what was there by '-'. */
static int prepend(char *buf, size_t size, const char *prefix, const char *name) {
	char old[UDEV_SYSPATH_MAX];
	int n;

	snprintf(old, sizeof(old), "%s", buf);
	n = snprintf(buf, size, "%s-%s%s%s", prefix, name, old[0] ? "-" : "", old);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* Moves path up past its parents of the same subsystem: a chain of one bus names its device once, by the first. */
static void skip_subsystem(char *path, const char *subsystem) {
	char up[PATH_MAX], own[64];

	for (;;) {
		snprintf(up, sizeof(up), "%s", path);
		if (!to_parent(up))
			return;
		subsystem_of(up, own, sizeof(own));
		if (!streq(own, subsystem))
			return;
		snprintf(path, PATH_MAX, "%s", up);
	}
}

int udev_path_id(const char *syspath, char *buf, size_t size) {
	char path[PATH_MAX], subsystem[64];
	int r = 0;

	if (size == 0 || strlen(syspath) >= sizeof(path))
		return -ENOBUFS;
	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s", syspath);
	/* path_id starts at the device itself: a card's own subsystem, drm, names nothing. */
	for (size_t depth = 0; r >= 0 && depth < PATH_ID_DEPTH && !streq(path, "/sys/devices"); depth++) {
		subsystem_of(path, subsystem, sizeof(subsystem));
		if (streq(subsystem, "pci") || streq(subsystem, "platform") || streq(subsystem, "acpi")) {
			r = prepend(buf, size, subsystem, strrchr(path, '/') + 1);
			skip_subsystem(path, subsystem);
		}
		if (!to_parent(path))
			break;
	}
	if (r < 0)
		return r;
	return buf[0] ? 0 : -ENOENT;
}

/* path_id's tag: letters, digits and '-' kept, any run of others one '_', none leading or trailing. */
static void path_tag(const char *path, char *tag, size_t size) {
	size_t n = 0;

	for (const char *p = path; *p && n + 1 < size; p++) {
		if ((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '-')
			tag[n++] = *p;
		else if (n > 0 && tag[n - 1] != '_')
			tag[n++] = '_';
	}
	while (n > 0 && tag[n - 1] == '_')
		n--;
	tag[n] = '\0';
}

int udev_drm_properties(const char *id_path, char *buf, size_t size) {
	char tag[UDEV_SYSPATH_MAX];
	int n;

	if (size == 0)
		return -ENOBUFS;
	if (!id_path || !id_path[0]) {
		buf[0] = '\0';
		return 0;
	}
	path_tag(id_path, tag, sizeof(tag));
	n = snprintf(buf, size, "ID_PATH=%s\nID_PATH_TAG=%s\nID_FOR_SEAT=drm-%s\n", id_path, tag, tag);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}
