/* SPDX-License-Identifier: MIT */
/*
 * A hostile DRM client for the attack tests on a persona's card0. Usage:
 *
 *   drm-attack race DEVICE
 *     Threads call GETCONNECTOR, GETRESOURCES and a test-only ATOMIC on
 *     shared argument structs in a loop while two other threads keep
 *     changing their nested counts and pointers, so that what each CUSE
 *     round reads differs from the last. Prints "racing", then, once a line
 *     (or the end) comes on stdin, "calls N ok K" and "errno E COUNT" for
 *     each errno seen, and "done".
 *
 *   drm-attack block DEVICE FILES N
 *     Shows a buffer on the card, then on each of FILES open files starts N
 *     threads blocked in read() and N in a WAIT_VBLANK for a vblank hours
 *     away. Prints "started", then one line as each returns:
 *     "read F errno E" or "read F ok", "vblank F errno E" or "vblank F ok"
 *     (F: the file's index), and "done" when all have.
 *
 *   drm-attack scribble DEVICE COLOR COLOR2 FLIPS
 *     Shows a buffer of COLOR (SETCRTC), flips FLIPS times between it and
 *     one of COLOR2 with a DIRTYFB after each, sets an inverted gamma ramp
 *     and the identity again, turns the CRTC off and shows the COLOR2 buffer
 *     again. Prints "shown", "flip K ok" or "flip K errno E", one line each
 *     for the rest ("gamma ok", "off errno E"...), "done", then waits for a
 *     line on stdin and draws COLOR into both mappings: "refilled ok" (the
 *     mappings read back what was drawn) or "refilled differs", then
 *     "dirtyfb ...", "flip ...", "getresources ..." and "read ..." (without
 *     blocking), each "ok" or "errno E", and "end". It keeps its mappings
 *     until it exits.
 *
 * Exit status 0, or 1 with "drm-attack: STEP: REASON" on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <xf86drm.h>
#include <xf86drmMode.h>

#include "drm-client.h"

#define MAX_COUNT 64
#define MAX_ERRNO 256
#define MAX_FILES 8
#define MAX_THREADS 64

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...) {
	va_list ap;

	pthread_mutex_lock(&out_lock);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&out_lock);
}

static int fail(const char *step, int err) {
	fprintf(stderr, "drm-attack: %s: %s\n", step, strerror(err));
	return 1;
}

static void wait_for_line(void) {
	char line[64];

	(void)fgets(line, sizeof(line), stdin);
}

static int open_card(const char *path) {
	return open(path, O_RDWR | O_CLOEXEC);
}

/* --- race -------------------------------------------------------------------- */

static atomic_bool stop;
static atomic_ulong n_calls, n_ok, n_errno[MAX_ERRNO];
static int race_fd;
static uint32_t connector_id, crtc_id;

/* The arguments the callers pass and the mutators change under them. */
static struct drm_mode_get_connector conn_arg;
static struct drm_mode_card_res res_arg;
static struct drm_mode_atomic atomic_arg;
static struct drm_mode_modeinfo modes[MAX_COUNT];
static uint32_t ids[4][MAX_COUNT], encoders[MAX_COUNT], props[MAX_COUNT], objs[MAX_COUNT], counts[MAX_COUNT];
static uint64_t values[MAX_COUNT * MAX_COUNT];

static void count(int r) {
	atomic_fetch_add(&n_calls, 1);
	if (r == 0)
		atomic_fetch_add(&n_ok, 1);
	else
		atomic_fetch_add(&n_errno[errno < MAX_ERRNO ? errno : 0], 1);
}

/* One caller: an ioctl on its shared argument, over and over. */
struct racer {
	unsigned long cmd;
	void *arg;
};

static void *race_call(void *data) {
	const struct racer *r = data;

	while (!atomic_load(&stop)) {
		conn_arg.connector_id = connector_id;
		atomic_arg.flags = DRM_MODE_ATOMIC_TEST_ONLY;
		count(ioctl(race_fd, r->cmd, r->arg));
	}
	return NULL;
}

/* Changes every nested count and pointer the callers hand in, each its own way, round after round. */
static void *race_mutate(void *data) {
	volatile struct drm_mode_get_connector *c = &conn_arg;
	volatile struct drm_mode_card_res *r = &res_arg;
	volatile struct drm_mode_atomic *a = &atomic_arg;
	volatile uint32_t *n = counts;
	unsigned int seed = (unsigned int)(uintptr_t)data;

	while (!atomic_load(&stop)) {
		unsigned int k = (unsigned int)rand_r(&seed);

		c->count_modes = k % MAX_COUNT;
		c->count_props = (k >> 6) % MAX_COUNT;
		c->count_encoders = (k >> 12) % MAX_COUNT;
		c->modes_ptr = k & (1u << 20) ? 0 : (uintptr_t)modes;
		r->count_fbs = k % MAX_COUNT;
		r->count_crtcs = (k >> 3) % MAX_COUNT;
		r->count_connectors = (k >> 9) % MAX_COUNT;
		r->count_encoders = (k >> 15) % MAX_COUNT;
		a->count_objs = (k >> 4) % MAX_COUNT;
		n[k % MAX_COUNT] = (k >> 8) % MAX_COUNT;
		a->props_ptr = k & (1u << 21) ? 0 : (uintptr_t)props;
	}
	return NULL;
}

