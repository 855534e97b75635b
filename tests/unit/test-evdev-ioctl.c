/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <termios.h>

#include "test-util.h"

#define OLD_KEY_MAX 0x1ff
#define POISON 0xa5

/* EVIOCGABS with a size other than sizeof(struct input_absinfo). */
#define EVIOCGABS_LEN(abs, len) _IOC(_IOC_READ, 'E', 0x40 + (abs), (len))

struct mt_request {
	uint32_t code;
	int32_t values[TS_SLOTS];
};

/* A device with a code of every type that has a bitmap. */
static struct libevdev *combo_new(void) {
	struct libevdev *d = test_keyboard_new();
	struct input_absinfo ai = { .minimum = 0, .maximum = 255 };

	assert_int_equal(libevdev_enable_event_code(d, EV_REL, REL_X, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_REL, REL_WHEEL, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_ABS, ABS_PRESSURE, &ai), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_MSC, MSC_TIMESTAMP, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_LED, LED_MUTE, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_SND, SND_BELL, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_SND, SND_TONE, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_FF, FF_RUMBLE, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_FF, FF_GAIN, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_SW, SW_LID, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_SW, SW_MAX, NULL), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_KEY, KEY_MAX, NULL), 0);
	assert_int_equal(libevdev_enable_property(d, INPUT_PROP_POINTER), 0);
	return d;
}

static int fixture_combo_setup(void **state) {
	return fixture_setup(state, combo_new(), 0);
}

/* Brings the node forward with the hardware in the state the persona already knows. */
static void make_active(struct fixture *f) {
	struct evdev_state hw = f->node->view;

	evdev_node_activate(f->node, &hw);
	recorder_clear(&f->rec);
}

static int ioctl_int(struct fixture *f, struct evdev_client *c, unsigned int cmd, uintptr_t arg) {
	return do_ioctl(f->node, c, cmd, (void *)arg);
}

static bool all_bytes(const void *p, size_t len, uint8_t value) {
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		if (b[i] != value)
			return false;
	return true;
}

static void test_version(void **state) {
	struct fixture *f = *state;
	int version = 0;

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGVERSION, &version), 0);
	assert_int_equal(version, EV_VERSION);
}

static void test_id(void **state) {
	struct fixture *f = *state;
	struct input_id id;

	memset(&id, POISON, sizeof(id));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGID, &id), 0);
	assert_int_equal(id.bustype, BUS_USB);
	assert_int_equal(id.vendor, 0x046d);
	assert_int_equal(id.product, 0xc31c);
	assert_int_equal(id.version, 0x0110);
}

static void test_name(void **state) {
	struct fixture *f = *state;
	char buf[256];

	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGNAME(sizeof(buf)), buf), (int)strlen(KBD_NAME) + 1);
	assert_string_equal(buf, KBD_NAME);
	assert_true(all_bytes(buf + strlen(KBD_NAME) + 1, sizeof(buf) - strlen(KBD_NAME) - 1, POISON));
}

static void test_name_short_buffer(void **state) {
	struct fixture *f = *state;
	char buf[64];

	/* Truncated, without a terminating NUL, and the result is the size given. */
	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGNAME(5), buf), 5);
	assert_memory_equal(buf, KBD_NAME, 5);
	assert_true(all_bytes(buf + 5, sizeof(buf) - 5, POISON));

	/* Exactly the length: still no NUL. */
	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGNAME(strlen(KBD_NAME)), buf), (int)strlen(KBD_NAME));
	assert_int_equal((uint8_t)buf[sizeof(buf) - 1], POISON);

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGNAME(0), buf), 0);
}

static void test_phys_uniq(void **state) {
	struct fixture *f = *state;
	char buf[64];

	/* The keyboard has neither. */
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGPHYS(sizeof(buf)), buf), -ENOENT);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGUNIQ(sizeof(buf)), buf), -ENOENT);
}

static void test_phys_touchscreen(void **state) {
	struct fixture *f = *state;
	char buf[64];

	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGPHYS(sizeof(buf)), buf), (int)strlen(TS_PHYS) + 1);
	assert_string_equal(buf, TS_PHYS);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGPHYS(3), buf), 3);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGNAME(sizeof(buf)), buf), (int)strlen(TS_NAME) + 1);
	assert_string_equal(buf, TS_NAME);
}

static void test_prop(void **state) {
	struct fixture *f = *state;
	unsigned long props[4];

	memset(props, POISON, sizeof(props));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGPROP(sizeof(props)), props),
			 EVDEV_BITS_LEN(INPUT_PROP_MAX));
	for (unsigned int p = 0; p <= INPUT_PROP_MAX; p++)
		assert_int_equal(bit_test(props, p), p == INPUT_PROP_DIRECT);
	assert_true(all_bytes((uint8_t *)props + EVDEV_BITS_LEN(INPUT_PROP_MAX),
			      sizeof(props) - EVDEV_BITS_LEN(INPUT_PROP_MAX), POISON));

	memset(props, POISON, sizeof(props));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGPROP(1), props), 1);
	assert_int_equal(((uint8_t *)props)[0], 1 << INPUT_PROP_DIRECT);
	assert_int_equal(((uint8_t *)props)[1], POISON);
}

