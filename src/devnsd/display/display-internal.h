/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What the display class's files share: the class (class.c), presenting
 * (present.c), the CUSE nodes (serve.c), the mmap sockets (socket.c),
 * tracking mappings (track.c), restart (state.c), the display device going
 * and coming (hotplug.c), the outputs (output.c) and the hardware behind
 * them (hardware.c), a persona's node (node.c) and its card0 (drm.c).
 *
 * A file calls only files after it in this order: serve.c, hotplug.c,
 * socket.c, class.c, track.c, state.c, present.c, node.c, drm.c,
 * output.c, hardware.c. News goes up without calls: the core reaches the
 * transport through struct display_transport_ops, and card0's scanout
 * reaches class.c through drm-node.h's events.
 */
#include <sys/queue.h>

#include "devns-fb.h"
#include "display/display.h"
#include "drm-node.h"
#include "fb-ioctl.h"
#include "fb-node.h"
#include "fb-track.h"
#include "ratelimit.h"

struct cuse_fb;
struct cuse_drm;
struct display_socket;
struct display_track;
struct track_budget;
struct display_hotplug;

/*
 * drm_dev_register() makes a DRM device's node before it registers the
 * device's connectors, so a device that has just come may show no
 * connected output yet: it is asked again, this often, for this long.
 */
#define DISPLAY_OUTPUT_RETRY_USEC (50 * 1000u)
#define DISPLAY_OUTPUT_WAIT_USEC (2 * 1000000u)

/* Buffers of a persona's card0 devnsd keeps mapped: a client's swap chain (double or triple buffering). */
#define DISPLAY_CARD_MAPS 4

/* Where each persona's framebuffer socket is: DISPLAY_RUN_DIR/PERSONA/fb0. */
#define DISPLAY_RUN_DIR "/run/devnsd/fb"

/* A persona's /dev/devns/PERSONA/fb0, its shadow framebuffer and its mmap socket. */
struct display_node {
	struct display_class *class;
	struct persona *persona;
	struct fb_node *fb;
	struct cuse_fb *cuse;
	struct display_socket *socket;
	char path[64 + NAME_MAX_LEN];
	/* The node's device number, when devnsd chose it (0 otherwise). */
	dev_t rdev;
	char socket_path[108];
	/* The socket's directory: containers get it bound at the same path. */
	char socket_dir[108];
	bool ready;
	/* A program held a change of its mapping's write protection up: no more tracking (display/track.c). */
	bool track_refused;
	/* The persona's tracking threads alive (display/track.c). */
	struct track_budget *track_budget;
	/* The persona's share of descriptors its clients sent that wait to be closed (fd-closer.h). */
	struct fd_closer_quota *closer_quota;
	/* Never 0, never reused. */
	uint64_t serial;
	/* Counts changes to what the persona shows (writes, pans, blanking, mappings, card0's commits). */
	uint64_t gen;
	/*
	 * card0 (display/drm.c): its KMS state, its CUSE node, and what its
	 * scanout shows (drm_shown, memfd -1), mapped read-only at drm_map.
	 */
	struct drm_node *drm;
	struct cuse_drm *drm_cuse;
	char drm_path[64 + NAME_MAX_LEN];
	dev_t drm_rdev;
	bool drm_ready;
	struct listener drm_scanout_listener, drm_vblank_listener;
	struct drm_scanout drm_shown;
	const uint8_t *drm_map;
	size_t drm_map_size;
	uint64_t drm_map_serial;
	/*
	 * The buffers card0 showed last, mapped (drm_map is one of them): a
	 * client flipping between its buffers costs no mapping per flip.
	 */
	struct display_card_map {
		const uint8_t *map;
		size_t size;
		uint64_t serial, used;
	} drm_maps[DISPLAY_CARD_MAPS];
	uint64_t drm_maps_clock;
	/* The virtual vblank, armed while card0 waits for one; held while the active persona's present is under way. */
	sd_event_source *drm_vblank;
	bool drm_vblank_held;
	/*
	 * For a restart (display/state.c): the scanout's buffer kept in the fd
	 * store (drm_kept: its serial and where the frame is in it), kept
	 * again at most once a DISPLAY_CARD_KEEP_USEC while it changes. With
	 * drm_ghost, what the persona shows is the last run's kept frame,
	 * until card0's state or fb0 changes.
	 */
	sd_event_source *drm_keep;
	struct display_card_kept {
		uint64_t serial, size;
		uint32_t width, height, pitch, offset;
	} drm_kept;
	bool drm_ghost;
	LIST_ENTRY(display_node) link;
};

