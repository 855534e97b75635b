/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define CONF_MAX_PERSONAS 64
#define CONF_MAX_PATTERNS 64
#define CONF_DEFAULT_PATH "/etc/devnsd/devnsd.conf"

struct conf_persona {
	char name[NAME_MAX_LEN + 1];
	bool active;
	unsigned int line;        /* of its section header */
	unsigned int active_line; /* of its Active= key */
};

struct conf {
	char *path;
	/* [Input] Devices=: paths or glob patterns, in order. */
	char *input_patterns[CONF_MAX_PATTERNS];
	size_t n_input_patterns;
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
