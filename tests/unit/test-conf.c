/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <stdio.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf/conf.h"
#include "test-util.h"

/* The longest line devnsd.conf(5) allows. */
#define LINE_MAX_CHARS 198

/* Writes text to a new temporary file; returns its path (to free and unlink). */
static char *write_conf(const char *text) {
	const char *dir = getenv("TMPDIR");
	char *path = NULL;
	size_t len = strlen(text);
	int fd;

	assert_true(asprintf(&path, "%s/devnsd-conf-XXXXXX", dir && *dir ? dir : "/tmp") > 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
	return path;
}

static void remove_conf(char *path) {
	unlink(path);
	free(path);
}

/* Loads text, which must be valid. */
static struct conf *load_ok(const char *text) {
	char *path = write_conf(text), *error = NULL;
	struct conf *c = NULL;
	int r = conf_load(path, &c, &error);

	if (r < 0)
		fail_msg("conf_load: %d: %s", r, error ? error : "(no message)");
	assert_null(error);
	assert_non_null(c);
	assert_string_equal(c->path, path);
	remove_conf(path);
	return c;
}

/*
 * Loads text, which must be rejected with a one-line message saying
 * PATH:LINE: (line > 0) or PATH: (line 0) and containing each of the
 * NULL-terminated words.
 */
static void check_error(const char *text, unsigned int line, const char *file, int src_line, ...) {
	char *path = write_conf(text), *error = NULL, *prefix = NULL;
	struct conf *c = NULL;
	const char *word;
	va_list ap;
	int r;

	r = conf_load(path, &c, &error);
	if (r != -EINVAL || !error) {
		print_error("conf_load returned %d, message: %s\n", r, error ? error : "(none)");
		conf_free(c);
		free(error);
		remove_conf(path);
		_fail(file, src_line);
		return;
	}
	assert_null(c);
	if (line > 0)
		assert_true(asprintf(&prefix, "%s:%u: ", path, line) > 0);
	else
		assert_true(asprintf(&prefix, "%s: ", path) > 0);
	if (strncmp(error, prefix, strlen(prefix)) != 0 || strchr(error, '\n')) {
		print_error("expected a line starting with '%s', got '%s'\n", prefix, error);
		_fail(file, src_line);
	}
	va_start(ap, src_line);
	while ((word = va_arg(ap, const char *)))
		if (!strstr(error, word)) {
			print_error("'%s' does not mention '%s'\n", error, word);
			_fail(file, src_line);
		}
	va_end(ap);
	free(prefix);
	free(error);
	remove_conf(path);
}
#define EXPECT_ERROR(text, line, ...) check_error((text), (line), __FILE__, __LINE__, __VA_ARGS__, (const char *)NULL)

static void test_minimal_example(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Input]\n"
		    "Devices=/dev/input/event1 /dev/input/by-path/*-event-kbd   # globs allowed\n"
		    "\n"
		    "[Persona work]\n"
		    "Active=yes  # starts in front\n"
		    "\n"
		    "[Persona personal]\n");
	assert_int_equal(c->n_personas, 2);
	assert_string_equal(c->personas[0].name, "work");
	assert_string_equal(c->personas[1].name, "personal");
	assert_true(c->personas[0].active);
	assert_false(c->personas[1].active);
	assert_int_equal(c->active, 0);
	assert_int_equal(c->personas[0].line, 4);
	assert_int_equal(c->personas[0].active_line, 5);
	assert_int_equal(c->personas[1].line, 7);
	assert_int_equal(c->input.n_patterns, 2);
	assert_string_equal(c->input.patterns[0], "/dev/input/event1");
	assert_string_equal(c->input.patterns[1], "/dev/input/by-path/*-event-kbd");
	assert_int_equal(conf_find_persona(c, "personal"), 1);
	assert_int_equal(conf_find_persona(c, "nobody"), -1);
	conf_free(c);
}

static void test_shipped_example(void **state) {
	const char *path = getenv("DEVNSD_EXAMPLE_CONF");
	struct conf *c = NULL;
	char *error = NULL;

	(void)state;
	if (!path)
		fail_msg("DEVNSD_EXAMPLE_CONF does not name the shipped example (meson test sets it)");
	assert_int_equal(conf_load(path, &c, &error), 0);
	assert_null(error);
	assert_int_equal(c->n_personas, 2);
	assert_string_equal(c->personas[c->active].name, "work");
	assert_int_equal(c->input.n_patterns, 2);
	conf_free(c);
}

