/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "util.h"
#include "populate/view-mounts.h"

/* mountinfo escapes space, tab, newline and backslash as \ooo. false when it does not fit or is malformed. */
static bool unescape(const char *s, size_t n, char *out, size_t size) {
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '\\') {
			if (i + 3 >= n)
				return false;
			if (s[i + 1] < '0' || s[i + 1] > '3' || s[i + 2] < '0' || s[i + 2] > '7' || s[i + 3] < '0' ||
			    s[i + 3] > '7')
				return false;
			c = (char)(((s[i + 1] - '0') << 6) | ((s[i + 2] - '0') << 3) | (s[i + 3] - '0'));
			i += 3;
		}
		if (c == '\0' || k + 1 >= size)
			return false;
		out[k++] = c;
	}
	out[k] = '\0';
	return true;
}

/* The next space-separated field of [*pos, end). */
static bool field(const char **pos, const char *end, const char **ret, size_t *ret_len) {
	const char *s = *pos, *e;

	while (s < end && *s == ' ')
		s++;
	if (s >= end)
		return false;
	for (e = s; e < end && *e != ' '; e++)
		;
	*ret = s;
	*ret_len = (size_t)(e - s);
	*pos = e;
	return true;
}

static bool parse_line(const char *line, const char *end, dev_t dev, const char *persona, struct view_mount *ret) {
	const char *f[5];
	size_t n[5];
	char num[64], root[256];
	unsigned int major, minor;
	uint64_t id;
	char tail;
	size_t plen = strlen(persona);

	const char *w;
	size_t wn;

	for (size_t i = 0; i < ELEMENTSOF(f); i++)
		if (!field(&line, end, &f[i], &n[i]))
			return false;
	/* After the optional fields and "-": the file system type, devnsd's views' own. */
	do
		if (!field(&line, end, &w, &wn))
			return false;
	while (wn != 1 || w[0] != '-');
	if (!field(&line, end, &w, &wn) || wn != strlen(VIEW_MOUNTS_FSTYPE) || memcmp(w, VIEW_MOUNTS_FSTYPE, wn) != 0)
		return false;
	if (n[2] >= sizeof(num))
		return false;
	memcpy(num, f[2], n[2]);
	num[n[2]] = '\0';
	if (sscanf(num, "%u:%u%c", &major, &minor, &tail) != 2 || makedev(major, minor) != dev)
		return false;
	if (n[0] >= sizeof(num))
		return false;
	memcpy(num, f[0], n[0]);
	num[n[0]] = '\0';
	if (sscanf(num, "%" SCNu64 "%c", &id, &tail) != 1)
		return false;
	if (!unescape(f[3], n[3], root, sizeof(root)) || root[0] != '/')
		return false;
	/* "/PERSONA" or "/PERSONA/..." */
	if (strncmp(root + 1, persona, plen) != 0 || (root[1 + plen] != '\0' && root[1 + plen] != '/') ||
	    strstr(root, "/..") || strstr(root, "//"))
		return false;
	if (!unescape(f[4], n[4], ret->target, sizeof(ret->target)) || ret->target[0] != '/' || !ret->target[1] ||
	    strstr(ret->target, "//"))
		return false;
	memmove(ret->target, ret->target + 1, strlen(ret->target));
	snprintf(ret->root, sizeof(ret->root), "%s", root + 1);
	ret->mnt_id = id;
	return true;
}

size_t view_mounts_find(const char *text, size_t len, dev_t dev, const char *persona, struct view_mount *out,
			size_t max) {
	const char *pos = text, *end = text + len;
	size_t found = 0;

	if (dev == 0)
		return 0;
	while (pos < end && found < max) {
		const char *nl = memchr(pos, '\n', (size_t)(end - pos));

		/* A line cut short is not read. */
		if (!nl)
			break;
		if (parse_line(pos, nl, dev, persona, &out[found]))
			found++;
		pos = nl + 1;
	}
	return found;
}
