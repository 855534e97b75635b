/* SPDX-License-Identifier: MIT */
#pragma once

#include <syslog.h>

#include "util.h"

/* Logging for the top layer (main, manager, bus): modules return errors and stay quiet. */

void log_setup(const char *ident);
void log_set_max_level(int level);

/* Logs at a syslog level; with error != 0, "%m" means strerror(error). Returns -|error|. */
int log_full_errno(int level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, (e), __VA_ARGS__)
