/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/devnum.h"
#include "core/manager.h"
#include "util.h"

/* The kernel's second range of dynamic majors; devns picks one unused. */
#define MAJOR_FIRST 384
#define MAJOR_LAST 511

struct devnum_entry {
	char *name;
	unsigned int minor;
	/* Asked for in this run: a node of devnsd's may have it now. */
	bool held;
	/* Its node is gone for good (its persona deleted or gone from an earlier run, or no node of
	 * this run asked for it by the time devnsd started): a new card may take its minor. */
	bool free;
};

struct devnum {
	char *path;
	unsigned int major;
	struct devnum_entry *entries;
	size_t n_entries;
};

/*
 * Whether a driver holds major; with own_ok, a driver other than devns.
 * CUSE registers each node under its DEVNAME, so the nodes a restart takes
 * over ("devns/...") are devns' own, under the major saved; a new major
 * is picked among those nobody holds.
 */
static bool major_in_use(unsigned int major, bool own_ok) {
	_cleanup_(freep) char *line = NULL;
	size_t len = 0;
	bool chars = false, used = false;
	FILE *f = fopen("/proc/devices", "re");

	if (!f)
		return false;
	while (!used && getline(&line, &len, f) > 0) {
		unsigned int m;
		int name = 0;

		if (strncmp(line, "Character", 9) == 0)
			chars = true;
		else if (strncmp(line, "Block", 5) == 0)
			chars = false;
		else if (chars && sscanf(line, "%u %n", &m, &name) == 1 && m == major)
			used = !own_ok || strncmp(line + name, DEVNS_DEV_DIR "/", strlen(DEVNS_DEV_DIR "/")) != 0;
	}
	fclose(f);
	return used;
}

static int pick_major(unsigned int *ret) {
	for (unsigned int m = MAJOR_LAST; m >= MAJOR_FIRST; m--)
		if (!major_in_use(m, false)) {
			*ret = m;
			return 0;
		}
	return -ENOSPC;
}

static void clear_entries(struct devnum *d) {
	for (size_t i = 0; i < d->n_entries; i++)
		free(d->entries[i].name);
	d->n_entries = 0;
}