/* Checks EVIOCGBIT for every type with a bitmap against the description. */
static void check_all_bits(struct fixture *f) {
	static const struct {
		unsigned int type, max;
	} types[] = {
		{ 0, EV_MAX },       { EV_KEY, KEY_MAX }, { EV_REL, REL_MAX }, { EV_ABS, ABS_MAX }, { EV_MSC, MSC_MAX },
		{ EV_LED, LED_MAX }, { EV_SND, SND_MAX }, { EV_FF, FF_MAX },   { EV_SW, SW_MAX },
	};

	for (size_t t = 0; t < ELEMENTSOF(types); t++) {
		unsigned long bits[64];
		int len = EVDEV_BITS_LEN(types[t].max);

		memset(bits, POISON, sizeof(bits));
		assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(types[t].type, sizeof(bits)), bits), len);
		for (unsigned int code = 0; code <= types[t].max; code++) {
			bool want = types[t].type == 0 ? libevdev_has_event_type(f->desc, code)
						       : libevdev_has_event_code(f->desc, types[t].type, code);
			if (bit_test(bits, code) != want)
				fail_msg("EVIOCGBIT(%u): code %#x is %d, want %d", types[t].type, code,
					 bit_test(bits, code), want);
		}
		assert_true(all_bytes((uint8_t *)bits + len, sizeof(bits) - len, POISON));
	}
}

static void test_bits_all_types(void **state) {
	check_all_bits(*state);
}

static void test_bits_spot_checks(void **state) {
	struct fixture *f = *state;
	unsigned long bits[BITS_TO_LONGS(KEY_CNT)];

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(0, sizeof(bits)), bits), EVDEV_BITS_LEN(EV_MAX));
	assert_true(bit_test(bits, EV_SYN));
	assert_true(bit_test(bits, EV_KEY));
	assert_true(bit_test(bits, EV_ABS));
	assert_false(bit_test(bits, EV_REL));
	assert_false(bit_test(bits, EV_REP));

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_ABS, sizeof(bits)), bits), EVDEV_BITS_LEN(ABS_MAX));
	assert_true(bit_test(bits, ABS_MT_SLOT));
	assert_true(bit_test(bits, ABS_MT_POSITION_Y));
	assert_false(bit_test(bits, ABS_PRESSURE));

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_KEY, sizeof(bits)), bits), EVDEV_BITS_LEN(KEY_MAX));
	assert_true(bit_test(bits, BTN_TOUCH));
	assert_false(bit_test(bits, KEY_A));
}

static void test_bits_invalid_type(void **state) {
	struct fixture *f = *state;
	unsigned long bits[4];

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_REP, sizeof(bits)), bits), -EINVAL);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_PWR, sizeof(bits)), bits), -EINVAL);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_FF_STATUS, sizeof(bits)), bits), -EINVAL);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_MAX, sizeof(bits)), bits), -EINVAL);
}

static void test_bits_short_buffer(void **state) {
	struct fixture *f = *state;
	uint8_t buf[1024];

	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_KEY, 4), buf), 4);
	/* KEY_ESC..KEY_Z start at bit 1. */
	assert_int_equal(buf[0], 0xfe);
	assert_int_equal(buf[4], POISON);

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_KEY, 0), buf), 0);
}

static void test_bits_old_key_max(void **state) {
	struct fixture *f = *state;
	unsigned long buf[128];

	/* The old KEY_MAX as a byte count gets the whole key bitmap, as with current kernels. */
	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_KEY, OLD_KEY_MAX), buf), EVDEV_BITS_LEN(KEY_MAX));
	assert_true(bit_test(buf, KEY_A));
	assert_true(all_bytes((uint8_t *)buf + EVDEV_BITS_LEN(KEY_MAX), sizeof(buf) - EVDEV_BITS_LEN(KEY_MAX), POISON));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGBIT(EV_ABS, OLD_KEY_MAX), buf), EVDEV_BITS_LEN(ABS_MAX));
}

static void test_effects(void **state) {
	struct fixture *f = *state;
	int effects = -1;

	/* A node given no effect slots (its device reported none) has room for none. */
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGEFFECTS, &effects), 0);
	assert_int_equal(effects, 0);
}

static void test_key_state(void **state) {
	struct fixture *f = *state;
	unsigned long keys[BITS_TO_LONGS(KEY_CNT) + 2];

	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 42), EV(EV_KEY, KEY_LEFTSHIFT, 1), SYN_EV);
	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1), SYN_EV);
	DELIVER(f->node, EV(EV_KEY, KEY_B, 1), SYN_EV);

	memset(keys, POISON, sizeof(keys));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEY(sizeof(keys)), keys), EVDEV_BITS_LEN(KEY_MAX));
	for (unsigned int code = 0; code < KEY_MAX; code++)
		assert_int_equal(bit_test(keys, code), code == KEY_LEFTSHIFT || code == KEY_A || code == KEY_B);
	assert_true(all_bytes((uint8_t *)keys + EVDEV_BITS_LEN(KEY_MAX), sizeof(keys) - EVDEV_BITS_LEN(KEY_MAX),
			      POISON));

	/* The queued key events are gone, and so is the packet they leave empty. */
	EXPECT_READ(f->client, EV(EV_MSC, MSC_SCAN, 42), SYN_EV, EV(EV_MSC, MSC_SCAN, 30), SYN_EV);
}