/*
 * How persona framebuffers reach programs: display/serve.c serves
 * fb0 nodes over CUSE and mmap sockets; unit tests run the core without
 * one (NULL). Every op is optional.
 */
struct display_transport_ops {
	/* dn's framebuffer exists: make it reachable. */
	int (*node_added)(struct display_node *dn);
	/* dn is going (also when node_added failed). */
	void (*node_removed)(struct display_node *dn);
	/* dn's persona has a new owner. */
	void (*set_owner)(struct display_node *dn);
	/* Ends every file, ticket and mapping of dn. */
	void (*revoke)(struct display_node *dn);
	/* Open files and mapping programs of dn; programs waiting for vsync on dn. */
	unsigned int (*n_open)(struct display_node *dn);
	unsigned int (*n_mappers)(struct display_node *dn);
	unsigned int (*vsync_waiters)(struct display_node *dn);
	/* Wakes dn's vsync waiters. */
	void (*vsync)(struct display_node *dn);
	/*
	 * Mapping programs of dn whose writes are not tracked at all, and
	 * those whose writes would go unseen now (not tracked, or not
	 * write-protected at the moment). Without n_unseen every mapping is
	 * scanned every refresh.
	 */
	unsigned int (*n_untracked)(struct display_node *dn);
	unsigned int (*n_unseen)(struct display_node *dn);
	/* Write-protects every tracked mapping of dn (arm), or lifts the protection. */
	void (*arm)(struct display_node *dn, bool arm);
	/*
	 * When every writable mapping of dn is tracked asynchronously: scans
	 * them for written pages (display_track_written()), the rows of dn's
	 * visible frame (height rows) they touch in ret_rows, at most max
	 * spans. -EOPNOTSUPP: some mapping is not tracked so; -E2BIG (or
	 * another error): the whole frame is to be taken.
	 */
	int (*written)(struct display_node *dn, uint32_t height, struct fb_rows *ret_rows, size_t max, size_t *ret_n);
	/* Parks every asynchronously tracked mapping of dn (display_track_park()). */
	void (*park)(struct display_node *dn);
	/* The class is going, before its nodes: the transport's own nodes (the routed ones). */
	void (*class_removed)(struct display_class *dc);
	/* A vblank of dn's card0 happened: answer what waited for it. */
	void (*drm_vblank)(struct display_node *dn);
	/* Open files of dn's card0. */
	unsigned int (*drm_n_open)(struct display_node *dn);
};

