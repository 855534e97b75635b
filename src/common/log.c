/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "util.h"

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
	char line[2048];
	va_list ap;
	int saved = errno, n, k;

	if (error < 0)
		error = -error;
	if (level <= log_max_level) {
		if (log_prefix_level)
			n = snprintf(line, sizeof(line), "<%d>", level);
		else
			n = snprintf(line, sizeof(line), "%s: ", log_ident);
		errno = error;
		va_start(ap, fmt);
		k = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
		va_end(ap);
		n += MAX(k, 0);
		/* One write a line: lines from several sources never interleave. */
		n = MIN(n, (int)sizeof(line) - 2);
		line[n++] = '\n';
		fwrite(line, 1, (size_t)n, stderr);
	}
	errno = saved;
	return -error;
}
