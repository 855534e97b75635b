/* SPDX-License-Identifier: MIT */
/* The ioctl table and the core ioctls: version, caps, master, magic. */
#include <stdio.h>

#include "drm-internal.h"
#include "util.h"

#define DRIVER_NAME "devns"
#define DRIVER_DATE "20240601"
#define DRIVER_DESC "devns persona display (dumb buffers, no GPU)"
#define DRIVER_MAJOR 1
#define DRIVER_MINOR 0

enum group { CORE, MODES, PROPS, BUFFERS, MODESET, ATOMIC };
#define MASTER 1u /* DRM_MASTER: only the current master may call it */

struct ioctl_def {
	unsigned int cmd;
	enum group group;
	unsigned int flags;
};

#define DEF(c, g, f) [_IOC_NR(c)] = { (c), (g), (f) }
static const struct ioctl_def ioctls[] = {
	DEF(DRM_IOCTL_VERSION, CORE, 0),
	DEF(DRM_IOCTL_GET_UNIQUE, CORE, 0),
	DEF(DRM_IOCTL_GET_MAGIC, CORE, 0),
	DEF(DRM_IOCTL_SET_VERSION, CORE, MASTER),
	DEF(DRM_IOCTL_GEM_CLOSE, BUFFERS, 0),
	DEF(DRM_IOCTL_GET_CAP, CORE, 0),
	DEF(DRM_IOCTL_SET_CLIENT_CAP, CORE, 0),
	DEF(DRM_IOCTL_AUTH_MAGIC, CORE, MASTER),
	DEF(DRM_IOCTL_SET_MASTER, CORE, 0),
	DEF(DRM_IOCTL_PRIME_HANDLE_TO_FD, BUFFERS, 0),
	DEF(DRM_IOCTL_PRIME_FD_TO_HANDLE, BUFFERS, 0),
	DEF(DRM_IOCTL_DROP_MASTER, CORE, 0),
	DEF(DRM_IOCTL_WAIT_VBLANK, MODESET, 0),
	DEF(DRM_IOCTL_MODE_GETRESOURCES, MODES, 0),
	DEF(DRM_IOCTL_MODE_GETCRTC, MODES, 0),
	DEF(DRM_IOCTL_MODE_SETCRTC, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_CURSOR, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_GETGAMMA, MODESET, 0),
	DEF(DRM_IOCTL_MODE_SETGAMMA, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_GETENCODER, MODES, 0),
	DEF(DRM_IOCTL_MODE_GETCONNECTOR, MODES, 0),
	DEF(DRM_IOCTL_MODE_GETPROPERTY, PROPS, 0),
	DEF(DRM_IOCTL_MODE_SETPROPERTY, PROPS, MASTER),
	DEF(DRM_IOCTL_MODE_GETPROPBLOB, PROPS, 0),
	DEF(DRM_IOCTL_MODE_GETFB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_ADDFB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_RMFB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_PAGE_FLIP, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_DIRTYFB, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_CREATE_DUMB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_MAP_DUMB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_DESTROY_DUMB, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_GETPLANERESOURCES, MODES, 0),
	DEF(DRM_IOCTL_MODE_GETPLANE, MODES, 0),
	DEF(DRM_IOCTL_MODE_SETPLANE, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_ADDFB2, BUFFERS, 0),
	DEF(DRM_IOCTL_MODE_OBJ_GETPROPERTIES, PROPS, 0),
	DEF(DRM_IOCTL_MODE_OBJ_SETPROPERTY, PROPS, MASTER),
	DEF(DRM_IOCTL_MODE_CURSOR2, MODESET, MASTER),
	DEF(DRM_IOCTL_MODE_ATOMIC, ATOMIC, MASTER),
	DEF(DRM_IOCTL_MODE_CREATEPROPBLOB, PROPS, 0),
	DEF(DRM_IOCTL_MODE_DESTROYPROPBLOB, PROPS, 0),
};

/* drm_copy_field(): at most *len bytes of value (no NUL), and *len becomes its length. */
static void copy_field(struct drm_io *io, __kernel_size_t *len, char *buf, const char *value) {
	size_t full = strlen(value), n = MIN(full, (size_t)*len);

	if (n > 0 && buf)
		memcpy(drm_io_out(io, (uintptr_t)buf, n), value, n);
	*len = full;
}

