/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "fb-stream.h"

long fb_stream_clamp(size_t total, uint64_t pos, size_t count, bool write) {
	long err = 0;

	if (!write) {
		if (pos >= total)
			return 0;
		if (count > total - pos)
			count = total - (size_t)pos;
		return (long)count;
	}
	if (pos > total)
		return -EFBIG;
	if (count > total) {
		err = -EFBIG;
		count = total;
	}
	if (count > total - pos) {
		if (!err)
			err = -ENOSPC;
		count = total - (size_t)pos;
	}
	return count ? (long)count : err;
}