static void test_key_state_other_client_keeps_queue(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);
	unsigned long keys[BITS_TO_LONGS(KEY_CNT)];

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEY(sizeof(keys)), keys), EVDEV_BITS_LEN(KEY_MAX));
	EXPECT_READ(f->client, SYN_EV);
	EXPECT_READ(other, EV(EV_KEY, KEY_A, 1), SYN_EV);
}

static void test_key_state_short(void **state) {
	struct fixture *f = *state;
	uint8_t buf[16];

	DELIVER(f->node, EV(EV_KEY, KEY_ESC, 1), EV(EV_KEY, KEY_Z, 1), SYN_EV);
	memset(buf, POISON, sizeof(buf));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEY(2), buf), 2);
	assert_int_equal(buf[0], 1 << KEY_ESC);
	assert_int_equal(buf[1], 0);
	assert_int_equal(buf[2], POISON);
	/* Flushed even though KEY_Z did not fit. */
	EXPECT_READ(f->client, SYN_EV);
}

static void test_led_state(void **state) {
	struct fixture *f = *state;
	unsigned long leds[4];

	DELIVER(f->node, EV(EV_LED, LED_CAPSL, 1), EV(EV_LED, LED_SCROLLL, 1), EV(EV_KEY, KEY_CAPSLOCK, 1), SYN_EV);
	memset(leds, POISON, sizeof(leds));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGLED(sizeof(leds)), leds), EVDEV_BITS_LEN(LED_MAX));
	assert_true(bit_test(leds, LED_CAPSL));
	assert_true(bit_test(leds, LED_SCROLLL));
	assert_false(bit_test(leds, LED_NUML));
	EXPECT_READ(f->client, EV(EV_KEY, KEY_CAPSLOCK, 1), SYN_EV);
}

static void test_sw_snd_state(void **state) {
	struct fixture *f = *state;
	unsigned long bits[4];

	DELIVER(f->node, EV(EV_SW, SW_LID, 1), EV(EV_SW, SW_MAX, 1), SYN_EV, EV(EV_SND, SND_TONE, 1), SYN_EV);
	memset(bits, POISON, sizeof(bits));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGSW(sizeof(bits)), bits), EVDEV_BITS_LEN(SW_MAX));
	assert_true(bit_test(bits, SW_LID));
	assert_true(bit_test(bits, SW_MAX));
	assert_false(bit_test(bits, SW_TABLET_MODE));
	/* The switch packet is gone; the sound one is still there. */
	EXPECT_READ(f->client, SYN_EV, EV(EV_SND, SND_TONE, 1), SYN_EV);

	DELIVER(f->node, EV(EV_SND, SND_TONE, 1), SYN_EV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGSND(sizeof(bits)), bits), EVDEV_BITS_LEN(SND_MAX));
	assert_true(bit_test(bits, SND_TONE));
	assert_false(bit_test(bits, SND_BELL));
	/* A leading report is kept, as the kernel keeps it: it may end a packet read in part. */
	EXPECT_READ(f->client, SYN_EV);
}

static void test_abs_get(void **state) {
	struct fixture *f = *state;
	struct input_absinfo ai;

	DELIVER(f->node, EV(EV_ABS, ABS_X, 1000), EV(EV_ABS, ABS_Y, 500), SYN_EV);
	memset(&ai, POISON, sizeof(ai));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_X), &ai), 0);
	assert_int_equal(ai.value, 1000);
	assert_int_equal(ai.minimum, 0);
	assert_int_equal(ai.maximum, TS_MAX_X);
	assert_int_equal(ai.fuzz, 0);
	assert_int_equal(ai.flat, 0);
	assert_int_equal(ai.resolution, 12);

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_MT_SLOT), &ai), 0);
	assert_int_equal(ai.maximum, TS_SLOTS - 1);

	/* A short size copies only that much. */
	memset(&ai, POISON, sizeof(ai));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS_LEN(ABS_Y, 8), &ai), 0);
	assert_int_equal(ai.value, 500);
	assert_int_equal(ai.minimum, 0);
	assert_true(all_bytes(&ai.maximum, sizeof(ai) - 8, POISON));
}