struct display_class {
	struct device_class base;
	const struct display_transport_ops *transport;
	struct display_output *backend;
	char *device;
	sd_event_source *backend_source;
	/* Runs once a refresh while the active persona has mappings or someone waits for vsync. */
	sd_event_source *tick;
	uint64_t refresh_usec;
	/* When the last tick was due: a tick for a tracked write keeps to the same beat. */
	uint64_t tick_due_usec;
	struct display_node *active;
	LIST_HEAD(, display_node) nodes;
	/* /dev/devns/fb0 and /dev/devns/card0, whose opener's persona decides whose node it gets (Routed=yes). */
	struct cuse_fb *routed;
	bool routed_ready;
	struct cuse_drm *routed_card;
	bool routed_card_ready;
	/* Visible rows of the active persona not yet presented. */
	struct fb_rows damage;
	/* The next present copies in one go (a switch). */
	bool urgent;
	/* The display device went away: backend stands in for it, in memory (display_class_set_output()). */
	bool lost;
	/* Follows the display device going and coming back (display/hotplug.c); NULL in unit tests. */
	struct display_hotplug *hotplug;
	/*
	 * What display/hotplug.c knows of the display (display/hardware.c),
	 * from when it was opened or from the last run's record: the sysfs
	 * directory of the hardware behind it and the kind of its node, for
	 * the state record (display/state.c). NULL while not known.
	 */
	char *hardware, *hardware_kind;
	/* Powering the display down failed once, or cannot be done: it stays up. */
	bool stays_up;
	/* Power-downs let through, and the timer that tries again once one is due. */
	struct ratelimit power_downs;
	sd_event_source *power_due;
	/*
	 * The switch under way, held until it is on screen: switch_copy while
	 * its frame is not submitted yet, switch_flip once the pending flip
	 * shows it.
	 */
	struct switch_op *switch_copy;
	struct switch_op *switch_flip;
	/* Copies a frame in steps while the backend is copying, from copy_src (NULL: black). */
	sd_event_source *copy;
	const uint8_t *copy_src;
	uint32_t copy_stride, copy_rows;
	/* Whose frame, and which version, the copy under way shows. */
	uint64_t copy_owner, copy_gen;
	/* Switches shown by a flip to a buffer that kept the frame, and by copying the frame first. */
	uint64_t switches_kept, switches_copied;
	uint64_t next_serial;
	/*
	 * The active persona's mapped frame as the last scan took it (snap),
	 * and a hash of each of its rows (when scan_valid): a refresh hashes
	 * the frame's rows again, takes those that changed into snap, and
	 * presents them from there, so what is shown is what was hashed.
	 */
	uint64_t *scan;
	uint8_t *snap;
	uint32_t scan_rows;
	bool scan_valid;
	/* A scan ran since the last refresh. */
	bool scanned;
	/* A pan or blank presented the whole frame since the last refresh. */
	bool presented_whole;
	/* Whether the active persona's mapped frame is tracked or scanned every refresh. */
	struct fb_track_policy track;
	/* Scans in a row of an asynchronously tracked frame that found no page written. */
	unsigned int poll_empty;
	/* Bytes of dumb buffers each persona's card0 may hold; 0: drm-node.h's default. */
	uint64_t drm_budget;
	/* /dev/udmabuf, for card0's PRIME (dma-bufs of dumb buffers), or -1: DRM_CAP_PRIME answers 0. */
	int udmabuf;
};

/*
 * display/socket.c: hands the persona's memfd to programs that
 * bring a ticket of an open fb0 file (devns-fb.h). The socket is made
 * 0660, owned by the persona's owner uid and video group.
 */
int display_socket_new(struct display_socket **ret, struct display_node *dn);
struct display_socket *display_socket_free(struct display_socket *s);
/* Connected programs: each holds a mapping of the framebuffer. */
unsigned int display_socket_n_mappers(const struct display_socket *s);
/*
 * Mappings that are not tracked (a read-only mapping is seen whole):
 * at all, or, with now, at the moment (not write-protected).
 */
unsigned int display_socket_n_untracked(const struct display_socket *s, bool now);
/* The transport's written op for the socket's mappings. */
int display_socket_written(struct display_socket *ds, uint64_t frame_offset, uint32_t line, uint32_t height,
			   struct fb_rows *ret_rows, size_t max, size_t *ret_n);
/* Parks every asynchronously tracked mapping. */
void display_socket_park(struct display_socket *ds);
/* Write-protects every tracked mapping (arm), or lifts the protection. */
void display_socket_arm(struct display_socket *s, bool arm);
/* Closes every connection, mappings included, without calling display_node_mappers_changed(). */
void display_socket_revoke(struct display_socket *s);
/* Gives the socket file to uid:gid, mode 0660; -ESTALE when it is no longer the socket devnsd bound. */
int display_socket_set_owner(struct display_socket *s, uid_t uid, gid_t gid);


