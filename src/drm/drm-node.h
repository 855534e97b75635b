/* SPDX-License-Identifier: MIT */
#pragma once

#include <drm.h>
#include <drm_mode.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fb-state.h"
#include "listener.h"

/*
 * A persona's DRM/KMS primary node without a transport: one CRTC, one
 * connector (always connected), one encoder and one primary plane, dumb
 * buffers, framebuffers, property blobs, DRM master and an event queue per
 * open file. The ioctls are in drm-ioctl.h.
 *
 * The node owns no clock and no hardware. What it shows goes up as news
 * (events.scanout); time comes in as drm_node_vblank(), which the transport
 * calls at each vblank of the persona: the real display's flip completion
 * while the persona is active, a virtual vblank while it is in the
 * background. The node asks for vblanks only while something waits for one
 * (drm_node_wants_vblank()), so an idle client costs no wakeups.
 */

/* Object ids: stable, the same on every node. Framebuffers and blobs get ids from DRM_NODE_FIRST_DYNAMIC_ID up. */
#define DRM_NODE_CRTC_ID 32
#define DRM_NODE_PLANE_ID 33
#define DRM_NODE_ENCODER_ID 34
#define DRM_NODE_CONNECTOR_ID 35
#define DRM_NODE_FIRST_DYNAMIC_ID 64

/* Largest mode and framebuffer side (the mode config's maximum), and the connector's mode count. */
#define DRM_NODE_MAX_SIDE 8192
#define DRM_NODE_MAX_MODES 8
/* Entries of the CRTC's gamma table, per channel. */
#define DRM_NODE_GAMMA_SIZE 256

/*
 * Limits. Counts past them fail with -ENOSPC, bytes past them with
 * -ENOMEM, opens past DRM_NODE_MAX_FILES with -EMFILE; nothing changes.
 */
#define DRM_NODE_MAX_FILES 64
#define DRM_FILE_MAX_HANDLES 64      /* GEM handles of one open file */
#define DRM_NODE_MAX_BUFFERS 256     /* dumb buffers of the node */
#define DRM_FILE_MAX_FBS 64          /* framebuffers of one open file */
#define DRM_NODE_MAX_FBS 256
#define DRM_FILE_MAX_BLOBS 64        /* property blobs of one open file */
#define DRM_NODE_MAX_BLOBS 256
#define DRM_NODE_MAX_BLOB_BYTES (4u << 20)
#define DRM_BLOB_MAX_LEN (64u * 1024) /* one blob: CREATEPROPBLOB longer than this is -EINVAL */
/* Dumb buffer memory of a node, unless configured: the larger of 64 MiB and six frames of the mode. */
#define DRM_NODE_DEFAULT_BUDGET (64ull << 20)
#define DRM_NODE_DEFAULT_BUDGET_FRAMES 6
/* Event space of one open file, as the kernel's: each event is reserved when asked for. */
#define DRM_FILE_EVENT_SPACE 4096

/* Memory for dumb buffers: the daemon makes memfds and counts them. */
struct drm_memory_ops {
	/* size bytes of zeroed memory as an fd the node keeps until release(): 0 or a negative errno. */
	int (*alloc)(void *userdata, uint64_t size, int *ret_fd);
	/* The node is done with fd (release closes it). */
	void (*release)(void *userdata, int fd, uint64_t size);
	/* PRIME, optional: a dma-buf of fd's size bytes, which the node keeps (and closes) with the buffer: 0 or a negative errno. */
	int (*export)(void *userdata, int fd, uint64_t size, int *ret_dmabuf);
	/* Whether anyone but the node holds the dma-buf export() made (an fd, a mapping). */
	bool (*exported_held)(void *userdata, int dmabuf);
};

/* The default: memfds sealed against resizing, mode 0600. */
extern const struct drm_memory_ops drm_memfd_ops;

