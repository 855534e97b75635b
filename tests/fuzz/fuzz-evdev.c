/* SPDX-License-Identifier: MIT */
/*
 * A persona's evdev node as a container reaches it through
 * /dev/devns/PERSONA/eventN: ioctls (with CUSE's retries), write()s and
 * read()s on open files, mapped onto the node the way src/cuse/cuse-evdev.c
 * maps them. Behind the node is the fake input backend, wired as
 * input/serve.c wires a device: what the node forwards goes to the backend,
 * the backend's events (its LED echoes too) are folded into the hardware
 * state and passed to the node while it is active. Interleaved: the
 * device's own events, switches, LED writes from the persona's sysfs view,
 * and the device going away.
 */
#include <libevdev/libevdev.h>

#include "cuse-evdev.h"
#include "evdev-node.h"
#include "fuzz-cuse.h"
#include "input-backend.h"

#define HANDLES (EVDEV_NODE_MAX_CLIENTS + 4)
#define OPS_MAX 256
/* As cuse-evdev.c: reads are answered from at most 128 KiB, writes taken in chunks. */
#define READ_EVENTS_MAX ((128 * 1024) / sizeof(struct input_event))
#define WRITE_CHUNK 256
#define WRITE_BYTES_MAX (3 * WRITE_CHUNK * sizeof(struct input_event) + 7)
#define DRAIN_BATCH 256

struct handle {
	struct evdev_client *client;
	bool nonblock;
	/* Blocked reads, by size, answered oldest first. */
	size_t pending[CUSE_EVDEV_MAX_PENDING_READS];
	unsigned int n_pending;
};

struct rig {
	struct input_backend *backend;
	struct evdev_node *node;
	struct evdev_state hw;
	bool gone;
	struct handle handles[HANDLES];
	uint8_t user[FUZZ_USER_SIZE];
};

static struct rig rig;
static struct input_event read_buf[READ_EVENTS_MAX];
static uint8_t write_buf[WRITE_BYTES_MAX];

static int read_events(struct evdev_client *c, size_t size) {
	size_t max = MIN(size / sizeof(struct input_event), READ_EVENTS_MAX);
	int n = evdev_client_read(c, read_buf, max);

	fuzz_assert(n == -ENODEV || (n >= 0 && (size_t)n <= max));
	return n;
}

/* cuse_evdev_wakeup(): blocked reads are answered while the client has something. */
static void node_wakeup(void *userdata, struct evdev_client *c) {
	struct handle *h = c->data;

	(void)userdata;
	while (h->n_pending > 0 && evdev_client_ready(c)) {
		size_t size = h->pending[0];

		memmove(h->pending, h->pending + 1, --h->n_pending * sizeof(h->pending[0]));
		(void)read_events(c, size);
	}
}

static int node_forward(void *userdata, const struct input_event *ev) {
	return input_backend_write_event(((struct rig *)userdata)->backend, ev);
}

static int node_set_repeat(void *userdata, int delay, int period) {
	return input_backend_set_repeat(((struct rig *)userdata)->backend, delay, period);
}

static int node_get_keycode(void *userdata, struct input_keymap_entry *ke) {
	return input_backend_get_keycode(((struct rig *)userdata)->backend, ke);
}

static int node_ff_upload(void *userdata, struct ff_effect *effect) {
	return input_backend_ff_upload(((struct rig *)userdata)->backend, effect);
}

static int node_ff_erase(void *userdata, int hw_id) {
	return input_backend_ff_erase(((struct rig *)userdata)->backend, hw_id);
}

static const struct evdev_node_ops node_ops = {
	.forward = node_forward,
	.set_repeat = node_set_repeat,
	.get_keycode = node_get_keycode,
	.ff_upload = node_ff_upload,
	.ff_erase = node_ff_erase,
	.wakeup = node_wakeup,
};

static void enable(struct libevdev *d, unsigned int type, unsigned int code, const void *data) {
	fuzz_assert(libevdev_enable_event_code(d, type, code, data) == 0);
}

static void enable_abs(struct libevdev *d, unsigned int code, int min, int max) {
	struct input_absinfo ai = { .minimum = min, .maximum = max, .resolution = 12 };

	enable(d, EV_ABS, code, &ai);
}