static int version(struct drm_call *c) {
	struct drm_version *v = c->arg;

	v->version_major = DRIVER_MAJOR;
	v->version_minor = DRIVER_MINOR;
	v->version_patchlevel = 0;
	/* Bounded by the strings, not by the caller's lengths. */
	copy_field(c->io, &v->name_len, v->name, DRIVER_NAME);
	copy_field(c->io, &v->date_len, v->date, DRIVER_DATE);
	copy_field(c->io, &v->desc_len, v->desc, DRIVER_DESC);
	return 0;
}

/*
 * The bus id, as the kernel keeps it with the master: empty until SET_VERSION
 * asks for interface 1.1 or later, so that drmOpen() by driver name takes the
 * node (it passes over a node whose bus id is set: one in use).
 */
static int get_unique(struct drm_call *c) {
	struct drm_unique *u = c->arg;
	char unique[80] = "";
	size_t len;

	if (c->n->unique_set)
		snprintf(unique, sizeof(unique), "devns:%s", c->n->name);
	len = strlen(unique);
	if (u->unique_len >= len && u->unique)
		memcpy(drm_io_out(c->io, (uintptr_t)u->unique, len), unique, len);
	u->unique_len = len;
	return 0;
}

static int get_cap(struct drm_call *c) {
	struct drm_get_cap *cap = c->arg;

	switch (cap->capability) {
	case DRM_CAP_DUMB_BUFFER:
	case DRM_CAP_VBLANK_HIGH_CRTC:
	case DRM_CAP_TIMESTAMP_MONOTONIC:
	case DRM_CAP_CRTC_IN_VBLANK_EVENT:
		cap->value = 1;
		return 0;
	case DRM_CAP_DUMB_PREFERRED_DEPTH:
		cap->value = 24;
		return 0;
	case DRM_CAP_DUMB_PREFER_SHADOW:
	case DRM_CAP_ASYNC_PAGE_FLIP:
	case DRM_CAP_ADDFB2_MODIFIERS:
	case DRM_CAP_PAGE_FLIP_TARGET:
	case DRM_CAP_SYNCOBJ:
	case DRM_CAP_SYNCOBJ_TIMELINE:
		cap->value = 0;
		return 0;
	case DRM_CAP_PRIME:
		cap->value = c->n->prime_caps;
		return 0;
	case DRM_CAP_CURSOR_WIDTH:
	case DRM_CAP_CURSOR_HEIGHT:
		/* The kernel's answer without a cursor plane. */
		cap->value = 64;
		return 0;
	default:
		return -EINVAL;
	}
}

static int set_client_cap(struct drm_call *c) {
	struct drm_set_client_cap *cap = c->arg;
	struct drm_file *f = c->f;

	switch (cap->capability) {
	case DRM_CLIENT_CAP_STEREO_3D:
		/* No stereo modes: refused rather than promised. */
		return cap->value == 0 ? 0 : -EINVAL;
	case DRM_CLIENT_CAP_UNIVERSAL_PLANES:
		if (cap->value > 1)
			return -EINVAL;
		f->universal_planes = cap->value;
		return 0;
	case DRM_CLIENT_CAP_ATOMIC:
		if (cap->value > 2)
			return -EINVAL;
		f->atomic = f->universal_planes = f->aspect_ratio = cap->value != 0;
		return 0;
	case DRM_CLIENT_CAP_ASPECT_RATIO:
		if (cap->value > 1)
			return -EINVAL;
		f->aspect_ratio = cap->value;
		return 0;
	case DRM_CLIENT_CAP_WRITEBACK_CONNECTORS:
		if (!f->atomic || cap->value > 1)
			return -EINVAL;
		f->writeback = cap->value;
		return 0;
	default:
		return -EINVAL;
	}
}

/* drm_master_check_perm(): the file's last master in the same process, or a privileged caller. */
static int master_perm(const struct drm_call *c) {
	if (c->f->was_master && c->f->pid == c->ctx->pid)
		return 0;
	return c->ctx->privileged ? 0 : -EACCES;
}