static void test_abs_set(void **state) {
	struct fixture *f = *state;
	struct input_absinfo set = {
		.value = 7, .minimum = -10, .maximum = 100, .fuzz = 1, .flat = 2, .resolution = 3,
	};
	struct input_absinfo ai, before;

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSABS(ABS_X), &set), 0);
	memset(&ai, POISON, sizeof(ai));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_X), &ai), 0);
	assert_memory_equal(&ai, &set, sizeof(ai));

	/* The number of slots cannot change. */
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_MT_SLOT), &before), 0);
	set.maximum = 2;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSABS(ABS_MT_SLOT), &set), -EINVAL);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_MT_SLOT), &ai), 0);
	assert_memory_equal(&ai, &before, sizeof(ai));
}

static void test_abs_keyboard(void **state) {
	struct fixture *f = *state;
	struct input_absinfo ai = { 0 };

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGABS(ABS_X), &ai), -EINVAL);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSABS(ABS_X), &ai), -EINVAL);
}

static void test_mt_slots(void **state) {
	struct fixture *f = *state;
	struct mt_request req;

	DELIVER(f->node, EV(EV_ABS, ABS_MT_SLOT, 2), EV(EV_ABS, ABS_MT_TRACKING_ID, 42),
		EV(EV_ABS, ABS_MT_POSITION_X, 100), EV(EV_ABS, ABS_MT_POSITION_Y, 200), EV(EV_ABS, ABS_MT_SLOT, 5),
		EV(EV_ABS, ABS_MT_TRACKING_ID, 43), EV(EV_ABS, ABS_MT_POSITION_X, 300), EV(EV_KEY, BTN_TOUCH, 1),
		SYN_EV);

	memset(&req, POISON, sizeof(req));
	req.code = ABS_MT_TRACKING_ID;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), 0);
	assert_int_equal(req.code, ABS_MT_TRACKING_ID);
	for (unsigned int i = 0; i < TS_SLOTS; i++)
		assert_int_equal(req.values[i], i == 2 ? 42 : i == 5 ? 43 : -1);

	memset(&req, POISON, sizeof(req));
	req.code = ABS_MT_POSITION_X;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), 0);
	assert_int_equal(req.values[2], 100);
	assert_int_equal(req.values[5], 300);
	assert_int_equal(req.values[0], 0);
}

static void test_mt_slots_short(void **state) {
	struct fixture *f = *state;
	struct mt_request req;

	DELIVER(f->node, EV(EV_ABS, ABS_MT_SLOT, 1), EV(EV_ABS, ABS_MT_TRACKING_ID, 9), SYN_EV);
	memset(&req, POISON, sizeof(req));
	req.code = ABS_MT_TRACKING_ID;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(uint32_t) + 3 * sizeof(int32_t)), &req),
			 0);
	assert_int_equal(req.values[0], -1);
	assert_int_equal(req.values[1], 9);
	assert_int_equal(req.values[2], -1);
	assert_true(all_bytes(&req.values[3], sizeof(req.values) - 3 * sizeof(int32_t), POISON));
}

static void test_mt_slots_invalid(void **state) {
	struct fixture *f = *state;
	struct mt_request req = { .code = ABS_MT_SLOT };

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), -EINVAL);
	req.code = ABS_X;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), -EINVAL);
	req.code = ABS_MAX + 1;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), -EINVAL);
}

static void test_mt_slots_keyboard(void **state) {
	struct fixture *f = *state;
	struct mt_request req = { .code = ABS_MT_TRACKING_ID };

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGMTSLOTS(sizeof(req)), &req), -EINVAL);
}

static void test_rep(void **state) {
	struct fixture *f = *state;
	unsigned int rep[2] = { 0 }, set[2] = { 500, 50 };

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGREP, rep), 0);
	assert_int_equal(rep[0], KBD_REP_DELAY);
	assert_int_equal(rep[1], KBD_REP_PERIOD);

	/* In the background the persona's setting is kept, not applied. */
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSREP, set), 0);
	assert_int_equal(f->rec.n_set_repeat, 0);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGREP, rep), 0);
	assert_int_equal(rep[0], 500);
	assert_int_equal(rep[1], 50);

	make_active(f);
	set[0] = 300;
	set[1] = 40;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSREP, set), 0);
	assert_in_range(f->rec.n_set_repeat, 1, 2);
	assert_int_equal(f->rec.rep_delay, 300);
	assert_int_equal(f->rec.rep_period, 40);
}

static void test_rep_without_ev_rep(void **state) {
	struct fixture *f = *state;
	unsigned int rep[2] = { 500, 50 };

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGREP, rep), -ENOSYS);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSREP, rep), -ENOSYS);
}

static void test_keycode(void **state) {
	struct fixture *f = *state;
	unsigned int legacy[2] = { 0x1e, 0 };
	struct input_keymap_entry ke = { .len = sizeof(uint32_t) };
	uint32_t scancode = 0x1e;

	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEYCODE, legacy), 0);
	assert_int_equal(f->rec.n_get_keycode, 1);
	assert_int_equal(legacy[0], 0x1e);
	assert_int_equal(legacy[1], KEY_A);
	legacy[0] = 0x99;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEYCODE, legacy), -EINVAL);

	memcpy(ke.scancode, &scancode, sizeof(scancode));
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEYCODE_V2, &ke), 0);
	assert_int_equal(ke.keycode, KEY_A);
	ke.len = sizeof(ke.scancode) + 1;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGKEYCODE_V2, &ke), -EINVAL);
}