static void test_first_persona_active(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Persona a]\n[Persona b]\nActive=no\n");
	assert_int_equal(c->n_personas, 2);
	assert_int_equal(c->active, 0);
	assert_false(c->personas[0].active);
	conf_free(c);

	c = load_ok("[Persona a]\n[Persona b]\nActive=yes\n[Persona c]\n");
	assert_int_equal(c->active, 1);
	conf_free(c);
}

static void test_booleans(void **state) {
	static const char *const yes[] = { "yes", "true", "on", "1", "YES", "True" };
	static const char *const no[] = { "no", "false", "off", "0", "No" };

	(void)state;
	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		char text[128];
		struct conf *c;

		snprintf(text, sizeof(text), "[Persona a]\n[Persona b]\nActive=%s\n", yes[i]);
		c = load_ok(text);
		assert_int_equal(c->active, 1);
		conf_free(c);
	}
	for (size_t i = 0; i < ELEMENTSOF(no); i++) {
		char text[128];
		struct conf *c;

		snprintf(text, sizeof(text), "[Persona a]\n[Persona b]\nActive=%s\n", no[i]);
		c = load_ok(text);
		assert_false(c->personas[1].active);
		conf_free(c);
	}
}

static void test_comments(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("# a comment\n"
		    "; another\n"
		    "\n"
		    "   [Input]   \n"
		    "Devices = /dev/input/event3 ; semicolon comment\n"
		    "Devices=/dev/input/event4#not-a-comment\n"
		    "[Persona a]\n"
		    "  # indented comment\n"
		    "Active = yes ; trailing\n");
	assert_int_equal(c->input.n_patterns, 2);
	assert_string_equal(c->input.patterns[0], "/dev/input/event3");
	assert_string_equal(c->input.patterns[1], "/dev/input/event4#not-a-comment");
	assert_true(c->personas[0].active);
	conf_free(c);
}

static void test_longest_line(void **state) {
	char text[512];
	struct conf *c;
	int n;

	(void)state;
	n = snprintf(text, sizeof(text), "[Persona a]\n#");
	memset(text + n, 'x', LINE_MAX_CHARS - 1);
	strcpy(text + n + LINE_MAX_CHARS - 1, "\n[Persona b]\n");
	c = load_ok(text);
	assert_int_equal(c->n_personas, 2);
	conf_free(c);

	/* One more character is too many. */
	n = snprintf(text, sizeof(text), "[Persona a]\n#");
	memset(text + n, 'x', LINE_MAX_CHARS);
	strcpy(text + n + LINE_MAX_CHARS, "\n[Persona b]\n");
	EXPECT_ERROR(text, 2, "too long");
}

static void test_line_too_long(void **state) {
	char text[1024];
	int n;

	(void)state;
	n = snprintf(text, sizeof(text), "[Persona a]\nActive=yes\n[Input]\nDevices=/dev/input/");
	memset(text + n, 'e', 400);
	strcpy(text + n + 400, "\n");
	EXPECT_ERROR(text, 4, "too long");
}

static void test_unknown_section(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\n\n[Inptu]\nDevices=/x\n", 3, "[Inptu]", "unknown section");
	EXPECT_ERROR("[Persona]\n", 1, "[Persona]", "unknown section");
	EXPECT_ERROR("[input]\nDevices=/dev/input/event0\n[Persona a]\n", 1, "[input]", "unknown section");
}

static void test_unknown_key(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\nActiv=yes\n", 2, "Activ", "unknown key");
	EXPECT_ERROR("[Input]\nDevice=/dev/input/event0\n[Persona a]\n", 2, "[Input]", "Device", "unknown key");
	EXPECT_ERROR("[Persona a]\n[Input]\nShared=event0\n", 3, "Shared", "unknown key");
}

static void test_bad_boolean(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\nActive=maybe\n", 2, "[Persona a]", "Active=maybe", "boolean");
	EXPECT_ERROR("[Persona a]\nActive=yes please  # oh\n", 2, "Active=yes please", "boolean");
	EXPECT_ERROR("[Persona a]\nActive=\n", 2, "Active=", "boolean");
}

