/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "container-fs.h"
#include "util.h"

/* Below the directory, through no symlink of any kind and no "..". */
#define CFS_RESOLVE (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static int open_beneath(int dir_fd, const char *name, uint64_t flags, int *ret_fd) {
	struct open_how how = { .flags = flags | O_CLOEXEC, .resolve = CFS_RESOLVE };
	long fd = syscall(SYS_openat2, dir_fd, name, &how, sizeof(how));

	if (fd < 0)
		return -errno;
	*ret_fd = (int)fd;
	return 0;
}

static cfs_mount_ok_fn guard;
static void *guard_userdata;

void cfs_guard_mounts(cfs_mount_ok_fn ok, void *userdata) {
	guard = ok;
	guard_userdata = userdata;
}

int cfs_check_mount(int fd) {
	struct statx stx;

	if (!guard)
		return 0;
	/* Nothing of the file system is asked: a FUSE server that does not answer holds nothing here. */
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) < 0 || !(stx.stx_mask & STATX_MNT_ID))
		return -EMEDIUMTYPE;
	return guard(stx.stx_mnt_id, guard_userdata) ? 0 : -EMEDIUMTYPE;
}

/* Opens name below dir_fd, and keeps it only if its mount passes the guard. */
static int open_checked(int dir_fd, const char *name, uint64_t flags, int *ret_fd) {
	_cleanup_(closep) int fd = -1;
	int r;

	r = open_beneath(dir_fd, name, flags, &fd);
	if (r >= 0)
		r = cfs_check_mount(fd);
	if (r < 0)
		return r;
	*ret_fd = take_fd(&fd);
	return 0;
}

/* A path component devnsd may step into: not empty, ".", "..", too long or holding a '/'. */
static bool component_ok(const char *s, size_t len) {
	return len > 0 && len <= 255 && !memchr(s, '/', len) && !(len == 1 && s[0] == '.') &&
	       !(len == 2 && s[0] == '.' && s[1] == '.');
}

int cfs_open_dir(int root_fd, const char *path, int create, mode_t mode, int *ret_fd) {
	_cleanup_(closep) int cur = -1;
	const char *s = path;
	int r;

	r = open_checked(root_fd, ".", O_PATH | O_DIRECTORY, &cur);
	if (r < 0)
		return r;
	while (*s) {
		char name[256];
		size_t len = strcspn(s, "/");
		int next = -1;

		if (len == 0) {
			s++;
			continue;
		}
		if (!component_ok(s, len))
			return -EINVAL;
		memcpy(name, s, len);
		name[len] = '\0';
		s += len;
		r = open_checked(cur, name, O_PATH | O_DIRECTORY, &next);
		if (r == -ENOENT && create) {
			if (mkdirat(cur, name, mode) < 0 && errno != EEXIST)
				return -errno;
			r = open_checked(cur, name, O_PATH | O_DIRECTORY, &next);
		}
		if (r < 0)
			return r;
		close(cur);
		cur = next;
	}
	*ret_fd = take_fd(&cur);
	return 0;
}

/* Splits path into its directory, opened below root_fd, and its last component. */
static int open_parent(int root_fd, const char *path, int create, int *ret_fd, const char **ret_name) {
	char dir[4096];
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t len = slash ? (size_t)(slash - path) : 0;

	if (!component_ok(name, strlen(name)) || len >= sizeof(dir))
		return -EINVAL;
	memcpy(dir, path, len);
	dir[len] = '\0';
	*ret_name = name;
	return cfs_open_dir(root_fd, dir, create, 0755, ret_fd);
}

int cfs_read_file(int root_fd, const char *path, size_t max, char **ret, size_t *ret_len) {
	_cleanup_(closep) int dir_fd = -1, pfd = -1, fd = -1;
	_cleanup_(freep) char *buf = NULL;
	const char *name;
	char self[64];
	struct stat st;
	size_t len = 0;
	int r;

	r = open_parent(root_fd, path, 0, &dir_fd, &name);
	if (r < 0)
		return r;
	/* Look before opening: opening a device or a FIFO is an act of its own. */
	r = open_checked(dir_fd, name, O_PATH, &pfd);
	if (r < 0)
		return r;
	if (fstat(pfd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((size_t)st.st_size > max)
		return -EFBIG;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	r = read_bounded(fd, buf, max, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

int cfs_stat_at(int dir_fd, const char *name, struct stat *ret) {
	_cleanup_(closep) int fd = -1;
	int r;

	if (!component_ok(name, strlen(name)))
		return -EINVAL;
	r = open_checked(dir_fd, name, O_PATH | O_NOFOLLOW, &fd);
	if (r < 0)
		return r;
	return fstat(fd, ret) < 0 ? -errno : 0;
}

int cfs_write_file(int dir_fd, const char *name, const char *text, mode_t mode) {
	_cleanup_(closep) int fd = -1;
	char tmp[300];
	size_t len = strlen(text), done = 0;
	int r = 0;

	if (!component_ok(name, strlen(name)))
		return -EINVAL;
	snprintf(tmp, sizeof(tmp), ".#%s.%d", name, (int)getpid());
	(void)unlinkat(dir_fd, tmp, 0);
	fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	while (done < len && r == 0) {
		ssize_t n = write(fd, text + done, len - done);
		if (n < 0 && errno != EINTR)
			r = -errno;
		else if (n > 0)
			done += (size_t)n;
	}
	if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(dir_fd, tmp, 0);
	return r;
}

int cfs_touch(int dir_fd, const char *name, mode_t mode) {
	int fd;

	if (!component_ok(name, strlen(name)))
		return -EINVAL;
	fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

int cfs_mount_target(int dir_fd, const char *name, dev_t rdev, int *ret_fd) {
	struct stat st;
	int fd, r;

	if (!component_ok(name, strlen(name)))
		return -EINVAL;
	fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd >= 0) {
		*ret_fd = fd;
		return 0;
	}
	if (errno != EEXIST)
		return -errno;
	r = cfs_stat_at(dir_fd, name, &st);
	if (r < 0)
		return r;
	return S_ISCHR(st.st_mode) && st.st_rdev == rdev ? 1 : -EEXIST;
}

int cfs_group_find(const char *text, size_t len, const char *name, uint32_t *ret_gid) {
	const char *s = text, *end = text + len;
	size_t name_len = strlen(name);

	while (s < end) {
		const char *eol = memchr(s, '\n', (size_t)(end - s));
		const char *line = s, *field;
		uint64_t gid = 0;
		size_t n;

		eol = eol ? eol : end;
		s = eol + 1;
		/* NAME:PASSWORD:GID:MEMBERS */
		if ((size_t)(eol - line) <= name_len + 1 || memcmp(line, name, name_len) != 0 || line[name_len] != ':')
			continue;
		field = memchr(line + name_len + 1, ':', (size_t)(eol - line - (ptrdiff_t)name_len - 1));
		if (!field)
			continue;
		field++;
		for (n = 0; field + n < eol && field[n] >= '0' && field[n] <= '9' && gid < UINT32_MAX; n++)
			gid = gid * 10 + (uint64_t)(field[n] - '0');
		if (n == 0 || gid >= UINT32_MAX || (field + n < eol && field[n] != ':'))
			continue;
		*ret_gid = (uint32_t)gid;
		return 0;
	}
	return -ENOENT;
}