static void test_grab(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 1), 0);
	/* A second grab fails, by the holder or anyone else. */
	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 1), -EBUSY);
	assert_int_equal(ioctl_int(f, other, EVIOCGRAB, 1), -EBUSY);
	/* Only the holder can let go. */
	assert_int_equal(ioctl_int(f, other, EVIOCGRAB, 0), -EINVAL);

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_NOTHING(other);
	assert_int_equal(recorder_wakeups(&f->rec, other), 0);

	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 0), 0);
	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 0), -EINVAL);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_READ(other, EV(EV_KEY, KEY_A, 0), SYN_EV);

	assert_int_equal(ioctl_int(f, other, EVIOCGRAB, 1), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_NOTHING(f->client);
	EXPECT_READ(other, EV(EV_KEY, KEY_B, 1), SYN_EV);
}

static void test_grab_released_on_close(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	assert_int_equal(ioctl_int(f, other, EVIOCGRAB, 1), 0);
	evdev_node_close(f->node, other);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 1), 0);
}

static void test_grab_released_on_revoke(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	assert_int_equal(ioctl_int(f, other, EVIOCGRAB, 1), 0);
	assert_int_equal(ioctl_int(f, other, EVIOCREVOKE, 0), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 1), 0);
}

/*
 * The kernel's evdev injects every client's writes through the one input
 * handle of the node, which is the handle a grab holds: writes from other
 * clients of the same node still reach the device while it is grabbed.
 */
static void test_grab_does_not_block_other_writers(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);

	make_active(f);
	assert_int_equal(ioctl_int(f, f->client, EVIOCGRAB, 1), 0);
	WRITE(f->node, other, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_EVENTS(f->rec.forwarded, f->rec.n_forwarded, EV(EV_LED, LED_CAPSL, 1), SYN_EV);
}

static void test_revoke(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);
	struct input_event ev[4];
	int version;

	assert_int_equal(ioctl_int(f, f->client, EVIOCREVOKE, 1), -EINVAL);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);

	recorder_clear(&f->rec);
	assert_int_equal(ioctl_int(f, f->client, EVIOCREVOKE, 0), 0);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 1);
	assert_int_equal(recorder_wakeups(&f->rec, other), 0);
	assert_int_equal(evdev_client_read(f->client, ev, ELEMENTSOF(ev)), -ENODEV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCGVERSION, &version), -ENODEV);
	assert_int_equal(ioctl_int(f, f->client, EVIOCREVOKE, 0), -ENODEV);

	assert_int_equal(do_ioctl(f->node, other, EVIOCGVERSION, &version), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 0), SYN_EV);
	EXPECT_READ(other, EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV);
}

static void test_clock_invalid(void **state) {
	struct fixture *f = *state;
	int clk;

	clk = CLOCK_PROCESS_CPUTIME_ID;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), -EINVAL);
	clk = CLOCK_MONOTONIC_RAW;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), -EINVAL);
	clk = -1;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), -EINVAL);
	clk = 4242;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), -EINVAL);
}

/*
 * This program's own clock_gettime(), which the code under test calls in
 * place of libc's: CLOCK_BOOTTIME runs boot_ahead_usec ahead of the real one,
 * as it does after a suspend of that long. On a machine that never slept,
 * CLOCK_BOOTTIME equals CLOCK_MONOTONIC and a wrong clock could not show.
 */
static long long boot_ahead_usec;

int clock_gettime(clockid_t clock, struct timespec *ts) {
	long long ns;

	if (syscall(SYS_clock_gettime, clock, ts) != 0)
		return -1;
	if (clock == CLOCK_BOOTTIME && boot_ahead_usec) {
		ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + boot_ahead_usec * 1000LL;
		ts->tv_sec = ns / 1000000000LL;
		ts->tv_nsec = ns % 1000000000LL;
	}
	return 0;
}

/* The real CLOCK_BOOTTIME less CLOCK_MONOTONIC (not 0 on a machine that slept), in µs. */
static long long real_boot_offset_usec(void) {
	struct timespec boot, mono;

	assert_int_equal(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &mono), 0);
	assert_int_equal(syscall(SYS_clock_gettime, CLOCK_BOOTTIME, &boot), 0);
	return ((long long)boot.tv_sec - mono.tv_sec) * 1000000 + (boot.tv_nsec - mono.tv_nsec) / 1000;
}

/* Hands the node one key packet stamped at mono_usec in CLOCK_MONOTONIC. */
static void deliver_at(struct evdev_node *n, long long mono_usec) {
	struct timeval t = { .tv_sec = mono_usec / 1000000, .tv_usec = mono_usec % 1000000 };
	struct input_event evs[2] = { EV(EV_KEY, KEY_A, 1), SYN_EV };

	evs[0].time = evs[1].time = t;
	evdev_node_deliver(n, evs, 2);
}

