/* SPDX-License-Identifier: MIT */
/*
 * A mapped fbdev program driven step by step, for the dirty tracking tests:
 *   fbanim DEVICE STEP...      (DEVICE "-": none, for the steps that draw nothing)
 *   fill RGB          every visible pixel becomes RGB (hex), through the mapping
 *   anim N FPS        N frames at FPS: frame i fills rows [0, 64) with anim_color(i)
 *   read FILE         read() FILE into the mapping from the visible frame's start
 *   forkfill RGB      a forked child fills the frame with RGB through the inherited mapping
 *   holdlock FILE     holds the program's memory-map lock: one thread reads a mapping of FILE
 *                     (a fuse-stall file that never answers) through /proc/self/mem, which keeps
 *                     the lock while it waits, and another waits to map memory behind it, so
 *                     that nobody else gets the lock either; the main thread goes on
 *   fdprep SOCKET N   makes a userfaultfd of this program and a message of 16 zero bytes carrying N
 *                     descriptors, the userfaultfd last (the others: a pipe's end), for SOCKET: a
 *                     unix socket's path (stream, else seqpacket) or fd:NUM, a socket inherited
 *   fdsend            sends that message and closes the userfaultfd: the message holds the last
 *                     reference once the reader has not let go of it first (the tests hold devnsd
 *                     still meanwhile). Prepared beforehand, the program's memory locked in, so
 *                     that no fault waits for a lock held
 *   sleep MS          sleep MS milliseconds
 *   wait              wait for a line on stdin
 * No pan, no vsync wait: the frame changes only through the mapping.
 * Each step prints "STEP ok" (read: "read ok BYTES" or "read errno N";
 * anim: "anim ok disturbed FRAMES longest_us US") when done.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <linux/fb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ANIM_ROWS 64

static uint32_t anim_color(unsigned int i) {
	return (i & 0xffu) << 16 | ((i * 7u) & 0xffu) << 8 | 0x80u;
}

static void fill_rows(uint8_t *frame, const struct fb_fix_screeninfo *fix, const struct fb_var_screeninfo *var,
		      uint32_t rows, uint32_t rgb) {
	for (uint32_t y = 0; y < rows && y < var->yres; y++) {
		uint32_t *row = (uint32_t *)(void *)(frame + (size_t)y * fix->line_length);
		for (uint32_t x = 0; x < var->xres; x++)
			row[x] = rgb;
	}
}

static uint64_t now_us(void) {
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/*
 * N frames, one every period_us: a frame that comes late is drawn at once
 * and the ones after it keep their spacing from it (no catching up, so
 * two frames never come together). Prints how many frames were disturbed
 * (started more than a quarter period late, or took longer than that to
 * draw: a display may show such a frame together with the next, or torn),
 * and the longest drawing.
 */
static void anim(uint8_t *frame, const struct fb_fix_screeninfo *fix, const struct fb_var_screeninfo *var,
		 unsigned int n, uint64_t period_us) {
	uint64_t next = now_us(), longest = 0;
	unsigned int disturbed = 0;

	for (unsigned int f = 0; f < n; f++) {
		uint64_t start = now_us(), took;

		bool late = start > next + period_us / 4;

		if (late)
			next = start;
		fill_rows(frame, fix, var, ANIM_ROWS, anim_color(f));
		took = now_us() - start;
		disturbed += late || took > period_us / 4;
		longest = took > longest ? took : longest;
		next += period_us;
		while (now_us() < next)
			usleep((useconds_t)(next - now_us()));
	}
	printf("anim ok disturbed %u longest_us %llu\n", disturbed, (unsigned long long)longest);
}

struct holder {
	int go_reader[2], go_mapper[2];
	int mem;
	void *addr;
};

/* Waits in a fault on holder->addr with the memory-map lock held (/proc/self/mem does not let it go). */
static void *hold_reader(void *arg) {
	struct holder *h = arg;
	char c;

	if (read(h->go_reader[0], &c, 1) == 1)
		(void)!pread(h->mem, &c, 1, (off_t)(uintptr_t)h->addr);
	return NULL;
}

