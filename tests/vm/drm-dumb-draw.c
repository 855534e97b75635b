/* SPDX-License-Identifier: MIT */
/*
 * A plain DRM client that draws with dumb buffers, the way a simple
 * compositor does, through libdrm: the same steps on the kernel's own
 * card and on a devns card0 (mapped through libdevns-fbmmap.so). Usage:
 *   drm-dumb-draw DEVICE COLOR [--color2 COLOR2] [--flips N] [--redraw] [--rows N] [--interval MS]
 *                 [--hold MS] [--dpms] [--plane-off]
 * It opens DEVICE, asks VERSION, takes the first connected connector with
 * a mode and a CRTC for it, creates a dumb buffer of the mode's size,
 * adds it as an XRGB8888 framebuffer, maps it (MAP_DUMB, mmap()), fills
 * it with COLOR (0xRRGGBB), reads it back, and shows it (SETCRTC). With
 * --flips N it makes a second buffer filled with COLOR2 (COLOR's
 * complement unless given) and flips between the two N times, waiting
 * for each flip's event; with --redraw, each flip's buffer is drawn anew
 * first (a colour of its own a frame), as a player or compositor draws
 * every frame. --rows N draws only the first N rows of each flip's buffer
 * anew (and implies --redraw), copied from a frame in memory and not read
 * back, as a compositor copies what changed; --interval MS waits MS
 * between flips, as a program drawing at its own pace does. --hold keeps
 * the last frame shown MS milliseconds longer. With --dpms it then reads
 * lines from stdin until it ends: "off" and "on" set the connector's DPMS
 * property, as a compositor turns its output off when idle. --plane-off
 * then takes the framebuffer off the CRTC's primary plane (SETPLANE with
 * none), leaving the CRTC on, before it ends. Each step prints one line:
 *   version NAME MAJOR.MINOR.PATCHLEVEL
 *   mode CONNECTOR_ID WIDTHxHEIGHT@REFRESH crtc CRTC_ID
 *   buffer I handle H pitch P size S fb FB_ID
 *   mapped I
 *   filled I 0xRRGGBB
 *   shown
 *   flip K fb FB_ID sequence SEQ
 *   flips N in USEC us
 *   waited for flips N in USEC us    (the PAGE_FLIP calls and the waits for their events alone)
 *   dpms off | dpms on
 *   plane PLANE_ID off
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

#include "drm-client.h"

static int fail(const char *step, int err) {
	fprintf(stderr, "drm-dumb-draw: %s: %s\n", step, strerror(err));
	return 1;
}

static void sleep_ms(unsigned int ms) {
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The primary plane that can be on crtc; 0 if none. */
static uint32_t primary_plane(int fd, uint32_t crtc) {
	drmModeRes *res = drmModeGetResources(fd);
	drmModePlaneRes *planes;
	uint32_t found = 0;
	int index = -1;

	if (!res || drmSetClientCap(fd, DRM_CLIENT_CAP_UNIVERSAL_PLANES, 1) < 0) {
		drmModeFreeResources(res);
		return 0;
	}
	for (int i = 0; i < res->count_crtcs; i++)
		if (res->crtcs[i] == crtc)
			index = i;
	drmModeFreeResources(res);
	planes = drmModeGetPlaneResources(fd);
	for (uint32_t i = 0; planes && index >= 0 && i < planes->count_planes && !found; i++) {
		drmModePlane *plane = drmModeGetPlane(fd, planes->planes[i]);
		drmModeObjectProperties *props =
			drmModeObjectGetProperties(fd, planes->planes[i], DRM_MODE_OBJECT_PLANE);

		for (uint32_t j = 0; plane && props && j < props->count_props; j++) {
			drmModePropertyRes *prop = drmModeGetProperty(fd, props->props[j]);

			if (prop && strcmp(prop->name, "type") == 0 && props->prop_values[j] == DRM_PLANE_TYPE_PRIMARY &&
			    (plane->possible_crtcs & (1u << index)))
				found = plane->plane_id;
			drmModeFreeProperty(prop);
		}
		drmModeFreeObjectProperties(props);
		drmModeFreePlane(plane);
	}
	drmModeFreePlaneResources(planes);
	return found;
}

