/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>

#include "test-util.h"

#include "idmap.h"

static void parse(const char *text, struct idmap *m) {
	assert_int_equal(idmap_parse(text, strlen(text), m), 0);
}

static void test_identity_map(void **state) {
	struct idmap m;
	uint32_t id;

	(void)state;
	parse("         0          0 4294967295\n", &m);
	assert_int_equal(m.n, 1);
	assert_int_equal(idmap_to_host(&m, 1000, &id), 0);
	assert_int_equal(id, 1000);
	assert_int_equal(idmap_to_host(&m, UINT32_MAX, &id), -ENOENT);
}

static void test_shifted_ranges(void **state) {
	struct idmap m;
	uint32_t id;

	(void)state;
	parse("0 100000 65536\n65536 300000 10\n", &m);
	assert_int_equal(idmap_to_host(&m, 0, &id), 0);
	assert_int_equal(id, 100000);
	assert_int_equal(idmap_to_host(&m, 65535, &id), 0);
	assert_int_equal(id, 165535);
	assert_int_equal(idmap_to_host(&m, 65537, &id), 0);
	assert_int_equal(id, 300001);
	assert_int_equal(idmap_to_host(&m, 65546, &id), -ENOENT);
	assert_int_equal(idmap_from_host(&m, 100044, &id), 0);
	assert_int_equal(id, 44);
	assert_int_equal(idmap_from_host(&m, 0, &id), -ENOENT);
	assert_int_equal(idmap_from_host(&m, 165536, &id), -ENOENT);
}

static void test_empty_map_maps_nothing(void **state) {
	struct idmap m;
	uint32_t id;

	(void)state;
	parse("", &m);
	assert_int_equal(m.n, 0);
	assert_int_equal(idmap_to_host(&m, 0, &id), -ENOENT);
}

static void test_bad_text(void **state) {
	static const char *const bad[] = {
		"0 0\n", "0 0 0\n", "a b c\n", "0 0 1 2\n", "-1 0 1\n", "0 4294967296 1\n",
		"4294967295 0 2\n", "0 4294967295 2\n", "0 0 1x\n",
	};
	struct idmap m;

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++)
		assert_int_equal(idmap_parse(bad[i], strlen(bad[i]), &m), -EINVAL);
}

static void test_too_many_ranges(void **state) {
	char *text = malloc(IDMAP_MAX_RANGES * 16 + 32);
	size_t len = 0;
	struct idmap m;

	(void)state;
	assert_non_null(text);
	for (unsigned int i = 0; i <= IDMAP_MAX_RANGES; i++)
		len += (size_t)sprintf(text + len, "%u %u 1\n", i, i);
	assert_int_equal(idmap_parse(text, len, &m), -EINVAL);
	free(text);
}

static void test_read_own_map(void **state) {
	int fd = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct idmap m;
	uint32_t id;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(idmap_read(fd, "uid_map", &m), 0);
	assert_true(m.n >= 1);
	assert_int_equal(idmap_from_host(&m, (uint32_t)geteuid(), &id), 0);
	assert_int_equal(idmap_read(fd, "no_such_map", &m), -ENOENT);
	close(fd);
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity_map),
		cmocka_unit_test(test_shifted_ranges),
		cmocka_unit_test(test_empty_map_maps_nothing),
		cmocka_unit_test(test_bad_text),
		cmocka_unit_test(test_too_many_ranges),
		cmocka_unit_test(test_read_own_map),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
