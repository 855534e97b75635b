/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "populate/udev.h"
#include "util.h"

#define INPUT_MAJOR 13
#define OVERLAY_SIZE "1m"

/* The sysfs directory of the kernel input device at source, and its number. */
static int input_syspath(const char *source, char real[static PATH_MAX], dev_t *ret_hw) {
	char link[64];
	struct stat st;

	if (stat(source, &st) < 0)
		return -ENODEV;
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != INPUT_MAJOR)
		return -ENODEV;
	snprintf(link, sizeof(link), "/sys/dev/char/%u:%u", major(st.st_rdev), minor(st.st_rdev));
	if (!realpath(link, real))
		return -errno;
	*ret_hw = st.st_rdev;
	return 0;
}

int udev_node_describe(const char *kind, const char *source, dev_t devnum, const char *devname,
		       const char *properties, struct udev_node *ret) {
	bool drm = streq(kind, "drm");
	char real[PATH_MAX], id_path[UDEV_SYSPATH_MAX], props[UDEV_PROPERTIES_MAX];
	dev_t hw;
	int r;

	if (!drm && !streq(kind, "input"))
		return -ENODEV;
	r = drm ? udev_drm_card_syspath(source, real, &hw) : input_syspath(source, real, &hw);
	if (r < 0)
		return r;
	if (strncmp(real, "/sys/devices/", 13) != 0 || strlen(real) >= sizeof(ret->syspath) ||
	    strlen(devname) >= sizeof(ret->devname))
		return -ENAMETOOLONG;
	if (drm && (!properties || !properties[0])) {
		r = udev_path_id(real, id_path, sizeof(id_path));
		if (r < 0 && r != -ENOENT)
			return r;
		r = udev_drm_properties(r < 0 ? NULL : id_path, props, sizeof(props));
		if (r < 0)
			return r;
		properties = props;
	}
	if (strlen(properties ?: "") >= sizeof(ret->properties))
		return -ENAMETOOLONG;
	*ret = (struct udev_node){ .devnum = devnum, .hw_devnum = hw };
	snprintf(ret->syspath, sizeof(ret->syspath), "%s", real);
	snprintf(ret->devname, sizeof(ret->devname), "%s", devname);
	snprintf(ret->subsystem, sizeof(ret->subsystem), "%s", drm ? "drm" : "input");
	snprintf(ret->devtype, sizeof(ret->devtype), "%s", drm ? "drm_minor" : "");
	snprintf(ret->properties, sizeof(ret->properties), "%s", properties ?: "");
	return 0;
}

int udev_input_parent(const char *syspath, char buf[static UDEV_PARENT_ID_MAX]) {
	const char *end = strrchr(syspath, '/'), *start;
	size_t len;

	if (!end || end == syspath)
		return -EINVAL;
	for (start = end; start > syspath && start[-1] != '/'; start--)
		;
	len = (size_t)(end - start);
	if (len <= 5 || strncmp(start, "input", 5) != 0 || strspn(start + 5, "0123456789") != len - 5 ||
	    len + strlen("+input:") >= UDEV_PARENT_ID_MAX)
		return -EINVAL;
	snprintf(buf, UDEV_PARENT_ID_MAX, "+input:%.*s", (int)len, start);
	return 0;
}

const char *const *udev_tags(const char *subsystem) {
	/* 71-seat.rules and 73-seat-late.rules (uaccess) for a card; 71-seat.rules and 70-uaccess.rules for input. */
	static const char *const card[] = { "seat", "master-of-seat", "uaccess", NULL };
	static const char *const input[] = { "seat", "uaccess", NULL };

	return subsystem && streq(subsystem, "drm") ? card : input;
}

static int append(char *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static int append(char *buf, size_t size, size_t *len, const char *fmt, ...) {
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *len)
		return -ENOBUFS;
	*len += (size_t)n;
	return 0;
}