int main(int argc, char *argv[]) {
	uint32_t colors[2], crtc = 0, w, h;
	unsigned int flips = 0, hold_ms = 0, rows = 0, interval_ms = 0;
	uint32_t *frame = NULL;
	bool redraw = false, dpms = false, plane_off = false;
	struct timespec t0, t1;
	long long flip_usec = 0;
	bool color2_given = false;
	struct buffer bufs[2] = { 0 };
	drmModeConnector *conn = NULL;
	drmModeModeInfo mode;
	drmVersion *ver;
	const char *step;
	char line[16];
	int fd, r, n_bufs;

	if (argc < 3) {
		fprintf(stderr, "usage: drm-dumb-draw DEVICE COLOR [--color2 COLOR2] [--flips N] [--redraw] [--rows N] "
			"[--interval MS] [--hold MS] [--dpms] [--plane-off]\n");
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
		else if (strcmp(argv[i], "--rows") == 0 && i + 1 < argc)
			rows = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc)
			interval_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--hold") == 0 && i + 1 < argc)
			hold_ms = (unsigned int)strtoul(argv[++i], NULL, 0);
		else if (strcmp(argv[i], "--dpms") == 0)
			dpms = true;
		else if (strcmp(argv[i], "--plane-off") == 0)
			plane_off = true;
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

	if (rows > 0) {
		redraw = true;
		rows = rows < h ? rows : h;
		frame = calloc((size_t)rows * w, sizeof(*frame));
		if (!frame)
			return fail("frame", ENOMEM);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned int k = 1; k <= flips; k++) {
		uint32_t fb_id = bufs[k % 2].fb_id;
		struct timespec f0, f1;
		long seq;

		if (frame) {
			for (uint32_t y = 0; y < rows; y++)
				memcpy(bufs[k % 2].mem + (size_t)y * (bufs[k % 2].pitch / 4), frame + (size_t)y * w,
				       (size_t)w * 4);
			frame[k % ((size_t)rows * w)] ^= 0xff;
		} else if (redraw && !buffer_fill(&bufs[k % 2], w, h, colors[k % 2] ^ (k & 0xff))) {
			fprintf(stderr, "drm-dumb-draw: buffer %u does not read back what was drawn\n", k % 2);
			return 1;
		}
		clock_gettime(CLOCK_MONOTONIC, &f0);
		seq = flip_to(fd, crtc, fb_id, &step);
		if (seq < 0)
			return fail(step, (int)-seq);
		clock_gettime(CLOCK_MONOTONIC, &f1);
		flip_usec += (f1.tv_sec - f0.tv_sec) * 1000000 + (f1.tv_nsec - f0.tv_nsec) / 1000;
		printf("flip %u fb %u sequence %ld\n", k, fb_id, seq);
		fflush(stdout);
		sleep_ms(interval_ms);
	}
	free(frame);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (flips > 0) {
		printf("flips %u in %lld us\n", flips,
		       (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
		printf("waited for flips %u in %lld us\n", flips, flip_usec);
	}
	fflush(stdout);
	sleep_ms(hold_ms);
	while (dpms && fgets(line, sizeof(line), stdin)) {
		bool off = strcmp(line, "off\n") == 0;

		if (!off && strcmp(line, "on\n") != 0)
			continue;
		r = set_dpms(fd, conn->connector_id, off ? DRM_MODE_DPMS_OFF : DRM_MODE_DPMS_ON);
		if (r < 0)
			return fail("DPMS", -r);
		printf("dpms %s\n", off ? "off" : "on");
		fflush(stdout);
	}
	if (plane_off) {
		uint32_t plane = primary_plane(fd, crtc);

		if (!plane || drmModeSetPlane(fd, plane, crtc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) < 0)
			return fail("SETPLANE", plane ? errno : ENOENT);
		printf("plane %u off\n", plane);
		fflush(stdout);
	}

	for (int i = 0; i < n_bufs; i++)
		buffer_free(fd, &bufs[i]);
	drmModeFreeConnector(conn);
	close(fd);
	printf("done\n");
	return 0;
}