static long long read_key_time(struct evdev_client *c) {
	struct input_event ev[2];

	assert_int_equal(evdev_client_read(c, ev, 2), 2);
	assert_int_equal(ev[0].code, KEY_A);
	assert_int_equal(ev[1].type, EV_SYN);
	assert_int_equal(timeval_usec(ev[1].time), timeval_usec(ev[0].time));
	return timeval_usec(ev[0].time);
}

/* Without the node's batch_time(), the clocks are read: each client gets its own. */
static void test_clock_monotonic(void **state) {
	struct fixture *f = *state;
	struct evdev_client *boot = fixture_open(f), *mono = fixture_open(f);
	/* Far from both CLOCK_MONOTONIC (0) and CLOCK_REALTIME (decades). */
	const long long ahead = 10LL * 24 * 3600 * 1000000;
	long long t0 = clock_usec(CLOCK_MONOTONIC), expected, got;
	int clk = CLOCK_MONOTONIC;

	assert_int_equal(do_ioctl(f->node, mono, EVIOCSCLOCKID, &clk), 0);
	clk = CLOCK_BOOTTIME;
	assert_int_equal(do_ioctl(f->node, boot, EVIOCSCLOCKID, &clk), 0);

	boot_ahead_usec = ahead;
	deliver_at(f->node, t0);
	expected = real_boot_offset_usec() + ahead;
	boot_ahead_usec = 0;

	/* CLOCK_MONOTONIC is the events' own clock: passed on as it is. */
	assert_int_equal(read_key_time(mono), t0);
	/*
	 * CLOCK_BOOTTIME: the time plus BOOTTIME's lead over MONOTONIC. The two
	 * clocks are read one after the other, so the lead read there may differ
	 * from expected by the time between two reads: the check only asks that
	 * it be nearer BOOTTIME's lead than any other clock's.
	 */
	got = read_key_time(boot) - t0;
	if (llabs(got - expected) >= ahead / 2)
		fail_msg("a CLOCK_BOOTTIME client got an event %lld µs after its CLOCK_MONOTONIC time, "
			 "where CLOCK_BOOTTIME is %lld µs ahead", got, expected);
	evdev_node_close(f->node, boot);
	evdev_node_close(f->node, mono);
}

/* The node's batch_time(): CLOCK_BOOTTIME an hour ahead of CLOCK_MONOTONIC, CLOCK_REALTIME in 2024. */
#define BATCH_MONO_USEC 5000000000LL
#define BATCH_BOOT_AHEAD_USEC 3600000000LL
#define BATCH_REAL_USEC 1700000000000000LL

static unsigned int batch_time_calls;

static int fake_batch_time(void *userdata, clockid_t clock, uint64_t *ret_usec) {
	(void)userdata;
	batch_time_calls++;
	switch (clock) {
	case CLOCK_MONOTONIC:
		*ret_usec = BATCH_MONO_USEC;
		return 0;
	case CLOCK_BOOTTIME:
		*ret_usec = BATCH_MONO_USEC + BATCH_BOOT_AHEAD_USEC;
		return 0;
	case CLOCK_REALTIME:
		*ret_usec = BATCH_REAL_USEC;
		return 0;
	default:
		return -EINVAL;
	}
}

/* With the node's batch_time() (as devnsd gives it), each client's clock is offset from the batch's instant. */
static void test_clock_from_batch_time(void **state) {
	struct fixture *f = *state;
	struct evdev_node_ops ops = recorder_ops;
	struct evdev_client *boot = fixture_open(f), *mono = fixture_open(f), *real = fixture_open(f);
	const long long t0 = BATCH_MONO_USEC - 1500; /* taken 1.5 ms before the batch's wakeup */
	int clk;

	ops.batch_time = fake_batch_time;
	f->node->ops = &ops;
	clk = CLOCK_BOOTTIME;
	assert_int_equal(do_ioctl(f->node, boot, EVIOCSCLOCKID, &clk), 0);
	clk = CLOCK_MONOTONIC;
	assert_int_equal(do_ioctl(f->node, mono, EVIOCSCLOCKID, &clk), 0);
	clk = CLOCK_REALTIME;
	assert_int_equal(do_ioctl(f->node, real, EVIOCSCLOCKID, &clk), 0);

	batch_time_calls = 0;
	deliver_at(f->node, t0);
	assert_int_equal(read_key_time(boot), t0 + BATCH_BOOT_AHEAD_USEC);
	assert_int_equal(read_key_time(mono), t0);
	assert_int_equal(read_key_time(real), t0 + BATCH_REAL_USEC - BATCH_MONO_USEC);
	assert_true(batch_time_calls > 0);

	evdev_node_close(f->node, boot);
	evdev_node_close(f->node, mono);
	evdev_node_close(f->node, real);
	f->node->ops = &recorder_ops;
}

