/* SPDX-License-Identifier: MIT */
/*
 * The hardware behind a display's node: what stays when the kernel names
 * the node anew (a driver bound again gets the next free number, card1).
 * A node is known by its device's parent in sysfs (the GPU's PCI device,
 * the USB port of a USB display) and its kind, its sysfs name without the
 * number ("card", not "renderD"; "fb").
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "display/display-internal.h"
#include "util.h"

int display_hardware_of(const char *node, char **ret_hardware, char **ret_kind) {
	char link[PATH_MAX], self[PATH_MAX], hardware[PATH_MAX];
	const char *name;
	struct stat st;
	size_t len;

	if (stat(node, &st) < 0)
		return -errno;
	if (!S_ISCHR(st.st_mode))
		return -ENODEV;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, self))
		return -errno;
	if ((size_t)snprintf(link, sizeof(link), "%s/device", self) >= sizeof(link))
		return -ENAMETOOLONG;
	if (!realpath(link, hardware))
		return -errno;
	name = strrchr(self, '/') + 1;
	for (len = strlen(name); len > 0 && name[len - 1] >= '0' && name[len - 1] <= '9'; len--)
		;
	_cleanup_(freep) char *h = strdup(hardware), *k = strndup(name, len);
	if (!h || !k)
		return -ENOMEM;
	*ret_hardware = TAKE_PTR(h);
	*ret_kind = TAKE_PTR(k);
	return 0;
}

/* Whether name starts with one of names. */
static bool has_prefix(const char *name, const char *const *names, size_t n) {
	for (size_t i = 0; i < n; i++)
		if (strncmp(name, names[i], strlen(names[i])) == 0)
			return true;
	return false;
}

bool display_hardware_is_firmware(const char *hardware) {
	static const char *const devices[] = { "simple-framebuffer.", "efi-framebuffer.", "vesa-framebuffer.",
					       "vga-framebuffer.", "platform-framebuffer." };
	static const char *const drivers[] = { "simple-framebuffer", "efi-framebuffer", "vesa-framebuffer" };
	char link[PATH_MAX], driver[PATH_MAX];
	const char *name = strrchr(hardware, '/');

	if (has_prefix(name ? name + 1 : hardware, devices, ELEMENTSOF(devices)))
		return true;
	if ((size_t)snprintf(link, sizeof(link), "%s/driver", hardware) >= sizeof(link) || !realpath(link, driver))
		return false;
	name = strrchr(driver, '/');
	for (size_t i = 0; name && i < ELEMENTSOF(drivers); i++)
		if (streq(name + 1, drivers[i]))
			return true;
	return false;
}

int display_hardware_find(const char *hardware, const char *kind, char **ret_node) {
	static const struct {
		const char *kind, *subsystem, *dev;
	} where[] = { { "card", "drm", "/dev/dri" }, { "fb", "graphics", "/dev" } };
	char path[PATH_MAX];
	size_t len = strlen(kind);

	for (size_t i = 0; i < ELEMENTSOF(where); i++) {
		struct dirent *de;
		DIR *dir;
		int r = -ENOENT;

		if (!streq(kind, where[i].kind))
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", hardware, where[i].subsystem) >= sizeof(path))
			return -ENAMETOOLONG;
		dir = opendir(path);
		if (!dir)
			continue;
		while (r == -ENOENT && (de = readdir(dir))) {
			_cleanup_(freep) char *h = NULL, *k = NULL;

			if (strncmp(de->d_name, kind, len) != 0 || !de->d_name[len] ||
			    strspn(de->d_name + len, "0123456789") != strlen(de->d_name + len))
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", where[i].dev, de->d_name) >= sizeof(path))
				continue;
			/* The node itself must lead back here: /dev is what is opened. */
			if (display_hardware_of(path, &h, &k) < 0 || !streq(h, hardware) || !streq(k, kind))
				continue;
			*ret_node = strdup(path);
			r = *ret_node ? 0 : -ENOMEM;
		}
		closedir(dir);
		if (r != -ENOENT)
			return r;
	}
	return -ENOENT;
}