int udev_db_record(const char *properties, const char *const *tags, uint64_t usec_initialized, char *buf,
		   size_t size) {
	size_t len = 0;
	int r;

	r = append(buf, size, &len, "I:%" PRIu64 "\n", usec_initialized);
	for (const char *line = properties; r >= 0 && *line;) {
		size_t n = strcspn(line, "\n");
		if (n > 0)
			r = append(buf, size, &len, "E:%.*s\n", (int)n, line);
		line += n + (line[n] ? 1 : 0);
	}
	for (size_t i = 0; r >= 0 && tags && tags[i]; i++)
		r = append(buf, size, &len, "G:%s\n", tags[i]);
	for (size_t i = 0; r >= 0 && tags && tags[i]; i++)
		r = append(buf, size, &len, "Q:%s\n", tags[i]);
	if (r >= 0)
		r = append(buf, size, &len, "V:1\n");
	return r < 0 ? r : (int)len;
}

void udev_db_name(dev_t devnum, char buf[static 32]) {
	snprintf(buf, 32, "c%u:%u", major(devnum), minor(devnum));
}

int udev_uevent_file(const struct udev_node *n, const char *host_uevent, char *buf, size_t size) {
	size_t len = 0;
	int r = 0;

	for (const char *line = host_uevent; r >= 0 && *line;) {
		size_t k = strcspn(line, "\n");
		if (k > 0 && strncmp(line, "MAJOR=", 6) != 0 && strncmp(line, "MINOR=", 6) != 0 &&
		    strncmp(line, "DEVNAME=", 8) != 0)
			r = append(buf, size, &len, "%.*s\n", (int)k, line);
		line += k + (line[k] ? 1 : 0);
	}
	if (r >= 0)
		r = append(buf, size, &len, "MAJOR=%u\nMINOR=%u\nDEVNAME=%s\n", major(n->devnum), minor(n->devnum),
			   n->devname);
	return r < 0 ? r : (int)len;
}

/* A small tmpfs, not yet mounted anywhere: its fs context's fd. */
static int tmpfs_new(int *ret_fs_fd) {
	_cleanup_(closep) int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);

	if (fs < 0)
		return -errno;
	if (fsconfig(fs, FSCONFIG_SET_STRING, "size", OVERLAY_SIZE, 0) < 0 ||
	    fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return -errno;
	*ret_fs_fd = take_fd(&fs);
	return 0;
}

static int tmpfs_mount(int fs, int *ret_mount_fd) {
	int fd = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);

	if (fd < 0)
		return -errno;
	*ret_mount_fd = fd;
	return 0;
}

