/* SPDX-License-Identifier: MIT */
/*
 * The text of LED and backlight attributes. From the container's side:
 * what a write() to /run/devns/PERSONA/sys/class/{leds,backlight}/NAME/
 * {brightness,trigger,bl_power} hands the view's store (up to
 * SYSFS_STORE_MAX bytes, not NUL-terminated, in a buffer of exactly that
 * size), parsed as leds/serve.c parses it and applied to a light of the
 * fake backend shared by two personas; and what the views show. From the
 * host's side: trigger lists and numbers as sysfs shows them, read as
 * led-sysfs.c and sysfs-attr.c read them.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "fuzz-input.h"
#include "led-backend.h"
#include "led-text.h"
#include "light.h"
#include "sysfs-attr.h"
#include "sysfs-view.h"
#include "util.h"

#define OPS_MAX 64

static char attr_path[PATH_MAX];
static int attr_dir = -1;

/* A store's bytes in a buffer of their own size, so that reading one past them is caught. */
static char *store_bytes(struct fuzz_input *in, size_t *ret_len) {
	size_t len = fuzz_len(in, SYSFS_STORE_MAX);
	const uint8_t *p = fuzz_span(in, len, &len);
	char *buf = malloc(len ? len : 1);

	fuzz_assert(buf);
	memcpy(buf, p, len);
	*ret_len = len;
	return buf;
}

/*
 * A number parsed as the kernel's kstrtoul() would: an optional '+', digits
 * (hex or octal too with base 0), one newline at the very end; a NUL ends
 * the text early, as it ends the kernel's parsing of a store.
 */