static int race(const char *path) {
	static struct racer callers[] = {
		{ DRM_IOCTL_MODE_GETCONNECTOR, &conn_arg },
		{ DRM_IOCTL_MODE_GETRESOURCES, &res_arg },
		{ DRM_IOCTL_MODE_ATOMIC, &atomic_arg },
	};
	pthread_t threads[5];
	size_t n = 0;
	drmModeRes *res;

	race_fd = open_card(path);
	if (race_fd < 0)
		return fail(path, errno);
	res = drmModeGetResources(race_fd);
	if (!res || res->count_connectors < 1 || res->count_crtcs < 1)
		return fail("GETRESOURCES", res ? ENOENT : errno);
	connector_id = res->connectors[0];
	crtc_id = res->crtcs[0];
	drmModeFreeResources(res);
	(void)drmSetClientCap(race_fd, DRM_CLIENT_CAP_ATOMIC, 1);

	conn_arg = (struct drm_mode_get_connector){
		.encoders_ptr = (uintptr_t)encoders,
		.modes_ptr = (uintptr_t)modes,
		.props_ptr = (uintptr_t)props,
		.prop_values_ptr = (uintptr_t)values,
	};
	res_arg = (struct drm_mode_card_res){
		.fb_id_ptr = (uintptr_t)ids[0],
		.crtc_id_ptr = (uintptr_t)ids[1],
		.connector_id_ptr = (uintptr_t)ids[2],
		.encoder_id_ptr = (uintptr_t)ids[3],
	};
	for (size_t i = 0; i < MAX_COUNT; i++) {
		objs[i] = crtc_id;
		props[i] = (uint32_t)i + 1;
	}
	atomic_arg = (struct drm_mode_atomic){
		.objs_ptr = (uintptr_t)objs,
		.count_props_ptr = (uintptr_t)counts,
		.props_ptr = (uintptr_t)props,
		.prop_values_ptr = (uintptr_t)values,
	};

	for (size_t i = 0; i < sizeof(callers) / sizeof(callers[0]); i++)
		if (pthread_create(&threads[n++], NULL, race_call, &callers[i]) != 0)
			return fail("pthread_create", EAGAIN);
	for (uintptr_t i = 1; i <= 2; i++)
		if (pthread_create(&threads[n++], NULL, race_mutate, (void *)i) != 0)
			return fail("pthread_create", EAGAIN);
	say("racing");
	wait_for_line();
	atomic_store(&stop, true);
	for (size_t i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	say("calls %lu ok %lu", atomic_load(&n_calls), atomic_load(&n_ok));
	for (int e = 0; e < MAX_ERRNO; e++)
		if (atomic_load(&n_errno[e]))
			say("errno %d %lu", e, atomic_load(&n_errno[e]));
	say("done");
	return 0;
}

/* --- an output to show on -------------------------------------------------------- */

struct output {
	int fd;
	drmModeConnector *conn;
	drmModeModeInfo mode;
	uint32_t crtc;
	struct buffer bufs[2];
};

/* Opens the card, makes n buffers (the first of color, the second of color2) and shows the first. */
static int output_show(struct output *o, const char *path, int n, uint32_t color, uint32_t color2) {
	const char *step;
	int r;

	o->fd = open_card(path);
	if (o->fd < 0)
		return fail(path, errno);
	r = pick_output(o->fd, &o->conn, &o->crtc);
	if (r < 0)
		return fail("no output", -r);
	o->mode = o->conn->modes[0];
	for (int i = 0; i < n; i++) {
		r = buffer_new(o->fd, o->mode.hdisplay, o->mode.vdisplay, &o->bufs[i], &step);
		if (r < 0)
			return fail(step, -r);
		if (!buffer_fill(&o->bufs[i], o->mode.hdisplay, o->mode.vdisplay, i ? color2 : color))
			return fail("the buffer does not read back", EIO);
	}
	if (drmModeSetCrtc(o->fd, o->crtc, o->bufs[0].fb_id, 0, 0, &o->conn->connector_id, 1, &o->mode) < 0)
		return fail("SETCRTC", errno);
	say("shown");
	return 0;
}

static const char *result(int r) {
	static __thread char buf[32];

	if (r >= 0)
		return "ok";
	snprintf(buf, sizeof(buf), "errno %d", errno);
	return buf;
}

/* --- blocked callers --------------------------------------------------------------- */

struct blocked {
	int fd, index;
	bool vblank;
};

static void *block_one(void *data) {
	struct blocked *b = data;
	char buf[4096];

	if (b->vblank) {
		union drm_wait_vblank vbl = { .request = { .type = _DRM_VBLANK_RELATIVE, .sequence = 1000000 } };

		say("vblank %d %s", b->index, result(ioctl(b->fd, DRM_IOCTL_WAIT_VBLANK, &vbl)));
	} else
		say("read %d %s", b->index, result(read(b->fd, buf, sizeof(buf)) < 0 ? -1 : 0));
	return NULL;
}

static int block(const char *path, int files, int n) {
	static struct blocked args[MAX_THREADS];
	pthread_t threads[MAX_THREADS];
	struct output o = { 0 };
	int fds[MAX_FILES], n_threads = 0, r;

	if (files < 1 || files > MAX_FILES || n < 1 || files * n * 2 > MAX_THREADS)
		return fail("block", EINVAL);
	r = output_show(&o, path, 1, 0x204060, 0);
	if (r)
		return r;
	fds[0] = o.fd;
	for (int f = 1; f < files; f++)
		if ((fds[f] = open_card(path)) < 0)
			return fail(path, errno);
	for (int f = 0; f < files; f++)
		for (int i = 0; i < 2 * n; i++) {
			args[n_threads] = (struct blocked){ .fd = fds[f], .index = f, .vblank = i % 2 };
			if (pthread_create(&threads[n_threads], NULL, block_one, &args[n_threads]) != 0)
				return fail("pthread_create", EAGAIN);
			n_threads++;
		}
	say("started");
	for (int i = 0; i < n_threads; i++)
		pthread_join(threads[i], NULL);
	say("done");
	return 0;
}

/* --- a persona drawing ------------------------------------------------------------ */

static int dirty(const struct output *o, int i) {
	drmModeClip clip = { 0, 0, o->mode.hdisplay, o->mode.vdisplay };

	return drmModeDirtyFB(o->fd, o->bufs[i].fb_id, &clip, 1);
}

static int scribble(const char *path, uint32_t color, uint32_t color2, unsigned int flips) {
	uint16_t ramp[3][256];
	struct output o = { 0 };
	const char *step;
	bool same = true;
	char buf[4096];
	int r;

	r = output_show(&o, path, 2, color, color2);
	if (r)
		return r;
	for (unsigned int k = 1; k <= flips; k++) {
		long seq = flip_to(o.fd, o.crtc, o.bufs[k % 2].fb_id, &step);

		if (seq < 0)
			say("flip %u errno %ld", k, -seq);
		else
			say("flip %u %s", k, result(dirty(&o, (int)(k % 2))));
	}
	for (int i = 0; i < 256; i++)
		ramp[0][i] = ramp[1][i] = ramp[2][i] = (uint16_t)((255 - i) * 257);
	say("gamma %s", result(drmModeCrtcSetGamma(o.fd, o.crtc, 256, ramp[0], ramp[1], ramp[2])));
	for (int i = 0; i < 256; i++)
		ramp[0][i] = ramp[1][i] = ramp[2][i] = (uint16_t)(i * 257);
	say("gamma back %s", result(drmModeCrtcSetGamma(o.fd, o.crtc, 256, ramp[0], ramp[1], ramp[2])));
	say("off %s", result(drmModeSetCrtc(o.fd, o.crtc, 0, 0, 0, NULL, 0, NULL)));
	say("on %s", result(drmModeSetCrtc(o.fd, o.crtc, o.bufs[1].fb_id, 0, 0, &o.conn->connector_id, 1, &o.mode)));
	say("dirtyfb %s", result(dirty(&o, 1)));
	say("done");

	wait_for_line();
	for (int i = 0; i < 2; i++)
		same &= buffer_fill(&o.bufs[i], o.mode.hdisplay, o.mode.vdisplay, color);
	say("refilled %s", same ? "ok" : "differs");
	say("dirtyfb %s", result(dirty(&o, 1)));
	say("flip %s", result(drmModePageFlip(o.fd, o.crtc, o.bufs[0].fb_id, 0, NULL)));
	drmModeRes *res = drmModeGetResources(o.fd);
	say("getresources %s", result(res ? 0 : -1));
	drmModeFreeResources(res);
	(void)fcntl(o.fd, F_SETFL, O_NONBLOCK);
	say("read %s", result(read(o.fd, buf, sizeof(buf)) < 0 ? -1 : 0));
	say("end");
	return 0;
}

int main(int argc, char *argv[]) {
	if (argc == 3 && strcmp(argv[1], "race") == 0)
		return race(argv[2]);
	if (argc == 5 && strcmp(argv[1], "block") == 0)
		return block(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 6 && strcmp(argv[1], "scribble") == 0)
		return scribble(argv[2], (uint32_t)strtoul(argv[3], NULL, 16), (uint32_t)strtoul(argv[4], NULL, 16),
				(unsigned int)strtoul(argv[5], NULL, 0));
	fprintf(stderr, "usage: drm-attack race DEVICE | block DEVICE FILES N | scribble DEVICE COLOR COLOR2 FLIPS\n");
	return 2;
}
