/* SPDX-License-Identifier: MIT */
/*
 * A plain DRM client that draws with dumb buffers, the way a simple
 * compositor does, through libdrm: the same steps on the kernel's own
 * card and on a devns card0 (mapped through libdevns-fbmmap.so). Usage:
 *   drm-dumb-draw DEVICE COLOR [--color2 COLOR2] [--flips N] [--redraw] [--hold MS]
 * It opens DEVICE, asks VERSION, takes the first connected connector with
 * a mode and a CRTC for it, creates a dumb buffer of the mode's size,
 * adds it as an XRGB8888 framebuffer, maps it (MAP_DUMB, mmap()), fills
 * it with COLOR (0xRRGGBB), reads it back, and shows it (SETCRTC). With
 * --flips N it makes a second buffer filled with COLOR2 (COLOR's
 * complement unless given) and flips between the two N times, waiting
 * for each flip's event; with --redraw, each flip's buffer is drawn anew
 * first (a colour of its own a frame), as a player or compositor draws
 * every frame. --hold keeps the last frame shown MS
 * milliseconds longer. Each step prints one line:
 *   version NAME MAJOR.MINOR.PATCHLEVEL
 *   mode CONNECTOR_ID WIDTHxHEIGHT@REFRESH crtc CRTC_ID
 *   buffer I handle H pitch P size S fb FB_ID
 *   mapped I
 *   filled I 0xRRGGBB
 *   shown
 *   flip K fb FB_ID sequence SEQ
 *   flips N in USEC us
 *   done
 * Exit status 0, or 1 with "drm-dumb-draw: STEP: REASON" on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

#include <drm_fourcc.h>

#define FLIP_TIMEOUT_MS 5000

struct buffer {
	uint32_t handle, pitch, fb_id;
	uint64_t size;
	uint32_t *mem;
};

static int fail(const char *step, int err) {
	fprintf(stderr, "drm-dumb-draw: %s: %s\n", step, strerror(err));
	return 1;
}

static void sleep_ms(unsigned int ms) {
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A CRTC that can drive conn: its encoder's, or the first any of its encoders can use. */
static uint32_t pick_crtc(int fd, const drmModeRes *res, const drmModeConnector *conn) {
	drmModeEncoder *enc;
	uint32_t crtc = 0;

	if (conn->encoder_id && (enc = drmModeGetEncoder(fd, conn->encoder_id))) {
		crtc = enc->crtc_id;
		drmModeFreeEncoder(enc);
	}
	for (int i = 0; i < conn->count_encoders && !crtc; i++) {
		enc = drmModeGetEncoder(fd, conn->encoders[i]);
		if (!enc)
			continue;
		for (int c = 0; c < res->count_crtcs && !crtc; c++)
			if (enc->possible_crtcs & (1u << c))
				crtc = res->crtcs[c];
		drmModeFreeEncoder(enc);
	}
	return crtc;
}

/* The first connected connector with a mode, and a CRTC for it; -errno. */
static int pick_output(int fd, drmModeConnector **ret_conn, uint32_t *ret_crtc) {
	drmModeRes *res = drmModeGetResources(fd);
	int r = -ENOENT;

	if (!res)
		return -errno;
	for (int i = 0; i < res->count_connectors && r < 0; i++) {
		drmModeConnector *conn = drmModeGetConnector(fd, res->connectors[i]);

		if (!conn)
			continue;
		if (conn->connection == DRM_MODE_CONNECTED && conn->count_modes > 0 &&
		    (*ret_crtc = pick_crtc(fd, res, conn))) {
			*ret_conn = conn;
			r = 0;
		} else
			drmModeFreeConnector(conn);
	}
	drmModeFreeResources(res);
	return r;
}

/* Creates, adds and maps a buffer of w x h; -errno with *ret_step naming what failed. */
static int buffer_new(int fd, uint32_t w, uint32_t h, struct buffer *b, const char **ret_step) {
	struct drm_mode_create_dumb create = { .width = w, .height = h, .bpp = 32 };
	struct drm_mode_map_dumb map = { 0 };
	uint32_t handles[4] = { 0 }, pitches[4] = { 0 }, offsets[4] = { 0 };
	void *mem;

	*ret_step = "CREATE_DUMB";
	if (drmIoctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &create) < 0)
		return -errno;
	b->handle = create.handle;
	b->pitch = create.pitch;
	b->size = create.size;
	handles[0] = b->handle;
	pitches[0] = b->pitch;
	*ret_step = "ADDFB2";
	if (drmModeAddFB2(fd, w, h, DRM_FORMAT_XRGB8888, handles, pitches, offsets, &b->fb_id, 0) < 0)
		return -errno;
	*ret_step = "MAP_DUMB";
	map.handle = b->handle;
	if (drmIoctl(fd, DRM_IOCTL_MODE_MAP_DUMB, &map) < 0)
		return -errno;
	*ret_step = "mmap";
	mem = mmap(NULL, (size_t)b->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)map.offset);
	if (mem == MAP_FAILED)
		return -errno;
	b->mem = mem;
	return 0;
}

/* Fills the visible w x h of b with color and reads it back: whether it reads back. */
static bool buffer_fill(const struct buffer *b, uint32_t w, uint32_t h, uint32_t color) {
	bool same = true;

	for (uint32_t y = 0; y < h; y++) {
		uint32_t *row = b->mem + (size_t)y * (b->pitch / 4);

		for (uint32_t x = 0; x < w; x++)
			row[x] = color;
	}
	for (uint32_t y = 0; y < h && same; y++)
		for (uint32_t x = 0; x < w && same; x++)
			same = b->mem[(size_t)y * (b->pitch / 4) + x] == color;
	return same;
}

