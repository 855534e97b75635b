/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * How much of a read or write of count bytes at pos fits a framebuffer of
 * total bytes, the way the kernel's fb_read()/fb_write() cut it: the byte
 * count (0 for a read at or past the end), or, for a write that can write
 * nothing, the kernel's error (-EFBIG past the end, -ENOSPC at the end).
 */
long fb_stream_clamp(size_t total, uint64_t pos, size_t count, bool write);
