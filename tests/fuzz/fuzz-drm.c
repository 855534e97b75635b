/* SPDX-License-Identifier: MIT */
/*
 * A persona's card0 as a container reaches it: random DRM ioctls (with
 * CUSE's retries, arguments and the arrays they point at in the caller's
 * memory) from open files of one node that open and close, read()s of
 * their events, vblanks, blocking WAIT_VBLANKs answered or interrupted,
 * and map offsets looked up, on a node of a mode and budget the input
 * picks. What the display would do next is checked instead of done: every
 * scanout it is told of must lie inside its buffer's memory, every damage
 * rectangle inside the framebuffer; the memory in use stays within the
 * budget; events are whole, of the kinds there are, and never from the
 * future.
 */
#include <drm.h>
#include <drm_mode.h>

#include "drm-ioctl.h"
#include "drm-node.h"
#include "fuzz-cuse.h"

#define FILES 3
#define OPS_MAX 160
#define SIDE_MAX 320

struct rig {
	struct drm_node *node;
	struct drm_file *files[FILES];
	struct drm_ioctl_ctx ctx;
	uint64_t now;
	unsigned int waits; /* blocking WAIT_VBLANKs not answered yet */
	struct listener on_scanout;
	uint8_t user[FUZZ_USER_SIZE];
};

static struct rig rig;
static struct drm_ioctl_step step;

/* What the display class would present: all of it inside the buffer's memory. */
static void on_scanout(struct listener *l, void *data) {
	const struct drm_scanout_news *news = data;
	const struct drm_scanout *s = news->scanout;
	uint64_t last_row, end;

	(void)l;
	fuzz_assert(!s->active || s->enabled);
	if (!s->fb_id)
		return;
	fuzz_assert(s->active && s->memfd >= 0 && s->pitch >= s->fb_width * 4);
	fuzz_assert(s->src_x + s->mode.hdisplay <= s->fb_width && s->src_y + s->mode.vdisplay <= s->fb_height);
	last_row = (uint64_t)s->offset + (uint64_t)(s->src_y + s->mode.vdisplay - 1) * s->pitch;
	end = last_row + (uint64_t)(s->src_x + s->mode.hdisplay) * 4;
	fuzz_assert(end <= s->mem_size);
	for (size_t i = 0; i < news->n_damage; i++) {
		const struct drm_mode_rect *d = &news->damage[i];

		fuzz_assert(d->x1 >= 0 && d->y1 >= 0 && d->x1 < d->x2 && d->y1 < d->y2);
		fuzz_assert(d->x2 <= (int32_t)s->fb_width && d->y2 <= (int32_t)s->fb_height);
	}
}

struct call {
	struct drm_file *f;
	unsigned int cmd;
};

static void ioctl_step(void *userdata, void *arg, const void *in, size_t in_size, size_t out_size,
		       struct fuzz_step *ret) {
	struct call *c = userdata;

	drm_ioctl(c->f, &rig.ctx, c->cmd, arg, in, in_size, out_size, &step);
	*ret = FUZZ_STEP_OF(step);
}

static unsigned int pick_cmd(struct fuzz_input *in) {
	static const unsigned int known[] = {
		DRM_IOCTL_VERSION, DRM_IOCTL_GET_UNIQUE, DRM_IOCTL_GET_MAGIC, DRM_IOCTL_SET_VERSION,
		DRM_IOCTL_GEM_CLOSE, DRM_IOCTL_GET_CAP, DRM_IOCTL_SET_CLIENT_CAP, DRM_IOCTL_AUTH_MAGIC,
		DRM_IOCTL_SET_MASTER, DRM_IOCTL_DROP_MASTER, DRM_IOCTL_WAIT_VBLANK, DRM_IOCTL_MODE_GETRESOURCES,
		DRM_IOCTL_MODE_GETCRTC, DRM_IOCTL_MODE_SETCRTC, DRM_IOCTL_MODE_CURSOR, DRM_IOCTL_MODE_GETGAMMA,
		DRM_IOCTL_MODE_SETGAMMA, DRM_IOCTL_MODE_GETENCODER, DRM_IOCTL_MODE_GETCONNECTOR,
		DRM_IOCTL_MODE_GETPROPERTY, DRM_IOCTL_MODE_SETPROPERTY, DRM_IOCTL_MODE_GETPROPBLOB,
		DRM_IOCTL_MODE_GETFB, DRM_IOCTL_MODE_ADDFB, DRM_IOCTL_MODE_RMFB, DRM_IOCTL_MODE_PAGE_FLIP,
		DRM_IOCTL_MODE_DIRTYFB, DRM_IOCTL_MODE_CREATE_DUMB, DRM_IOCTL_MODE_MAP_DUMB,
		DRM_IOCTL_MODE_DESTROY_DUMB, DRM_IOCTL_MODE_GETPLANERESOURCES, DRM_IOCTL_MODE_GETPLANE,
		DRM_IOCTL_MODE_SETPLANE, DRM_IOCTL_MODE_ADDFB2, DRM_IOCTL_MODE_OBJ_GETPROPERTIES,
		DRM_IOCTL_MODE_OBJ_SETPROPERTY, DRM_IOCTL_MODE_CURSOR2, DRM_IOCTL_MODE_ATOMIC,
		DRM_IOCTL_MODE_CREATEPROPBLOB, DRM_IOCTL_MODE_DESTROYPROPBLOB,
	};
	uint8_t how = fuzz_u8(in);

	return how % 16 == 0 ? fuzz_u32(in) : known[how % ELEMENTSOF(known)];
}