/*
 * drm_memfd_ops with PRIME: export() makes a dma-buf of the memfd through
 * udmabuf, userdata pointing at the fd of an open /dev/udmabuf (see
 * drm_udmabuf_probe()). A buffer whose dma-buf a program still holds after
 * its last handle went stays counted against the budget, as its memory is
 * still there, until the program lets the dma-buf go: the node looks
 * again (the dma-buf's references, in devnsd's own fdinfo of it) when it
 * needs the room.
 */
extern const struct drm_memory_ops drm_udmabuf_ops;

/*
 * Whether /dev/udmabuf (udmabuf, its open fd) can make dma-bufs of the
 * node's memfds, and the transport can compare files (kcmp(2)): 0, or the
 * negative errno of what failed.
 */
int drm_udmabuf_probe(int udmabuf);

/*
 * How many references the file whose /proc/.../fdinfo text this is has
 * (a dma-buf's "count:" line; the text is changed in place): 0, or -EINVAL
 * for text that is no dma-buf's.
 */
int drm_dmabuf_count(char *text, long *ret);

struct drm_node_config {
	/* The persona's mode: the connector's preferred one; smaller standard modes follow it unless one_mode. */
	struct fb_mode mode;
	/* The connector offers the persona's mode alone: a display that shows no other size. */
	bool one_mode;
	/* Labels the memory; the bus id GET_UNIQUE answers is "devns:NAME". */
	const char *name;
	/* Optional EDID for the connector's EDID property (at most DRM_BLOB_MAX_LEN bytes). */
	const uint8_t *edid;
	size_t edid_len;
	uint32_t width_mm, height_mm;
	/* Bytes of dumb buffers; 0: the default above. */
	uint64_t budget;
	/*
	 * DRM_CAP_PRIME's answer: only when the transport really exports
	 * dma-bufs (memory's export(), a program's library to hand them over)
	 * and can tell whether a caller's fd is one of them (struct drm_ioctl_ctx).
	 */
	uint64_t prime_caps;
	/* NULL: drm_memfd_ops. */
	const struct drm_memory_ops *memory;
	void *memory_userdata;
};

/* What the persona shows: the CRTC's state and the framebuffer on its primary plane. */
struct drm_scanout {
	bool enabled;                 /* the CRTC has a mode */
	bool active;                  /* ... and is on (ACTIVE, DPMS on) */
	struct drm_mode_modeinfo mode; /* valid when enabled */
	/* The framebuffer, when active and the plane has one (fb_id 0: black). */
	uint32_t fb_id;
	uint32_t format;              /* DRM_FORMAT_XRGB8888 or ARGB8888 */
	uint32_t fb_width, fb_height, pitch, offset;
	int memfd;                    /* the buffer's memory: the node's; dup it to keep it */
	uint64_t mem_size;
	uint64_t mem_serial;          /* which buffer: never 0, never reused within the process */
	/* The part of the framebuffer shown at the CRTC's top left, in whole pixels; its size is the mode's. */
	uint32_t src_x, src_y;
};

/* events.scanout's data: the new state, and what changed in it (n_damage 0: all of it). */
struct drm_scanout_news {
	const struct drm_scanout *scanout;
	const struct drm_mode_rect *damage; /* in framebuffer pixels, inside the framebuffer */
	size_t n_damage;
};

struct drm_node_events {
	/* The scanout changed or was drawn to: struct drm_scanout_news *. Active persona: present it; background: keep it. */
	struct signal_list scanout;
	/* The master changed: the new master's struct drm_file *, or NULL when none. */
	struct signal_list master;
	/* An open file has events to read: its struct drm_file *. */
	struct signal_list readable;
	/* drm_node_wants_vblank() became true: NULL. */
	struct signal_list vblank;
};

struct drm_node;
struct drm_file;

/* A node with cfg's modes, in its first state (CRTC off). -EINVAL for a mode it cannot show. */
int drm_node_new(struct drm_node **ret, const struct drm_node_config *cfg);

/* Frees the node, closing the files still open (their news is emitted: remove listeners first if unwanted). */
struct drm_node *drm_node_free(struct drm_node *n);
static inline void drm_node_freep(struct drm_node **n) {
	drm_node_free(*n);
}

