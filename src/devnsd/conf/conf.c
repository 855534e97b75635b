/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <libevdev/libevdev.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"

enum section {
	SECTION_NONE,
	SECTION_UNKNOWN, /* already reported */
	SECTION_DAEMON,
	SECTION_INPUT,
	SECTION_LEDS,
	SECTION_BACKLIGHT,
	SECTION_DISPLAY,
	SECTION_PERSONA,
};

struct parser {
	FILE *file;
	struct conf *conf;
	unsigned int line;
	char *error;
	enum section section;
	const char *section_name;
	struct conf_persona *persona;
};

_printf_(2, 3) static int parse_error(struct parser *p, const char *fmt, ...) {
	va_list ap;
	char *msg = NULL;

	if (p->error)
		return 0;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (asprintf(&p->error, "%s:%u: %s", p->conf->path, p->line, msg ? msg : "out of memory") < 0)
		p->error = NULL;
	free(msg);
	return 0;
}

static char *strip(char *s) {
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static void on_persona_section(struct parser *p, const char *header, const char *pname) {
	struct conf *c = p->conf;

	if (!name_is_valid(pname)) {
		parse_error(p, "[%s]: invalid persona name '%s' (letters, digits, '_' and '-', at most %d)", header,
			    pname, NAME_MAX_LEN);
		return;
	}
	for (size_t i = 0; i < c->n_personas; i++)
		if (streq(c->personas[i].name, pname)) {
			parse_error(p, "[%s]: duplicate persona, first defined on line %u", header,
				    c->personas[i].line);
			return;
		}
	if (c->n_personas == CONF_MAX_PERSONAS) {
		parse_error(p, "[%s]: too many personas (at most %d)", header, CONF_MAX_PERSONAS);
		return;
	}
	p->persona = &c->personas[c->n_personas++];
	snprintf(p->persona->name, sizeof(p->persona->name), "%s", pname);
	p->persona->line = p->line;
	p->persona->input_group = (struct conf_group){ .name = "input", .gid = -1 };
	p->persona->video_group = (struct conf_group){ .name = "video", .gid = -1 };
	p->persona->request_users = (struct conf_uids){ .ranges = { { 0, 0 } }, .n = 1 };
	p->section = SECTION_PERSONA;
}

static void on_section(struct parser *p, const char *name) {
	static const struct {
		const char *name;
		enum section section;
	} plain[] = {
		{ "Daemon", SECTION_DAEMON },
		{ "Input", SECTION_INPUT },
		{ "Leds", SECTION_LEDS },
		{ "Backlight", SECTION_BACKLIGHT },
		{ "Display", SECTION_DISPLAY },
	};
	const char *pname;

	p->persona = NULL;
	p->section = SECTION_UNKNOWN;
	for (size_t i = 0; i < ELEMENTSOF(plain); i++)
		if (streq(name, plain[i].name)) {
			p->section = plain[i].section;
			p->section_name = plain[i].name;
			return;
		}
	if (strncmp(name, "Persona", 7) != 0 || !isspace((unsigned char)name[7])) {
		parse_error(p, "[%s]: unknown section", name);
		return;
	}
	pname = name + 8;
	while (isspace((unsigned char)*pname))
		pname++;
	on_persona_section(p, name, pname);
}

/* Reads a line for inih, counting lines and seeing section headers (even those without keys). */
static char *reader(char *str, int num, void *stream) {
	struct parser *p = stream;
	size_t len;
	char *s, *end;

	if (p->error)
		return NULL;
	if (!fgets(str, num, p->file)) {
		if (ferror(p->file))
			parse_error(p, "cannot read: %s", strerror(errno));
		return NULL;
	}
	p->line++;
	len = strlen(str);
	if (len == (size_t)num - 1 && str[len - 1] != '\n' && !feof(p->file)) {
		parse_error(p, "line too long (at most %d characters)", num - 2);
		return NULL;
	}
	s = strip(str);
	if (*s == '[') {
		char name[256];
		end = strchr(s, ']');
		if (!end || (size_t)(end - s - 1) >= sizeof(name)) {
			parse_error(p, "malformed section header");
			return NULL;
		}
		memcpy(name, s + 1, (size_t)(end - s - 1));
		name[end - s - 1] = '\0';
		on_section(p, strip(name));
	}
	return str;
}

/* Drops a trailing "# comment": a '#' at the start or after white space. */
static void drop_comment(char *v) {
	for (char *s = v; *s; s++)
		if (*s == '#' && (s == v || isspace((unsigned char)s[-1]))) {
			*s = '\0';
			break;
		}
}

/* Calls fn for each white-space separated word of value; stops at the first error. */
static int for_each_word(struct parser *p, const char *key, const char *value,
			 int (*fn)(struct parser *p, const char *key, const char *word)) {
	char *copy, *tok, *save = NULL;

	copy = strdup(value);
	if (!copy)
		return parse_error(p, "out of memory");
	drop_comment(copy);
	for (tok = strtok_r(copy, " \t", &save); tok && !p->error; tok = strtok_r(NULL, " \t", &save))
		fn(p, key, tok);
	free(copy);
	return p->error ? 0 : 1;
}

static struct conf_devices *section_devices(struct parser *p) {
	switch (p->section) {
	case SECTION_INPUT:
		return &p->conf->input;
	case SECTION_LEDS:
		return &p->conf->leds;
	case SECTION_BACKLIGHT:
		return &p->conf->backlight;
	default:
		return NULL;
	}
}

static int add_pattern(struct parser *p, const char *key, const char *word) {
	struct conf_devices *d = section_devices(p);

	if (word[0] != '/')
		return parse_error(p, "[%s] %s=: '%s' is not an absolute path", p->section_name, key, word);
	if (strlen(word) >= PATH_MAX)
		return parse_error(p, "[%s] %s=: path too long", p->section_name, key);
	if (d->n_patterns == CONF_MAX_PATTERNS)
		return parse_error(p, "[%s] %s=: too many entries (at most %d)", p->section_name, key,
				   CONF_MAX_PATTERNS);
	d->patterns[d->n_patterns] = strdup(word);
	if (!d->patterns[d->n_patterns])
		return parse_error(p, "out of memory");
	d->n_patterns++;
	return 1;
}

static int add_shared(struct parser *p, const char *key, const char *word) {
	struct conf_devices *d = section_devices(p);

	if (strchr(word, '/') || strlen(word) > NAME_MAX)
		return parse_error(p, "[%s] %s=: '%s' is not a device name", p->section_name, key, word);
	if (d->n_shared == CONF_MAX_PATTERNS)
		return parse_error(p, "[%s] %s=: too many entries (at most %d)", p->section_name, key,
				   CONF_MAX_PATTERNS);
	d->shared[d->n_shared] = strdup(word);
	if (!d->shared[d->n_shared])
		return parse_error(p, "out of memory");
	d->n_shared++;
	return 1;
}

/* KEY_A+KEY_B:persona */
static int add_switch_key(struct parser *p, const char *key, const char *word) {
	struct conf *c = p->conf;
	struct conf_switch_key *sk;
	char buf[256], *colon, *tok, *save = NULL;
	bool secure = streq(key, "SecureAttentionKey");

	if (secure && c->have_secure_key)
		return parse_error(p, "[Daemon] %s=: only one secure attention chord", key);
	if (!secure && c->n_switch_keys - c->have_secure_key == CONF_MAX_SWITCH_KEYS)
		return parse_error(p, "[Daemon] %s=: too many hotkeys (at most %d)", key, CONF_MAX_SWITCH_KEYS);
	snprintf(buf, sizeof(buf), "%s", word);
	colon = strrchr(buf, ':');
	if (!colon || !name_is_valid(colon + 1))
		return parse_error(p, "[Daemon] %s=%s: expected KEY_X+KEY_Y:PERSONA", key, word);
	*colon = '\0';
	sk = &c->switch_keys[c->n_switch_keys];
	*sk = (struct conf_switch_key){ .line = p->line, .secure = secure };
	snprintf(sk->persona, sizeof(sk->persona), "%s", colon + 1);
	for (tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
		int code = libevdev_event_code_from_name(EV_KEY, tok);
		if (code < 0)
			return parse_error(p, "[Daemon] %s=%s: unknown key '%s'", key, word, tok);
		if (sk->n_keys == CONF_MAX_CHORD)
			return parse_error(p, "[Daemon] %s=%s: at most %d keys in a chord", key, word,
					   CONF_MAX_CHORD);
		sk->keys[sk->n_keys++] = (uint16_t)code;
	}
	if (sk->n_keys == 0)
		return parse_error(p, "[Daemon] %s=%s: no keys", key, word);
	for (size_t i = 0; i < c->n_switch_keys; i++)
		if (c->switch_keys[i].n_keys == sk->n_keys &&
		    memcmp(c->switch_keys[i].keys, sk->keys, sk->n_keys * sizeof(sk->keys[0])) == 0 &&
		    (secure || c->switch_keys[i].secure))
			return parse_error(p, "[Daemon] %s=%s: the secure attention chord is another chord's too", key,
					   word);
	c->have_secure_key = c->have_secure_key || secure;
	c->n_switch_keys++;
	return 1;
}

/* True if a path has a ".." component. */
static bool path_has_dotdot(const char *path) {
	for (const char *s = path; (s = strstr(s, "..")); s += 2)
		if ((s == path || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
			return true;
	return false;
}

/* node:path, e.g. fb0:/dev/graphics/fb0 */
static int add_map(struct parser *p, const char *key, const char *word) {
	struct conf_persona *cp = p->persona;
	const char *colon = strchr(word, ':');
	struct conf_map *map;

	if (!colon || colon == word || (size_t)(colon - word) > NAME_MAX_LEN || colon[1] != '/' ||
	    path_has_dotdot(colon + 1) || strlen(colon + 1) >= PATH_MAX)
		return parse_error(p, "[Persona %s] %s=%s: expected NODE:/absolute/path", cp->name, key, word);
	if (cp->n_maps == CONF_MAX_MAPS)
		return parse_error(p, "[Persona %s] %s=: too many entries (at most %d)", cp->name, key,
				   CONF_MAX_MAPS);
	map = &cp->maps[cp->n_maps];
	memcpy(map->node, word, (size_t)(colon - word));
	map->node[colon - word] = '\0';
	if (!name_is_valid(map->node))
		return parse_error(p, "[Persona %s] %s=%s: invalid node name '%s'", cp->name, key, word, map->node);
	map->path = strdup(colon + 1);
	if (!map->path)
		return parse_error(p, "out of memory");
	cp->n_maps++;
	return 1;
}

static int set_string(struct parser *p, char **dst, const char *v) {
	free(*dst);
	*dst = strdup(v);
	return *dst ? 1 : parse_error(p, "out of memory");
}

static int set_boolean(struct parser *p, bool *dst, const char *key, const char *v) {
	int b = parse_boolean(v);

	if (b < 0)
		return parse_error(p, "[%s] %s=%s: not a boolean (yes or no)", p->section_name, key, v);
	*dst = b;
	return 1;
}

static int parse_mode(struct parser *p, const char *v) {
	unsigned int w, h;
	char extra;

	if (sscanf(v, "%ux%u%c", &w, &h, &extra) != 2 || w < 16 || h < 16 || w > 8192 || h > 8192)
		return parse_error(p, "[Display] Mode=%s: expected WIDTHxHEIGHT, 16 to 8192 each", v);
	p->conf->display_width = w;
	p->conf->display_height = h;
	return 1;
}

static int parse_spare_frames(struct parser *p, const char *v) {
	unsigned long n = 0;
	char *end = NULL;

	errno = 0;
	if (isdigit((unsigned char)v[0]))
		n = strtoul(v, &end, 10);
	if (!end || *end || errno || n > CONF_MAX_SPARE_FRAMES)
		return parse_error(p, "[Display] SpareFrames=%s: expected a number of frames, 0 to %u", v,
				   CONF_MAX_SPARE_FRAMES);
	p->conf->display_spares = (unsigned int)n;
	return 1;
}

/* A size in bytes with an optional K, M or G (powers of 1024), or "infinity" (UINT64_MAX) where allowed. */
static int parse_size(struct parser *p, const char *key, const char *v, bool infinity, uint64_t *ret) {
	unsigned long long n;
	unsigned int shift = 0;
	char *end;

	if (infinity && streq(v, "infinity")) {
		*ret = UINT64_MAX;
		return 1;
	}
	errno = 0;
	n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
	if (!isdigit((unsigned char)v[0]) || errno)
		goto bad;
	if (*end == 'K' || *end == 'M' || *end == 'G') {
		shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
		end++;
	}
	if (*end || n > (UINT64_MAX >> shift))
		goto bad;
	*ret = (uint64_t)n << shift;
	return 1;
bad:
	return parse_error(p, "[Display] %s=%s: expected a size (bytes, or with K, M or G)%s", key, v,
			   infinity ? " or infinity" : "");
}

static int display_key(struct parser *p, const char *name, const char *v) {
	struct conf *c = p->conf;

	if (streq(name, "Backend")) {
		if (streq(v, "drm"))
			c->display = DISPLAY_DRM;
		else if (streq(v, "fbdev"))
			c->display = DISPLAY_FBDEV;
		else if (streq(v, "headless"))
			c->display = DISPLAY_HEADLESS;
		else
			return parse_error(p, "[Display] Backend=%s: expected drm, fbdev or headless", v);
		return 1;
	}
	if (streq(name, "Device")) {
		if (v[0] != '/')
			return parse_error(p, "[Display] Device=%s: not an absolute path", v);
		return set_string(p, &c->display_device, v);
	}
	if (streq(name, "Mode"))
		return parse_mode(p, v);
	if (streq(name, "SpareBuffer")) {
		bool spare = false;
		int r = set_boolean(p, &spare, name, v);

		if (r > 0)
			c->display_spares = spare;
		return r;
	}
	if (streq(name, "SpareFrames"))
		return parse_spare_frames(p, v);
	if (streq(name, "SpareMemory"))
		return parse_size(p, name, v, true, &c->display_spare_bytes);
	if (streq(name, "CardMemory")) {
		int r = parse_size(p, name, v, false, &c->display_card_bytes);

		if (r > 0 && c->display_card_bytes < CONF_MIN_CARD_MEMORY)
			return parse_error(p, "[Display] CardMemory=%s: less than one megabyte", v);
		return r;
	}
	if (streq(name, "TrackWrites"))
		return set_boolean(p, &c->display_track, name, v);
	return parse_error(p, "[Display] %s: unknown key", name);
}

static int daemon_key(struct parser *p, const char *name, const char *v, const char *raw) {
	struct conf *c = p->conf;

	if (streq(name, "Routed"))
		return set_boolean(p, &c->routed, name, v);
	if (streq(name, "SwitchGroup")) {
		if (!*v || strlen(v) > 64)
			return parse_error(p, "[Daemon] SwitchGroup=%s: not a group name", v);
		return set_string(p, &c->switch_group, v);
	}
	if (streq(name, "SwitchKeys"))
		return for_each_word(p, name, raw, add_switch_key);
	if (streq(name, "SecureAttentionKey"))
		return add_switch_key(p, name, v);
	return parse_error(p, "[Daemon] %s: unknown key", name);
}

/* NAME, GID or NAME:GID; a name as groupadd takes them. */
static int parse_group(struct parser *p, const char *key, const char *v, struct conf_group *ret) {
	const char *colon = strchr(v, ':');
	size_t len = colon ? (size_t)(colon - v) : strlen(v);
	const char *num = colon ? colon + 1 : v;
	bool numeric = len > 0 && strspn(v, "0123456789") == len;
	struct conf_group g = { .gid = -1 };

	if (numeric && !colon)
		len = 0;
	else if (len == 0 || len > NAME_MAX_LEN || v[0] == '-' ||
		 strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") < len)
		return parse_error(p, "[Persona %s] %s=%s: expected a group name, a gid, or NAME:GID", p->persona->name,
				   key, v);
	if (colon || numeric) {
		char *end;
		unsigned long long gid;

		errno = 0;
		gid = strtoull(num, &end, 10);
		if (!*num || *end || errno || !isdigit((unsigned char)*num) || gid >= UINT32_MAX)
			return parse_error(p, "[Persona %s] %s=%s: not a gid (0 to %u)", p->persona->name, key, v,
					   UINT32_MAX - 1);
		g.gid = (int64_t)gid;
	}
	memcpy(g.name, v, len);
	g.name[len] = '\0';
	*ret = g;
	return 1;
}

bool conf_uids_contain(const struct conf_uids *u, uint32_t uid) {
	for (size_t i = 0; i < u->n; i++)
		if (uid >= u->ranges[i].first && uid <= u->ranges[i].last)
			return true;
	return false;
}

/* A uid below 2^32 - 1 (the kernel's invalid id), in decimal; NULL when there is none. */
static const char *parse_uid(const char *s, uint32_t *ret) {
	unsigned long long v = 0;
	const char *start = s;

	for (; *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (unsigned long long)(*s - '0');
		if (v >= UINT32_MAX)
			return NULL;
	}
	if (s == start)
		return NULL;
	*ret = (uint32_t)v;
	return s;
}

/* UID or FIRST-LAST */
static int add_uid_range(struct parser *p, const char *key, const char *word) {
	struct conf_persona *cp = p->persona;
	uint32_t first, last;
	const char *s = parse_uid(word, &first);

	if (s && *s == '-')
		s = parse_uid(s + 1, &last);
	else
		last = first;
	if (!s || *s || last < first)
		return parse_error(p, "[Persona %s] %s=%s: expected a uid or FIRST-LAST (0 to %u)", cp->name, key,
				   word, UINT32_MAX - 1);
	if (cp->request_users.n == CONF_MAX_UID_RANGES)
		return parse_error(p, "[Persona %s] %s=: too many entries (at most %d)", cp->name, key,
				   CONF_MAX_UID_RANGES);
	cp->request_users.ranges[cp->request_users.n].first = first;
	cp->request_users.ranges[cp->request_users.n].last = last;
	cp->request_users.n++;
	return 1;
}

static int persona_key(struct parser *p, const char *name, const char *v, const char *raw) {
	struct conf_persona *cp = p->persona;

	if (streq(name, "Active")) {
		int b = parse_boolean(v);
		if (b < 0)
			return parse_error(p, "[Persona %s] Active=%s: not a boolean (yes or no)", cp->name, v);
		cp->active = b;
		cp->active_line = p->line;
		return 1;
	}
	if (streq(name, "AllowRequestActive")) {
		int b = parse_boolean(v);
		if (b < 0)
			return parse_error(p, "[Persona %s] %s=%s: not a boolean (yes or no)", cp->name, name, v);
		cp->allow_request_active = b;
		return 1;
	}
	if (streq(name, "RequestActiveUsers")) {
		/* The first use replaces the default; an empty value allows no one. */
		if (!cp->request_users_set || !*v)
			cp->request_users.n = 0;
		cp->request_users_set = true;
		return for_each_word(p, name, raw, add_uid_range);
	}
	if (streq(name, "Pid")) {
		char *end;
		long pid = strtol(v, &end, 10);
		if (!*v || *end || pid <= 0 || pid > INT32_MAX)
			return parse_error(p, "[Persona %s] Pid=%s: not a process id", cp->name, v);
		cp->pid = (pid_t)pid;
		return 1;
	}
	if (streq(name, "Machine")) {
		/* As systemd-machined accepts them: a host name, at most 64 characters. */
		if (!*v || strlen(v) > 64 || *v == '.' || *v == '-' ||
		    strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(v))
			return parse_error(p, "[Persona %s] Machine=%s: not a machine name", cp->name, v);
		return set_string(p, &cp->machine, v);
	}
	if (streq(name, "DeviceMap"))
		return for_each_word(p, name, raw, add_map);
	if (streq(name, "InputGroup"))
		return parse_group(p, name, v, &cp->input_group);
	if (streq(name, "VideoGroup"))
		return parse_group(p, name, v, &cp->video_group);
	return parse_error(p, "[Persona %s] %s: unknown key", cp->name, name);
}

static int handler(void *user, const char *section, const char *name, const char *value) {
	struct parser *p = user;
	char buf[256], *v;

	if (p->error)
		return 0;
	snprintf(buf, sizeof(buf), "%s", value);
	drop_comment(buf);
	v = strip(buf);

	switch (p->section) {
	case SECTION_NONE:
		return parse_error(p, "%s=%s: key outside any section", name, value);
	case SECTION_UNKNOWN:
		return 0;
	case SECTION_DAEMON:
		return daemon_key(p, name, v, value);
	case SECTION_DISPLAY:
		return display_key(p, name, v);
	case SECTION_PERSONA:
		return persona_key(p, name, v, value);
	case SECTION_INPUT:
	case SECTION_LEDS:
	case SECTION_BACKLIGHT:
		if (streq(name, "Devices"))
			return for_each_word(p, name, value, add_pattern);
		if (streq(name, "Shared") && p->section != SECTION_INPUT)
			return for_each_word(p, name, value, add_shared);
		return parse_error(p, "[%s] %s: unknown key", section, name);
	}
	return 0;
}

bool conf_name_is_routed_node(const char *name) {
	if (streq(name, "fb0") || streq(name, "card0"))
		return true;
	return strncmp(name, "event", 5) == 0 && name[5] && strspn(name + 5, "0123456789") == strlen(name + 5);
}

int conf_find_persona(const struct conf *c, const char *name) {
	for (size_t i = 0; i < c->n_personas; i++)
		if (streq(c->personas[i].name, name))
			return (int)i;
	return -1;
}

static int finish(struct parser *p) {
	struct conf *c = p->conf;
	bool have_active = false;

	if (c->n_personas == 0) {
		if (asprintf(&p->error, "%s: no [Persona NAME] section: at least one persona is needed", c->path) < 0)
			p->error = NULL;
		return -EINVAL;
	}
	for (size_t i = 0; i < c->n_personas; i++) {
		if (!c->personas[i].active)
			continue;
		if (have_active) {
			p->line = c->personas[i].active_line;
			parse_error(p, "[Persona %s] Active=yes: persona %s is already the active one",
				    c->personas[i].name, c->personas[c->active].name);
			return -EINVAL;
		}
		have_active = true;
		c->active = i;
	}
	/* /dev/devns/NAME would be both the persona's directory and a routed node. */
	for (size_t i = 0; c->routed && i < c->n_personas; i++)
		if (conf_name_is_routed_node(c->personas[i].name)) {
			p->line = c->personas[i].line;
			parse_error(p, "[Persona %s]: with Routed=yes a persona may not be named as a routed node (fb0, "
				    "card0, eventN)", c->personas[i].name);
			return -EINVAL;
		}
	for (size_t i = 0; i < c->n_switch_keys; i++)
		if (conf_find_persona(c, c->switch_keys[i].persona) < 0) {
			p->line = c->switch_keys[i].line;
			parse_error(p, "[Daemon] %s=: no persona named '%s'",
				    c->switch_keys[i].secure ? "SecureAttentionKey" : "SwitchKeys", c->switch_keys[i].persona);
			return -EINVAL;
		}
	if (c->display == DISPLAY_NONE && (c->display_device || c->display_width)) {
		p->line = 0;
		if (asprintf(&p->error, "%s: [Display] needs Backend=", c->path) < 0)
			p->error = NULL;
		return -EINVAL;
	}
	if (c->display == DISPLAY_HEADLESS && c->display_width == 0) {
		c->display_width = 1280;
		c->display_height = 800;
	}
	return 0;
}

int conf_load(const char *path, struct conf **ret, char **ret_error) {
	_cleanup_(conf_freep) struct conf *c = NULL;
	struct parser p = { 0 };
	int r;

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->path = strdup(path);
	if (!c->path)
		return -ENOMEM;
	c->display_spares = 3;
	c->display_spare_bytes = UINT64_MAX;
	c->display_track = true;
	p.conf = c;
	p.file = fopen(path, "re");
	if (!p.file) {
		r = -errno;
		if (asprintf(ret_error, "%s: cannot read: %s", path, strerror(-r)) < 0)
			*ret_error = NULL;
		return r;
	}
	r = ini_parse_stream(reader, &p, handler, &p);
	if (r < 0 && !p.error)
		parse_error(&p, "cannot read file");
	else if (r > 0 && !p.error) {
		p.line = (unsigned int)r;
		parse_error(&p, "syntax error (expected [Section] or Key=Value)");
	}
	fclose(p.file);
	if (!p.error)
		finish(&p);
	if (p.error) {
		*ret_error = p.error;
		return -EINVAL;
	}
	*ret = TAKE_PTR(c);
	return 0;
}

static void devices_free(struct conf_devices *d) {
	for (size_t i = 0; i < d->n_patterns; i++)
		free(d->patterns[i]);
	for (size_t i = 0; i < d->n_shared; i++)
		free(d->shared[i]);
}

struct conf *conf_free(struct conf *c) {
	if (!c)
		return NULL;
	devices_free(&c->input);
	devices_free(&c->leds);
	devices_free(&c->backlight);
	for (size_t i = 0; i < c->n_personas; i++) {
		free(c->personas[i].machine);
		for (size_t j = 0; j < c->personas[i].n_maps; j++)
			free(c->personas[i].maps[j].path);
	}
	free(c->switch_group);
	free(c->display_device);
	free(c->path);
	free(c);
	return NULL;
}