/*
 * display/track.c: one mapping's userfaultfd (devns-fb.h). new
 * takes fds in any case and checks them: -EBADF when one is no
 * userfaultfd, or, for asynchronous tracking, no pagemap the program at
 * the socket's other end (peer_pidfd, -1 if unknown) can open; -EINVAL
 * when msg's range is not inside dn's framebuffer or not registered for
 * write-protection in it. A live track has its userfaultfd still; a
 * fault, or any failure, leaves it unarmed (a failure for good), and
 * tells display_node_mapped_written().
 */
int display_track_new(struct display_node *dn, const struct devns_fb_track *msg, const int fds[3], int peer_pidfd,
		      struct display_track **ret);
struct display_track *display_track_free(struct display_track *t);
/* dn is going: its tracking threads still alive count on their own. */
void display_track_budget_drop(struct display_node *dn);
bool display_track_live(const struct display_track *t);
bool display_track_armed(const struct display_track *t);
void display_track_arm(struct display_track *t, bool arm);
/* Whether t's program's kernel resolves its write faults, so that written pages are scanned for. */
bool display_track_async(const struct display_track *t);
/*
 * Scans an asynchronously tracked mapping for pages written since the
 * last scan, protecting them again: the rows of the visible frame
 * (frame_offset in the framebuffer, height rows of line bytes) they
 * touch, at most max spans in ret_rows, *ret_n of them. -E2BIG: possibly
 * more than the scan could say; the mapping is protected whole again, and
 * the whole frame is to be taken. Any other error ends the tracking.
 */
int display_track_written(struct display_track *t, uint64_t frame_offset, uint32_t line, uint32_t height,
			  struct fb_rows *ret_rows, size_t max, size_t *ret_n);
/*
 * An asynchronously tracked mapping that stopped changing: its next write
 * is to fault and wake devnsd (display/track.c). Writes while it is
 * parked are not scanned for: the caller takes the whole frame once.
 */
void display_track_park(struct display_track *t);

/*
 * display/present.c: bringing the active persona's changes to the
 * screen. Damage is in rows of the visible frame.
 */
void display_add_damage(struct display_class *dc, uint32_t y0, uint32_t y1);
void display_damage_all(struct display_class *dc);
/* Takes the rows of the active persona's mapped frame that changed since the last scan as damage; whether any did. */
bool display_scan_mapped(struct display_class *dc);
/* Whether the active persona's mapped frame may have changed unseen since the last scan. */
bool display_mapped_unseen(struct display_class *dc);
/* Starts presenting the damage unless a copy or a flip is under way. */
void display_flush(struct display_class *dc);
/* Completes the copy under way at once (switching: it shows the last switch). */
void display_complete_copy(struct display_class *dc, bool switching);
/* Gives up the copy under way. */
void display_abort_copy(struct display_class *dc);
/* The last switch is on screen, or cannot get there. */
void display_switch_shown(struct display_class *dc);
/* Runs the refresh timer when something needs it. */
void display_update_tick(struct display_class *dc);
/* A background persona's visible rows changed: they go to the spare that holds its frame; that spare, or DISPLAY_NO_BUFFER. */
unsigned int display_stage_written(struct display_class *dc, struct display_node *dn, const struct fb_rows *visible);
/* Event sources of the class: copy steps, the refresh timer, the display's flips and fd. */
int display_on_copy(sd_event_source *s, void *userdata);
int display_on_tick(sd_event_source *s, uint64_t usec, void *userdata);
int display_on_power_due(sd_event_source *s, uint64_t usec, void *userdata);
void display_on_flip_done(void *userdata);
int display_on_backend(sd_event_source *s, int fd, uint32_t revents, void *userdata);

/* A program connected to or left dn's socket. */
void display_node_mappers_changed(struct display_node *dn);
/* A tracked mapping of dn was written to (or its tracking ended, or began): dn's frame is to be scanned. */
void display_node_mapped_written(struct display_node *dn);

