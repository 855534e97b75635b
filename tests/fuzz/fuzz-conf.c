/* SPDX-License-Identifier: MIT */
/*
 * devnsd's configuration parser: conf_load() on a file holding the input.
 * A configuration it accepts must hold what the rest of devnsd relies on;
 * one it refuses must come with a message.
 */
#include <linux/input.h>
#include <stdio.h>
#include <sys/mman.h>

#include "conf/conf.h"
#include "fuzz-input.h"

static bool is_abs_path(const char *s) {
	return s && s[0] == '/' && strlen(s) < 4096;
}

static void check_devices(const struct conf_devices *d) {
	fuzz_assert(d->n_patterns <= CONF_MAX_PATTERNS && d->n_shared <= CONF_MAX_PATTERNS);
	for (size_t i = 0; i < d->n_patterns; i++)
		fuzz_assert(is_abs_path(d->patterns[i]));
	for (size_t i = 0; i < d->n_shared; i++)
		fuzz_assert(d->shared[i][0] && !strchr(d->shared[i], '/'));
}

static void check_group(const struct conf_group *g) {
	fuzz_assert(strlen(g->name) <= NAME_MAX_LEN && g->gid >= -1 && g->gid < (int64_t)UINT32_MAX);
	fuzz_assert(g->name[0] || g->gid >= 0);
}

static void check_conf(const struct conf *c) {
	fuzz_assert(c->n_personas >= 1 && c->n_personas <= CONF_MAX_PERSONAS && c->active < c->n_personas);
	for (size_t i = 0; i < c->n_personas; i++) {
		const struct conf_persona *p = &c->personas[i];

		fuzz_assert(name_is_valid(p->name));
		fuzz_assert(conf_find_persona(c, p->name) == (int)i);
		fuzz_assert(p->pid >= 0 && p->n_maps <= CONF_MAX_MAPS);
		for (size_t k = 0; k < p->n_maps; k++)
			fuzz_assert(name_is_valid(p->maps[k].node) && is_abs_path(p->maps[k].path));
		check_group(&p->input_group);
		check_group(&p->video_group);
	}
	fuzz_assert(c->n_switch_keys <= CONF_MAX_SWITCH_KEYS);
	for (size_t i = 0; i < c->n_switch_keys; i++) {
		const struct conf_switch_key *k = &c->switch_keys[i];

		fuzz_assert(k->n_keys >= 1 && k->n_keys <= CONF_MAX_CHORD);
		fuzz_assert(conf_find_persona(c, k->persona) >= 0);
		for (size_t j = 0; j < k->n_keys; j++)
			fuzz_assert(k->keys[j] <= KEY_MAX);
	}
	check_devices(&c->input);
	check_devices(&c->leds);
	check_devices(&c->backlight);
	fuzz_assert(!c->display_device || is_abs_path(c->display_device));
	if (c->display == DISPLAY_HEADLESS)
		fuzz_assert(c->display_width >= 16 && c->display_width <= 8192 && c->display_height >= 16 &&
			    c->display_height <= 8192);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static int fd = -1;
	static char path[64];
	struct conf *c = NULL;
	char *error = NULL;
	int r;

	if (fd < 0) {
		fd = memfd_create("devnsd.conf", MFD_CLOEXEC);
		fuzz_assert(fd >= 0);
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	fuzz_assert(ftruncate(fd, 0) == 0);
	fuzz_assert(pwrite(fd, data, size, 0) == (ssize_t)size);

	r = conf_load(path, &c, &error);
	if (r < 0) {
		fuzz_assert(r == -EINVAL && error && strncmp(error, path, strlen(path)) == 0);
		free(error);
		return 0;
	}
	fuzz_assert(!error);
	check_conf(c);
	conf_free(c);
	return 0;
}