/* A keyboard with LEDs, a bell, a lid switch and key repeat, or a multitouch screen with force feedback. */
static struct libevdev *device_new(bool touchscreen) {
	struct libevdev *d = libevdev_new();
	int delay = 250, period = 33;

	fuzz_assert(d);
	libevdev_set_name(d, touchscreen ? "fuzz touchscreen" : "fuzz keyboard");
	libevdev_set_id_bustype(d, BUS_USB);
	if (touchscreen) {
		libevdev_set_phys(d, "usb-0000:00:14.0-4/input0");
		enable(d, EV_KEY, BTN_TOUCH, NULL);
		enable_abs(d, ABS_X, 0, 4095);
		enable_abs(d, ABS_Y, 0, 2303);
		enable_abs(d, ABS_MT_SLOT, 0, 9);
		enable_abs(d, ABS_MT_TRACKING_ID, 0, 65535);
		enable_abs(d, ABS_MT_POSITION_X, 0, 4095);
		enable_abs(d, ABS_MT_POSITION_Y, 0, 2303);
		enable(d, EV_FF, FF_RUMBLE, NULL);
		libevdev_enable_property(d, INPUT_PROP_DIRECT);
		return d;
	}
	for (unsigned int code = KEY_ESC; code <= KEY_Z; code++)
		enable(d, EV_KEY, code, NULL);
	enable(d, EV_MSC, MSC_SCAN, NULL);
	enable(d, EV_LED, LED_NUML, NULL);
	enable(d, EV_LED, LED_CAPSL, NULL);
	enable(d, EV_SND, SND_BELL, NULL);
	enable(d, EV_SW, SW_LID, NULL);
	enable(d, EV_REP, REP_DELAY, &delay);
	enable(d, EV_REP, REP_PERIOD, &period);
	return d;
}

/* input/serve.c's drain(): the device's events, folded into the hardware state, passed on in packets. */
static void drain(struct rig *r) {
	struct input_event batch[DRAIN_BATCH];
	size_t n = 0;

	for (int i = 0; i < 4096; i++) {
		struct input_event ev;
		int k = input_backend_next_event(r->backend, &ev);

		if (k == 0)
			break;
		if (k < 0) {
			if (!r->gone)
				evdev_node_set_gone(r->node);
			r->gone = true;
			break;
		}
		evdev_state_apply(&r->hw, &ev);
		batch[n++] = ev;
		if (n == DRAIN_BATCH || (ev.type == EV_SYN && ev.code == SYN_REPORT)) {
			if (r->node->active)
				evdev_node_deliver(r->node, batch, n);
			n = 0;
		}
	}
	if (n > 0 && r->node->active)
		evdev_node_deliver(r->node, batch, n);
}

static void handle_open(struct rig *r, struct fuzz_input *in) {
	for (size_t i = 0; i < HANDLES; i++) {
		struct handle *h = &r->handles[i];
		int k;

		if (h->client)
			continue;
		k = evdev_node_open(r->node, &h->client);
		fuzz_assert(k == 0 || k == -EMFILE || k == -ENODEV);
		if (k < 0) {
			h->client = NULL;
			return;
		}
		h->client->data = h;
		h->nonblock = fuzz_u8(in) & 1;
		return;
	}
}

static void handle_close(struct rig *r, struct handle *h) {
	if (!h->client)
		return;
	h->n_pending = 0;
	evdev_node_close(r->node, h->client);
	h->client = NULL;
}

/* ce_read() */
static void handle_read(struct handle *h, size_t size) {
	struct evdev_client *c = h->client;

	if (size != 0 && size < sizeof(struct input_event))
		return; /* EINVAL */
	if (evdev_client_ready(c) && size != 0) {
		(void)read_events(c, size);
		return;
	}
	if (c->revoked || c->node->gone || h->nonblock || size == 0)
		return; /* ENODEV, EAGAIN, or 0 */
	if (h->n_pending == CUSE_EVDEV_MAX_PENDING_READS)
		return; /* EBUSY */
	h->pending[h->n_pending++] = size;
}