/* The node's news; add listeners here. */
struct drm_node_events *drm_node_events(struct drm_node *n);

/* What the node shows now (for a switch to the persona, a screenshot). */
void drm_node_scanout(const struct drm_node *n, struct drm_scanout *ret);

/*
 * A vblank of the persona's CRTC at now_usec (CLOCK_MONOTONIC): the
 * sequence advances by one, pending flips complete (their events are
 * queued) and vblank events that were waiting for this sequence are
 * queued. Ignored while the CRTC is off.
 */
void drm_node_vblank(struct drm_node *n, uint64_t now_usec);

/* The CRTC's vblank sequence: strictly increasing, starts at 0. */
uint64_t drm_node_sequence(const struct drm_node *n);

/* Whether a flip, a vblank event or a blocking WAIT_VBLANK waits for a vblank. */
bool drm_node_wants_vblank(const struct drm_node *n);

/* Whether the buffer of that serial (struct drm_scanout's mem_serial) still exists. */
bool drm_node_has_buffer(const struct drm_node *n, uint64_t serial);

/* Bytes of dumb buffer memory in use, and the budget. */
uint64_t drm_node_memory_used(const struct drm_node *n);
uint64_t drm_node_budget(const struct drm_node *n);

/*
 * A buffer by its MAP_DUMB offset: its memory and size. With file set, only
 * a buffer file holds a handle to (as the kernel lets an open file map only
 * its own objects). -ENOENT otherwise.
 */
int drm_node_map_lookup(const struct drm_node *n, const struct drm_file *file, uint64_t offset, int *ret_fd,
			uint64_t *ret_size);

/* A dumb buffer as drm_node_map_find() finds it. */
struct drm_dumb_map {
	int fd;          /* the node's: dup it to keep it */
	uint64_t size;
	uint64_t serial; /* as drm_scanout's mem_serial: never 0, never reused */
};

/* drm_node_map_lookup(), with the buffer's serial. */
int drm_node_map_find(const struct drm_node *n, const struct drm_file *file, uint64_t offset,
		      struct drm_dumb_map *ret);

/*
 * PRIME export of the buffer at a MAP_DUMB offset that file holds a handle
 * to: the node's dma-buf of it (made at the first export; dup it, or send
 * it), -ENOENT for no such buffer, -EOPNOTSUPP without memory's export().
 */
int drm_node_export(struct drm_node *n, const struct drm_file *file, uint64_t offset, int *ret_dmabuf);

/* Buffers gone from every file whose dma-buf a program still held when the node last looked. */
unsigned int drm_node_n_held(const struct drm_node *n);

/*
 * Forgets those buffers (the persona was revoked: whoever still holds their
 * dma-bufs is not the persona's any more): they count no more, and can no
 * longer be imported.
 */
void drm_node_drop_held(struct drm_node *n);

/*
 * A new open file of the node, opened by process pid. The first open file
 * of a node without a master becomes master, as the kernel does (news on
 * events.master). -EMFILE past DRM_NODE_MAX_FILES.
 */
int drm_file_open(struct drm_node *n, pid_t pid, struct drm_file **ret);

/*
 * Closes f: its framebuffers go (a shown one turns the CRTC off, as RMFB
 * does), its handles, blobs and events too; a master gives mastership up.
 */
void drm_file_close(struct drm_file *f);

/* The file's node. */
struct drm_node *drm_file_node(const struct drm_file *f);

/* Whether f is the node's master. */
bool drm_file_is_master(const struct drm_file *f);

/*
 * read(): whole events into buf, as many as fit. Returns the bytes
 * written; 0 when the next event does not fit in count; -EAGAIN when no
 * event is queued (a blocking reader waits for events.readable).
 */
ssize_t drm_file_read(struct drm_file *f, void *buf, size_t count);

/* Whether read() would return events (poll's POLLIN). */
bool drm_file_readable(const struct drm_file *f);