static void file_ioctl(struct rig *r, struct drm_file *f, struct fuzz_input *in) {
	struct call c = { .f = f, .cmd = pick_cmd(in) };
	void *arg = fuzz_ioctl_arg(in, true);
	uint8_t flags = fuzz_u8(in);
	int k;

	rig.ctx.privileged = flags & 1;
	rig.ctx.pid = 100 + (flags >> 1) % 3;
	rig.ctx.now_usec = r->now;
	k = fuzz_cuse_ioctl(r->user, arg, ioctl_step, &c);
	if (k >= 0 && step.wait && !step.retry) {
		/* A blocking WAIT_VBLANK: answered at its vblank, or interrupted (below). */
		fuzz_assert(step.wait_seq > drm_node_sequence(r->node));
		r->waits++;
	}
	fuzz_assert(drm_node_memory_used(r->node) <= drm_node_budget(r->node));
}

static void file_read(struct rig *r, struct drm_file *f, size_t count) {
	static uint8_t buf[8192];
	ssize_t n = drm_file_read(f, buf, count);

	(void)r;
	if (n == -EAGAIN) {
		fuzz_assert(!drm_file_readable(f));
		return;
	}
	fuzz_assert(n >= 0 && (size_t)n <= count && n % (ssize_t)sizeof(struct drm_event_vblank) == 0);
	for (ssize_t off = 0; off < n; off += (ssize_t)sizeof(struct drm_event_vblank)) {
		struct drm_event_vblank ev;

		memcpy(&ev, buf + off, sizeof(ev));
		fuzz_assert(ev.base.length == sizeof(ev));
		fuzz_assert(ev.base.type == DRM_EVENT_VBLANK || ev.base.type == DRM_EVENT_FLIP_COMPLETE);
		fuzz_assert(ev.sequence <= (uint32_t)drm_node_sequence(r->node));
		fuzz_assert(ev.crtc_id == DRM_NODE_CRTC_ID);
	}
}

static void end_waits(struct rig *r, bool interrupt) {
	union drm_wait_vblank reply = { 0 };

	while (r->waits > 0) {
		drm_node_wait_end(r->node, interrupt ? NULL : &reply);
		r->waits--;
	}
}

static void other_op(struct rig *r, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	uint64_t seq = drm_node_sequence(r->node);
	struct drm_scanout s;
	int fd;
	uint64_t size;

	switch (op % 5) {
	case 0:
		r->now += fuzz_u16(in);
		drm_node_vblank(r->node, r->now);
		fuzz_assert(drm_node_sequence(r->node) == seq || drm_node_sequence(r->node) == seq + 1);
		break;
	case 1:
		end_waits(r, op & 8);
		break;
	case 2: {
		/* The preload redeeming an offset: the caller's memory holds what MAP_DUMB answered. */
		uint64_t off;

		memcpy(&off, r->user + fuzz_u16(in) % (FUZZ_USER_SIZE - 8), 8);
		if (drm_node_map_lookup(r->node, (op & 8) ? r->files[0] : NULL, off, &fd, &size) == 0)
			fuzz_assert(fd >= 0 && size > 0 && size % 4096 == 0);
		break;
	}
	case 3:
		drm_node_scanout(r->node, &s);
		fuzz_assert(!s.fb_id || s.memfd >= 0);
		break;
	default:
		r->now += fuzz_u32(in);
		break;
	}
}

static void one_op(struct rig *r, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	size_t i = fuzz_u8(in) % FILES;
	struct drm_file **f = &r->files[i];

	if (op % 6 < 2 && !*f)
		return;
	switch (op % 6) {
	case 0:
		file_ioctl(r, *f, in);
		break;
	case 1:
		file_read(r, *f, fuzz_u16(in) % 8192);
		break;
	case 2:
		if (*f) {
			drm_file_close(*f);
			*f = NULL;
		} else {
			fuzz_assert(drm_file_open(r->node, 100 + (pid_t)i, f) == 0);
		}
		break;
	case 3: {
		size_t off = fuzz_u16(in) % FUZZ_USER_SIZE;

		fuzz_bytes(in, r->user + off, fuzz_len(in, FUZZ_USER_SIZE - off));
		break;
	}
	default:
		other_op(r, in);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct fuzz_input in = { data, size };
	struct rig *r = &rig;
	struct drm_node_config cfg = { .name = "fuzz" };

	memset(r, 0, sizeof(*r));
	cfg.mode.width = 1 + fuzz_u16(&in) % SIDE_MAX;
	cfg.mode.height = 1 + fuzz_u16(&in) % SIDE_MAX;
	cfg.mode.refresh_hz = fuzz_u8(&in);
	cfg.budget = fuzz_u8(&in) * 65536u;
	if (drm_node_new(&r->node, &cfg) < 0)
		return 0;
	r->on_scanout.notify = on_scanout;
	signal_add(&drm_node_events(r->node)->scanout, &r->on_scanout);
	r->now = 1000000;
	for (size_t i = 0; i < 2; i++)
		fuzz_assert(drm_file_open(r->node, 100 + (pid_t)i, &r->files[i]) == 0);

	for (unsigned int i = 0; i < OPS_MAX && !fuzz_done(&in); i++)
		one_op(r, &in);

	end_waits(r, true);
	listener_remove(&r->on_scanout);
	drm_node_free(r->node);
	return 0;
}