/* ce_write() */
static void handle_write(struct rig *r, struct handle *h, const uint8_t *buf, size_t size) {
	struct input_event evs[WRITE_CHUNK];
	size_t count = size / sizeof(struct input_event);

	if (size != 0 && size < sizeof(struct input_event))
		return; /* EINVAL */
	for (size_t done = 0; done < count;) {
		size_t n = MIN(count - done, (size_t)WRITE_CHUNK);
		int k;

		memcpy(evs, buf + done * sizeof(evs[0]), n * sizeof(evs[0]));
		k = evdev_node_write(r->node, h->client, evs, n);
		fuzz_assert(k == (int)n || (k < 0 && k >= -4095));
		if (k < 0)
			return;
		done += n;
	}
}

struct ioctl_call {
	struct rig *rig;
	struct evdev_client *client;
	unsigned int cmd;
};

static void ioctl_step(void *userdata, void *arg, const void *in, size_t in_size, size_t out_size,
		       struct fuzz_step *ret) {
	static struct evdev_ioctl_step step;
	struct ioctl_call *call = userdata;

	evdev_node_ioctl(call->rig->node, call->client, call->cmd, arg, in, in_size, out_size, &step);
	*ret = FUZZ_STEP_OF(step);
}

/* Mostly 'E' commands in the shapes evdev knows, some anything at all. */
static unsigned int pick_cmd(struct fuzz_input *in) {
	static const unsigned int known[] = {
		EVIOCGVERSION, EVIOCGID, EVIOCGREP, EVIOCSREP, EVIOCGKEYCODE, EVIOCGKEYCODE_V2,
		EVIOCGEFFECTS, EVIOCSFF, EVIOCRMFF, EVIOCGRAB, EVIOCREVOKE, EVIOCSCLOCKID, EVIOCGMASK, EVIOCSMASK,
		EVIOCGPROP(0), EVIOCGMTSLOTS(0), EVIOCGKEY(0), EVIOCGLED(0), EVIOCGSND(0), EVIOCGSW(0),
		EVIOCGNAME(0), EVIOCGPHYS(0), EVIOCGUNIQ(0), EVIOCGBIT(0, 0), EVIOCGABS(0), EVIOCSABS(0),
	};
	uint8_t how = fuzz_u8(in);
	unsigned int cmd, dir, nr;

	switch (how % 4) {
	case 0:
		return fuzz_u32(in);
	case 1:
		dir = fuzz_u8(in) & 3u;
		nr = fuzz_u8(in);
		return _IOC(dir, 'E', nr, fuzz_u16(in) & _IOC_SIZEMASK);
	default:
		cmd = known[fuzz_u8(in) % ELEMENTSOF(known)];
		/* EVIOCGBIT takes an event type, EVIOCGABS/EVIOCSABS an axis, in the number. */
		if (cmd == EVIOCGBIT(0, 0))
			cmd += fuzz_u8(in) % (EV_MAX + 1);
		else if (cmd == EVIOCGABS(0) || cmd == EVIOCSABS(0))
			cmd += fuzz_u8(in) % (ABS_MAX + 1);
		/* The variable-sized ones take their size from the input. */
		if (_IOC_SIZE(cmd) == 0 && _IOC_DIR(cmd) != _IOC_NONE)
			cmd |= (unsigned int)(fuzz_u16(in) & _IOC_SIZEMASK) << _IOC_SIZESHIFT;
		return cmd;
	}
}

static void handle_ioctl(struct rig *r, struct handle *h, struct fuzz_input *in) {
	struct ioctl_call call = { .rig = r, .client = h->client, .cmd = pick_cmd(in) };
	/* EVIOCGRAB, EVIOCREVOKE and EVIOCRMFF take a value. */
	void *arg = fuzz_ioctl_arg(in, false);
	int k;

	k = fuzz_cuse_ioctl(r->user, arg, ioctl_step, &call);
	fuzz_assert(k >= -4095 && (k < 0 || k <= (int)EVDEV_IOCTL_BUF_MAX));
}