static int add_entry(struct devnum *d, const char *name, unsigned int minor) {
	struct devnum_entry *e;

	if (d->n_entries >= DEVNUM_MAX_NODES)
		return -E2BIG;
	e = realloc(d->entries, (d->n_entries + 1) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	d->entries = e;
	e[d->n_entries].name = strdup(name);
	if (!e[d->n_entries].name)
		return -ENOMEM;
	e[d->n_entries].minor = minor;
	e[d->n_entries].held = e[d->n_entries].free = false;
	d->n_entries++;
	return 0;
}

static int load(struct devnum *d) {
	_cleanup_(freep) char *line = NULL;
	size_t len = 0;
	FILE *f = fopen(d->path, "re");
	int r = 0;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (r >= 0 && getline(&line, &len, f) > 0) {
		char name[256];
		unsigned int n;
		if (sscanf(line, "major %u", &n) == 1)
			d->major = n;
		else if (sscanf(line, "%u %255s", &n, name) == 2)
			r = add_entry(d, name, n);
	}
	fclose(f);
	return r;
}

static int save(struct devnum *d) {
	_cleanup_(freep) char *tmp = NULL;
	FILE *f;
	int r = 0;

	if (asprintf(&tmp, "%s.new", d->path) < 0)
		return -ENOMEM;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "major %u\n", d->major);
	for (size_t i = 0; i < d->n_entries; i++)
		fprintf(f, "%u %s\n", d->entries[i].minor, d->entries[i].name);
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		r = -errno;
	fclose(f);
	if (r == 0 && rename(tmp, d->path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

int devnum_new(struct devnum **ret, const char *dir) {
	_cleanup_(devnum_freep) struct devnum *d = NULL;
	int r;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (asprintf(&d->path, "%s/devices", dir) < 0) {
		d->path = NULL;
		return -ENOMEM;
	}
	r = load(d);
	if (r < 0)
		return r;
	/* A major that someone else holds now cannot be ours again: start over. */
	if (d->major == 0 || major_in_use(d->major, true)) {
		clear_entries(d);
		r = pick_major(&d->major);
		if (r < 0)
			return r;
		r = save(d);
		if (r < 0)
			return r;
	}
	*ret = TAKE_PTR(d);
	return 0;
}

struct devnum *devnum_free(struct devnum *d) {
	if (!d)
		return NULL;
	clear_entries(d);
	free(d->entries);
	free(d->path);
	free(d);
	return NULL;
}

/* Whether devname's last component is cardN: a DRM primary node, whose minor libdrm wants below DEVNUM_CARD_MINORS. */
static bool is_card(const char *devname) {
	const char *name = strrchr(devname, '/');

	name = name ? name + 1 : devname;
	return strncmp(name, "card", 4) == 0 && name[4] && strspn(name + 4, "0123456789") == strlen(name + 4);
}

static bool minor_taken(const struct devnum *d, unsigned int minor) {
	for (size_t i = 0; i < d->n_entries; i++)
		if (d->entries[i].minor == minor)
			return true;
	return false;
}

/*
 * A card takes the lowest free minor below DEVNUM_CARD_MINORS, or, when
 * every one is given, that of a card whose node is gone for good (a deleted
 * persona's, or an earlier run's that no persona took again): *ret_reuse is
 * then the entry to hand over. Any other node takes the next minor past
 * every one given, from DEVNUM_CARD_MINORS on. Numbers a state file gave
 * before (input nodes below it) stay.
 */
static int pick_minor(const struct devnum *d, const char *devname, unsigned int *ret, size_t *ret_reuse) {
	unsigned int minor = DEVNUM_CARD_MINORS;

	*ret_reuse = SIZE_MAX;
	if (is_card(devname)) {
		for (minor = 0; minor < DEVNUM_CARD_MINORS; minor++)
			if (!minor_taken(d, minor)) {
				*ret = minor;
				return 0;
			}
		for (size_t i = 0; i < d->n_entries; i++) {
			const struct devnum_entry *e = &d->entries[i];

			if (e->minor < DEVNUM_CARD_MINORS && e->free && is_card(e->name)) {
				*ret = e->minor;
				*ret_reuse = i;
				return 0;
			}
		}
		return -ENOSPC;
	}
	for (size_t i = 0; i < d->n_entries; i++)
		minor = MAX(minor, d->entries[i].minor + 1);
	*ret = minor;
	return 0;
}

int devnum_get(struct devnum *d, const char *devname, unsigned int *ret_major, unsigned int *ret_minor) {
	unsigned int minor;
	size_t reuse;
	char *name;
	int r;

	for (size_t i = 0; i < d->n_entries; i++)
		if (streq(d->entries[i].name, devname)) {
			d->entries[i].held = true;
			d->entries[i].free = false;
			*ret_major = d->major;
			*ret_minor = d->entries[i].minor;
			return 0;
		}
	if (strlen(devname) > 255 || strpbrk(devname, " \n"))
		return -EINVAL;
	r = pick_minor(d, devname, &minor, &reuse);
	if (r < 0)
		return r;
	if (reuse != SIZE_MAX) {
		name = strdup(devname);
		if (!name)
			return -ENOMEM;
		free(d->entries[reuse].name);
		d->entries[reuse].name = name;
		d->entries[reuse].held = true;
		d->entries[reuse].free = false;
	} else {
		r = add_entry(d, devname, minor);
		if (r < 0)
			return r;
		d->entries[d->n_entries - 1].held = true;
	}
	r = save(d);
	if (r < 0)
		return r;
	*ret_major = d->major;
	*ret_minor = minor;
	return 0;
}

/* The persona part of an entry's name ("devns/PERSONA/NODE"): its length, 0 when it has none. */
static size_t persona_part(const char *name, const char **ret) {
	size_t dir = strlen(DEVNS_DEV_DIR "/");
	const char *end;

	if (strncmp(name, DEVNS_DEV_DIR "/", dir) != 0 || !(end = strchr(name + dir, '/')))
		return 0;
	*ret = name + dir;
	return (size_t)(end - *ret);
}

static void entry_gone(struct devnum_entry *e) {
	e->held = false;
	e->free = true;
}

void devnum_release_persona(struct devnum *d, const char *persona) {
	for (size_t i = 0; i < d->n_entries; i++) {
		const char *p;
		size_t n = persona_part(d->entries[i].name, &p);

		if (n > 0 && n == strlen(persona) && strncmp(p, persona, n) == 0)
			entry_gone(&d->entries[i]);
	}
}

void devnum_release_gone(struct devnum *d, bool (*alive)(void *userdata, const char *persona), void *userdata) {
	char name[256];

	for (size_t i = 0; i < d->n_entries; i++) {
		const char *p;
		size_t n = persona_part(d->entries[i].name, &p);

		if (n == 0 || n >= sizeof(name))
			continue;
		memcpy(name, p, n);
		name[n] = '\0';
		if (!alive(userdata, name))
			entry_gone(&d->entries[i]);
	}
}

void devnum_settle(struct devnum *d) {
	for (size_t i = 0; i < d->n_entries; i++)
		if (!d->entries[i].held)
			entry_gone(&d->entries[i]);
}
