/* SPDX-License-Identifier: MIT */
#include <libevdev/libevdev.h>
#include <stdlib.h>
#include <string.h>

#include "evdev-node.h"

int evdev_node_new(struct evdev_node **ret, const struct libevdev *desc, const struct evdev_state *state,
		   const struct evdev_node_ops *ops, void *userdata) {
	struct evdev_node *n;
	int delay = 0, period = 0;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->desc = desc;
	n->ops = ops;
	n->userdata = userdata;
	n->view = *state;
	LIST_INIT(&n->clients);
	n->ff.gain = 0xffff;
	n->ff.autocenter = -1;
	evdev_caps_from_libevdev(&n->caps, desc);
	for (unsigned int code = 0; code <= ABS_MAX; code++) {
		const struct input_absinfo *ai = libevdev_get_abs_info(desc, code);
		if (ai)
			n->absinfo[code] = *ai;
	}
	if (libevdev_get_repeat(desc, &delay, &period) == 0) {
		n->rep[REP_DELAY] = delay;
		n->rep[REP_PERIOD] = period;
	}
	/* As the kernel sizes it: eight packets, at least 64 events. */
	n->queue_size = MAX(64u, (state->n_slots * 6 + 8) * 8);
	*ret = n;
	return 0;
}

struct evdev_node *evdev_node_free(struct evdev_node *n) {
	struct evdev_client *c;

	if (!n)
		return NULL;
	while ((c = LIST_FIRST(&n->clients)))
		evdev_node_close(n, c);
	free(n->ff.slots);
	free(n);
	return NULL;
}

static unsigned int clients_of(const struct evdev_node *n, uid_t uid) {
	const struct evdev_client *c;
	unsigned int count = 0;

	LIST_FOREACH(c, &n->clients, link)
		count += c->uid == uid;
	return count;
}

int evdev_node_open_as(struct evdev_node *n, uid_t uid, struct evdev_client **ret) {
	struct evdev_client *c;
	int r;

	if (n->gone)
		return -ENODEV;
	if (n->n_clients >= EVDEV_NODE_MAX_CLIENTS)
		return -EMFILE;
	if (uid != EVDEV_UID_NONE && clients_of(n, uid) >= EVDEV_NODE_MAX_CLIENTS_PER_UID)
		return -EMFILE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	r = evdev_queue_init(&c->queue, n->queue_size);
	if (r < 0) {
		free(c);
		return r;
	}
	c->node = n;
	c->clock = CLOCK_REALTIME;
	c->uid = uid;
	LIST_INSERT_HEAD(&n->clients, c, link);
	n->n_clients++;
	*ret = c;
	return 0;
}

int evdev_node_open(struct evdev_node *n, struct evdev_client **ret) {
	return evdev_node_open_as(n, EVDEV_UID_NONE, ret);
}

void evdev_node_close(struct evdev_node *n, struct evdev_client *c) {
	if (n->grab == c)
		n->grab = NULL;
	evdev_ff_flush(n, c);
	LIST_REMOVE(c, link);
	n->n_clients--;
	for (size_t i = 0; i < ELEMENTSOF(c->masks); i++)
		free(c->masks[i]);
	evdev_queue_fini(&c->queue);
	free(c);
}

static bool client_filtered(const struct evdev_client *c, unsigned int type, unsigned int code) {
	unsigned int cnt;

	if (type == EV_SYN || type >= EV_CNT)
		return false;
	if (c->masks[0] && !bit_test(c->masks[0], type))
		return true;
	cnt = evdev_mask_count(type);
	if (cnt == 0 || code >= cnt)
		return false;
	return c->masks[type] && !bit_test(c->masks[type], code);
}

static struct timeval now_in(clockid_t clock) {
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (struct timeval){ .tv_sec = ts.tv_sec, .tv_usec = ts.tv_nsec / 1000 };
}

/*
 * Event times arrive in CLOCK_MONOTONIC; a client may have asked for another
 * clock. The offsets are taken once per batch of events, and only when
 * needed: from the node's batch_time() (the event loop's time of the
 * wakeup, no clock read), or by reading the clocks.
 */
struct clock_offsets {
	const struct evdev_node *node;
	long long us[2]; /* CLOCK_REALTIME, CLOCK_BOOTTIME */
	bool known[2];
};

static long long to_us(struct timeval t) {
	return (long long)t.tv_sec * 1000000 + t.tv_usec;
}

static long long clock_offset(const struct evdev_node *n, clockid_t clock) {
	uint64_t mono, other;

	if (n->ops && n->ops->batch_time && n->ops->batch_time(n->userdata, CLOCK_MONOTONIC, &mono) >= 0 &&
	    n->ops->batch_time(n->userdata, clock, &other) >= 0)
		return (long long)other - (long long)mono;
	return to_us(now_in(clock)) - to_us(now_in(CLOCK_MONOTONIC));
}

static struct timeval convert_time(struct timeval t, clockid_t clock, struct clock_offsets *o) {
	size_t i = clock == CLOCK_BOOTTIME;
	long long us;

