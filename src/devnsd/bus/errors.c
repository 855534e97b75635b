/* SPDX-License-Identifier: MIT */
/*
 * From the codes the methods of org.devns1 fail with to the D-Bus errors
 * their callers see, in one table (as dbus-broker's driver turns its
 * DRIVER_E_* codes into names in one switch). Clients match on these
 * names: an entry's name never changes.
 */
#include <stdarg.h>

#include "bus/errors.h"

struct bus_error_entry {
	int code;
	const char *name;
	const char *message;
};

static const struct bus_error_entry table[] = {
	/*
	 * Errnos a handler passes on as they are. Each has the name sd-bus
	 * gives it too, so that returning the errno without bus_error_set()
	 * tells the caller the same (tests/unit/test-bus-errors.c checks).
	 */
	{ -ENOMEM, SD_BUS_ERROR_NO_MEMORY, "Out of memory" },
	{ -EACCES, SD_BUS_ERROR_ACCESS_DENIED, "Access denied" },
	{ -EPERM, SD_BUS_ERROR_ACCESS_DENIED, "Access denied" },
	{ -EINVAL, SD_BUS_ERROR_INVALID_ARGS, "Invalid arguments" },

	/* devnsd's own errors. */
	{ -BUS_E_NO_SUCH_PERSONA, BUS_ERROR_NO_SUCH_PERSONA, "No persona of that name" },
	{ -BUS_E_NOT_IN_PERSONA, BUS_ERROR_NOT_IN_PERSONA, "The caller is not in any persona's container" },
	{ -BUS_E_NOT_ATTACHED, BUS_ERROR_NOT_ATTACHED, "The persona is not attached to a container" },
	{ -BUS_E_NO_DISPLAY, BUS_ERROR_NO_DISPLAY, "devnsd runs no display ([Display] is not set)" },

	/* Situations named by a standard error that sd-bus would not give their errno. */
	{ -BUS_E_PERSONA_EXISTS, SD_BUS_ERROR_INVALID_ARGS, "A persona of that name exists already" },
	{ -BUS_E_TOO_MANY_PERSONAS, SD_BUS_ERROR_LIMITS_EXCEEDED, "Too many personas" },
	{ -BUS_E_PERSONA_ACTIVE, SD_BUS_ERROR_FAILED, "The persona is active; switch away first" },
	{ -BUS_E_NO_PROCESS, SD_BUS_ERROR_INVALID_ARGS, "No such process" },
	{ -BUS_E_NOT_IN_CONTAINER, SD_BUS_ERROR_INVALID_ARGS,
	  "The process is not in a container: it shares devnsd's pid namespace" },
	{ -BUS_E_CONTAINER_TAKEN, SD_BUS_ERROR_INVALID_ARGS, "The process's container is bound to another persona" },
	{ -BUS_E_NO_ROOT_USER, SD_BUS_ERROR_INVALID_ARGS, "The process's user namespace maps no root user" },
	{ -BUS_E_NO_LEADER, SD_BUS_ERROR_INVALID_ARGS, "The machine has no valid leader" },
	{ -BUS_E_TOO_OFTEN, SD_BUS_ERROR_LIMITS_EXCEEDED, "Asked too often" },
};

static const struct bus_error_entry *lookup(int code) {
	for (size_t i = 0; i < ELEMENTSOF(table); i++)
		if (table[i].code == code)
			return &table[i];
	return NULL;
}

const char *bus_error_name(int code) {
	const struct bus_error_entry *e = lookup(code);

	return e ? e->name : NULL;
}

int bus_error_set(sd_bus_error *error, int code, const char *format, ...) {
	const struct bus_error_entry *e;
	va_list ap;
	int r;

	if (code >= 0)
		code = -EIO;
	e = lookup(code);
	if (!e) {
		if (!format)
			return sd_bus_error_set_errno(error, code);
		va_start(ap, format);
		r = sd_bus_error_set_errnofv(error, code, format, ap);
		va_end(ap);
		return r;
	}
	if (!format)
		return sd_bus_error_set(error, e->name, e->message);
	/* "%m" in the message: the errno's text (devnsd's own codes have none). */
	errno = -code < _BUS_E_FIRST ? -code : 0;
	va_start(ap, format);
	r = sd_bus_error_setfv(error, e->name, format, ap);
	va_end(ap);
	return r;
}