/*
 * display/state.c: the class's part of a restart. fb_new gives dn
 * its framebuffer, the last run's memory when it was kept, and keeps it;
 * renewed keeps dn's new memory; removed forgets p's.
 */
int display_state_fb_new(struct display_class *dc, struct display_node *dn);
void display_state_fb_renewed(struct display_node *dn);
void display_state_fb_removed(struct display_class *dc, struct persona *p);
/*
 * Registers the part that keeps each persona's mode, pan and blanking,
 * card0's frame, and the hardware the display is on (dc->hardware).
 */
int display_state_register(struct display_class *dc);
/*
 * The hardware the last run's display was on ("KIND PATH" in the state
 * record), when that was a node of the kind the configured backend drives
 * ("card", "fb"); -ENOENT or -EINVAL otherwise.
 */
int display_hardware_last(struct manager *m, const struct conf *conf, char **ret_hardware, char **ret_kind);

/*
 * display/output.c: the display's outputs.
 *
 * The device the configuration names, or the backend's default; NULL for
 * the headless display.
 */
const char *display_device_of(const struct conf *conf);
/*
 * Opens the configured display (DRM or fbdev), or device with the
 * configured backend when device is not NULL, showing width x height, or
 * the configuration's mode when width is 0. Logs nothing; -EBUSY when another
 * program is the DRM master, -ENODEV without a connected output of that
 * mode, -EMEDIUMTYPE for a framebuffer that is not XRGB.
 */
int display_open_output(const struct conf *conf, const char *device, uint32_t width, uint32_t height,
			struct display_output **ret);
/*
 * What presents while the display's device is gone: width x height in
 * memory, with no spare buffers, so a switch copies into memory nobody sees.
 */
int display_stand_in_new(uint32_t width, uint32_t height, struct display_output **ret);

/*
 * display/hotplug.c: follows the display's device going away and
 * coming back (the configuration's device, kernel or udev events): while it
 * is gone the class presents in memory, and once it is back with the same
 * mode, on it again. node: what the display was opened through, NULL when
 * it is not there (dc->lost). Logs what happens.
 */
int display_hotplug_new(struct display_class *dc, const struct conf *conf, const char *node,
			struct display_hotplug **ret);
struct display_hotplug *display_hotplug_free(struct display_hotplug *h);

/*
 * display/hardware.c: the hardware behind a display's node, what
 * stays when the kernel names the node anew: the sysfs directory of the
 * node's device's parent, and the node's kind ("card", "fb").
 */
int display_hardware_of(const char *node, char **ret_hardware, char **ret_kind);
/*
 * Whether hardware is the framebuffer the firmware set up: a platform
 * device the kernel made for it (drivers/firmware/sysfb.c), or one a
 * device tree describes ("<address>.framebuffer"), known by its driver.
 */
bool display_hardware_is_firmware(const char *hardware);
/* The node in /dev of the given kind ("card", "fb") that hardware has now; -ENOENT if none. */
int display_hardware_find(const char *hardware, const char *kind, char **ret_node);

/*
 * display/class.c, what the transport tells the core: rows written to dn's
 * framebuffer; a pan, blank or vsync wait.
 */
void display_node_written(struct display_node *dn, const struct fb_rows *rows);
void display_node_effect(struct display_node *dn, enum fb_effect effect);

/*
 * display/present.c: rows of what dn shows changed (whole: all of it, or
 * which of fb0 and card0 shows changed): presented when dn is active,
 * staged in the spare that keeps its frame when not.
 */
void display_node_changed(struct display_node *dn, const struct fb_rows *visible, bool whole);

/* display/node.c: persona p's node, or NULL. */
struct display_node *display_node_of(struct display_class *dc, struct persona *p);
/*
 * What dn shows: the first byte of its visible frame, and its line length
 * in *ret_stride; NULL when it shows black. Dark: powered down (fb0
 * blanked, or card0's CRTC off by DPMS or ACTIVE).
 */