static void test_duplicate_persona(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\n[Persona b]\n[Persona a]\n", 3, "[Persona a]", "duplicate", "line 1");
}

static void test_no_persona(void **state) {
	(void)state;
	EXPECT_ERROR("[Input]\nDevices=/dev/input/event0\n", 0, "[Persona NAME]");
	EXPECT_ERROR("", 0, "persona");
	EXPECT_ERROR("# only a comment\n", 0, "persona");
}

static void test_two_active(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\nActive=yes\n[Persona b]\nActive=yes\n", 4, "[Persona b]", "Active=yes",
		     "persona a");
}

static void test_invalid_persona_name(void **state) {
	char longest[NAME_MAX_LEN + 2], text[128];
	struct conf *c;

	(void)state;
	EXPECT_ERROR("[Persona ../etc]\n", 1, "invalid persona name", "../etc");
	EXPECT_ERROR("[Persona a]\n[Persona -x]\n", 2, "invalid persona name", "-x");
	EXPECT_ERROR("[Persona two words]\n", 1, "invalid persona name");
	/* With Routed=yes, the routed nodes' names: /dev/devns/NAME would be both. */
	EXPECT_ERROR("[Daemon]\nRouted=yes\n[Persona card0]\n", 3, "may not be named as a routed node", "card0");
	EXPECT_ERROR("[Persona fb0]\n[Daemon]\nRouted=yes\n", 1, "may not be named as a routed node", "fb0");
	EXPECT_ERROR("[Daemon]\nRouted=yes\n[Persona a]\n[Persona event12]\n", 4, "routed node", "event12");
	/* Without routed nodes they are names as any other. */
	c = load_ok("[Persona card0]\n[Persona event12]\n");
	assert_int_equal(c->n_personas, 2);
	conf_free(c);

	memset(longest, 'n', NAME_MAX_LEN + 1);
	longest[NAME_MAX_LEN + 1] = '\0';
	snprintf(text, sizeof(text), "[Persona %s]\n", longest);
	EXPECT_ERROR(text, 1, "invalid persona name", longest);

	longest[NAME_MAX_LEN] = '\0';
	snprintf(text, sizeof(text), "[Persona %s]\n[Persona A_b-9]\n", longest);
	c = load_ok(text);
	assert_string_equal(c->personas[0].name, longest);
	assert_string_equal(c->personas[1].name, "A_b-9");
	conf_free(c);
}

static void test_too_many_personas(void **state) {
	char text[CONF_MAX_PERSONAS * 32 + 64];
	size_t n = 0;
	struct conf *c;

	(void)state;
	for (unsigned int i = 0; i < CONF_MAX_PERSONAS; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "[Persona p%u]\n", i);
	c = load_ok(text);
	assert_int_equal(c->n_personas, CONF_MAX_PERSONAS);
	conf_free(c);
	snprintf(text + n, sizeof(text) - n, "[Persona extra]\n");
	EXPECT_ERROR(text, CONF_MAX_PERSONAS + 1, "too many personas");
}

static void test_syntax(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\nthis is not a key\n", 2, "syntax");
	EXPECT_ERROR("Active=yes\n[Persona a]\n", 1, "Active", "outside any section");
	EXPECT_ERROR("[Persona a\n", 1, "malformed section header");
}

static void test_devices(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Input]\nDevices=/dev/input/event0\nDevices=\t/dev/input/event1\t/dev/input/event2\n"
		    "[Persona a]\n");
	assert_int_equal(c->input.n_patterns, 3);
	assert_string_equal(c->input.patterns[2], "/dev/input/event2");
	conf_free(c);

	EXPECT_ERROR("[Input]\nDevices=event1\n[Persona a]\n", 2, "Devices", "event1", "absolute");
	EXPECT_ERROR("[Input]\nDevices=/dev/input/event0 input/event1\n[Persona a]\n", 2, "input/event1",
		     "absolute");
}

static void test_missing_file(void **state) {
	struct conf *c = NULL;
	char *error = NULL, *want = NULL;
	const char *path = "/nonexistent/devnsd.conf";

	(void)state;
	assert_int_equal(conf_load(path, &c, &error), -ENOENT);
	assert_null(c);
	assert_non_null(error);
	assert_true(asprintf(&want, "%s: cannot read: %s", path, strerror(ENOENT)) > 0);
	assert_string_equal(error, want);
	free(want);
	free(error);
}