	if (clock == CLOCK_MONOTONIC)
		return t;
	if (!o->known[i]) {
		o->us[i] = clock_offset(o->node, clock);
		o->known[i] = true;
	}
	/* A time no clock reaches (only a broken device sends one) is passed on as it is. */
	if (__builtin_mul_overflow((long long)t.tv_sec, 1000000LL, &us) ||
	    __builtin_add_overflow(us, (long long)t.tv_usec, &us) || __builtin_add_overflow(us, o->us[i], &us))
		return t;
	return (struct timeval){ .tv_sec = us / 1000000, .tv_usec = us % 1000000 };
}

static void client_push(struct evdev_client *c, const struct input_event *ev, struct clock_offsets *o) {
	struct input_event e = *ev;

	if (c->revoked || client_filtered(c, e.type, e.code))
		return;
	e.time = convert_time(e.time, c->clock, o);
	if (evdev_queue_push(&c->queue, &e))
		c->wake = true;
}

/* Passes events to the node's clients (the grabbing one only, if any) and its view. */
static void pass(struct evdev_node *n, const struct input_event *evs, size_t count) {
	struct clock_offsets offsets = { .node = n };
	struct evdev_client *c;
	bool feedback = false;

	for (size_t i = 0; i < count; i++) {
		if ((evs[i].type == EV_LED || evs[i].type == EV_SND) &&
		    evdev_state_value(&n->view, evs[i].type, evs[i].code) != (evs[i].value != 0))
			feedback = true;
		evdev_state_apply(&n->view, &evs[i]);
		if (n->grab) {
			client_push(n->grab, &evs[i], &offsets);
			continue;
		}
		LIST_FOREACH(c, &n->clients, link)
			client_push(c, &evs[i], &offsets);
	}
	if (feedback && n->ops && n->ops->feedback_changed)
		n->ops->feedback_changed(n->userdata);
}

void evdev_node_flush_wakeups(struct evdev_node *n) {
	struct evdev_client *c, *next;

	for (c = LIST_FIRST(&n->clients); c; c = next) {
		next = LIST_NEXT(c, link);
		if (!c->wake)
			continue;
		c->wake = false;
		if (n->ops && n->ops->wakeup)
			n->ops->wakeup(n->userdata, c);
	}
}

void evdev_node_deliver(struct evdev_node *n, const struct input_event *evs, size_t count) {
	pass(n, evs, count);
	evdev_node_flush_wakeups(n);
}

/* Events made up by devnsd itself: stamped now, in CLOCK_MONOTONIC like hardware events. */
static void pass_synthetic(struct evdev_node *n, struct input_event *evs, size_t count) {
	struct timeval t = now_in(CLOCK_MONOTONIC);

	for (size_t i = 0; i < count; i++)
		evs[i].time = t;
	pass(n, evs, count);
}

static int forward(struct evdev_node *n, uint16_t type, uint16_t code, int32_t value) {
	struct input_event ev = { .time = now_in(CLOCK_MONOTONIC), .type = type, .code = code, .value = value };

	return n->ops && n->ops->forward ? n->ops->forward(n->userdata, &ev) : 0;
}

static int set_repeat(struct evdev_node *n) {
	if (!n->active || !n->ops || !n->ops->set_repeat)
		return 0;
	return n->ops->set_repeat(n->userdata, n->rep[REP_DELAY], n->rep[REP_PERIOD]);
}

/* An LED or sound change: kept in the view; sent to the hardware or echoed locally. */
static int write_feedback(struct evdev_node *n, const struct input_event *ev, bool *ret_sync) {
	struct input_event echo[2] = { *ev, { .type = EV_SYN, .code = SYN_REPORT } };
	bool on = ev->value != 0;
	int r;

	if (!evdev_caps_has(&n->caps, ev->type, ev->code))
		return 0;
	if (evdev_state_value(&n->view, ev->type, ev->code) == on)
		return 0;
	if (!n->active) {
		/* In the background only this persona's readers see the change. */
		pass_synthetic(n, echo, 2);
		return 0;
	}
	*ret_sync = true;
	r = forward(n, ev->type, ev->code, on);
	if (r < 0)
		return r;
	/*
	 * The view changes now, as the input core's state does at a write, so
	 * that a change back in the same write goes out too; readers see it
	 * when the hardware echoes it.
	 */
	evdev_state_apply(&n->view, &(struct input_event){ .type = ev->type, .code = ev->code, .value = on });
	if (n->ops && n->ops->feedback_changed)
		n->ops->feedback_changed(n->userdata);
	return 0;
}

