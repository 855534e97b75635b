/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * A user namespace's uid_map or gid_map, as /proc/PID/uid_map shows it to
 * a reader in the initial user namespace: ids [inside, inside + count) of
 * the namespace are the host's [outside, outside + count).
 */
#define IDMAP_MAX_RANGES 340

struct idmap_range {
	uint32_t inside, outside, count;
};

struct idmap {
	struct idmap_range ranges[IDMAP_MAX_RANGES];
	size_t n;
};

/* Parses the map's text: lines of three numbers. -EINVAL for anything else, or ranges that overflow. */
int idmap_parse(const char *text, size_t len, struct idmap *ret);
/* Reads "uid_map" or "gid_map" below a /proc/PID directory fd. */
int idmap_read(int proc_fd, const char *file, struct idmap *ret);
/* The host's id for id inside the namespace; -ENOENT when it is not mapped. */
int idmap_to_host(const struct idmap *m, uint32_t inside, uint32_t *ret);
/* The namespace's id for a host id; -ENOENT when it is not mapped. */
int idmap_from_host(const struct idmap *m, uint32_t outside, uint32_t *ret);