static void test_path_through_file(void **state) {
	char *file = write_conf("[Persona a]\n"), *path = NULL, *error = NULL;
	struct conf *c = NULL;

	(void)state;
	assert_true(asprintf(&path, "%s/devnsd.conf", file) > 0);
	assert_int_equal(conf_load(path, &c, &error), -ENOTDIR);
	assert_null(c);
	assert_non_null(error);
	assert_int_equal(strncmp(error, path, strlen(path)), 0);
	assert_non_null(strstr(error, strerror(ENOTDIR)));
	free(error);
	free(path);
	remove_conf(file);
}

/* An unprivileged uid for the unreadable file's reader when the tests run as root. */
#define READER_UID 65534

/*
 * A mode 000 file is refused with EACCES. Root reads any file, so as root
 * the file is loaded by a child that dropped to READER_UID first. The child
 * sends back conf_load()'s result and message; the checks are the parent's.
 */
static void test_unreadable_file(void **state) {
	char *path = write_conf("[Persona a]\n"), *error = NULL, msg[4096];
	struct conf *c = NULL;
	int pipefd[2], status, r;
	ssize_t len;
	pid_t pid;

	(void)state;
	assert_int_equal(chmod(path, 0), 0);
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pipefd[0]);
		if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setresgid(READER_UID, READER_UID, READER_UID) < 0 ||
				       setresuid(READER_UID, READER_UID, READER_UID) < 0))
			_exit(10);
		if (access(path, R_OK) == 0)
			_exit(11); /* permissions still do not stop this user */
		r = conf_load(path, &c, &error);
		if (write(pipefd[1], &r, sizeof(r)) != sizeof(r))
			_exit(12);
		if (error && write(pipefd[1], error, strlen(error)) < 0)
			_exit(12);
		_exit(0);
	}
	close(pipefd[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("the reader as uid %d failed before loading (status %#x: 10 no uid change, 11 file readable)",
			 READER_UID, status);
	assert_int_equal(read(pipefd[0], &r, sizeof(r)), sizeof(r));
	len = read(pipefd[0], msg, sizeof(msg) - 1);
	close(pipefd[0]);
	assert_true(len > 0);
	msg[len] = '\0';
	assert_int_equal(r, -EACCES);
	assert_int_equal(strncmp(msg, path, strlen(path)), 0);
	assert_non_null(strstr(msg, strerror(EACCES)));
	remove_conf(path);
}

/* A file that opens but cannot be read is a read error, not a file without personas. */
static void test_read_error(void **state) {
	const char *dir = getenv("TMPDIR");
	struct conf *c = NULL;
	char *error = NULL;
	int r;

	(void)state;
	if (!dir || !*dir)
		dir = "/tmp";
	r = conf_load(dir, &c, &error);
	assert_true(r < 0);
	assert_null(c);
	assert_non_null(error);
	if (!strstr(error, "cannot read") && !strstr(error, strerror(EISDIR))) {
		print_error("'%s' does not say the file cannot be read\n", error);
		free(error);
		fail();
		return;
	}
	free(error);
}

static void test_daemon_section(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Daemon]\n"
		    "Routed=yes\n"
		    "SwitchGroup=input\n"
		    "SwitchKeys=KEY_LEFTCTRL+KEY_LEFTALT+KEY_F1:work KEY_LEFTMETA+BTN_LEFT:home  # hotkeys\n"
		    "[Persona work]\n"
		    "[Persona home]\n");
	assert_true(c->routed);
	assert_string_equal(c->switch_group, "input");
	assert_int_equal(c->n_switch_keys, 2);
	assert_int_equal(c->switch_keys[0].n_keys, 3);
	assert_int_equal(c->switch_keys[0].keys[0], KEY_LEFTCTRL);
	assert_int_equal(c->switch_keys[0].keys[1], KEY_LEFTALT);
	assert_int_equal(c->switch_keys[0].keys[2], KEY_F1);
	assert_string_equal(c->switch_keys[0].persona, "work");
	assert_int_equal(c->switch_keys[1].n_keys, 2);
	assert_int_equal(c->switch_keys[1].keys[1], BTN_LEFT);
	assert_string_equal(c->switch_keys[1].persona, "home");
	conf_free(c);

	EXPECT_ERROR("[Daemon]\nRouted=perhaps\n[Persona a]\n", 2, "[Daemon]", "Routed=perhaps", "boolean");
	EXPECT_ERROR("[Daemon]\nSwitchKeys=KEY_F1:nobody\n[Persona a]\n", 2, "SwitchKeys", "nobody");
	EXPECT_ERROR("[Daemon]\nSwitchKeys=KEY_NOPE:a\n[Persona a]\n", 2, "SwitchKeys", "KEY_NOPE");
	EXPECT_ERROR("[Daemon]\nSwitchKeys=KEY_F1\n[Persona a]\n", 2, "SwitchKeys", "KEY_F1");
	EXPECT_ERROR("[Daemon]\nSwitchKeys=KEY_A+KEY_B+KEY_C+KEY_D+KEY_E:a\n[Persona a]\n", 2, "SwitchKeys", "chord");
	EXPECT_ERROR("[Daemon]\nSpeed=11\n[Persona a]\n", 2, "Speed", "unknown key");

	/* One secure attention chord, beside the switch chords, and never one of them. */
	c = load_ok("[Daemon]\n"
		    "SwitchKeys=KEY_LEFTMETA+KEY_F1:work\n"
		    "SecureAttentionKey=KEY_LEFTCTRL+KEY_LEFTALT+KEY_HOME:home\n"
		    "[Persona work]\n"
		    "[Persona home]\n");
	assert_int_equal(c->n_switch_keys, 2);
	assert_true(c->have_secure_key);
	assert_false(c->switch_keys[0].secure);
	assert_true(c->switch_keys[1].secure);
	assert_int_equal(c->switch_keys[1].n_keys, 3);
	assert_int_equal(c->switch_keys[1].keys[2], KEY_HOME);
	assert_string_equal(c->switch_keys[1].persona, "home");
	conf_free(c);
	EXPECT_ERROR("[Daemon]\nSecureAttentionKey=KEY_F1:a\nSecureAttentionKey=KEY_F2:a\n[Persona a]\n", 3,
		     "SecureAttentionKey", "only one");
	EXPECT_ERROR("[Daemon]\nSwitchKeys=KEY_F1:a\nSecureAttentionKey=KEY_F1:a\n[Persona a]\n", 3,
		     "SecureAttentionKey", "another chord");
	EXPECT_ERROR("[Daemon]\nSecureAttentionKey=KEY_F1:nobody\n[Persona a]\n", 2, "SecureAttentionKey", "nobody");
}

