/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "devnsctl-png.h"
#include "fb-state.h"
#include "util.h"

#define BUS_NAME "org.devns1"
#define BUS_PATH "/org/devns1"
#define BUS_INTERFACE "org.devns1.Manager"

/* XRGB8888 rows to an 8-bit RGB PNG. */
static int write_png(FILE *f, const uint8_t *frame, uint32_t width, uint32_t height, uint32_t stride) {
	_cleanup_(freep) uint8_t *row = malloc((size_t)width * 3);
	png_structp png;
	png_infop info;

	if (!row)
		return -ENOMEM;
	png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
	if (!png)
		return -ENOMEM;
	info = png_create_info_struct(png);
	if (!info || setjmp(png_jmpbuf(png))) {
		png_destroy_write_struct(&png, &info);
		return -EIO;
	}
	png_init_io(png, f);
	/* Unfiltered rows: screens are mostly flat colour, which zlib packs well on its own. */
	png_set_filter(png, 0, PNG_FILTER_NONE);
	png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint32_t y = 0; y < height; y++) {
		const uint8_t *src = frame + (size_t)y * stride;
		for (uint32_t x = 0; x < width; x++) {
			row[3 * x] = src[4 * x + 2];
			row[3 * x + 1] = src[4 * x + 1];
			row[3 * x + 2] = src[4 * x];
		}
		png_write_row(png, row);
	}
	png_write_end(png, NULL);
	png_destroy_write_struct(&png, &info);
	return 0;
}

/*
 * A new file beside path, made with O_EXCL and mode 0600 (mkstemp), for
 * the PNG; rename() later puts it at path. Whatever was at path, a symlink
 * planted there included, is replaced, never followed or written through.
 */
static int open_temp(const char *path, char **ret_tmp, FILE **ret) {
	_cleanup_(freep) char *tmp = NULL;
	const char *slash = strrchr(path, '/');
	int dir_len = slash ? (int)(slash - path + 1) : 0;
	FILE *f;
	int fd;

	if (asprintf(&tmp, "%.*s.%s.XXXXXX", dir_len, path, slash ? slash + 1 : path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		int r = -errno;
		close(fd);
		unlink(tmp);
		return r;
	}
	*ret_tmp = TAKE_PTR(tmp);
	*ret = f;
	return 0;
}

static int fail(const char *what, int r, const sd_bus_error *error) {
	if (error && sd_bus_error_is_set(error))
		fprintf(stderr, "devnsctl: screenshot: %s\n", error->message ? error->message : error->name);
	else
		fprintf(stderr, "devnsctl: screenshot: %s: %s\n", what, strerror(-r));
	return EXIT_FAILURE;
}

int cmd_screenshot(sd_bus *bus, const char *persona, const char *path) {
	_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
	_cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
	_cleanup_(freep) char *tmp = NULL;
	FILE *f = NULL;
	uint32_t width, height, stride;
	const char *format;
	struct stat st;
	void *frame;
	int fd, r;

	r = sd_bus_call_method(bus, BUS_NAME, BUS_PATH, BUS_INTERFACE, "Screenshot", &error, &reply, "s", persona);
	if (r < 0)
		return fail("", r, &error);
	r = sd_bus_message_read(reply, "huuus", &fd, &width, &height, &stride, &format);
	if (r < 0)
		return fail("bad reply", r, NULL);
	if (!streq(format, "XRGB8888") || width == 0 || height == 0 || width > FB_STATE_MAX_SIDE ||
	    height > FB_STATE_MAX_SIDE || stride < width * 4)
		return fail("unexpected frame format", -EPROTO, NULL);
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < (uint64_t)stride * height)
		return fail("short frame", -EPROTO, NULL);
	frame = mmap(NULL, (size_t)stride * height, PROT_READ, MAP_SHARED, fd, 0);
	if (frame == MAP_FAILED)
		return fail("cannot map the frame", -errno, NULL);
	r = open_temp(path, &tmp, &f);
	if (r < 0) {
		munmap(frame, (size_t)stride * height);
		return fail(path, r, NULL);
	}
	r = write_png(f, frame, width, height, stride);
	munmap(frame, (size_t)stride * height);
	if (r == 0 && (fflush(f) != 0 || fsync(fileno(f)) < 0))
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return fail(path, r, NULL);
	}
	return EXIT_SUCCESS;
}
