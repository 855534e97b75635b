/* SPDX-License-Identifier: MIT */
#pragma once

/* cmocka needs these before its own header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <linux/input.h>
#include <time.h>

#include "evdev-node.h"
#include "util.h"

struct libevdev;

#define EV(t, c, v) ((struct input_event){ .type = (t), .code = (c), .value = (v) })
#define SYN_EV EV(EV_SYN, SYN_REPORT, 0)
#define EVENTS(...) ((const struct input_event[]){ __VA_ARGS__ })
#define N_EVENTS(...) (sizeof(EVENTS(__VA_ARGS__)) / sizeof(struct input_event))

/* The slots of the test touchscreen, and its axis ranges. */
#define TS_SLOTS 10
#define TS_MAX_X 4095
#define TS_MAX_Y 2303

#define KBD_NAME "devns test keyboard"
#define KBD_REP_DELAY 250
#define KBD_REP_PERIOD 33
#define TS_NAME "devns test touchscreen"
#define TS_PHYS "usb-0000:00:14.0-4/input0"

/* A keyboard: KEY_ESC..KEY_Z and a few more, MSC_SCAN, LED_NUML/CAPSL/SCROLLL, EV_REP. */
struct libevdev *test_keyboard_new(void);
/* A multitouch touchscreen: ABS_X/Y, ABS_MT_SLOT 0..TS_SLOTS-1, tracking id, position, BTN_TOUCH, INPUT_PROP_DIRECT. */
struct libevdev *test_touchscreen_new(void);

/* What a node asked of the hardware, and whom it woke up. */
#define RECORDER_MAX 256
struct recorder {
	struct input_event forwarded[RECORDER_MAX];
	size_t n_forwarded;
	unsigned int n_set_repeat;
	int rep_delay, rep_period;
	struct {
		struct evdev_client *client;
		unsigned int count;
	} woken[RECORDER_MAX];
	size_t n_woken;
	unsigned int n_get_keycode;
};

/* Ops recording into the struct recorder passed as userdata; get_keycode maps scancode 0x1e to KEY_A. */
extern const struct evdev_node_ops recorder_ops;
void recorder_clear(struct recorder *r);
/* How many wakeups c got since the last recorder_clear(). */
unsigned int recorder_wakeups(const struct recorder *r, const struct evdev_client *c);

/* A node on a description, with one open client, recording its ops. */
struct fixture {
	struct libevdev *desc;
	struct evdev_state state;
	struct recorder rec;
	struct evdev_node *node;
	struct evdev_client *client;
};

/* cmocka setups: a node on desc (taken over) with n_slots slots; a keyboard; a touchscreen. */
int fixture_setup(void **state, struct libevdev *desc, unsigned int n_slots);
int fixture_keyboard_setup(void **state);
int fixture_touchscreen_setup(void **state);
int fixture_teardown(void **state);
struct evdev_client *fixture_open(struct fixture *f);

/*
 * Runs an ioctl as the CUSE frontend does in unrestricted mode: the first
 * step gets no data; every retry is served from real memory at the iovecs
 * the node asked for, and the output is copied back into them. Returns the
 * ioctl's result (a negative errno on failure).
 */
int do_ioctl(struct evdev_node *n, struct evdev_client *c, unsigned int cmd, void *arg);

/* Hardware events, stamped now in CLOCK_MONOTONIC, handed to the node. */
void deliver_events(struct evdev_node *n, const struct input_event *evs, size_t count);
#define DELIVER(n, ...) deliver_events((n), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

/* Events written by a client; asserts all were consumed. */
void write_events(struct evdev_node *n, struct evdev_client *c, const struct input_event *evs, size_t count);
#define WRITE(n, c, ...) write_events((n), (c), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__))

/* Reads everything the client has ready; asserts the read succeeds. */
size_t read_events(struct evdev_client *c, struct input_event *out, size_t max);

/* Compares type, code and value of two event sequences, printing both on a mismatch. */
void check_events(const struct input_event *got, size_t n_got, const struct input_event *want, size_t n_want,
		  const char *file, int line);
#define EXPECT_EVENTS(got, n_got, ...) \
	check_events((got), (n_got), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__), __FILE__, __LINE__)

/* Reads what the client has ready and compares it with the given events. */
void check_read(struct evdev_client *c, const struct input_event *want, size_t n_want, const char *file, int line);
#define EXPECT_READ(c, ...) check_read((c), EVENTS(__VA_ARGS__), N_EVENTS(__VA_ARGS__), __FILE__, __LINE__)
#define EXPECT_NOTHING(c) check_read((c), NULL, 0, __FILE__, __LINE__)

/* Microseconds of an event time, and of a clock now. */
long long timeval_usec(struct timeval t);
long long clock_usec(clockid_t clock);

/* The EVIOCGBIT/EVIOCGKEY length for a bitmap of codes 0..max, as the kernel computes it. */
#define EVDEV_BITS_LEN(max) ((int)(BITS_TO_LONGS(max) * sizeof(long)))
