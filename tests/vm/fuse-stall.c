/* SPDX-License-Identifier: MIT */
/*
 * A FUSE file system with one file, /file (4096 bytes of zeros), whose
 * flush, read and poll never return to a process named COMM: it waits in
 * close(), in a fault on a mapping of the file, or in poll() (epoll_ctl()
 * adding the file, which holds the epoll's lock meanwhile), until this
 * server dies. Everyone else is answered (closing it on exec, say).
 *   fuse-stall COMM MOUNTPOINT -f
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <fuse.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *stall_comm;

/* Whether the thread that asks is of a process named stall_comm. */
static bool asked_by_comm(void) {
	char path[64], comm[32] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)fuse_get_context()->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	if (n > 0 && comm[n - 1] == '\n')
		comm[n - 1] = '\0';
	return n > 0 && strcmp(comm, stall_comm) == 0;
}

static int stall_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
	(void)fi;
	memset(st, 0, sizeof(*st));
	if (strcmp(path, "/") == 0) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	if (strcmp(path, "/file") == 0) {
		st->st_mode = S_IFREG | 0644;
		st->st_nlink = 1;
		st->st_size = 4096;
		return 0;
	}
	return -ENOENT;
}

static int stall_open(const char *path, struct fuse_file_info *fi) {
	(void)fi;
	return strcmp(path, "/file") == 0 ? 0 : -ENOENT;
}

static int stall_flush(const char *path, struct fuse_file_info *fi) {
	(void)path;
	(void)fi;
	while (asked_by_comm())
		pause();
	return 0;
}

static int stall_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
	(void)path;
	(void)fi;
	while (asked_by_comm())
		pause();
	if (off >= 4096)
		return 0;
	size = size < (size_t)(4096 - off) ? size : (size_t)(4096 - off);
	memset(buf, 0, size);
	return (int)size;
}

static int stall_poll(const char *path, struct fuse_file_info *fi, struct fuse_pollhandle *ph, unsigned *reventsp) {
	(void)path;
	(void)fi;
	while (asked_by_comm())
		pause();
	if (ph)
		fuse_pollhandle_destroy(ph);
	*reventsp = POLLIN;
	return 0;
}

static const struct fuse_operations ops = {
	.poll = stall_poll,
	.getattr = stall_getattr,
	.open = stall_open,
	.read = stall_read,
	.flush = stall_flush,
};

int main(int argc, char *argv[]) {
	if (argc < 3)
		return 2;
	stall_comm = argv[1];
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &ops, NULL);
}
