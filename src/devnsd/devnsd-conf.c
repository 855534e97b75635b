/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devnsd-conf.h"

struct parser {
	FILE *file;
	struct conf *conf;
	unsigned int line;
	char *error;
	/* The section being read; NULL when it is unknown (already reported). */
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

static void on_section(struct parser *p, const char *name) {
	struct conf *c = p->conf;
	const char *pname;

	p->persona = NULL;
	if (streq(name, "Input"))
		return;
	if (strncmp(name, "Persona", 7) != 0 || !isspace((unsigned char)name[7])) {
		parse_error(p, "[%s]: unknown section", name);
		return;
	}
	pname = name + 8;
	while (isspace((unsigned char)*pname))
		pname++;
	if (!name_is_valid(pname)) {
		parse_error(p, "[%s]: invalid persona name '%s' (letters, digits, '_' and '-', at most %d)", name,
			    pname, NAME_MAX_LEN);
		return;
	}
	for (size_t i = 0; i < c->n_personas; i++)
		if (streq(c->personas[i].name, pname)) {
			parse_error(p, "[%s]: duplicate persona, first defined on line %u", name,
				    c->personas[i].line);
			return;
		}
	if (c->n_personas == CONF_MAX_PERSONAS) {
		parse_error(p, "[%s]: too many personas (at most %d)", name, CONF_MAX_PERSONAS);
		return;
	}
	p->persona = &c->personas[c->n_personas++];
	snprintf(p->persona->name, sizeof(p->persona->name), "%s", pname);
	p->persona->line = p->line;
}

/* Reads a line for inih, counting lines and seeing section headers (even those without keys). */
static char *reader(char *str, int num, void *stream) {
	struct parser *p = stream;
	size_t len;
	char *s, *end;

	if (p->error || !fgets(str, num, p->file))
		return NULL;
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

static int parse_devices(struct parser *p, const char *value) {
	struct conf *c = p->conf;
	char *copy, *tok, *save = NULL;

	copy = strdup(value);
	if (!copy)
		return parse_error(p, "out of memory");
	drop_comment(copy);
	for (tok = strtok_r(copy, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (tok[0] != '/') {
			parse_error(p, "[Input] Devices=%s: '%s' is not an absolute path", value, tok);
			break;
		}
		if (c->n_input_patterns == CONF_MAX_PATTERNS) {
			parse_error(p, "[Input] Devices=: too many entries (at most %d)", CONF_MAX_PATTERNS);
			break;
		}
		c->input_patterns[c->n_input_patterns] = strdup(tok);
		if (!c->input_patterns[c->n_input_patterns]) {
			parse_error(p, "out of memory");
			break;
		}
		c->n_input_patterns++;
	}
	free(copy);
	return p->error ? 0 : 1;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
	struct parser *p = user;
	char v[256];

	if (p->error)
		return 0;
	snprintf(v, sizeof(v), "%s", value);
	drop_comment(v);
	strip(v);

	if (streq(section, "Input")) {
		if (streq(name, "Devices"))
			return parse_devices(p, value);
		return parse_error(p, "[Input] %s: unknown key", name);
	}
	if (p->persona) {
		if (streq(name, "Active")) {
			int b = parse_boolean(strip(v));
			if (b < 0)
				return parse_error(p, "[Persona %s] Active=%s: not a boolean (yes or no)",
						   p->persona->name, value);
			p->persona->active = b;
			p->persona->active_line = p->line;
			return 1;
		}
		return parse_error(p, "[Persona %s] %s: unknown key", p->persona->name, name);
	}
	if (!*section)
		return parse_error(p, "%s=%s: key outside any section", name, value);
	/* Unknown section: already reported by the reader. */
	return 0;
}

static int finish(struct parser *p) {
	struct conf *c = p->conf;
	bool have_active = false;

	if (c->n_personas == 0) {
		p->line = 0;
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

struct conf *conf_free(struct conf *c) {
	if (!c)
		return NULL;
	for (size_t i = 0; i < c->n_input_patterns; i++)
		free(c->input_patterns[i]);
	free(c->path);
	free(c);
	return NULL;
}