static int set_master(struct drm_call *c) {
	int r = master_perm(c);

	if (r < 0)
		return r;
	if (c->n->master == c->f)
		return 0;
	if (c->n->master)
		return -EBUSY;
	c->n->master = c->f;
	c->f->was_master = true;
	c->f->pid = c->ctx->pid;
	signal_emit(&c->n->events.master, c->f);
	return 0;
}

static int drop_master(struct drm_call *c) {
	int r = master_perm(c);

	if (r < 0)
		return r;
	if (c->n->master != c->f)
		return -EINVAL;
	c->n->master = NULL;
	signal_emit(&c->n->events.master, NULL);
	return 0;
}

static int get_magic(struct drm_call *c) {
	struct drm_auth *a = c->arg;

	if (!c->f->magic) {
		struct drm_file *o;
		bool used;

		do {
			c->n->next_magic = c->n->next_magic >= INT32_MAX ? 1 : c->n->next_magic + 1;
			used = false;
			LIST_FOREACH(o, &c->n->files, link)
				used |= o->magic == c->n->next_magic;
		} while (used);
		c->f->magic = c->n->next_magic;
	}
	a->magic = c->f->magic;
	return 0;
}

static int auth_magic(struct drm_call *c) {
	const struct drm_auth *a = c->arg;
	struct drm_file *o;

	LIST_FOREACH(o, &c->n->files, link)
		if (a->magic != 0 && o->magic == a->magic) {
			o->authenticated = true;
			o->magic = 0;
			return 0;
		}
	return -EINVAL;
}

static int set_version(struct drm_call *c) {
	struct drm_set_version *sv = c->arg;
	int r = 0;

	if (sv->drm_di_major != -1 && (sv->drm_di_major != 1 || sv->drm_di_minor < 0 || sv->drm_di_minor > 4))
		r = -EINVAL;
	else if (sv->drm_dd_major != -1 &&
		 (sv->drm_dd_major != DRIVER_MAJOR || sv->drm_dd_minor < 0 || sv->drm_dd_minor > DRIVER_MINOR))
		r = -EINVAL;
	if (r == 0 && sv->drm_di_major == 1 && sv->drm_di_minor >= 1)
		c->n->unique_set = true;
	sv->drm_di_major = 1;
	sv->drm_di_minor = 4;
	sv->drm_dd_major = DRIVER_MAJOR;
	sv->drm_dd_minor = DRIVER_MINOR;
	return r;
}

static int core(struct drm_call *c, unsigned int nr) {
	/* These two only name what they write: the rounds end when it is all there. */
	if (nr == _IOC_NR(DRM_IOCTL_VERSION))
		return version(c);
	if (nr == _IOC_NR(DRM_IOCTL_GET_UNIQUE))
		return get_unique(c);
	if (!drm_io_ready(c->io))
		return 0;
	switch (nr) {
	case _IOC_NR(DRM_IOCTL_GET_MAGIC):
		return get_magic(c);
	case _IOC_NR(DRM_IOCTL_AUTH_MAGIC):
		return auth_magic(c);
	case _IOC_NR(DRM_IOCTL_SET_VERSION):
		return set_version(c);
	case _IOC_NR(DRM_IOCTL_GET_CAP):
		return get_cap(c);
	case _IOC_NR(DRM_IOCTL_SET_CLIENT_CAP):
		return set_client_cap(c);
	case _IOC_NR(DRM_IOCTL_SET_MASTER):
		return set_master(c);
	case _IOC_NR(DRM_IOCTL_DROP_MASTER):
		return drop_master(c);
	default:
		return -EINVAL;
	}
}

static int dispatch(struct drm_call *c, const struct ioctl_def *def, unsigned int nr) {
	if ((def->flags & MASTER) && c->n->master != c->f)
		return -EACCES;
	switch (def->group) {
	case CORE:
		return core(c, nr);
	case MODES:
		return drm_ioctl_modes(c, nr);
	case PROPS:
		return drm_ioctl_props(c, nr);
	case BUFFERS:
		return drm_ioctl_buffers(c, nr);
	case MODESET:
		return drm_ioctl_modeset(c, nr);
	case ATOMIC:
		return drm_ioctl_atomic(c);
	}
	return -EINVAL;
}

