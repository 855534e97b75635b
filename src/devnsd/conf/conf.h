/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define CONF_MAX_PERSONAS 64
#define CONF_MAX_PATTERNS 64
#define CONF_MAX_SWITCH_KEYS 16
/* SwitchKeys= chords and the one SecureAttentionKey=. */
#define CONF_MAX_HOTKEYS (CONF_MAX_SWITCH_KEYS + 1)
#define CONF_MAX_CHORD 4
#define CONF_MAX_MAPS 16
#define CONF_MAX_UID_RANGES 16
#define CONF_DEFAULT_PATH "/etc/devnsd/devnsd.conf"

/* Devices of one class: paths or glob patterns, and the names shared by all personas. */
struct conf_devices {
	char *patterns[CONF_MAX_PATTERNS];
	size_t n_patterns;
	char *shared[CONF_MAX_PATTERNS];
	size_t n_shared;
};

/* Where a persona's node appears inside its container, e.g. fb0 -> /dev/graphics/fb0. */
struct conf_map {
	char node[NAME_MAX_LEN + 1];
	char *path;
};

/*
 * A group a persona's nodes get inside its container: a name looked up in
 * the container's /etc/group, a number, or both ("input:1004", the number
 * used when the container has no such group).
 */
struct conf_group {
	char name[NAME_MAX_LEN + 1]; /* "" for a number alone */
	int64_t gid;                 /* the container's gid; -1: its root group */
};

/* User ids inside a container, as ranges: RequestActiveUsers=. */
struct conf_uids {
	struct {
		uint32_t first, last;
	} ranges[CONF_MAX_UID_RANGES];
	size_t n;
};

/* Whether uid is in one of the ranges. */
bool conf_uids_contain(const struct conf_uids *u, uint32_t uid);

struct conf_persona {
	char name[NAME_MAX_LEN + 1];
	bool active;
	unsigned int line;        /* of its section header */
	unsigned int active_line; /* of its Active= key */
	pid_t pid;                /* Pid=: bind to this process's pid namespace; 0: none */
	char *machine;            /* Machine=: bind to this systemd-machined machine */
	bool allow_request_active;
	/* RequestActiveUsers=: who in the container may ask; its root alone unless set. */
	struct conf_uids request_users;
	bool request_users_set;
	struct conf_map maps[CONF_MAX_MAPS];
	size_t n_maps;
	/* InputGroup=, VideoGroup=: the groups of input nodes and of fb0 (and its socket). */
	struct conf_group input_group, video_group;
};

/* A hotkey: the keys held together, and the persona they bring forward. */
struct conf_switch_key {
	uint16_t keys[CONF_MAX_CHORD];
	size_t n_keys;
	char persona[NAME_MAX_LEN + 1];
	unsigned int line;
	/* SecureAttentionKey=: a user's switch that personas' requests cannot undo. */
	bool secure;
};

enum display_backend {
	DISPLAY_NONE,
	DISPLAY_HEADLESS,
	DISPLAY_DRM,
	DISPLAY_FBDEV,
};

/* SpareFrames= at most; the display backend keeps no more. */
#define CONF_MAX_SPARE_FRAMES 8

/* CardMemory= below this is refused. */
#define CONF_MIN_CARD_MEMORY (1ull << 20)

struct conf {
	char *path;

	/* [Daemon] */
	bool routed;
	char *switch_group;
	struct conf_switch_key switch_keys[CONF_MAX_HOTKEYS];
	size_t n_switch_keys;
	bool have_secure_key;

	/* [Input], [Leds], [Backlight] */
	struct conf_devices input, leds, backlight;

	/* [Display] */
	enum display_backend display;
	char *display_device;
	unsigned int display_width, display_height; /* headless mode */
	/* Frames shown before the last switches kept in spare buffers: at most so many, taking at most so many bytes. */
	unsigned int display_spares;
	uint64_t display_spare_bytes;
	/* Take the userfaultfds programs send to track their mappings (TrackWrites=). */
	bool display_track;
	/* Bytes of dumb buffers each persona's card0 may hold (CardMemory=); 0: the default. */
	uint64_t display_card_bytes;

	struct conf_persona personas[CONF_MAX_PERSONAS];
	size_t n_personas;
	/* The persona that starts active: Active=yes, or the first. */
	size_t active;
};

/*
 * Reads and checks a configuration file. On failure returns a negative
 * errno and, in *ret_error, one line saying FILE:LINE, the key and what is
 * wrong (the caller frees it).
 */
int conf_load(const char *path, struct conf **ret, char **ret_error);
struct conf *conf_free(struct conf *c);
static inline void conf_freep(struct conf **c) {
	conf_free(*c);
}

/* The persona's index, or -1. */
int conf_find_persona(const struct conf *c, const char *name);
/* Whether name is one of the routed nodes' in /dev/devns/ (fb0, card0, eventN): no persona's there, with Routed=yes. */
bool conf_name_is_routed_node(const char *name);