/* Waits to map memory: a writer waiting for the lock keeps every other reader out. */
static void *hold_mapper(void *arg) {
	struct holder *h = arg;
	char c;

	if (read(h->go_mapper[0], &c, 1) == 1)
		syscall(SYS_mmap, NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return NULL;
}

static int hold_lock(const char *path) {
	static struct holder h;
	pthread_t reader, mapper;
	int file;

	file = open(path, O_RDONLY);
	h.mem = open("/proc/self/mem", O_RDONLY);
	if (file < 0 || h.mem < 0 || pipe(h.go_reader) < 0 || pipe(h.go_mapper) < 0)
		return -1;
	/* Not through the preload library's mmap. */
	h.addr = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ, MAP_SHARED, file, 0);
	if (h.addr == MAP_FAILED)
		return -1;
	/* Both threads exist before the lock is held: making one maps its stack. */
	if (pthread_create(&reader, NULL, hold_reader, &h) != 0 || pthread_create(&mapper, NULL, hold_mapper, &h) != 0)
		return -1;
	if (write(h.go_reader[1], "r", 1) != 1)
		return -1;
	usleep(300000);
	if (write(h.go_mapper[1], "m", 1) != 1)
		return -1;
	usleep(300000);
	return 0;
}

/* A message ready to go: everything the kernel reads of it is in memory already. */
static struct {
	int sock, ufd;
	uint8_t data[16];
	struct iovec iov;
	struct msghdr msg;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} control;
} sending = { .sock = -1, .ufd = -1 };

static int connect_to(const char *where) {
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int types[] = { SOCK_STREAM, SOCK_SEQPACKET };

	if (strncmp(where, "fd:", 3) == 0)
		return (int)strtol(where + 3, NULL, 10);
	if (strlen(where) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, where);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		if (errno != EPROTOTYPE)
			return -1;
	}
	return -1;
}

/* Touches the stack below the caller's frame, so that mlockall() keeps it. */
static void __attribute__((noinline)) stack_touch(void) {
	volatile char pad[256 * 1024];

	for (size_t i = 0; i < sizeof(pad); i += 1024)
		pad[i] = 0;
}

static int send_prepare(const char *where, unsigned int n) {
	int fds[8], pipefd[2];
	struct cmsghdr *cmsg;

	stack_touch();

	if (n < 1 || n > 8 || pipe(pipefd) < 0)
		return errno = EINVAL, -1;
	sending.sock = connect_to(where);
	sending.ufd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (sending.sock < 0 || sending.ufd < 0)
		return -1;
	for (unsigned int i = 0; i + 1 < n; i++)
		fds[i] = pipefd[0];
	fds[n - 1] = sending.ufd;
	memset(sending.data, 0, sizeof(sending.data));
	sending.iov = (struct iovec){ .iov_base = sending.data, .iov_len = sizeof(sending.data) };
	memset(&sending.control, 0, sizeof(sending.control));
	sending.msg = (struct msghdr){ .msg_iov = &sending.iov, .msg_iovlen = 1, .msg_control = sending.control.buf,
				       .msg_controllen = CMSG_SPACE(n * sizeof(int)) };
	cmsg = CMSG_FIRSTHDR(&sending.msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(cmsg), fds, n * sizeof(int));
	/*
	 * Everything mapped now, the code of the steps to come among it, is in
	 * memory and stays: once the lock is held, any fault of this thread
	 * would wait for it.
	 */
	if (mlockall(MCL_CURRENT) < 0)
		return -1;
	return 0;
}

static int send_now(void) {
	if (sendmsg(sending.sock, &sending.msg, MSG_NOSIGNAL) != (ssize_t)sizeof(sending.data))
		return -1;
	close(sending.ufd);
	sending.ufd = -1;
	return 0;
}

