/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>

#include "idmap.h"
#include "util.h"

/* Longest text a full map takes: three 10-digit numbers a line. */
#define IDMAP_TEXT_MAX (IDMAP_MAX_RANGES * 36)

static const char *skip_blanks(const char *s, const char *end) {
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* One decimal number below 2^32, at s; NULL when there is none. */
static const char *parse_u32(const char *s, const char *end, uint32_t *ret) {
	uint64_t v = 0;
	const char *start = s;

	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > UINT32_MAX)
			return NULL;
	}
	if (s == start)
		return NULL;
	*ret = (uint32_t)v;
	return s;
}

int idmap_parse(const char *text, size_t len, struct idmap *ret) {
	const char *s = text, *end = text + len;

	ret->n = 0;
	while (s < end) {
		struct idmap_range r;

		s = skip_blanks(s, end);
		if (s < end && *s == '\n') {
			s++;
			continue;
		}
		if (s == end)
			break;
		if (ret->n == IDMAP_MAX_RANGES)
			return -EINVAL;
		if (!(s = parse_u32(s, end, &r.inside)) || !(s = parse_u32(skip_blanks(s, end), end, &r.outside)) ||
		    !(s = parse_u32(skip_blanks(s, end), end, &r.count)))
			return -EINVAL;
		s = skip_blanks(s, end);
		if (s < end && *s != '\n')
			return -EINVAL;
		if (r.count == 0 || (uint64_t)r.inside + r.count - 1 > UINT32_MAX ||
		    (uint64_t)r.outside + r.count - 1 > UINT32_MAX)
			return -EINVAL;
		ret->ranges[ret->n++] = r;
	}
	return 0;
}

int idmap_read(int proc_fd, const char *file, struct idmap *ret) {
	_cleanup_(closep) int fd = -1;
	_cleanup_(freep) char *buf = NULL;
	size_t len = 0;
	int r;

	fd = openat(proc_fd, file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	buf = malloc(IDMAP_TEXT_MAX);
	if (!buf)
		return -ENOMEM;
	r = read_bounded(fd, buf, IDMAP_TEXT_MAX, &len);
	if (r < 0)
		return r;
	return idmap_parse(buf, len, ret);
}

int idmap_to_host(const struct idmap *m, uint32_t inside, uint32_t *ret) {
	for (size_t i = 0; i < m->n; i++)
		if (inside >= m->ranges[i].inside && inside - m->ranges[i].inside < m->ranges[i].count) {
			*ret = m->ranges[i].outside + (inside - m->ranges[i].inside);
			return 0;
		}
	return -ENOENT;
}

int idmap_from_host(const struct idmap *m, uint32_t outside, uint32_t *ret) {
	for (size_t i = 0; i < m->n; i++)
		if (outside >= m->ranges[i].outside && outside - m->ranges[i].outside < m->ranges[i].count) {
			*ret = m->ranges[i].inside + (outside - m->ranges[i].outside);
			return 0;
		}
	return -ENOENT;
}