/* Events from the device itself: of its types and codes, any values. */
static void device_events(struct rig *r, struct fuzz_input *in) {
	static const uint16_t types[] = { EV_SYN, EV_KEY, EV_ABS, EV_MSC, EV_SW, EV_LED, EV_SND, EV_REP };
	unsigned int n = fuzz_u8(in) % 64;

	for (unsigned int i = 0; i < n; i++) {
		uint16_t type = types[fuzz_u8(in) % ELEMENTSOF(types)];
		uint16_t code = fuzz_u16(in);
		int32_t value = (int32_t)fuzz_u32(in);

		if (type == EV_SYN)
			code %= SYN_DROPPED + 1;
		else if (!libevdev_has_event_code(r->backend->desc, type, code))
			continue;
		if (input_fake_push(r->backend, type, code, value) < 0)
			break;
	}
}

static void poke_user(struct rig *r, struct fuzz_input *in) {
	size_t off = fuzz_u16(in) % FUZZ_USER_SIZE;
	size_t len = fuzz_len(in, FUZZ_USER_SIZE - off);

	fuzz_bytes(in, r->user + off, len);
}

static void one_op(struct rig *r, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	struct handle *h = &r->handles[fuzz_u8(in) % HANDLES];
	size_t len;
	const uint8_t *p;
	uint8_t b;

	switch (op % 10) {
	case 0:
		handle_open(r, in);
		break;
	case 1:
		handle_close(r, h);
		break;
	case 2:
		if (h->client)
			handle_ioctl(r, h, in);
		break;
	case 3:
		len = fuzz_len(in, WRITE_BYTES_MAX);
		p = fuzz_span(in, len, &len);
		memcpy(write_buf, p, len);
		if (h->client)
			handle_write(r, h, write_buf, len);
		break;
	case 4:
		if (h->client)
			handle_read(h, fuzz_u8(in) & 1 ? fuzz_u32(in) : fuzz_u8(in) * sizeof(struct input_event));
		break;
	case 5:
		device_events(r, in);
		break;
	case 6: /* input/serve.c's input_device_switch() */
		drain(r);
		if (r->node->active)
			evdev_node_deactivate(r->node);
		else
			evdev_node_activate(r->node, &r->hw);
		break;
	case 7: /* the persona's LED view: input_led_set() */
		b = fuzz_u8(in);
		(void)evdev_node_set_feedback(r->node, b & 1 ? EV_SND : EV_LED, (b >> 1) % 32, b >> 7);
		break;
	case 8:
		poke_user(r, in);
		break;
	default:
		if (fuzz_u8(in) == 'U')
			input_fake_unplug(r->backend);
		break;
	}
	/* The event loop's next turn: the device's events and echoes reach the node. */
	drain(r);
}

/* A device lasts from input to input (making one costs more than most inputs) until it is unplugged. */
static struct input_backend *device_get(bool touchscreen) {
	static struct input_backend *devices[2];
	struct input_backend **b = &devices[touchscreen];
	struct input_event ev;

	if (*b && input_backend_next_event(*b, &ev) == -ENODEV)
		*b = input_backend_free(*b);
	if (!*b) {
		fuzz_assert(input_fake_new("event0", device_new(touchscreen), b) == 0);
		input_fake_set_ff_max(*b, 4);
	}
	while (input_backend_next_event(*b, &ev) > 0)
		;
	input_fake_clear_written(*b);
	return *b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	struct fuzz_input in = { data, size };
	struct rig *r = &rig;
	uint8_t setup = fuzz_u8(&in);
	int n_slots;

	memset(r, 0, sizeof(*r));
	r->backend = device_get(setup & 1);
	n_slots = libevdev_get_num_slots(r->backend->desc);
	evdev_state_init(&r->hw, n_slots > 0 ? (unsigned int)n_slots : 0);
	fuzz_assert(evdev_node_new(&r->node, r->backend->desc, &r->hw, &node_ops, r) == 0);
	fuzz_assert(evdev_node_set_ff_max(r->node, r->backend->ff_effects_max) == 0);
	r->node->active = setup & 2;

	for (unsigned int i = 0; i < OPS_MAX && !fuzz_done(&in); i++)
		one_op(r, &in);

	for (size_t i = 0; i < HANDLES; i++)
		handle_close(r, &r->handles[i]);
	evdev_node_free(r->node);
	return 0;
}
