/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static const char *log_ident = "devns";
static int log_max_level = LOG_INFO;
static bool log_prefix_level;

void log_setup(const char *ident) {
	const char *lvl = getenv("DEVNS_LOG_LEVEL");

	log_ident = ident;
	/* Under systemd, stderr goes to the journal, which reads "<N>" as the priority. */
	log_prefix_level = getenv("JOURNAL_STREAM") != NULL;
	if (lvl && streq(lvl, "debug"))
		log_max_level = LOG_DEBUG;
}

void log_set_max_level(int level) {
	log_max_level = level;
}

int log_full_errno(int level, int error, const char *fmt, ...) {
	va_list ap;
	int saved = errno;

	if (error < 0)
		error = -error;
	if (level <= log_max_level) {
		if (log_prefix_level)
			fprintf(stderr, "<%d>", level);
		else
			fprintf(stderr, "%s: ", log_ident);
		errno = error;
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
		fputc('\n', stderr);
	}
	errno = saved;
	return -error;
}
