/* SPDX-License-Identifier: MIT */
#pragma once

/* What the files of src/drm/ share: the node's objects and state, and the ioctl rounds. */
#include <drm.h>
#include <drm_fourcc.h>
#include <drm_mode.h>
#include <sys/queue.h>

#include "drm-ioctl.h"
#include "drm-node.h"

/* Property ids: 1 to DRM_PROP_COUNT - 1, the same on every node. */
enum drm_prop_id {
	DRM_PROP_EDID = 1,
	DRM_PROP_DPMS,
	DRM_PROP_LINK_STATUS,
	DRM_PROP_NON_DESKTOP,
	DRM_PROP_CRTC_ID, /* connectors' and planes' */
	DRM_PROP_ACTIVE,
	DRM_PROP_MODE_ID,
	DRM_PROP_TYPE,
	DRM_PROP_FB_ID,
	DRM_PROP_CRTC_X,
	DRM_PROP_CRTC_Y,
	DRM_PROP_CRTC_W,
	DRM_PROP_CRTC_H,
	DRM_PROP_SRC_X,
	DRM_PROP_SRC_Y,
	DRM_PROP_SRC_W,
	DRM_PROP_SRC_H,
	DRM_PROP_FB_DAMAGE_CLIPS,
	DRM_PROP_COUNT,
};

/* A dumb buffer (a GEM object): alive while a handle or a framebuffer holds it. */
struct drm_buffer {
	unsigned int refs;
	int fd;
	uint64_t size;
	uint32_t width, height, bpp, pitch;
	uint64_t map_offset; /* MAP_DUMB's answer */
	uint64_t serial;
	/* PRIME: the dma-buf of the memory, -1 until exported. */
	int dmabuf;
	/* In the node's held list: no handle or framebuffer left, a program still holds the dma-buf. */
	bool held;
	LIST_ENTRY(drm_buffer) link;
};

/* A framebuffer: its file's until RMFB or close, which take it off the plane first. */
struct drm_fb {
	uint32_t id;
	struct drm_file *owner;
	struct drm_buffer *buf;
	uint32_t width, height, format, pitch, offset;
	LIST_ENTRY(drm_fb) link;
};

/* A property blob: its file's until DESTROYPROPBLOB or close; the CRTC's mode holds one too. */
struct drm_blob {
	uint32_t id;
	unsigned int refs;
	struct drm_file *owner;
	size_t len;
	LIST_ENTRY(drm_blob) link;
	uint8_t data[];
};

/* The mode objects' state, as atomic properties describe it. */
struct drm_kms_state {
	/* CRTC: enabled when it has a mode. */
	bool active;
	struct drm_blob *mode_blob;
	struct drm_mode_modeinfo mode;
	/* Primary plane. */
	struct drm_fb *fb;
	bool plane_on_crtc;
	int32_t crtc_x, crtc_y;
	uint32_t crtc_w, crtc_h;
	uint32_t src_x, src_y, src_w, src_h; /* 16.16 */
	/* Connector. */
	bool conn_on_crtc;
	uint32_t dpms;
};

/* An event asked for and not yet due: a flip's (at the next vblank) or a vblank's (at seq). */
struct drm_pending {
	struct drm_file *file;
	uint32_t type; /* DRM_EVENT_FLIP_COMPLETE, DRM_EVENT_VBLANK */
	bool flip;     /* completes at the next vblank; otherwise at target */
	uint64_t target;
	uint64_t user_data;
	TAILQ_ENTRY(drm_pending) link;
};

#define DRM_FILE_EVENTS_MAX (DRM_FILE_EVENT_SPACE / sizeof(struct drm_event_vblank))

struct drm_file {
	struct drm_node *node;
	LIST_ENTRY(drm_file) link;
	pid_t pid;
	bool was_master, authenticated;
	uint32_t magic;
	bool universal_planes, atomic, aspect_ratio, writeback;
	struct drm_buffer *handles[DRM_FILE_MAX_HANDLES]; /* handle h is handles[h - 1] */
	unsigned int n_fbs, n_blobs;
	/* Bytes free for events: reserved when asked for, given back when read. */
	size_t event_space;
	struct drm_event_vblank queue[DRM_FILE_EVENTS_MAX];
	size_t q_head, q_len;
};