const uint8_t *display_node_frame(const struct display_node *dn, uint32_t *ret_stride);
bool display_node_dark(const struct display_node *dn);
/* The transport's counts for dn (0 without a transport). */
unsigned int display_node_mappers(struct display_node *dn);
unsigned int display_node_vsync_waiters(struct display_node *dn);
/* Wakes dn's vsync waiters. */
void display_node_vsync(struct display_node *dn);

/*
 * display/drm.c: card0 in the core. new makes dn's KMS state (of dn's
 * mode), free ends it. owns: card0's CRTC has a mode, so that its scanout
 * is what dn shows (frame: as display_node_frame(); dark: its CRTC is
 * off). presented: the active persona's present is on screen, its held
 * vblank is due; released: dn is no longer active.
 */
int display_drm_new(struct display_node *dn);
void display_drm_free(struct display_node *dn);
bool display_drm_owns(const struct display_node *dn);
const uint8_t *display_drm_frame(const struct display_node *dn, uint32_t *ret_stride);
bool display_drm_dark(const struct display_node *dn);
void display_drm_presented(struct display_class *dc);
void display_drm_released(struct display_node *dn);
/*
 * card0's scanout news (drm-node.h), as display/class.c hears it. moves:
 * whether scanout s changes more of what dn shows than its damage says
 * (card0 or fb0 shown, another buffer, another place in it). show: dn
 * shows s from now on, its buffer mapped; returns the rows of the visible
 * frame that changed, all of them when *whole, which is set when the last
 * run's frame was shown until now.
 */
bool display_drm_moves(const struct display_node *dn, const struct drm_scanout *s);
struct fb_rows display_drm_show(struct display_node *dn, const struct drm_scanout_news *news, bool *whole);
/*
 * The last run's kept frame of dn's card0 (fd, which the caller keeps;
 * where the frame is in it): shown as dn's until card0's state or fb0
 * changes. -ESTALE when it does not fit the display's mode.
 */
int display_drm_adopt_kept(struct display_node *dn, int fd, const struct display_card_kept *kept);
/* fb0 changed or dn was revoked: the last run's card0 frame is no longer shown. Whether it was. */
bool display_drm_end_ghost(struct display_node *dn);

/* How often card0's shown buffer is kept for a restart while it changes. */
#define DISPLAY_CARD_KEEP_USEC (1000 * 1000ull)

/*
 * display/state.c: card0's frame for a restart. new makes dn's timer
 * that keeps it, free ends it; changed: card0 shows buffer mem_serial now,
 * kept once DISPLAY_CARD_KEEP_USEC has passed (not at every flip) unless
 * it is the one kept. keep keeps dn's card0 frame at once (the buffer
 * card0 shows, in the fd store, and where the frame is in it, in the
 * record), or forgets it when card0 shows nothing.
 */
int display_state_card_new(struct display_node *dn);
void display_state_card_free(struct display_node *dn);
void display_state_card_changed(struct display_node *dn, uint64_t mem_serial);
void display_state_card_keep(struct display_node *dn);

/*
 * display/class.c: the display class's core over backend b (taken over,
 * also on failure), device naming it in messages: each persona's
 * framebuffer memory, switching and presenting. transport (may be NULL:
 * unit tests) makes the framebuffers reachable.
 */
int display_class_new_core(struct manager *m, struct display_output *b, const char *device,
			   const struct display_transport_ops *transport, struct display_class **ret);
void display_class_free(struct display_class *dc);
/*
 * The display device went away (lost: b stands in for it, in memory) or a
 * display came back (b drives it): the class presents on b from now on.
 * b is taken over, also on failure, and must show frames of the mode of
 * the display before (-EMEDIUMTYPE otherwise). The active persona's whole
 * frame goes up on b, and a switch under way is answered once b shows it.
 */
int display_class_set_output(struct display_class *dc, struct display_output *b, bool lost);
