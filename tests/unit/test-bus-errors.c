/* SPDX-License-Identifier: MIT */
#include "test-util.h"

#include "bus/errors.h"

/* The names clients match on, for the situations they stand for. */
static void test_names_clients_see(void **state) {
	static const struct {
		int code;
		const char *name;
	} expected[] = {
		{ -BUS_E_NO_SUCH_PERSONA, "org.devns1.Error.NoSuchPersona" },
		{ -BUS_E_NOT_IN_PERSONA, "org.devns1.Error.NotInPersona" },
		{ -BUS_E_NOT_ATTACHED, "org.devns1.Error.NotAttached" },
		{ -BUS_E_NO_DISPLAY, "org.devns1.Error.NoDisplay" },
		{ -BUS_E_PERSONA_EXISTS, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_TOO_MANY_PERSONAS, "org.freedesktop.DBus.Error.LimitsExceeded" },
		{ -BUS_E_PERSONA_ACTIVE, "org.freedesktop.DBus.Error.Failed" },
		{ -BUS_E_NO_PROCESS, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_NOT_IN_CONTAINER, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_CONTAINER_TAKEN, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_NO_ROOT_USER, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_NO_LEADER, "org.freedesktop.DBus.Error.InvalidArgs" },
		{ -BUS_E_TOO_OFTEN, "org.freedesktop.DBus.Error.LimitsExceeded" },
		{ -EACCES, "org.freedesktop.DBus.Error.AccessDenied" },
		{ -EINVAL, "org.freedesktop.DBus.Error.InvalidArgs" },
	};

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
		_cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;

		assert_true(bus_error_set(&error, expected[i].code, "code %d", expected[i].code) < 0);
		assert_string_equal(error.name, expected[i].name);
	}
	/* Every code of devnsd's own has its entry. */
	for (int code = _BUS_E_FIRST; code < _BUS_E_LAST; code++)
		assert_non_null(bus_error_name(-code));
}

/* An errno the table lists has the name sd-bus gives it: a handler that returns it bare tells the same. */
static void test_errnos_agree_with_sd_bus(void **state) {
	(void)state;
	for (int e = 1; e < _BUS_E_FIRST; e++) {
		_cleanup_(sd_bus_error_free) sd_bus_error ours = SD_BUS_ERROR_NULL, theirs = SD_BUS_ERROR_NULL;

		bus_error_set(&ours, -e, NULL);
		sd_bus_error_set_errno(&theirs, e);
		assert_string_equal(ours.name, theirs.name);
	}
}

/* The handler's message is kept, "%m" being the errno's text; without one, the table's. */
static void test_messages(void **state) {
	_cleanup_(sd_bus_error_free) sd_bus_error a = SD_BUS_ERROR_NULL, b = SD_BUS_ERROR_NULL, c = SD_BUS_ERROR_NULL;

	(void)state;
	bus_error_set(&a, -EBUSY, "Switching to '%s' failed: %m", "work");
	assert_string_equal(a.name, "System.Error.EBUSY");
	assert_string_equal(a.message, "Switching to 'work' failed: Device or resource busy");
	bus_error_set(&b, -EACCES, "no: %m");
	assert_string_equal(b.message, "no: Permission denied");
	bus_error_set(&c, -BUS_E_NO_DISPLAY, NULL);
	assert_string_equal(c.message, "devnsd runs no display ([Display] is not set)");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_clients_see),
		cmocka_unit_test(test_errnos_agree_with_sd_bus),
		cmocka_unit_test(test_messages),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