struct drm_node {
	struct drm_node_events events;
	char name[64];
	struct drm_mode_modeinfo modes[DRM_NODE_MAX_MODES];
	size_t n_modes;
	uint32_t width_mm, height_mm;
	uint64_t prime_caps;
	/* The CRTC's gamma table (SETGAMMA; kept, the frame is shown as drawn). */
	uint16_t gamma[3][DRM_NODE_GAMMA_SIZE];
	/* SET_VERSION asked for interface 1.1 or later: GET_UNIQUE names the bus id (the kernel's master unique). */
	bool unique_set;
	uint64_t budget, mem_used;
	const struct drm_memory_ops *memory;
	void *memory_userdata;
	struct drm_blob *edid;

	LIST_HEAD(, drm_file) files;
	unsigned int n_files;
	struct drm_file *master;
	uint32_t next_magic;

	LIST_HEAD(, drm_buffer) buffers;
	/* Counted in n_buffers and mem_used until the node finds their dma-buf let go. */
	LIST_HEAD(, drm_buffer) held;
	unsigned int n_buffers, n_held;
	/* When a look found a dma-buf still held (clock's time): the next look waits DRM_HELD_LOOK_USEC. */
	uint64_t held_seen_usec;
	bool held_seen;
	LIST_HEAD(, drm_fb) fbs;
	unsigned int n_fbs;
	LIST_HEAD(, drm_blob) blobs;
	unsigned int n_blobs;
	size_t blob_bytes;
	uint32_t next_id;

	struct drm_kms_state state;
	TAILQ_HEAD(, drm_pending) pending;
	unsigned int n_flips; /* pending entries with flip set */
	bool flip_pending;    /* a commit waits for the next vblank (with or without an event) */
	uint64_t seq;
	uint64_t vblank_usec;
	uint64_t clock; /* the latest CLOCK_MONOTONIC time the node heard of, in microseconds */
	unsigned int blocking_waits;

	struct drm_scanout shown;
};

/* drm-node.c */
uint32_t drm_node_new_id(struct drm_node *n);
/* Emits events.scanout when what the node shows changed, or when damage is given for what it shows. */
void drm_node_scanout_changed(struct drm_node *n, const struct drm_mode_rect *damage, size_t n_damage, bool drawn);
void drm_node_vblank_wanted(struct drm_node *n, bool before);
/* The connector's modes: whether m is one of their sizes with sane timings (0), else -EINVAL or -ERANGE. */
int drm_node_check_mode(const struct drm_node *n, const struct drm_mode_modeinfo *m);

/* drm-events.c */
/* Takes one event's room in f's event space: -ENOMEM when it has none left. */
int drm_event_reserve(struct drm_file *f);
void drm_event_unreserve(struct drm_file *f);
/* Queues a reserved event and tells the listeners. */
void drm_event_send(struct drm_file *f, uint32_t type, uint64_t user_data, uint64_t seq, uint64_t usec);
/* A pending event (reserved by the caller): -ENOMEM. */
int drm_pending_add(struct drm_node *n, struct drm_file *f, uint32_t type, bool flip, uint64_t target,
		    uint64_t user_data);
/* Sends every pending event now, with the current sequence (the CRTC turned off). */
void drm_pending_flush(struct drm_node *n, uint64_t usec);
void drm_pending_drop_file(struct drm_node *n, struct drm_file *f);

