/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Attribute files of a sysfs directory, opened with openat() below dirfd. */

/* Reads an attribute's text, NUL-terminated; returns its length or -errno (-EFBIG if it does not fit). */
int sysfs_attr_read(int dirfd, const char *name, char *buf, size_t size);

/* Reads an attribute holding one unsigned decimal number. */
int sysfs_attr_read_u32(int dirfd, const char *name, uint32_t *ret);

/* Writes text in one write(); 0 or -errno. */
int sysfs_attr_write(int dirfd, const char *name, const char *text);

/* Writes a number followed by a newline. */
int sysfs_attr_write_u32(int dirfd, const char *name, uint32_t value);
