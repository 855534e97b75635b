/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test-util.h"

static void enable_abs(struct libevdev *d, unsigned int code, int min, int max, int resolution) {
	struct input_absinfo ai = { .minimum = min, .maximum = max, .resolution = resolution };

	assert_int_equal(libevdev_enable_event_code(d, EV_ABS, code, &ai), 0);
}

static void enable(struct libevdev *d, unsigned int type, unsigned int code) {
	assert_int_equal(libevdev_enable_event_code(d, type, code, NULL), 0);
}

struct libevdev *test_keyboard_new(void) {
	struct libevdev *d = libevdev_new();
	int delay = KBD_REP_DELAY, period = KBD_REP_PERIOD;

	assert_non_null(d);
	libevdev_set_name(d, KBD_NAME);
	libevdev_set_id_bustype(d, BUS_USB);
	libevdev_set_id_vendor(d, 0x046d);
	libevdev_set_id_product(d, 0xc31c);
	libevdev_set_id_version(d, 0x0110);
	for (unsigned int code = KEY_ESC; code <= KEY_Z; code++)
		enable(d, EV_KEY, code);
	enable(d, EV_KEY, KEY_LEFTSHIFT);
	enable(d, EV_KEY, KEY_CAPSLOCK);
	enable(d, EV_KEY, KEY_NUMLOCK);
	enable(d, EV_MSC, MSC_SCAN);
	enable(d, EV_LED, LED_NUML);
	enable(d, EV_LED, LED_CAPSL);
	enable(d, EV_LED, LED_SCROLLL);
	assert_int_equal(libevdev_enable_event_code(d, EV_REP, REP_DELAY, &delay), 0);
	assert_int_equal(libevdev_enable_event_code(d, EV_REP, REP_PERIOD, &period), 0);
	return d;
}

struct libevdev *test_touchscreen_new(void) {
	struct libevdev *d = libevdev_new();

	assert_non_null(d);
	libevdev_set_name(d, TS_NAME);
	libevdev_set_phys(d, TS_PHYS);
	libevdev_set_id_bustype(d, BUS_I2C);
	libevdev_set_id_vendor(d, 0x04f3);
	libevdev_set_id_product(d, 0x2b7c);
	libevdev_set_id_version(d, 0x0001);
	enable(d, EV_KEY, BTN_TOUCH);
	enable_abs(d, ABS_X, 0, TS_MAX_X, 12);
	enable_abs(d, ABS_Y, 0, TS_MAX_Y, 12);
	enable_abs(d, ABS_MT_SLOT, 0, TS_SLOTS - 1, 0);
	enable_abs(d, ABS_MT_TRACKING_ID, 0, 65535, 0);
	enable_abs(d, ABS_MT_POSITION_X, 0, TS_MAX_X, 12);
	enable_abs(d, ABS_MT_POSITION_Y, 0, TS_MAX_Y, 12);
	assert_int_equal(libevdev_enable_property(d, INPUT_PROP_DIRECT), 0);
	return d;
}

static struct recorder *rec_of(void *userdata) {
	return userdata;
}

static int rec_forward(void *userdata, const struct input_event *ev) {
	struct recorder *r = rec_of(userdata);

	assert_true(r->n_forwarded < RECORDER_MAX);
	r->forwarded[r->n_forwarded++] = *ev;
	return 0;
}

static int rec_set_repeat(void *userdata, int delay, int period) {
	struct recorder *r = rec_of(userdata);

	r->n_set_repeat++;
	r->rep_delay = delay;
	r->rep_period = period;
	return 0;
}

static int rec_get_keycode(void *userdata, struct input_keymap_entry *ke) {
	struct recorder *r = rec_of(userdata);
	uint32_t scancode = 0;

	r->n_get_keycode++;
	if (ke->len != sizeof(scancode))
		return -EINVAL;
	memcpy(&scancode, ke->scancode, sizeof(scancode));
	if (scancode != 0x1e)
		return -EINVAL;
	ke->keycode = KEY_A;
	return 0;
}

static void rec_wakeup(void *userdata, struct evdev_client *c) {
	struct recorder *r = rec_of(userdata);
	size_t i;

	for (i = 0; i < r->n_woken; i++)
		if (r->woken[i].client == c)
			break;
	if (i == r->n_woken) {
		assert_true(r->n_woken < RECORDER_MAX);
		r->woken[r->n_woken++].client = c;
	}
	r->woken[i].count++;
}

const struct evdev_node_ops recorder_ops = {
	.forward = rec_forward,
	.set_repeat = rec_set_repeat,
	.get_keycode = rec_get_keycode,
	.wakeup = rec_wakeup,
};

void recorder_clear(struct recorder *r) {
	memset(r, 0, sizeof(*r));
}

unsigned int recorder_wakeups(const struct recorder *r, const struct evdev_client *c) {
	for (size_t i = 0; i < r->n_woken; i++)
		if (r->woken[i].client == c)
			return r->woken[i].count;
	return 0;
}