static void test_device_classes(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Leds]\nDevices=/sys/class/leds/input*::capslock\nShared=input3::numlock\n"
		    "[Backlight]\nDevices=/sys/class/backlight/intel_backlight\n"
		    "[Persona a]\n");
	assert_int_equal(c->leds.n_patterns, 1);
	assert_string_equal(c->leds.patterns[0], "/sys/class/leds/input*::capslock");
	assert_int_equal(c->leds.n_shared, 1);
	assert_string_equal(c->leds.shared[0], "input3::numlock");
	assert_int_equal(c->backlight.n_patterns, 1);
	assert_int_equal(c->input.n_patterns, 0);
	conf_free(c);

	EXPECT_ERROR("[Leds]\nShared=/sys/class/leds/x\n[Persona a]\n", 2, "[Leds]", "Shared", "device name");
	EXPECT_ERROR("[Backlight]\nDevices=intel_backlight\n[Persona a]\n", 2, "[Backlight]", "absolute");
}

static void test_display_section(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Display]\nBackend=headless\n[Persona a]\n");
	assert_int_equal(c->display, DISPLAY_HEADLESS);
	assert_int_equal(c->display_width, 1280);
	assert_int_equal(c->display_height, 800);
	assert_int_equal(c->display_spares, 3);
	assert_true(c->display_spare_bytes == UINT64_MAX);
	assert_true(c->display_track);
	conf_free(c);

	c = load_ok("[Display]\nBackend=drm\nSpareBuffer=no\nTrackWrites=no\n[Persona a]\n");
	assert_int_equal(c->display_spares, 0);
	assert_false(c->display_track);
	conf_free(c);

	c = load_ok("[Display]\nBackend=drm\nSpareFrames=5\nSpareMemory=48M\n[Persona a]\n");
	assert_int_equal(c->display_spares, 5);
	assert_true(c->display_spare_bytes == 48u << 20);
	conf_free(c);

	c = load_ok("[Display]\nBackend=drm\nCardMemory=96M\n[Persona a]\n");
	assert_true(c->display_card_bytes == 96u << 20);
	conf_free(c);
	c = load_ok("[Display]\nBackend=drm\n[Persona a]\n");
	assert_true(c->display_card_bytes == 0);
	conf_free(c);

	c = load_ok("[Display]\nSpareFrames=0\nSpareMemory=4096\nSpareBuffer=yes\n[Persona a]\n");
	assert_int_equal(c->display_spares, 1);
	assert_true(c->display_spare_bytes == 4096);
	conf_free(c);

	c = load_ok("[Display]\nBackend=fbdev\nDevice=/dev/fb0\nMode=1024x768\n[Persona a]\n");
	assert_int_equal(c->display, DISPLAY_FBDEV);
	assert_string_equal(c->display_device, "/dev/fb0");
	assert_int_equal(c->display_width, 1024);
	assert_int_equal(c->display_height, 768);
	conf_free(c);

	EXPECT_ERROR("[Display]\nBackend=vnc\n[Persona a]\n", 2, "Backend=vnc");
	EXPECT_ERROR("[Display]\nBackend=drm\nSpareBuffer=2\n[Persona a]\n", 3, "SpareBuffer=2", "boolean");
	EXPECT_ERROR("[Display]\nSpareFrames=9\n[Persona a]\n", 2, "SpareFrames=9", "0 to 8");
	EXPECT_ERROR("[Display]\nSpareFrames=-1\n[Persona a]\n", 2, "SpareFrames=-1");
	EXPECT_ERROR("[Display]\nSpareFrames=4294967296\n[Persona a]\n", 2, "SpareFrames=4294967296");
	EXPECT_ERROR("[Display]\nSpareMemory=12X\n[Persona a]\n", 2, "SpareMemory=12X", "size");
	EXPECT_ERROR("[Display]\nSpareMemory=99999999999999G\n[Persona a]\n", 2, "SpareMemory=");
	EXPECT_ERROR("[Display]\nSpareMemory=-1M\n[Persona a]\n", 2, "SpareMemory=-1M");
	EXPECT_ERROR("[Display]\nCardMemory=512K\n[Persona a]\n", 2, "CardMemory=512K", "one megabyte");
	EXPECT_ERROR("[Display]\nCardMemory=infinity\n[Persona a]\n", 2, "CardMemory=infinity", "size");
	EXPECT_ERROR("[Display]\nBackend=drm\nTrackWrites=maybe\n[Persona a]\n", 3, "TrackWrites=maybe", "boolean");
	EXPECT_ERROR("[Display]\nBackend=drm\nMode=8x8\n[Persona a]\n", 3, "Mode=8x8");
	EXPECT_ERROR("[Display]\nBackend=drm\nMode=1024x768x2\n[Persona a]\n", 3, "Mode=");
	EXPECT_ERROR("[Display]\nDevice=dri/card0\n[Persona a]\n", 2, "Device=dri/card0");
	EXPECT_ERROR("[Display]\nDevice=/dev/dri/card0\n[Persona a]\n", 0, "[Display]", "Backend");
}