void drm_ioctl(struct drm_file *f, const struct drm_ioctl_ctx *ctx, unsigned int cmd, void *arg, const void *in,
	       size_t in_size, size_t out_size, struct drm_ioctl_step *s) {
	unsigned int nr = _IOC_NR(cmd), usize = _IOC_SIZE(cmd);
	const struct ioctl_def *def = nr < ELEMENTSOF(ioctls) ? &ioctls[nr] : NULL;
	struct drm_io io = { .s = s, .in = in, .in_size = in_size, .out_size = out_size };
	struct drm_call c = { .f = f, .n = f->node, .ctx = ctx, .io = &io, .arg = s->arg };
	size_t in_len, out_len, drv_size;
	const void *hdr;
	bool wanted;
	int r;

	s->retry = s->wait = false;
	s->result = 0;
	s->wait_seq = 0;
	s->out_size = 0;
	s->n_in = s->n_out = 0;
	if (!def || !def->cmd) {
		s->result = -EINVAL;
		return;
	}
	/* As the kernel's drm_ioctl(): the caller's size, in and out as both the caller and the table say. */
	drv_size = _IOC_SIZE(def->cmd);
	in_len = (cmd & def->cmd & IOC_IN) ? usize : 0;
	out_len = (cmd & def->cmd & IOC_OUT) ? usize : 0;
	hdr = drm_io_in(&io, (uintptr_t)arg, in_len);
	/* The header comes back first: its place in the output is taken now, its bytes written last. */
	drm_io_out(&io, (uintptr_t)arg, out_len);
	if (io.missing) {
		s->retry = true;
		return;
	}
	memset(s->arg, 0, MAX(MAX(in_len, out_len), drv_size));
	if (in_len > 0)
		memcpy(s->arg, hdr, in_len);
	c.n->clock = MAX(c.n->clock, ctx->now_usec);
	wanted = drm_node_wants_vblank(c.n);
	r = dispatch(&c, def, nr);
	drm_node_vblank_wanted(c.n, wanted);
	if (r >= 0 && !io.overflow && !drm_io_ready(&io))
		return;
	s->retry = false;
	if (io.overflow && r >= 0)
		r = -EINVAL;
	s->result = r;
	if (r < 0) {
		s->wait = false;
		return;
	}
	memcpy(s->out, s->arg, out_len);
	s->out_size = io.out_off;
}

int drm_ioctl_direct(struct drm_file *f, const struct drm_ioctl_ctx *ctx, unsigned int cmd, void *arg,
		     struct drm_ioctl_step *s) {
	_cleanup_(freep) uint8_t *in = NULL;
	size_t in_size = 0, out_size = 0, n_out = 0;
	struct iovec out_iov[DRM_IOCTL_IOV_MAX];

	in = malloc(DRM_IOCTL_DATA_MAX);
	if (!in)
		return -ENOMEM;
	for (unsigned int round = 0; round < DRM_IOCTL_ROUNDS; round++) {
		drm_ioctl(f, ctx, cmd, arg, in, in_size, out_size, s);
		if (!s->retry) {
			size_t off = 0;

			if (s->result < 0)
				return s->result;
			for (size_t i = 0; i < n_out && off < s->out_size; i++) {
				size_t len = MIN(out_iov[i].iov_len, s->out_size - off);

				memcpy(out_iov[i].iov_base, s->out + off, len);
				off += len;
			}
			return s->result;
		}
		in_size = out_size = 0;
		for (size_t i = 0; i < s->n_in; i++) {
			if (!s->in_iov[i].iov_base)
				return -EFAULT;
			if (s->in_iov[i].iov_len > DRM_IOCTL_DATA_MAX - in_size)
				return -ENOMEM;
			memcpy(in + in_size, s->in_iov[i].iov_base, s->in_iov[i].iov_len);
			in_size += s->in_iov[i].iov_len;
		}
		n_out = s->n_out;
		for (size_t i = 0; i < n_out; i++) {
			if (!s->out_iov[i].iov_base)
				return -EFAULT;
			out_iov[i] = s->out_iov[i];
			out_size += out_iov[i].iov_len;
		}
		if (out_size > DRM_IOCTL_DATA_MAX)
			return -ENOMEM;
	}
	return -EIO;
}
