/* SPDX-License-Identifier: MIT */
/*
 * What moving and looking at one frame costs in the guest, for reading the
 * framebuffer figures: run in a QEMU guest as
 *   fb-copy [/dev/fb0]
 * Prints "name µs" lines, each the mean of 20 rounds over a 4000 KiB frame:
 * pwrite() into a memfd, memcpy() into its mapping, process_vm_readv() into
 * it, write() to the kernel's framebuffer (when given), and comparing a
 * frame row by row with memcmp() or hashing its rows with XXH64.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "bench-util.h"

#define FRAME (1280u * 800u * 4u)
#define LINE (1280u * 4u)
#define ROUNDS 20

int main(int argc, char *argv[]) {
	uint8_t *src = malloc(FRAME), *other = malloc(FRAME), *map;
	int memfd = memfd_create("fb-copy", MFD_CLOEXEC), fb = -1;
	uint64_t sink = 0;
	double t;

	if (!src || !other || memfd < 0 || ftruncate(memfd, FRAME) < 0)
		return die("setup");
	map = mmap(NULL, FRAME, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (map == MAP_FAILED)
		return die("mmap");
	memset(src, 1, FRAME);
	memset(other, 1, FRAME);
	memset(map, 0, FRAME);

	t = now_us();
	for (int i = 0; i < ROUNDS; i++)
		if (pwrite(memfd, src, FRAME, 0) != FRAME)
			return die("pwrite");
	printf("pwrite_memfd %.0f\n", (now_us() - t) / ROUNDS);

	t = now_us();
	for (int i = 0; i < ROUNDS; i++) {
		memcpy(map, src, FRAME);
		sink += map[i];
	}
	printf("memcpy_mapping %.0f\n", (now_us() - t) / ROUNDS);

	t = now_us();
	for (int i = 0; i < ROUNDS; i++) {
		struct iovec to = { map, FRAME }, from = { src, FRAME };
		if (process_vm_readv(getpid(), &to, 1, &from, 1, 0) != FRAME)
			return die("process_vm_readv");
	}
	printf("process_vm_readv_mapping %.0f\n", (now_us() - t) / ROUNDS);

	if (argc > 1 && (fb = open(argv[1], O_WRONLY)) >= 0) {
		t = now_us();
		for (int i = 0; i < ROUNDS; i++)
			if (lseek(fb, 0, SEEK_SET) < 0 || write(fb, src, FRAME) != FRAME)
				return die("write");
		printf("write_fb %.0f\n", (now_us() - t) / ROUNDS);
		close(fb);
	}

	t = now_us();
	for (int i = 0; i < ROUNDS; i++)
		for (size_t y = 0; y < FRAME; y += LINE)
			sink += memcmp(src + y, other + y, LINE) != 0;
	printf("memcmp_rows %.0f\n", (now_us() - t) / ROUNDS);

	t = now_us();
	for (int i = 0; i < ROUNDS; i++)
		for (size_t y = 0; y < FRAME; y += LINE)
			sink += XXH64(src + y, LINE, 0);
	printf("xxh64_rows %.0f\n", (now_us() - t) / ROUNDS);

	fprintf(stderr, "(%llu)\n", (unsigned long long)(sink & 1));
	return 0;
}
