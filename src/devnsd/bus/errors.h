/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * bus/errors.c: the one place where a failure becomes a D-Bus error.
 *
 * A method of org.devns1 fails with a code: a negative errno, or the
 * negative of one of the codes below, which lie above every errno. The
 * codes name situations that share an errno with another situation but
 * not its D-Bus error (a persona that exists and a bad persona name are
 * both InvalidArgs; a persona that is not attached and one that does not
 * exist are two different errors of devnsd's own). bus_error_set() looks
 * the code up in the table of errors.c for the error's name and a default
 * message; the handler only says what failed.
 */

#include <systemd/sd-bus.h>

#include "util.h"

#define BUS_ERROR_NO_SUCH_PERSONA "org.devns1.Error.NoSuchPersona"
#define BUS_ERROR_NOT_IN_PERSONA "org.devns1.Error.NotInPersona"
#define BUS_ERROR_NO_DISPLAY "org.devns1.Error.NoDisplay"
#define BUS_ERROR_NOT_ATTACHED "org.devns1.Error.NotAttached"

enum {
	_BUS_E_FIRST = 4096, /* above MAX_ERRNO */
	BUS_E_NO_SUCH_PERSONA = _BUS_E_FIRST,
	BUS_E_NOT_IN_PERSONA,
	BUS_E_NOT_ATTACHED,
	BUS_E_NO_DISPLAY,
	BUS_E_PERSONA_EXISTS,
	BUS_E_TOO_MANY_PERSONAS,
	BUS_E_PERSONA_ACTIVE,
	BUS_E_NO_PROCESS,
	BUS_E_NOT_IN_CONTAINER,
	BUS_E_CONTAINER_TAKEN,
	BUS_E_NO_ROOT_USER,
	BUS_E_NO_LEADER,
	BUS_E_TOO_OFTEN,
	_BUS_E_LAST,
};

/*
 * Sets *error to the D-Bus error for code (a negative errno or -BUS_E_...),
 * with the message format (where "%m" is code's errno text), or the table's
 * message when format is NULL. An errno the table does not list gets
 * sd-bus's own name for it (org.freedesktop.DBus.Error.* or
 * System.Error.E...), as when a handler returns it without an error set.
 * Returns a negative errno, for the handler to return.
 */
int bus_error_set(sd_bus_error *error, int code, const char *format, ...) _printf_(3, 4);

/* The table's D-Bus error name for code; NULL for errnos it leaves to sd-bus. */
const char *bus_error_name(int code);
