/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

bool name_is_valid(const char *name) {
	size_t n = 0;

	if (!name || !*name || *name == '-')
		return false;
	for (const char *p = name; *p; p++, n++) {
		bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			  (*p >= '0' && *p <= '9') || *p == '_' || *p == '-';
		if (!ok || n >= NAME_MAX_LEN)
			return false;
	}
	return true;
}

int parse_boolean(const char *v) {
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	return -EINVAL;
}

int fd_set_owner(int fd, unsigned int uid, unsigned int gid, unsigned int mode) {
	char proc[64];

	if (fchownat(fd, "", (uid_t)uid, (gid_t)gid, AT_EMPTY_PATH) < 0)
		return -errno;
	/* The /proc link names this very inode, not a path. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, (mode_t)mode) < 0 ? -errno : 0;
}

int read_bounded(int fd, char *buf, size_t max, size_t *ret_len) {
	size_t len = 0;
	char extra;

	for (;;) {
		ssize_t n = len < max ? read(fd, buf + len, max - len) : read(fd, &extra, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (len == max)
			return -EFBIG;
		len += (size_t)n;
	}
	*ret_len = len;
	return 0;
}

bool pidfd_exited(int pidfd) {
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return poll(&pfd, 1, 0) != 0;
}

int proc_read_pid(const char *path, const char *key, pid_t *ret) {
	char line[128], format[32];
	FILE *f;
	int pid = -1;

	snprintf(format, sizeof(format), "%s: %%d", key);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, format, &pid) == 1)
			break;
	fclose(f);
	if (pid <= 0)
		return -ESRCH;
	*ret = pid;
	return 0;
}

int pidfd_get_pid(int pidfd, pid_t *ret) {
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	return proc_read_pid(path, "Pid", ret);
}

int pidfd_open_proc(int pidfd, int *ret_fd, pid_t *ret_pid) {
	char path[32];
	pid_t pid;
	int fd, r;

	r = pidfd_get_pid(pidfd, &pid);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/* Alive now: the number was still its own when the directory was opened. */
	if (pidfd_exited(pidfd)) {
		close(fd);
		return -ESRCH;
	}
	*ret_fd = fd;
	if (ret_pid)
		*ret_pid = pid;
	return 0;
}

int pidfd_open_file(int pidfd, const char *name, int *ret_fd) {
	_cleanup_(closep) int proc = -1;
	int fd, r;

	r = pidfd_open_proc(pidfd, &proc, NULL);
	if (r < 0)
		return r;
	fd = openat(proc, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	*ret_fd = fd;
	return 0;
}

int pidfd_start_time(int pidfd, uint64_t *ret) {
	_cleanup_(closep) int fd = -1;
	char buf[1024];
	const char *p;
	size_t len;
	int r;

	r = pidfd_open_file(pidfd, "stat", &fd);
	if (r < 0)
		return r;
	r = read_bounded(fd, buf, sizeof(buf) - 1, &len);
	if (r < 0)
		return r;
	buf[len] = '\0';
	/* The command name may hold anything: fields count from its closing parenthesis. */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EIO;
	}
	return sscanf(p + 1, "%" SCNu64, ret) == 1 ? 0 : -EIO;
}

int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack_bytes) {
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t thread;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (stack_bytes > 0)
		pthread_attr_setstacksize(&attr, stack_bytes);
	r = pthread_create(&thread, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -r;
}

bool pattern_names(const char *pattern, const char *path, const char *real) {
	glob_t g = { 0 };
	bool match = false;

	if (fnmatch(pattern, path, FNM_PATHNAME) == 0)
		return true;
	if (glob(pattern, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc && !match; i++) {
			_cleanup_(freep) char *resolved = realpath(g.gl_pathv[i], NULL);
			match = resolved && streq(resolved, real);
		}
	globfree(&g);
	return match;
}

uint64_t monotonic_usec(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int memfd_sized(const char *name, size_t size, unsigned int flags, int *ret_fd) {
	_cleanup_(closep) int fd = -1;

	fd = memfd_create(name, MFD_CLOEXEC | flags);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0)
		return -errno;
	*ret_fd = take_fd(&fd);
	return 0;
}

int memfd_reopen(int memfd, int access_mode, int *ret_fd) {
	char path[64];
	int fd, flags;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	fd = open(path, access_mode | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	*ret_fd = fd;
	return 0;
}