/* drm-objects.c: blobs, buffers, framebuffers */
int drm_blob_new(struct drm_node *n, struct drm_file *owner, const void *data, size_t len, struct drm_blob **ret);
struct drm_blob *drm_blob_find(const struct drm_node *n, uint32_t id);
void drm_blob_ref(struct drm_blob *b);
void drm_blob_unref(struct drm_node *n, struct drm_blob *b);
void drm_buffer_unref(struct drm_node *n, struct drm_buffer *b);
/* Frees the held buffers whose dma-buf no program holds any more. */
void drm_buffer_sweep_held(struct drm_node *n);
/* Frees every held buffer (the node goes). */
void drm_buffer_free_held(struct drm_node *n);
struct drm_fb *drm_fb_find(const struct drm_node *n, uint32_t id);
/* Frees fb, turning the CRTC off first when the plane shows it (RMFB). */
void drm_fb_remove(struct drm_node *n, struct drm_fb *fb);
/* Whether format is one the primary plane takes. */
bool drm_format_supported(uint32_t format);
extern const uint32_t drm_plane_formats[];
extern const size_t drm_n_plane_formats;

/* drm-kms.c: committing a state */
/*
 * Checks s as the kernel's atomic helpers would: 0, or -EINVAL, -ERANGE,
 * -ENOSPC. modeset: whether it changes the mode, ACTIVE or the routing.
 */
int drm_kms_check(const struct drm_node *n, const struct drm_kms_state *s, const struct drm_blob *damage,
		  bool *ret_modeset);
/* Makes s the node's state (references moved) and tells the listeners. */
void drm_kms_commit(struct drm_node *n, const struct drm_kms_state *s, const struct drm_mode_rect *damage,
		    size_t n_damage);
/* The state with the plane off and the CRTC disabled (what removing the shown framebuffer leaves). */
void drm_kms_disable(struct drm_node *n);

/* The ioctl rounds (drm-io.c). */
struct drm_io {
	struct drm_ioctl_step *s;
	const uint8_t *in;
	size_t in_size, out_size;
	size_t in_off, out_off; /* what the ranges named so far add up to */
	bool missing;           /* a range named is not in this round's data */
	bool overflow;
};

/* Names len bytes at addr to read: a pointer to them in this round's data, or NULL when they are not here yet. */
const void *drm_io_in(struct drm_io *io, uint64_t addr, size_t len);
/* Names len bytes at addr to write: where to put them in the output. */
void *drm_io_out(struct drm_io *io, uint64_t addr, size_t len);
/* Whether every range named is here: otherwise the step becomes a retry naming them. */
bool drm_io_ready(struct drm_io *io);

/* The ioctl handlers, each given the argument struct (arg) and the rounds. */
struct drm_call {
	struct drm_file *f;
	struct drm_node *n;
	const struct drm_ioctl_ctx *ctx;
	struct drm_io *io;
	void *arg;
};

int drm_ioctl_modes(struct drm_call *c, unsigned int nr); /* drm-getters.c */
int drm_ioctl_props(struct drm_call *c, unsigned int nr); /* drm-props.c */
int drm_ioctl_buffers(struct drm_call *c, unsigned int nr); /* drm-objects.c */
int drm_ioctl_modeset(struct drm_call *c, unsigned int nr); /* drm-legacy.c */
int drm_ioctl_atomic(struct drm_call *c);               /* drm-atomic.c */

/* drm-props.c */
/* The value of property prop on object obj in state s: -EINVAL when obj has no such property. */
int drm_prop_value(const struct drm_node *n, const struct drm_kms_state *s, uint32_t obj, uint32_t prop,
		   uint64_t *ret);
/* Sets prop of obj in s (for ATOMIC and OBJ_SETPROPERTY): 0 or -EINVAL, -EACCES. */
int drm_prop_set(struct drm_node *n, struct drm_file *f, struct drm_kms_state *s, uint32_t obj, uint32_t prop,
		 uint64_t value, struct drm_blob **damage);
/* Whether obj (of type, or DRM_MODE_OBJECT_ANY) is a mode object with properties: its type, or 0. */
uint32_t drm_obj_type(uint32_t obj, uint32_t type);
/* Whether obj has prop attached. */
bool drm_obj_has_prop(uint32_t obj, uint32_t prop);
/* Whether prop is for atomic clients only (hidden from the others). */
bool drm_prop_is_atomic(uint32_t prop);
/* drm-getters.c: obj's properties into the caller's arrays, as many as count says; count becomes the total. */
void drm_put_props(struct drm_call *c, uint32_t obj, uint64_t props_ptr, uint64_t values_ptr, uint32_t *count);