/* Once filled, nobody writes to it again. */
static int seal(int mount_fd) {
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };

	if (mount_setattr(mount_fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return -errno;
	return 0;
}

static int write_text(int dir, const char *name, const char *text) {
	_cleanup_(closep) int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	size_t len = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		return -EIO;
	return 0;
}

static int read_text(const char *path, char *buf, size_t size) {
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	size_t len;
	int r;

	if (fd < 0)
		return -errno;
	r = read_bounded(fd, buf, size - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	return 0;
}

/* The link name in from_fd, made again in dir (anything but a link is skipped). */
static int copy_link_at(int dir, int from_fd, const char *name) {
	char target[PATH_MAX];
	ssize_t n;

	n = readlinkat(from_fd, name, target, sizeof(target) - 1);
	if (n < 0)
		return errno == EINVAL || errno == ENOENT ? 0 : -errno;
	target[n] = '\0';
	return symlinkat(target, dir, name) < 0 ? -errno : 0;
}

/* The files a node's sysfs directory gets, kept in dir/.N until they are bound. */
static int stage_files(int dir, size_t i, const struct udev_node *n) {
	_cleanup_(closep) int fd = -1;
	char path[PATH_MAX], name[32], host[4096], text[4096 + 512];
	int r;

	snprintf(path, sizeof(path), "%s/uevent", n->syspath);
	r = read_text(path, host, sizeof(host));
	if (r >= 0)
		r = udev_uevent_file(n, host, text, sizeof(text));
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), ".%zu", i);
	if (mkdirat(dir, name, 0755) < 0)
		return -errno;
	fd = openat(dir, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = write_text(fd, "uevent", text);
	if (r < 0)
		return r;
	snprintf(text, sizeof(text), "%u:%u\n", major(n->devnum), minor(n->devnum));
	return write_text(fd, "dev", text);
}

static const struct udev_node *node_of(const struct udev_node *nodes, size_t n_nodes, unsigned int maj,
				       unsigned int min) {
	for (size_t i = 0; i < n_nodes; i++)
		if (major(nodes[i].devnum) == maj && minor(nodes[i].devnum) == min)
			return &nodes[i];
	return NULL;
}

int udev_overlay_new(int from_fd, const struct udev_node *nodes, size_t n_nodes, int *ret_mount_fd) {
	_cleanup_(closep) int fs = -1, mnt = -1;
	DIR *dir;
	struct dirent *de;
	size_t copied = 0;
	int r;

	r = tmpfs_new(&fs);
	if (r >= 0)
		r = tmpfs_mount(fs, &mnt);
	if (r < 0)
		return r;
	{
		int fd = openat(from_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		dir = fdopendir(fd);
		if (!dir) {
			close(fd);
			return -errno;
		}
	}
	while (r >= 0 && copied < UDEV_DEVCHAR_MAX && (de = readdir(dir))) {
		unsigned int maj, min;
		if (de->d_name[0] == '.' || sscanf(de->d_name, "%u:%u", &maj, &min) != 2 ||
		    node_of(nodes, n_nodes, maj, min))
			continue;
		r = copy_link_at(mnt, dirfd(dir), de->d_name);
		copied++;
	}
	closedir(dir);
	for (size_t i = 0; r >= 0 && i < n_nodes; i++) {
		char name[32], target[UDEV_SYSPATH_MAX + 8];
		snprintf(name, sizeof(name), "%u:%u", major(nodes[i].devnum), minor(nodes[i].devnum));
		/* From /sys/dev/char: "../../devices/...". */
		snprintf(target, sizeof(target), "../..%s", nodes[i].syspath + 4);
		if (symlinkat(target, mnt, name) < 0 && errno != EEXIST)
			r = -errno;
		if (r >= 0)
			r = stage_files(mnt, i, &nodes[i]);
	}
	if (r < 0)
		return r;
	*ret_mount_fd = take_fd(&mnt);
	return 0;
}

static int bind_file(int overlay_fd, const char *path, int target_fd) {
	_cleanup_(closep) int tree = -1;
	int r;

	tree = (int)open_tree(overlay_fd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (tree < 0)
		return -errno;
	r = seal(tree);
	if (r < 0)
		return r;
	if (move_mount(tree, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return -errno;
	return 0;
}

int udev_overlay_bind(int overlay_fd, size_t i, int uevent_fd, int dev_fd) {
	char dir[32], path[48];
	int r;

	snprintf(dir, sizeof(dir), ".%zu", i);
	snprintf(path, sizeof(path), "%s/uevent", dir);
	r = bind_file(overlay_fd, path, uevent_fd);
	snprintf(path, sizeof(path), "%s/dev", dir);
	if (r >= 0)
		r = bind_file(overlay_fd, path, dev_fd);
	return r;
}

int udev_overlay_seal(int overlay_fd, size_t n_nodes) {
	for (size_t i = 0; i < n_nodes; i++) {
		char dir[32], path[48];
		snprintf(dir, sizeof(dir), ".%zu", i);
		snprintf(path, sizeof(path), "%s/uevent", dir);
		(void)unlinkat(overlay_fd, path, 0);
		snprintf(path, sizeof(path), "%s/dev", dir);
		(void)unlinkat(overlay_fd, path, 0);
		(void)unlinkat(overlay_fd, dir, AT_REMOVEDIR);
	}
	return seal(overlay_fd);
}
