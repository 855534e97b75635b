/* SPDX-License-Identifier: MIT */
#include "ratelimit.h"

bool ratelimit_take(struct ratelimit *rl, uint64_t now_usec) {
	if (rl->spent > 0 && rl->interval_usec > 0 && now_usec > rl->last_usec) {
		uint64_t back = (now_usec - rl->last_usec) / rl->interval_usec;

		if (back >= rl->spent)
			rl->spent = 0;
		else
			rl->spent -= (unsigned int)back;
		/* Time not yet worth a token counts toward the next one. */
		rl->last_usec += back * rl->interval_usec;
	}
	if (rl->spent >= rl->burst)
		return false;
	if (rl->spent++ == 0)
		rl->last_usec = now_usec;
	return true;
}

uint64_t ratelimit_next(const struct ratelimit *rl) {
	if (rl->spent < rl->burst)
		return 0;
	return rl->last_usec + rl->interval_usec;
}