static void buffer_free(int fd, struct buffer *b) {
	struct drm_mode_destroy_dumb destroy = { .handle = b->handle };

	if (b->mem)
		munmap(b->mem, (size_t)b->size);
	if (b->fb_id)
		drmModeRmFB(fd, b->fb_id);
	if (b->handle)
		drmIoctl(fd, DRM_IOCTL_MODE_DESTROY_DUMB, &destroy);
	*b = (struct buffer){ 0 };
}

struct flip {
	bool done;
	unsigned int sequence;
};

static void on_flip(int fd, unsigned int sequence, unsigned int sec, unsigned int usec, void *data) {
	struct flip *f = data;

	f->done = true;
	f->sequence = sequence;
}

/* Flips crtc to fb_id and waits for the flip's event: its sequence, or -errno with *ret_step naming what failed. */
static long flip_to(int fd, uint32_t crtc, uint32_t fb_id, const char **ret_step) {
	drmEventContext ctx = { .version = 2, .page_flip_handler = on_flip };
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct flip f = { 0 };
	int r;

	*ret_step = "PAGE_FLIP";
	if (drmModePageFlip(fd, crtc, fb_id, DRM_MODE_PAGE_FLIP_EVENT, &f) < 0)
		return -errno;
	*ret_step = "flip event";
	while (!f.done) {
		r = poll(&pfd, 1, FLIP_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (drmHandleEvent(fd, &ctx) < 0)
			return -EIO;
	}
	return f.sequence;
}

int main(int argc, char *argv[]) {
	uint32_t colors[2], crtc = 0, w, h;
	unsigned int flips = 0, hold_ms = 0;
	bool redraw = false;
	struct timespec t0, t1;
	bool color2_given = false;
	struct buffer bufs[2] = { 0 };
	drmModeConnector *conn = NULL;
	drmModeModeInfo mode;
	drmVersion *ver;
	const char *step;
	int fd, r, n_bufs;

	if (argc < 3) {
		fprintf(stderr, "usage: drm-dumb-draw DEVICE COLOR [--color2 COLOR2] [--flips N] [--redraw] [--hold MS]\n");
		return 2;
	}
	colors[0] = (uint32_t)strtoul(argv[2], NULL, 16) & 0xffffff;
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--color2") == 0 && i + 1 < argc) {
			colors[1] = (uint32_t)strtoul(argv[++i], NULL, 16) & 0xffffff;
			color2_given = true;
		} else if (strcmp(argv[i], "--redraw") == 0)
			redraw = true;
		else if (strcmp(argv[i], "--flips") == 0 && i + 1 < argc)
			flips = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
			hold_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else {
			fprintf(stderr, "drm-dumb-draw: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (!color2_given)
		colors[1] = ~colors[0] & 0xffffff;

	fd = open(argv[1], O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "drm-dumb-draw: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	ver = drmGetVersion(fd);
	if (!ver)
		return fail("VERSION", errno);
	printf("version %s %d.%d.%d\n", ver->name, ver->version_major, ver->version_minor, ver->version_patchlevel);
	drmFreeVersion(ver);

	r = pick_output(fd, &conn, &crtc);
	if (r < 0)
		return fail(r == -ENOENT ? "no connected connector with a mode" : "GETRESOURCES", -r);
	mode = conn->modes[0];
	w = mode.hdisplay;
	h = mode.vdisplay;
	printf("mode %u %ux%u@%u crtc %u\n", conn->connector_id, w, h, mode.vrefresh, crtc);

	n_bufs = flips > 0 ? 2 : 1;
	for (int i = 0; i < n_bufs; i++) {
		r = buffer_new(fd, w, h, &bufs[i], &step);
		if (r < 0)
			return fail(step, -r);
		printf("buffer %d handle %u pitch %u size %llu fb %u\n", i, bufs[i].handle, bufs[i].pitch,
		       (unsigned long long)bufs[i].size, bufs[i].fb_id);
		printf("mapped %d\n", i);
		if (!buffer_fill(&bufs[i], w, h, colors[i])) {
			fprintf(stderr, "drm-dumb-draw: buffer %d does not read back what was drawn\n", i);
			return 1;
		}
		printf("filled %d 0x%06x\n", i, colors[i]);
	}
	if (drmModeSetCrtc(fd, crtc, bufs[0].fb_id, 0, 0, &conn->connector_id, 1, &mode) < 0)
		return fail("SETCRTC", errno);
	printf("shown\n");
	fflush(stdout);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned int k = 1; k <= flips; k++) {
		uint32_t fb_id = bufs[k % 2].fb_id;
		long seq;

		if (redraw && !buffer_fill(&bufs[k % 2], w, h, colors[k % 2] ^ (k & 0xff))) {
			fprintf(stderr, "drm-dumb-draw: buffer %u does not read back what was drawn\n", k % 2);
			return 1;
		}
		seq = flip_to(fd, crtc, fb_id, &step);
		if (seq < 0)
			return fail(step, (int)-seq);
		printf("flip %u fb %u sequence %ld\n", k, fb_id, seq);
		fflush(stdout);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (flips > 0)
		printf("flips %u in %lld us\n", flips,
		       (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
	fflush(stdout);
	sleep_ms(hold_ms);

	for (int i = 0; i < n_bufs; i++)
		buffer_free(fd, &bufs[i]);
	drmModeFreeConnector(conn);
	close(fd);
	printf("done\n");
	return 0;
}
