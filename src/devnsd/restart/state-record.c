/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "restart/state-record.h"

void state_record_init(struct state_record *r) {
	*r = (struct state_record){ 0 };
}

void state_record_done(struct state_record *r) {
	free(r->items);
	state_record_init(r);
}

struct state_persona *state_record_persona(struct state_record *r, const char *name) {
	for (size_t i = 0; i < r->n_personas; i++)
		if (streq(r->personas[i].name, name))
			return &r->personas[i];
	return NULL;
}

int state_record_add_persona(struct state_record *r, const char *name, struct state_persona **ret) {
	struct state_persona *sp = state_record_persona(r, name);

	if (!sp) {
		if (!name_is_valid(name))
			return -EINVAL;
		if (r->n_personas == CONF_MAX_PERSONAS)
			return -E2BIG;
		sp = &r->personas[r->n_personas++];
		*sp = (struct state_persona){ 0 };
		snprintf(sp->name, sizeof(sp->name), "%s", name);
	}
	if (ret)
		*ret = sp;
	return 0;
}

static bool token_valid(const char *s, size_t max) {
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == n;
}

static bool value_valid(const char *s) {
	size_t n = strlen(s);

	if (n == 0 || n > STATE_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

int state_record_add_item(struct state_record *r, const char *persona, const char *part, const char *key,
			  const char *value) {
	struct state_item *items, *it;

	if (!name_is_valid(persona) || !token_valid(part, STATE_PART_MAX) || !token_valid(key, STATE_KEY_MAX) ||
	    !value_valid(value))
		return -EINVAL;
	if (r->n_items == STATE_RECORD_MAX_ITEMS)
		return -E2BIG;
	items = realloc(r->items, (r->n_items + 1) * sizeof(*items));
	if (!items)
		return -ENOMEM;
	r->items = items;
	it = &items[r->n_items++];
	snprintf(it->persona, sizeof(it->persona), "%s", persona);
	snprintf(it->part, sizeof(it->part), "%s", part);
	snprintf(it->key, sizeof(it->key), "%s", key);
	snprintf(it->value, sizeof(it->value), "%s", value);
	return 0;
}

_printf_(4, 5) static int bad(char *error, size_t size, unsigned int line, const char *fmt, ...) {
	char what[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (error && size > 0) {
		if (line > 0)
			snprintf(error, size, "line %u: %s", line, what);
		else
			snprintf(error, size, "%s", what);
	}
	return -EBADMSG;
}

/* Splits off the next space-separated word of *s (modified in place); NULL when none is left. */
static char *next_word(char **s) {
	char *w = *s + strspn(*s, " "), *end;

	if (!*w)
		return NULL;
	end = w + strcspn(w, " ");
	*s = *end ? end + 1 : end;
	*end = '\0';
	return w;
}

static int parse_u64(const char *w, uint64_t *ret) {
	char *end;
	unsigned long long v;

	if (!w || w[0] < '0' || w[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(w, &end, 10);
	if (errno != 0 || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

static int parse_dev(const char *w, uint64_t *ret) {
	unsigned int major, minor;
	char tail;

	if (!w || sscanf(w, "%u:%u%c", &major, &minor, &tail) != 2 || major > 0xfffff || minor > 0xfffff)
		return -EINVAL;
	*ret = ((uint64_t)major << 20) | minor;
	return 0;
}

static int parse_line(struct state_record *r, char *line, bool *ret_end) {
	char *word = next_word(&line), *name;
	struct state_persona *sp;
	uint64_t v[4];
	int k;

	if (!word)
		return -EINVAL;
	if (streq(word, "end")) {
		*ret_end = true;
		return next_word(&line) ? -EINVAL : 0;
	}
	if (streq(word, "active")) {
		name = next_word(&line);
		if (!name || !name_is_valid(name) || next_word(&line))
			return -EINVAL;
		snprintf(r->active, sizeof(r->active), "%s", name);
		return 0;
	}
	if (streq(word, "seq"))
		return parse_u64(next_word(&line), &r->seq) < 0 || next_word(&line) ? -EINVAL : 0;
	if (streq(word, "view"))
		return parse_dev(next_word(&line), &r->view_dev) < 0 || next_word(&line) ? -EINVAL : 0;
	if (streq(word, "persona")) {
		const char *how;

		name = next_word(&line);
		how = next_word(&line);
		if (!name || !how || next_word(&line) || (!streq(how, "created") && !streq(how, "configured")))
			return -EINVAL;
		if (state_record_persona(r, name))
			return -EEXIST;
		k = state_record_add_persona(r, name, &sp);
		if (k < 0)
			return k;
		sp->created = streq(how, "created");
		return 0;
	}
	if (streq(word, "attach")) {
		name = next_word(&line);
		sp = name ? state_record_persona(r, name) : NULL;
		if (!sp || sp->attached)
			return -EINVAL;
		for (size_t i = 0; i < ELEMENTSOF(v); i++)
			if (parse_u64(next_word(&line), &v[i]) < 0)
				return -EINVAL;
		if (next_word(&line) || v[0] == 0 || v[0] > INT32_MAX)
			return -EINVAL;
		sp->attached = true;
		sp->pid = (pid_t)v[0];
		sp->start_time = v[1];
		sp->ns_dev = v[2];
		sp->ns_ino = v[3];
		return 0;
	}
	if (streq(word, "item")) {
		char *persona = next_word(&line), *part = next_word(&line), *key = next_word(&line);

		if (!persona || !part || !key || !state_record_persona(r, persona))
			return -EINVAL;
		return state_record_add_item(r, persona, part, key, line);
	}
	return -EINVAL;
}

int state_record_parse(struct state_record *r, const char *text, size_t len, char *error, size_t error_size) {
	char line[STATE_RECORD_MAX_LINE + 1];
	unsigned int number = 0;
	bool end = false;
	size_t pos = 0;

	state_record_init(r);
	if (len > STATE_RECORD_MAX_SIZE)
		return bad(error, error_size, 0, "larger than %u bytes", STATE_RECORD_MAX_SIZE);
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n;
		int k;

		if (!nl) {
			state_record_done(r);
			return bad(error, error_size, number + 1, "cut short (no newline)");
		}
		n = (size_t)(nl - (text + pos));
		number++;
		if (end) {
			state_record_done(r);
			return bad(error, error_size, number, "text after the end");
		}
		if (n > STATE_RECORD_MAX_LINE || memchr(text + pos, '\0', n)) {
			state_record_done(r);
			return bad(error, error_size, number, "line too long or not text");
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + 1;
		if (number == 1) {
			if (!streq(line, "devnsd-state 1")) {
				state_record_done(r);
				return bad(error, error_size, number, "not a devnsd state record of version 1");
			}
			continue;
		}
		k = parse_line(r, line, &end);
		if (k < 0) {
			state_record_done(r);
			return bad(error, error_size, number, "%s", k == -E2BIG ? "past a limit" :
							       k == -EEXIST ? "a persona named twice" : "malformed");
		}
	}
	if (!end) {
		state_record_done(r);
		return bad(error, error_size, 0, number == 0 ? "empty" : "cut short (no end line)");
	}
	return 0;
}

int state_record_format(const struct state_record *r, char **ret, size_t *ret_len) {
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	fputs("devnsd-state 1\n", f);
	if (r->seq)
		fprintf(f, "seq %" PRIu64 "\n", r->seq);
	if (r->active[0])
		fprintf(f, "active %s\n", r->active);
	if (r->view_dev)
		fprintf(f, "view %u:%u\n", (unsigned int)(r->view_dev >> 20), (unsigned int)(r->view_dev & 0xfffff));
	for (size_t i = 0; i < r->n_personas; i++) {
		const struct state_persona *sp = &r->personas[i];

		fprintf(f, "persona %s %s\n", sp->name, sp->created ? "created" : "configured");
		if (sp->attached)
			fprintf(f, "attach %s %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", sp->name, (int)sp->pid,
				sp->start_time, sp->ns_dev, sp->ns_ino);
	}
	for (size_t i = 0; i < r->n_items; i++)
		fprintf(f, "item %s %s %s %s\n", r->items[i].persona, r->items[i].part, r->items[i].key,
			r->items[i].value);
	fputs("end\n", f);
	if (fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret = text;
	*ret_len = len;
	return 0;
}
