/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>

#include "fb-ticket.h"

static bool live(const struct fb_ticket *s, uint64_t now) {
	return s->file && now < s->expires;
}

static int random_token(struct devns_fb_ticket *ret) {
	size_t done = 0;

	while (done < sizeof(ret->token)) {
		ssize_t n = getrandom(ret->token + done, sizeof(ret->token) - done, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	return 0;
}

int fb_tickets_issue(struct fb_tickets *t, const void *file, uint64_t now, struct devns_fb_ticket *ret) {
	struct fb_ticket *oldest = NULL, *free_slot = NULL, *s;
	unsigned int n = 0;
	int r;

	for (size_t i = 0; i < FB_TICKETS_MAX; i++) {
		s = &t->slot[i];
		if (!live(s, now)) {
			free_slot = free_slot ? free_slot : s;
			continue;
		}
		if (s->file != file)
			continue;
		n++;
		if (!oldest || s->expires < oldest->expires)
			oldest = s;
	}
	s = n >= FB_TICKETS_PER_FILE ? oldest : free_slot;
	if (!s)
		return -EBUSY;
	r = random_token(&s->token);
	if (r < 0) {
		*s = (struct fb_ticket){ 0 };
		return r;
	}
	s->file = file;
	s->expires = now + FB_TICKET_LIFETIME_USEC;
	*ret = s->token;
	return 0;
}

int fb_tickets_redeem(struct fb_tickets *t, const struct devns_fb_ticket *token, uint64_t now, const void **ret_file) {
	struct fb_ticket *found = NULL;

	/* Every slot is compared in full, so the time taken says nothing about how close a guess came. */
	for (size_t i = 0; i < FB_TICKETS_MAX; i++) {
		struct fb_ticket *s = &t->slot[i];
		uint8_t diff = 0;

		for (size_t k = 0; k < sizeof(token->token); k++)
			diff |= (uint8_t)(s->token.token[k] ^ token->token[k]);
		if (diff == 0 && s->file)
			found = s;
	}
	if (!found)
		return -ENOENT;
	/* Used once, valid or not. */
	if (!live(found, now)) {
		*found = (struct fb_ticket){ 0 };
		return -ENOENT;
	}
	*ret_file = found->file;
	*found = (struct fb_ticket){ 0 };
	return 0;
}

void fb_tickets_drop_file(struct fb_tickets *t, const void *file) {
	for (size_t i = 0; i < FB_TICKETS_MAX; i++)
		if (t->slot[i].file == file)
			t->slot[i] = (struct fb_ticket){ 0 };
}

void fb_tickets_clear(struct fb_tickets *t) {
	memset(t, 0, sizeof(*t));
}