static void check_value(const char *buf, size_t len, unsigned int base, uint32_t max, int r, uint32_t v) {
	size_t end = strnlen(buf, len);

	if (r < 0) {
		fuzz_assert(r == -EINVAL);
		return;
	}
	fuzz_assert(v <= max);
	fuzz_assert(end > 0 && (buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9')));
	for (size_t i = 1; i < end; i++)
		fuzz_assert(buf[i] != '\n' || i == len - 1);
	if (base == 10)
		for (size_t i = buf[0] == '+'; i < end && buf[i] != '\n'; i++)
			fuzz_assert(buf[i] >= '0' && buf[i] <= '9');
}

static void check_triggers(const struct led_triggers *t, size_t current) {
	fuzz_assert(t->n >= 1 && t->n <= LED_TRIGGERS_MAX && current < t->n);
	fuzz_assert(streq(t->names[0], "none"));
	for (size_t i = 0; i < t->n; i++) {
		size_t len = strnlen(t->names[i], sizeof(t->names[i]));

		fuzz_assert(len >= 1 && len <= LED_TRIGGER_NAME_MAX);
		for (size_t k = 0; k < len; k++)
			fuzz_assert(!strchr(" \t\n\v\f\r", t->names[i][k]));
	}
}

/* The kernel's trigger file as led-sysfs.c reads it; what the view shows from it reads back the same. */
static void parse_trigger_list(struct fuzz_input *in) {
	static char text[LED_TEXT_MAX + 1], shown[LED_TEXT_MAX], again_text[LED_TEXT_MAX];
	struct led_triggers t, again;
	size_t cur, again_cur;
	int n;

	fuzz_bytes(in, text, fuzz_len(in, LED_TEXT_MAX));
	text[LED_TEXT_MAX] = '\0';
	led_triggers_parse(text, &t, &cur);
	check_triggers(&t, cur);
	n = led_triggers_format(&t, cur, shown, sizeof(shown));
	if (n == -ENOBUFS)
		return;
	fuzz_assert(n > 0 && (size_t)n < sizeof(shown) && shown[n - 1] == '\n' && strlen(shown) == (size_t)n);
	led_triggers_parse(shown, &again, &again_cur);
	fuzz_assert(again.n == t.n && again_cur == cur);
	for (size_t i = 0; i < t.n; i++)
		fuzz_assert(streq(again.names[i], t.names[i]));
	fuzz_assert(led_triggers_format(&again, again_cur, again_text, sizeof(again_text)) == n);
	fuzz_assert(memcmp(again_text, shown, (size_t)n) == 0);
	for (size_t i = 0; i < t.n; i++) {
		int k = led_triggers_find(&t, t.names[i], strlen(t.names[i]));

		fuzz_assert(k >= 0 && (size_t)k <= i && streq(t.names[k], t.names[i]));
	}
}

/* An attribute file read with sysfs_attr_read_u32(), as led-sysfs.c reads max_brightness. */
static void read_attr_file(struct fuzz_input *in) {
	char text[64];
	size_t len = fuzz_bytes(in, text, fuzz_len(in, sizeof(text)));
	uint32_t v = 0;
	int fd, r;

	fd = openat(attr_dir, "max_brightness", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	fuzz_assert(fd >= 0);
	fuzz_assert(write(fd, text, len) == (ssize_t)len);
	close(fd);
	r = sysfs_attr_read_u32(attr_dir, "max_brightness", &v);
	fuzz_assert(r == 0 || r == -EINVAL || r == -EFBIG);
	if (r == 0)
		check_value(text, len, 10, UINT32_MAX, r, v);
}

/* What the light shows is one of the owners' states, and within the light's range. */
static void check_light(const struct light *l, struct led_backend *b) {
	const struct light_state *s = light_pick(l);

	fuzz_assert(led_fake_brightness(b) <= b->max_brightness);
	if (!s)
		return;
	fuzz_assert(s->brightness <= b->max_brightness && s->bl_power <= LED_BL_POWER_MAX);
	fuzz_assert(s->trigger < b->triggers.n);
	fuzz_assert(l->hw.brightness == s->brightness);
}

static void one_op(struct light *l, struct led_backend *b, const int *owners, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	const void *owner = &owners[fuzz_u8(in) % 3];
	const struct light_state *s = light_state_of(l, owner);
	unsigned int base = b->kind == LED_KIND_LED ? 10 : 0;
	char *buf, shown[4096];
	uint32_t v = 0;
	size_t len;
	int r;

	switch (op % 8) {
	case 0: /* brightness_store() */
		buf = store_bytes(in, &len);
		r = led_parse_value(buf, len, base, b->max_brightness, &v);
		check_value(buf, len, base, b->max_brightness, r, v);
		if (r == 0 && s)
			fuzz_assert(light_set_brightness(l, owner, v) == 0);
		free(buf);
		break;
	case 1: /* trigger_store() */
		buf = store_bytes(in, &len);
		r = led_triggers_find(&b->triggers, buf, len);
		fuzz_assert(r == -EINVAL || (r >= 0 && (size_t)r < b->triggers.n));
		if (r >= 0 && s)
			fuzz_assert(light_set_trigger(l, owner, (size_t)r) == 0);
		free(buf);
		break;
	case 2: /* bl_power_store() */
		buf = store_bytes(in, &len);
		r = led_parse_value(buf, len, 0, LED_BL_POWER_MAX, &v);
		check_value(buf, len, 0, LED_BL_POWER_MAX, r, v);
		if (r == 0 && s)
			fuzz_assert(light_set_power(l, owner, v) == 0);
		free(buf);
		break;
	case 3: /* trigger_show() */
		if (s) {
			r = led_triggers_format(&b->triggers, s->trigger, shown, sizeof(shown));
			fuzz_assert(r > 0 && (size_t)r < sizeof(shown));
		}
		break;
	case 4: /* a switch */
		(void)light_set_active(l, owner);
		break;
	case 5: /* a persona created or removed */
		if (s)
			(void)light_remove_owner(l, owner);
		else
			fuzz_assert(light_add_owner(l, owner) == 0);
		break;
	case 6:
		parse_trigger_list(in);
		break;
	default:
		read_attr_file(in);
		break;
	}
	check_light(l, b);
}

static void remove_attr_dir(void) {
	unlinkat(attr_dir, "max_brightness", 0);
	rmdir(attr_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static const int owners[3];
	struct fuzz_input in = { data, size };
	_cleanup_(light_freep) struct light *l = NULL;
	struct led_backend *b = NULL;
	uint8_t setup = fuzz_u8(&in);
	enum led_kind kind = setup & 1 ? LED_KIND_BACKLIGHT : LED_KIND_LED;
	uint32_t max = setup & 2 ? fuzz_u32(&in) : fuzz_u8(&in);

	if (attr_dir < 0) {
		snprintf(attr_path, sizeof(attr_path), "%s/devns-fuzz-leds-XXXXXX", getenv("TMPDIR") ?: "/tmp");
		fuzz_assert(mkdtemp(attr_path));
		attr_dir = open(attr_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		fuzz_assert(attr_dir >= 0);
		atexit(remove_attr_dir);
	}
	fuzz_assert(led_fake_new(kind, kind == LED_KIND_LED ? "input0::capslock" : "intel_backlight", max, &b) == 0);
	fuzz_assert(light_new(&l, b, setup & 4 ? LIGHT_SHARED : LIGHT_EXCLUSIVE) == 0);
	fuzz_assert(light_add_owner(l, &owners[0]) == 0 && light_add_owner(l, &owners[1]) == 0);
	fuzz_assert(light_set_active(l, &owners[0]) == 0);

	for (unsigned int i = 0; i < OPS_MAX && !fuzz_done(&in); i++)
		one_op(l, b, owners, &in);
	return 0;
}