int evdev_node_write(struct evdev_node *n, struct evdev_client *c, const struct input_event *evs, size_t count) {
	bool sync = false;
	int r = 0;

	if (c->revoked || n->gone)
		return -ENODEV;

	for (size_t i = 0; i < count && r >= 0; i++) {
		const struct input_event *ev = &evs[i];

		switch (ev->type) {
		case EV_LED:
		case EV_SND:
			r = write_feedback(n, ev, &sync);
			break;
		case EV_FF:
			r = evdev_ff_event(n, ev->code, ev->value);
			break;
		case EV_REP:
			if (ev->code <= REP_MAX && ev->value >= 0 && bit_test(n->caps.ev, EV_REP) &&
			    n->rep[ev->code] != ev->value) {
				n->rep[ev->code] = ev->value;
				r = set_repeat(n);
			}
			break;
		case EV_SYN:
			if (ev->code == SYN_REPORT) {
				struct input_event e = *ev;
				pass_synthetic(n, &e, 1);
			}
			break;
		default:
			if (evdev_caps_has(&n->caps, ev->type, ev->code)) {
				struct input_event e = *ev;
				pass_synthetic(n, &e, 1);
			}
			break;
		}
	}
	if (r >= 0 && sync)
		r = forward(n, EV_SYN, SYN_REPORT, 0);
	evdev_node_flush_wakeups(n);
	return r < 0 ? r : (int)count;
}

int evdev_client_read(struct evdev_client *c, struct input_event *out, size_t max) {
	if (c->revoked || c->node->gone)
		return -ENODEV;
	return (int)evdev_queue_pop(&c->queue, out, max);
}

bool evdev_client_ready(const struct evdev_client *c) {
	return c->revoked || c->node->gone || evdev_queue_readable(&c->queue);
}

void evdev_node_deactivate(struct evdev_node *n) {
	struct input_event evs[EVDEV_RELEASE_MAX];
	size_t count;

	if (!n->active)
		return;
	evdev_ff_deactivate(n);
	n->active = false;
	count = evdev_state_release(&n->view, evs);
	pass_synthetic(n, evs, count);
	evdev_node_flush_wakeups(n);
}

void evdev_node_activate(struct evdev_node *n, const struct evdev_state *hw) {
	bool sync = false;

	if (n->active)
		return;
	n->active = true;

	if (!evdev_state_input_equal(&n->view, hw)) {
		struct input_event drop[2] = {
			{ .type = EV_SYN, .code = SYN_DROPPED },
			{ .type = EV_SYN, .code = SYN_REPORT },
		};
		evdev_state_copy_input(&n->view, hw);
		/* Bypasses the view: the state was copied whole. */
		struct timeval t = now_in(CLOCK_MONOTONIC);
		struct clock_offsets offsets = { .node = n };
		struct evdev_client *c;
		for (size_t i = 0; i < 2; i++)
			drop[i].time = t;
		LIST_FOREACH(c, &n->clients, link)
			for (size_t i = 0; i < 2; i++)
				client_push(c, &drop[i], &offsets);
	}

	for (unsigned int code = 0; code <= LED_MAX; code++) {
		bool want = bit_test(n->view.led, code);
		if (bit_test(n->caps.led, code) && want != bit_test(hw->led, code)) {
			forward(n, EV_LED, (uint16_t)code, want);
			sync = true;
		}
	}
	for (unsigned int code = 0; code <= SND_MAX; code++) {
		bool want = bit_test(n->view.snd, code);
		if (bit_test(n->caps.snd, code) && want != bit_test(hw->snd, code)) {
			forward(n, EV_SND, (uint16_t)code, want);
			sync = true;
		}
	}
	if (sync)
		forward(n, EV_SYN, SYN_REPORT, 0);
	if (bit_test(n->caps.ev, EV_REP))
		set_repeat(n);
	evdev_ff_activate(n);
	evdev_node_flush_wakeups(n);
}

void evdev_client_revoke(struct evdev_node *n, struct evdev_client *c) {
	if (n->grab == c)
		n->grab = NULL;
	/* As the kernel's evdev_revoke(): the file's effects are flushed. */
	evdev_ff_flush(n, c);
	c->revoked = true;
	c->wake = true;
}

void evdev_node_revoke(struct evdev_node *n, const struct evdev_state *hw) {
	struct evdev_client *c;

	LIST_FOREACH(c, &n->clients, link)
		evdev_client_revoke(n, c);
	if (n->active)
		evdev_state_copy_input(&n->view, hw);
	else
		evdev_state_release_all(&n->view);
	evdev_node_flush_wakeups(n);
}

void evdev_node_set_gone(struct evdev_node *n) {
	struct evdev_client *c;

	n->gone = true;
	LIST_FOREACH(c, &n->clients, link)
		c->wake = true;
	evdev_node_flush_wakeups(n);
}

int evdev_node_set_feedback(struct evdev_node *n, uint16_t type, uint16_t code, bool on) {
	struct input_event ev = { .type = type, .code = code, .value = on };
	bool sync = false;
	int r;

	if (n->gone)
		return -ENODEV;
	if ((type != EV_LED && type != EV_SND) || !evdev_caps_has(&n->caps, type, code))
		return -EINVAL;
	r = write_feedback(n, &ev, &sync);
	if (r >= 0 && sync)
		r = forward(n, EV_SYN, SYN_REPORT, 0);
	evdev_node_flush_wakeups(n);
	return r;
}