static void test_persona_bindings(void **state) {
	struct conf *c;

	(void)state;
	c = load_ok("[Persona a]\n"
		    "Pid=4242\n"
		    "Machine=web.example-1\n"
		    "AllowRequestActive=yes\n"
		    "DeviceMap=fb0:/dev/graphics/fb0 event2:/dev/input/event0\n");
	assert_int_equal(c->personas[0].pid, 4242);
	assert_string_equal(c->personas[0].machine, "web.example-1");
	assert_true(c->personas[0].allow_request_active);
	assert_int_equal(c->personas[0].n_maps, 2);
	assert_string_equal(c->personas[0].maps[0].node, "fb0");
	assert_string_equal(c->personas[0].maps[0].path, "/dev/graphics/fb0");
	assert_string_equal(c->personas[0].maps[1].node, "event2");
	conf_free(c);

	EXPECT_ERROR("[Persona a]\nPid=0\n", 2, "Pid=0");
	EXPECT_ERROR("[Persona a]\nPid=12x\n", 2, "Pid=12x");
	EXPECT_ERROR("[Persona a]\nMachine=a/b\n", 2, "Machine=a/b");
	EXPECT_ERROR("[Persona a]\nAllowRequestActive=sure\n", 2, "AllowRequestActive=sure");
	EXPECT_ERROR("[Persona a]\nDeviceMap=fb0\n", 2, "DeviceMap=fb0");
	EXPECT_ERROR("[Persona a]\nDeviceMap=fb0:dev/fb0\n", 2, "DeviceMap=fb0:dev/fb0");
	EXPECT_ERROR("[Persona a]\nDeviceMap=fb0:/dev/../etc/passwd\n", 2, "DeviceMap");
}

