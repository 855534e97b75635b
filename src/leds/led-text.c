/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "led-text.h"
#include "util.h"

/* Longest number text taken: digits of a 64-bit value in octal, a prefix, a sign, a newline. */
#define VALUE_TEXT_MAX 32

static void add_trigger(struct led_triggers *t, const char *name, size_t len) {
	if (t->n == LED_TRIGGERS_MAX || len == 0 || len > LED_TRIGGER_NAME_MAX)
		return;
	memcpy(t->names[t->n], name, len);
	t->names[t->n][len] = '\0';
	t->n++;
}

void led_triggers_parse(const char *text, struct led_triggers *ret, size_t *ret_current) {
	struct led_triggers t = { .n = 0 };
	size_t current = 0;

	add_trigger(&t, "none", 4);
	while (*text) {
		const char *word;
		size_t len;
		bool bracketed;

		while (isspace((unsigned char)*text))
			text++;
		word = text;
		while (*text && !isspace((unsigned char)*text))
			text++;
		len = (size_t)(text - word);
		bracketed = len >= 2 && word[0] == '[' && word[len - 1] == ']';
		if (bracketed) {
			word++;
			len -= 2;
		}
		if (len == 0)
			continue;
		if (len == 4 && strncmp(word, "none", 4) == 0) {
			if (bracketed)
				current = 0;
			continue;
		}
		/* A long list is cut, but never before the current trigger (one too long to keep cuts nothing). */
		if (bracketed && len <= LED_TRIGGER_NAME_MAX && t.n == LED_TRIGGERS_MAX)
			t.n--;
		add_trigger(&t, word, len);
		if (bracketed && len <= LED_TRIGGER_NAME_MAX)
			current = t.n - 1;
	}
	*ret = t;
	*ret_current = current;
}

int led_triggers_format(const struct led_triggers *t, size_t current, char *buf, size_t size) {
	size_t len = 0;

	for (size_t i = 0; i < t->n; i++) {
		int n = snprintf(buf + len, size - len, i == current ? "%s[%s]" : "%s%s", i ? " " : "",
				 t->names[i]);
		if (n < 0 || (size_t)n >= size - len)
			return -ENOBUFS;
		len += (size_t)n;
	}
	if (len + 2 > size)
		return -ENOBUFS;
	buf[len++] = '\n';
	buf[len] = '\0';
	return (int)len;
}

int led_triggers_find(const struct led_triggers *t, const char *buf, size_t len) {
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0 || len > LED_TRIGGER_NAME_MAX)
		return -EINVAL;
	for (size_t i = 0; i < t->n; i++)
		if (strlen(t->names[i]) == len && memcmp(t->names[i], buf, len) == 0)
			return (int)i;
	return -EINVAL;
}

int led_parse_value(const char *buf, size_t len, unsigned int base, uint32_t max, uint32_t *ret) {
	char text[VALUE_TEXT_MAX + 1], *end;
	const char *digits = text;
	unsigned long long v;

	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len == 0 || len > VALUE_TEXT_MAX)
		return -EINVAL;
	memcpy(text, buf, len);
	text[len] = '\0';
	if (*digits == '+')
		digits++;
	/* strtoull() would also take white space and a minus sign. */
	if (!isdigit((unsigned char)*digits))
		return -EINVAL;
	errno = 0;
	v = strtoull(digits, &end, (int)base);
	if (errno != 0 || *end != '\0' || v > max)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}