static void test_clock_change_drops_queue(void **state) {
	struct fixture *f = *state;
	int clk = CLOCK_MONOTONIC;

	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), 0);
	/* SYN_DROPPED waits for the next packet. */
	EXPECT_NOTHING(f->client);
	DELIVER(f->node, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_SYN, SYN_DROPPED, 0), EV(EV_KEY, KEY_B, 1), SYN_EV);

	/* The same clock again, or an empty queue: nothing dropped. */
	DELIVER(f->node, EV(EV_KEY, KEY_B, 0), SYN_EV);
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), 0);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_B, 0), SYN_EV);
	clk = CLOCK_REALTIME;
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSCLOCKID, &clk), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_C, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_C, 1), SYN_EV);
}

static int get_mask(struct fixture *f, struct evdev_client *c, unsigned int type, void *codes, size_t size) {
	struct input_mask m = { .type = type, .codes_size = (uint32_t)size, .codes_ptr = (uintptr_t)codes };

	return do_ioctl(f->node, c, EVIOCGMASK, &m);
}

static int set_mask(struct fixture *f, struct evdev_client *c, unsigned int type, const void *codes, size_t size) {
	struct input_mask m = { .type = type, .codes_size = (uint32_t)size, .codes_ptr = (uintptr_t)codes };

	return do_ioctl(f->node, c, EVIOCSMASK, &m);
}

static void test_mask_default(void **state) {
	struct fixture *f = *state;
	unsigned long codes[BITS_TO_LONGS(KEY_CNT)];

	memset(codes, 0, sizeof(codes));
	assert_int_equal(get_mask(f, f->client, EV_KEY, codes, sizeof(codes)), 0);
	assert_true(all_bytes(codes, sizeof(codes), 0xff));
	memset(codes, 0, sizeof(codes));
	assert_int_equal(get_mask(f, f->client, 0, codes, sizeof(long)), 0);
	assert_true(all_bytes(codes, sizeof(long), 0xff));
	assert_true(all_bytes(codes + 1, sizeof(codes) - sizeof(long), 0));
}

static void test_mask_codes(void **state) {
	struct fixture *f = *state;
	struct evdev_client *other = fixture_open(f);
	unsigned long codes[BITS_TO_LONGS(KEY_CNT)] = { 0 }, got[BITS_TO_LONGS(KEY_CNT)];

	bit_assign(codes, KEY_B, true);
	assert_int_equal(set_mask(f, f->client, EV_KEY, codes, sizeof(codes)), 0);
	memset(got, 0, sizeof(got));
	assert_int_equal(get_mask(f, f->client, EV_KEY, got, sizeof(got)), 0);
	assert_memory_equal(got, codes, sizeof(codes));

	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1), SYN_EV);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 0), SYN_EV);
	DELIVER(f->node, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_MSC, MSC_SCAN, 30), SYN_EV, EV(EV_KEY, KEY_B, 1), SYN_EV);
	EXPECT_READ(other, EV(EV_MSC, MSC_SCAN, 30), EV(EV_KEY, KEY_A, 1), SYN_EV, EV(EV_KEY, KEY_A, 0), SYN_EV,
		    EV(EV_KEY, KEY_B, 1), SYN_EV);

	/* A masked-out packet does not wake the client. */
	recorder_clear(&f->rec);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	assert_int_equal(recorder_wakeups(&f->rec, f->client), 0);
	assert_int_equal(recorder_wakeups(&f->rec, other), 1);
}

static void test_mask_types(void **state) {
	struct fixture *f = *state;
	unsigned long types = 0;

	bit_assign(&types, EV_LED, true);
	assert_int_equal(set_mask(f, f->client, 0, &types, sizeof(types)), 0);
	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 58), EV(EV_KEY, KEY_CAPSLOCK, 1), EV(EV_LED, LED_CAPSL, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_LED, LED_CAPSL, 1), SYN_EV);

	/* An empty mask of a type filters all of it; EV_SYN is never filtered. */
	types = ~0UL;
	assert_int_equal(set_mask(f, f->client, 0, &types, sizeof(types)), 0);
	assert_int_equal(set_mask(f, f->client, EV_MSC, NULL, 0), 0);
	DELIVER(f->node, EV(EV_MSC, MSC_SCAN, 58), EV(EV_KEY, KEY_CAPSLOCK, 0), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_CAPSLOCK, 0), SYN_EV);
}

static void test_mask_unknown_type(void **state) {
	struct fixture *f = *state;
	unsigned long codes[2] = { 0 };

	/* Accepted and ignored, for forward compatibility. */
	assert_int_equal(set_mask(f, f->client, EV_REP, codes, sizeof(codes)), 0);
	assert_int_equal(set_mask(f, f->client, EV_CNT + 5, codes, sizeof(codes)), 0);
	assert_int_equal(get_mask(f, f->client, EV_REP, codes, sizeof(codes)), 0);
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
}