/* A map path must not climb out of where it points, even in its last component. */
static void test_device_map_trailing_dotdot(void **state) {
	(void)state;
	EXPECT_ERROR("[Persona a]\nDeviceMap=fb0:/dev/graphics/..\n", 2, "DeviceMap");
}

/* RequestActiveUsers=: container uids and ranges; the container's root alone by default. */
static void test_request_active_users(void **state) {
	const struct conf_uids *u;
	struct conf *c;

	(void)state;
	c = load_ok("[Persona a]\n"
		    "[Persona b]\n"
		    "RequestActiveUsers=1001 10000-19999  # radio and the apps\n"
		    "RequestActiveUsers=0\n"
		    "[Persona c]\n"
		    "RequestActiveUsers=0\n"
		    "RequestActiveUsers=\n"
		    "[Persona d]\n"
		    "RequestActiveUsers=4294967294 7-7\n");
	u = &c->personas[0].request_users;
	assert_int_equal(u->n, 1);
	assert_true(conf_uids_contain(u, 0));
	assert_false(conf_uids_contain(u, 1));
	assert_false(c->personas[0].request_users_set);

	/* The first line replaces the default, the next ones add to it. */
	u = &c->personas[1].request_users;
	assert_int_equal(u->n, 3);
	assert_true(conf_uids_contain(u, 1001));
	assert_true(conf_uids_contain(u, 10000));
	assert_true(conf_uids_contain(u, 19999));
	assert_false(conf_uids_contain(u, 20000));
	assert_false(conf_uids_contain(u, 9999));
	assert_true(conf_uids_contain(u, 0));
	assert_false(conf_uids_contain(u, 1000));

	/* Empty: no one. */
	assert_int_equal(c->personas[2].request_users.n, 0);
	assert_false(conf_uids_contain(&c->personas[2].request_users, 0));

	u = &c->personas[3].request_users;
	assert_true(conf_uids_contain(u, 4294967294u));
	assert_true(conf_uids_contain(u, 7));
	assert_false(conf_uids_contain(u, 0));
	conf_free(c);

	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=root\n", 2, "RequestActiveUsers=root", "uid");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=-1\n", 2, "RequestActiveUsers=-1");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=4294967295\n", 2, "4294967295");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=20-10\n", 2, "20-10");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=1-\n", 2, "1-");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=1+2\n", 2, "1+2");
	EXPECT_ERROR("[Persona a]\nRequestActiveUsers=0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", 2, "at most 16");
}

int main(void) {
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minimal_example),
		cmocka_unit_test(test_shipped_example),
		cmocka_unit_test(test_first_persona_active),
		cmocka_unit_test(test_booleans),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_longest_line),
		cmocka_unit_test(test_line_too_long),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_bad_boolean),
		cmocka_unit_test(test_duplicate_persona),
		cmocka_unit_test(test_no_persona),
		cmocka_unit_test(test_two_active),
		cmocka_unit_test(test_invalid_persona_name),
		cmocka_unit_test(test_too_many_personas),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_devices),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_path_through_file),
		cmocka_unit_test(test_unreadable_file),
		cmocka_unit_test(test_read_error),
		cmocka_unit_test(test_daemon_section),
		cmocka_unit_test(test_device_classes),
		cmocka_unit_test(test_display_section),
		cmocka_unit_test(test_persona_bindings),
		cmocka_unit_test(test_device_map_trailing_dotdot),
		cmocka_unit_test(test_request_active_users),
	};

	return cmocka_run_group_tests_name("configuration", tests, NULL, NULL);
}