int main(int argc, char *argv[]) {
	struct fb_var_screeninfo var = { 0 };
	struct fb_fix_screeninfo fix = { 0 };
	uint8_t *mem = NULL, *frame = NULL;
	int fd = -1;

	if (argc < 2) {
		fprintf(stderr, "usage: fbanim DEVICE|- STEP...\n");
		return 2;
	}
	if (strcmp(argv[1], "-") != 0) {
		fd = open(argv[1], O_RDWR);
		if (fd < 0 || ioctl(fd, FBIOGET_VSCREENINFO, &var) < 0 || ioctl(fd, FBIOGET_FSCREENINFO, &fix) < 0) {
			perror(argv[1]);
			return 1;
		}
		mem = mmap(NULL, fix.smem_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (mem == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		frame = mem + (size_t)var.yoffset * fix.line_length;
	}
	for (int i = 2; i < argc; i++) {
		const char *step = argv[i];

		if (!frame && (strcmp(step, "fill") == 0 || strcmp(step, "anim") == 0 || strcmp(step, "read") == 0 ||
			       strcmp(step, "forkfill") == 0)) {
			fprintf(stderr, "fbanim: %s needs a DEVICE\n", step);
			return 2;
		}
		if (strcmp(step, "fill") == 0 && i + 1 < argc) {
			fill_rows(frame, &fix, &var, var.yres, (uint32_t)strtoul(argv[++i], NULL, 16));
			printf("fill ok\n");
		} else if (strcmp(step, "anim") == 0 && i + 2 < argc) {
			unsigned int n = (unsigned int)strtoul(argv[++i], NULL, 0);
			unsigned long fps = strtoul(argv[++i], NULL, 0);

			anim(frame, &fix, &var, n, 1000000u / (fps ? fps : 1));
		} else if (strcmp(step, "read") == 0 && i + 1 < argc) {
			int file = open(argv[++i], O_RDONLY);
			ssize_t n = file < 0 ? -1 : read(file, frame, (size_t)var.yres * fix.line_length);

			if (n < 0)
				printf("read errno %d\n", errno);
			else
				printf("read ok %zd\n", n);
			if (file >= 0)
				close(file);
		} else if (strcmp(step, "forkfill") == 0 && i + 1 < argc) {
			uint32_t rgb = (uint32_t)strtoul(argv[++i], NULL, 16);
			pid_t child = fork();
			int status = 1;

			if (child == 0) {
				fill_rows(frame, &fix, &var, var.yres, rgb);
				_exit(0);
			}
			if (child < 0 || waitpid(child, &status, 0) < 0 || status != 0)
				return 1;
			printf("forkfill ok\n");
		} else if (strcmp(step, "holdlock") == 0 && i + 1 < argc) {
			if (hold_lock(argv[++i]) < 0) {
				perror("holdlock");
				return 1;
			}
			printf("holdlock ok\n");
		} else if (strcmp(step, "fdprep") == 0 && i + 2 < argc) {
			const char *where = argv[++i];

			if (send_prepare(where, (unsigned int)strtoul(argv[++i], NULL, 0)) < 0) {
				perror("fdprep");
				return 1;
			}
			printf("fdprep ok\n");
		} else if (strcmp(step, "fdsend") == 0) {
			if (send_now() < 0) {
				perror("fdsend");
				return 1;
			}
			printf("fdsend ok\n");
		} else if (strcmp(step, "sleep") == 0 && i + 1 < argc) {
			usleep((useconds_t)strtoul(argv[++i], NULL, 0) * 1000u);
			printf("sleep ok\n");
		} else if (strcmp(step, "wait") == 0) {
			char line[64];

			if (!fgets(line, sizeof(line), stdin))
				return 1;
			printf("wait ok\n");
		} else {
			fprintf(stderr, "fbanim: bad step %s\n", step);
			return 2;
		}
		fflush(stdout);
	}
	if (mem)
		munmap(mem, fix.smem_len);
	if (fd >= 0)
		close(fd);
	return 0;
}
