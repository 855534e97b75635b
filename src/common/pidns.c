/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "pidns.h"
#include "util.h"

static int pidns_from_fd(int fd, struct pidns *ret) {
	struct stat st;

	if (fstat(fd, &st) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	*ret = (struct pidns){ .fd = fd, .dev = st.st_dev, .ino = st.st_ino };
	return 0;
}

int pidns_of_pid(pid_t pid, struct pidns *ret) {
	char path[64];
	int fd;

	if (pid <= 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	return pidns_from_fd(fd, ret);
}

int pidns_of_pidfd(int pidfd, struct pidns *ret) {
	int fd, r;

	/* Through the process's own directory: ESRCH once it is gone, never another's namespace. */
	r = pidfd_open_file(pidfd, "ns/pid", &fd);
	if (r < 0)
		return r;
	return pidns_from_fd(fd, ret);
}

void pidns_close(struct pidns *ns) {
	closep(&ns->fd);
	*ns = PIDNS_NULL;
}

int pidns_find_ancestor(const struct pidns *ns, bool (*match)(void *userdata, const struct pidns *ns),
			void *userdata) {
	struct pidns cur;
	int depth, r = -ENOENT;

	if (ns->fd < 0)
		return -EBADF;
	if (match(userdata, ns))
		return 0;
	cur = *ns;
	for (depth = 1; depth <= PIDNS_MAX_DEPTH; depth++) {
		struct pidns parent;
		int fd = ioctl(cur.fd, NS_GET_PARENT);

		if (cur.fd != ns->fd)
			pidns_close(&cur);
		if (fd < 0)
			break; /* EPERM: the parent lies beyond what this process sees. */
		if (pidns_from_fd(fd, &parent) < 0)
			break;
		cur = parent;
		if (match(userdata, &cur)) {
			r = depth;
			break;
		}
	}
	if (cur.fd != ns->fd)
		pidns_close(&cur);
	return r;
}