int fixture_setup(void **state, struct libevdev *desc, unsigned int n_slots) {
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->desc = desc;
	evdev_state_init(&f->state, n_slots);
	assert_int_equal(evdev_node_new(&f->node, f->desc, &f->state, &recorder_ops, &f->rec), 0);
	f->client = fixture_open(f);
	*state = f;
	return 0;
}

int fixture_keyboard_setup(void **state) {
	return fixture_setup(state, test_keyboard_new(), 0);
}

int fixture_touchscreen_setup(void **state) {
	return fixture_setup(state, test_touchscreen_new(), TS_SLOTS);
}

int fixture_teardown(void **state) {
	struct fixture *f = *state;

	evdev_node_free(f->node);
	libevdev_free(f->desc);
	free(f);
	return 0;
}

struct evdev_client *fixture_open(struct fixture *f) {
	struct evdev_client *c = NULL;

	assert_int_equal(evdev_node_open(f->node, &c), 0);
	assert_non_null(c);
	return c;
}

int do_ioctl(struct evdev_node *n, struct evdev_client *c, unsigned int cmd, void *arg) {
	static struct evdev_ioctl_step step;
	static uint8_t in[2 * EVDEV_IOCTL_BUF_MAX];
	struct iovec out_iov[2] = { { 0 } };
	size_t in_size = 0, out_size = 0, n_out = 0;

	for (unsigned int round = 0; round < 8; round++) {
		memset(&step, 0xa5, sizeof(step));
		evdev_node_ioctl(n, c, cmd, arg, in, in_size, out_size, &step);
		if (!step.retry) {
			const uint8_t *p = step.out;
			size_t left = step.out_size;

			if (step.result < 0)
				return step.result;
			/* FUSE fails the ioctl with EIO when the reply is larger than what was asked for. */
			assert_in_range(step.out_size, 0, out_size);
			for (size_t i = 0; i < n_out && left > 0; i++) {
				size_t len = MIN(left, out_iov[i].iov_len);
				memcpy(out_iov[i].iov_base, p, len);
				p += len;
				left -= len;
			}
			return step.result;
		}
		assert_in_range(step.n_in, 0, ELEMENTSOF(step.in_iov));
		assert_in_range(step.n_out, 0, ELEMENTSOF(step.out_iov));
		in_size = 0;
		for (size_t i = 0; i < step.n_in; i++) {
			assert_in_range(in_size + step.in_iov[i].iov_len, 0, sizeof(in));
			memcpy(in + in_size, step.in_iov[i].iov_base, step.in_iov[i].iov_len);
			in_size += step.in_iov[i].iov_len;
		}
		out_size = 0;
		n_out = step.n_out;
		for (size_t i = 0; i < n_out; i++) {
			out_iov[i] = step.out_iov[i];
			out_size += out_iov[i].iov_len;
		}
		assert_in_range(out_size, 0, EVDEV_IOCTL_BUF_MAX);
	}
	fail_msg("ioctl %#x still asks for a retry after 8 rounds", cmd);
	return -EIO;
}

long long timeval_usec(struct timeval t) {
	return (long long)t.tv_sec * 1000000 + t.tv_usec;
}

long long clock_usec(clockid_t clock) {
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct timeval monotonic_now(void) {
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (struct timeval){ .tv_sec = ts.tv_sec, .tv_usec = ts.tv_nsec / 1000 };
}

void deliver_events(struct evdev_node *n, const struct input_event *evs, size_t count) {
	struct input_event copy[256];
	struct timeval t = monotonic_now();

	assert_in_range(count, 1, ELEMENTSOF(copy));
	for (size_t i = 0; i < count; i++) {
		copy[i] = evs[i];
		copy[i].time = t;
	}
	evdev_node_deliver(n, copy, count);
}

void write_events(struct evdev_node *n, struct evdev_client *c, const struct input_event *evs, size_t count) {
	assert_int_equal(evdev_node_write(n, c, evs, count), (int)count);
}

size_t read_events(struct evdev_client *c, struct input_event *out, size_t max) {
	int r = evdev_client_read(c, out, max);

	assert_in_range(r, 0, max);
	return (size_t)r;
}

static void print_events(const char *what, const struct input_event *evs, size_t n) {
	print_error("%s (%zu):\n", what, n);
	for (size_t i = 0; i < n; i++) {
		const char *type = libevdev_event_type_get_name(evs[i].type);
		const char *code = libevdev_event_code_get_name(evs[i].type, evs[i].code);
		print_error("    %s %s %d\n", type ? type : "?", code ? code : "?", evs[i].value);
	}
}

void check_events(const struct input_event *got, size_t n_got, const struct input_event *want, size_t n_want,
		  const char *file, int line) {
	bool same = n_got == n_want;

	for (size_t i = 0; same && i < n_got; i++)
		same = got[i].type == want[i].type && got[i].code == want[i].code && got[i].value == want[i].value;
	if (same)
		return;
	print_events("expected", want, n_want);
	print_events("got", got, n_got);
	_fail(file, line);
}

void check_read(struct evdev_client *c, const struct input_event *want, size_t n_want, const char *file, int line) {
	struct input_event got[512];
	size_t n = read_events(c, got, ELEMENTSOF(got));

	check_events(got, n, want, n_want, file, line);
}
