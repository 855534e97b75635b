/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define BITS_PER_LONG (sizeof(unsigned long) * 8)
#define BITS_TO_LONGS(n) (((n) + BITS_PER_LONG - 1) / BITS_PER_LONG)

static inline bool bit_test(const unsigned long *map, unsigned int bit) {
	return (map[bit / BITS_PER_LONG] >> (bit % BITS_PER_LONG)) & 1UL;
}

static inline void bit_assign(unsigned long *map, unsigned int bit, bool on) {
	unsigned long m = 1UL << (bit % BITS_PER_LONG);
	if (on)
		map[bit / BITS_PER_LONG] |= m;
	else
		map[bit / BITS_PER_LONG] &= ~m;
}

static inline void freep(void *p) {
	free(*(void **)p);
}

/* Frees p and returns NULL, for "x = mfree(x)". */
static inline void *mfree(void *p) {
	free(p);
	return NULL;
}

static inline void closep(int *fd) {
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
	/* The number may name another file soon: nothing closes it again through *fd. */
	*fd = -1;
}

/* Returns fd's value and sets *fd to -1: hands an fd over to a new owner. */
static inline int take_fd(int *fd) {
	int r = *fd;
	*fd = -1;
	return r;
}

/* Returns *p and sets it to NULL: hands a pointer over to a new owner. */
#define TAKE_PTR(p)                       \
	({                                \
		__typeof__(p) _tp_ = (p); \
		(p) = NULL;               \
		_tp_;                     \
	})

#define streq(a, b) (strcmp((a), (b)) == 0)

/* Reads fd to its end into buf: at most max bytes, -EFBIG when there is more. */
int read_bounded(int fd, char *buf, size_t max, size_t *ret_len);

/* The process behind pidfd has exited (or the fd is bad): what /proc said of it may be another's. */
bool pidfd_exited(int pidfd);

/* The pid the process behind pidfd has in this process's pid namespace; -ESRCH once it has exited. */
int pidfd_get_pid(int pidfd, pid_t *ret);
/* The pid on the first "KEY: N" line of a /proc file (fdinfo's Pid, status's Tgid): 0, -ESRCH without one, or -errno. */
int proc_read_pid(const char *path, const char *key, pid_t *ret);

/*
 * The /proc/PID directory of the process behind pidfd, as a directory fd
 * (ret_pid, if not NULL, gets its pid). The process is checked to be alive
 * after the directory was opened, so the directory is that process's, not
 * one that took its number later; lookups through the fd fail with ESRCH
 * once it exits. -ESRCH when it has exited.
 */
int pidfd_open_proc(int pidfd, int *ret_fd, pid_t *ret_pid);

/*
 * The file name (such as "ns/pid" or "stat") under the /proc/PID
 * directory of the process behind pidfd, opened read-only and
 * non-blocking through pidfd_open_proc(). -ESRCH when it has exited.
 */
int pidfd_open_file(int pidfd, const char *name, int *ret_fd);

/* The start time of the process behind pidfd, in clock ticks after boot (CLOCK_BOOTTIME), read through it. */
int pidfd_start_time(int pidfd, uint64_t *ret);

/*
 * Starts fn(arg) on a detached thread with every signal blocked there
 * (signals are the event loop's); stack_bytes 0: the default stack.
 * 0 or -errno.
 */
int thread_start_detached(void *(*fn)(void *), void *arg, size_t stack_bytes);

/* chown and chmod of the file an O_PATH fd names (fchmod() does not take one). */
int fd_set_owner(int fd, unsigned int uid, unsigned int gid, unsigned int mode);

/* A persona or device name: [A-Za-z0-9_-], 1 to NAME_MAX_LEN characters, not starting with '-'. */
#define NAME_MAX_LEN 32
bool name_is_valid(const char *name);

/* Parses yes/no, true/false, on/off, 1/0. Returns 0/1 or -EINVAL. */
int parse_boolean(const char *v);

/*
 * Whether a configured glob pattern names a device: path matches it, or a
 * path the pattern expands to resolves to real (a link such as by-id).
 */
bool pattern_names(const char *pattern, const char *path, const char *real);

/* CLOCK_MONOTONIC now, in microseconds. */
uint64_t monotonic_usec(void);

/* A memfd of size bytes (zeroed), close-on-exec, with flags (MFD_ALLOW_SEALING...). 0 or -errno. */
int memfd_sized(const char *name, size_t size, unsigned int flags, int *ret_fd);

/*
 * A new description of memfd's memory, opened through /proc for
 * access_mode (O_RDONLY, O_WRONLY, O_RDWR), never waiting: a lease on the
 * memory (its owner, root, may take one) makes the open fail with -EAGAIN
 * where a blocking one would sleep until the lease breaks.
 */
int memfd_reopen(int memfd, int access_mode, int *ret_fd);