/* As the kernel's bits_from_user(): a size that is not a whole number of longs is EINVAL. */
static void test_mask_set_partial_long(void **state) {
	struct fixture *f = *state;
	unsigned long codes[BITS_TO_LONGS(KEY_CNT)] = { 0 };

	assert_int_equal(set_mask(f, f->client, EV_KEY, codes, 3), -EINVAL);
	/* Nothing was set: KEY_A still passes. */
	DELIVER(f->node, EV(EV_KEY, KEY_A, 1), SYN_EV);
	EXPECT_READ(f->client, EV(EV_KEY, KEY_A, 1), SYN_EV);
}

/* As the kernel's evdev_get_mask(): what lies past the mask in a larger buffer is zeroed. */
static void test_mask_get_clears_rest(void **state) {
	struct fixture *f = *state;
	uint8_t codes[EVDEV_BITS_LEN(KEY_MAX) + 32];

	memset(codes, POISON, sizeof(codes));
	assert_int_equal(get_mask(f, f->client, EV_KEY, codes, sizeof(codes)), 0);
	assert_true(all_bytes(codes, EVDEV_BITS_LEN(KEY_MAX), 0xff));
	assert_true(all_bytes(codes + EVDEV_BITS_LEN(KEY_MAX), 32, 0));

	memset(codes, POISON, sizeof(codes));
	assert_int_equal(get_mask(f, f->client, EV_REP, codes, 16), 0);
	assert_true(all_bytes(codes, 16, 0));
}

static void test_unknown_ioctls(void **state) {
	struct fixture *f = *state;
	int arg = 0;
	struct termios tio;
	unsigned int keycode[2] = { 0x1e, KEY_B };

	assert_int_equal(do_ioctl(f->node, f->client, _IOR('E', 0x10, int), &arg), -ENOTTY);
	assert_int_equal(do_ioctl(f->node, f->client, _IO('E', 0x99), NULL), -ENOTTY);
	assert_int_equal(do_ioctl(f->node, f->client, _IOR('U', 0x01, int), &arg), -ENOTTY);
	/* Numbers that are EVIOCGBIT, EVIOCGABS and EVIOCSABS under 'E'. */
	assert_int_equal(do_ioctl(f->node, f->client, _IOC(_IOC_READ, 'U', 0x20 + EV_KEY, sizeof(arg)), &arg), -ENOTTY);
	assert_int_equal(do_ioctl(f->node, f->client, _IOC(_IOC_READ, 'U', 0x40 + ABS_X, sizeof(arg)), &arg), -ENOTTY);
	assert_int_equal(do_ioctl(f->node, f->client, _IOC(_IOC_WRITE, 'U', 0xc0 + ABS_X, sizeof(arg)), &arg), -ENOTTY);
	assert_int_equal(do_ioctl(f->node, f->client, TCGETS, &tio), -ENOTTY);
	/* Known to the kernel, not served here. */
	assert_int_equal(do_ioctl(f->node, f->client, EVIOCSKEYCODE, keycode), -ENOTTY);
}

#define KBD(name) cmocka_unit_test_setup_teardown(name, fixture_keyboard_setup, fixture_teardown)
#define TS(name) cmocka_unit_test_setup_teardown(name, fixture_touchscreen_setup, fixture_teardown)
#define COMBO(name) cmocka_unit_test_setup_teardown(name, fixture_combo_setup, fixture_teardown)

int main(void) {
	const struct CMUnitTest tests[] = {
		KBD(test_version),
		KBD(test_id),
		KBD(test_name),
		KBD(test_name_short_buffer),
		KBD(test_phys_uniq),
		TS(test_phys_touchscreen),
		TS(test_prop),
		KBD(test_bits_all_types),
		TS(test_bits_all_types),
		COMBO(test_bits_all_types),
		TS(test_bits_spot_checks),
		KBD(test_bits_invalid_type),
		KBD(test_bits_short_buffer),
		KBD(test_bits_old_key_max),
		KBD(test_effects),
		KBD(test_key_state),
		KBD(test_key_state_other_client_keeps_queue),
		KBD(test_key_state_short),
		KBD(test_led_state),
		COMBO(test_sw_snd_state),
		TS(test_abs_get),
		TS(test_abs_set),
		KBD(test_abs_keyboard),
		TS(test_mt_slots),
		TS(test_mt_slots_short),
		TS(test_mt_slots_invalid),
		KBD(test_mt_slots_keyboard),
		KBD(test_rep),
		TS(test_rep_without_ev_rep),
		KBD(test_keycode),
		KBD(test_grab),
		KBD(test_grab_released_on_close),
		KBD(test_grab_released_on_revoke),
		KBD(test_grab_does_not_block_other_writers),
		KBD(test_revoke),
		KBD(test_clock_invalid),
		KBD(test_clock_monotonic),
		KBD(test_clock_from_batch_time),
		KBD(test_clock_change_drops_queue),
		KBD(test_mask_default),
		KBD(test_mask_codes),
		KBD(test_mask_types),
		KBD(test_mask_unknown_type),
		KBD(test_mask_set_partial_long),
		KBD(test_mask_get_clears_rest),
		KBD(test_unknown_ioctls),
	};

	return cmocka_run_group_tests_name("evdev ioctl", tests, NULL, NULL);
}
