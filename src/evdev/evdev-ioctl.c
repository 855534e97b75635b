/* SPDX-License-Identifier: MIT */
/*
 * The evdev ioctls, answered the way the kernel's evdev answers them: same
 * lengths copied, same return values, same errors. Commands the kernel
 * knows but devnsd does not serve (keymap writes) and commands of other
 * drivers get ENOTTY.
 */
#include <libevdev/libevdev.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "evdev-node.h"

#define EVIOC_MASK_SIZE(nr) ((nr) & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT))

static void done(struct evdev_ioctl_step *s, int result, const void *data, size_t len) {
	s->result = result;
	s->out_size = len;
	if (len > 0)
		memcpy(s->out, data, len);
}

static void fail(struct evdev_ioctl_step *s, int error) {
	done(s, error, NULL, 0);
}

static void want_in(struct evdev_ioctl_step *s, void *base, size_t len) {
	if (len > 0)
		s->in_iov[s->n_in++] = (struct iovec){ .iov_base = base, .iov_len = len };
}

static void want_out(struct evdev_ioctl_step *s, void *base, size_t len) {
	if (len > 0)
		s->out_iov[s->n_out++] = (struct iovec){ .iov_base = base, .iov_len = len };
}

/*
 * Asks for in_len bytes at arg to read and out_len bytes at arg to write,
 * unless this step already has them. True when a retry was set up.
 */
static bool need(struct evdev_ioctl_step *s, void *arg, size_t in_len, size_t out_len, size_t in_size,
		 size_t out_size) {
	if (in_size >= in_len && out_size >= out_len)
		return false;
	s->retry = true;
	want_in(s, arg, in_len);
	want_out(s, arg, out_len);
	return true;
}

static void bits_to_user(struct evdev_ioctl_step *s, const unsigned long *bits, unsigned int maxbit, size_t size) {
	size_t len = BITS_TO_LONGS(maxbit) * sizeof(long);

	if (len > size)
		len = size;
	done(s, (int)len, bits, len);
}

static void str_to_user(struct evdev_ioctl_step *s, const char *str, size_t size) {
	size_t len;

	if (!str)
		return fail(s, -ENOENT);
	len = strlen(str) + 1;
	if (len > size)
		len = size;
	done(s, (int)len, str, len);
}

/* A retry for the codes asks for the struct again first: the next step needs both. */
static void retry_mask(struct evdev_ioctl_step *s, void *arg, const struct input_mask *m, size_t len, bool in) {
	s->retry = true;
	want_in(s, arg, sizeof(*m));
	if (in)
		want_in(s, (void *)(uintptr_t)m->codes_ptr, len);
	else
		want_out(s, (void *)(uintptr_t)m->codes_ptr, len);
}

static void get_mask(struct evdev_ioctl_step *s, struct evdev_client *c, void *arg, const struct input_mask *m,
		     size_t out_size) {
	unsigned int cnt = evdev_mask_count(m->type);
	size_t len = MIN((size_t)m->codes_size, BITS_TO_LONGS(cnt) * sizeof(long));

	/* Unknown types are accepted, for forward compatibility; past the mask the buffer is zeroed. */
	if (m->codes_size > EVDEV_IOCTL_BUF_MAX)
		return fail(s, -EINVAL);
	if (out_size < m->codes_size)
		return retry_mask(s, arg, m, m->codes_size, false);
	memset(s->out, 0, m->codes_size);
	if (cnt > 0 && c->masks[m->type])
		memcpy(s->out, c->masks[m->type], len);
	else if (cnt > 0)
		memset(s->out, 0xff, len); /* no mask yet: everything passes */
	s->out_size = m->codes_size;
	s->result = 0;
}

static void set_mask(struct evdev_ioctl_step *s, struct evdev_client *c, void *arg, const struct input_mask *m,
		     const uint8_t *codes, size_t codes_given) {
	unsigned int cnt = evdev_mask_count(m->type);
	size_t len;
	unsigned long *mask;

	if (cnt == 0)
		return done(s, 0, NULL, 0);
	if (m->codes_size % sizeof(long))
		return fail(s, -EINVAL);
	len = MIN((size_t)m->codes_size, BITS_TO_LONGS(cnt - 1) * sizeof(long));
	if (codes_given < len)
		return retry_mask(s, arg, m, len, true);
	mask = calloc(BITS_TO_LONGS(cnt), sizeof(long));
	if (!mask)
		return fail(s, -ENOMEM);
	memcpy(mask, codes, len);
	free(c->masks[m->type]);
	c->masks[m->type] = mask;
	done(s, 0, NULL, 0);
}

/* EVIOCGMASK and EVIOCSMASK: the struct first, then the codes it points at. */
static void mask_ioctl(struct evdev_ioctl_step *s, struct evdev_client *c, unsigned int cmd, void *arg,
		       const uint8_t *in, size_t in_size, size_t out_size) {
	struct input_mask m;

	if (in_size < sizeof(m)) {
		s->retry = true;
		want_in(s, arg, sizeof(m));
		return;
	}
	memcpy(&m, in, sizeof(m));
	if (cmd == EVIOCGMASK)
		get_mask(s, c, arg, &m, out_size);
	else
		set_mask(s, c, arg, &m, in + sizeof(m), in_size - sizeof(m));
}

static void get_keycode(struct evdev_ioctl_step *s, struct evdev_node *n, unsigned int cmd, const void *in) {
	struct input_keymap_entry ke = { 0 };
	unsigned int legacy[2];
	int r;

	if (!n->ops || !n->ops->get_keycode)
		return fail(s, -EINVAL);
	if (cmd == EVIOCGKEYCODE) {
		memcpy(legacy, in, sizeof(legacy));
		ke.len = sizeof(legacy[0]);
		memcpy(ke.scancode, &legacy[0], sizeof(legacy[0]));
	} else {
		memcpy(&ke, in, sizeof(ke));
		if (ke.len > sizeof(ke.scancode))
			return fail(s, -EINVAL);
	}
	r = n->ops->get_keycode(n->userdata, &ke);
	if (r < 0)
		return fail(s, r);
	if (cmd == EVIOCGKEYCODE) {
		legacy[1] = ke.keycode;
		return done(s, 0, legacy, sizeof(legacy));
	}
	done(s, 0, &ke, sizeof(ke));
}

static void set_clock(struct evdev_ioctl_step *s, struct evdev_client *c, const void *in) {
	int clk;

	memcpy(&clk, in, sizeof(clk));
	if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC && clk != CLOCK_BOOTTIME)
		return fail(s, -EINVAL);
	if (c->clock != clk) {
		c->clock = clk;
		/* Queued events carry the old clock: drop them, and say so. */
		if (c->queue.head != c->queue.tail) {
			struct input_event drop = { .type = EV_SYN, .code = SYN_DROPPED };
			evdev_queue_clear(&c->queue);
			evdev_queue_push(&c->queue, &drop);
		}
	}
	done(s, 0, NULL, 0);
}

static void grab_node(struct evdev_ioctl_step *s, struct evdev_node *n, struct evdev_client *c, uintptr_t on) {
	if (on) {
		if (n->grab)
			return fail(s, -EBUSY);
		n->grab = c;
	} else {
		if (n->grab != c)
			return fail(s, -EINVAL);
		n->grab = NULL;
	}
	done(s, 0, NULL, 0);
}

static void revoke_client(struct evdev_ioctl_step *s, struct evdev_node *n, struct evdev_client *c, uintptr_t arg) {
	if (arg)
		return fail(s, -EINVAL);
	evdev_client_revoke(n, c);
	evdev_node_flush_wakeups(n);
	done(s, 0, NULL, 0);
}

/* Reads of key, LED, sound and switch state: queued events of that type are dropped, as the kernel does. */
static void get_state_bits(struct evdev_ioctl_step *s, struct evdev_client *c, unsigned int type,
			   const unsigned long *bits, unsigned int maxbit, size_t size) {
	evdev_queue_flush_type(&c->queue, type);
	bits_to_user(s, bits, maxbit, size);
}

static void get_mt_slots(struct evdev_ioctl_step *s, struct evdev_node *n, const void *in, size_t size) {
	int32_t vals[1 + EVDEV_MAX_SLOTS];
	unsigned int code, k = 0;
	size_t max_slots = size >= sizeof(uint32_t) ? (size - sizeof(uint32_t)) / sizeof(int32_t) : 0;

	memcpy(&code, in, sizeof(code));
	if (n->view.n_slots == 0 || !evdev_is_mt_code(code))
		return fail(s, -EINVAL);
	vals[0] = (int32_t)code;
	for (; k < n->view.n_slots && k < max_slots; k++)
		vals[1 + k] = n->view.mt[k][code - EVDEV_MT_FIRST];
	done(s, 0, vals, size >= sizeof(uint32_t) ? (1 + k) * sizeof(int32_t) : 0);
}

static bool fixed_ioctl(struct evdev_ioctl_step *s, struct evdev_node *n, struct evdev_client *c, unsigned int cmd,
			void *arg, const void *in, size_t in_size, size_t out_size) {
	switch (cmd) {
	case EVIOCGVERSION: {
		int version = EV_VERSION;
		if (!need(s, arg, 0, sizeof(version), in_size, out_size))
			done(s, 0, &version, sizeof(version));
		return true;
	}
	case EVIOCGID: {
		struct input_id id = {
			.bustype = (uint16_t)libevdev_get_id_bustype(n->desc),
			.vendor = (uint16_t)libevdev_get_id_vendor(n->desc),
			.product = (uint16_t)libevdev_get_id_product(n->desc),
			.version = (uint16_t)libevdev_get_id_version(n->desc),
		};
		if (!need(s, arg, 0, sizeof(id), in_size, out_size))
			done(s, 0, &id, sizeof(id));
		return true;
	}
	case EVIOCGREP: {
		unsigned int rep[2] = { (unsigned int)n->rep[REP_DELAY], (unsigned int)n->rep[REP_PERIOD] };
		if (!bit_test(n->caps.ev, EV_REP))
			fail(s, -ENOSYS);
		else if (!need(s, arg, 0, sizeof(rep), in_size, out_size))
			done(s, 0, rep, sizeof(rep));
		return true;
	}
	case EVIOCSREP: {
		unsigned int rep[2];
		if (!bit_test(n->caps.ev, EV_REP)) {
			fail(s, -ENOSYS);
		} else if (!need(s, arg, sizeof(rep), 0, in_size, out_size)) {
			struct input_event evs[2] = {
				{ .type = EV_REP, .code = REP_DELAY },
				{ .type = EV_REP, .code = REP_PERIOD },
			};
			memcpy(rep, in, sizeof(rep));
			evs[0].value = (int32_t)rep[0];
			evs[1].value = (int32_t)rep[1];
			evdev_node_write(n, c, evs, 2);
			done(s, 0, NULL, 0);
		}
		return true;
	}
	case EVIOCGKEYCODE:
		if (!need(s, arg, 2 * sizeof(unsigned int), 2 * sizeof(unsigned int), in_size, out_size))
			get_keycode(s, n, cmd, in);
		return true;
	case EVIOCGKEYCODE_V2:
		if (!need(s, arg, sizeof(struct input_keymap_entry), sizeof(struct input_keymap_entry), in_size,
			  out_size))
			get_keycode(s, n, cmd, in);
		return true;
	case EVIOCGEFFECTS: {
		int effects = bit_test(n->caps.ev, EV_FF) ? (int)n->ff.max : 0;
		if (!need(s, arg, 0, sizeof(effects), in_size, out_size))
			done(s, 0, &effects, sizeof(effects));
		return true;
	}
	case EVIOCRMFF: {
		int r = evdev_ff_erase(n, c, (int)(uintptr_t)arg);
		done(s, r < 0 ? r : 0, NULL, 0);
		return true;
	}
	case EVIOCGRAB:
		grab_node(s, n, c, (uintptr_t)arg);
		return true;
	case EVIOCREVOKE:
		revoke_client(s, n, c, (uintptr_t)arg);
		return true;
	case EVIOCSCLOCKID:
		if (!need(s, arg, sizeof(int), 0, in_size, out_size))
			set_clock(s, c, in);
		return true;
	case EVIOCGMASK:
	case EVIOCSMASK:
		mask_ioctl(s, c, cmd, arg, in, in_size, out_size);
		return true;
	default:
		return false;
	}
}

/*
 * EVIOCSFF: the effect is read whole, and only its id is written back, as
 * the kernel's put_user() does. A size other than the struct's is EFAULT.
 */
static void upload_effect(struct evdev_ioctl_step *s, struct evdev_node *n, struct evdev_client *c, void *arg,
			  size_t size, const void *in, size_t in_size, size_t out_size) {
	struct ff_effect effect;
	int r;

	if (size != sizeof(effect))
		return fail(s, -EFAULT);
	if (in_size < sizeof(effect) || out_size < sizeof(effect.id)) {
		s->retry = true;
		want_in(s, arg, sizeof(effect));
		want_out(s, (void *)((uintptr_t)arg + offsetof(struct ff_effect, id)), sizeof(effect.id));
		return;
	}
	memcpy(&effect, in, sizeof(effect));
	r = evdev_ff_upload(n, c, &effect);
	if (r < 0)
		return fail(s, r);
	done(s, 0, &effect.id, sizeof(effect.id));
}

static bool sized_ioctl(struct evdev_ioctl_step *s, struct evdev_node *n, struct evdev_client *c, unsigned int cmd,
			void *arg, const void *in, size_t in_size, size_t out_size) {
	size_t size = _IOC_SIZE(cmd);

	switch (EVIOC_MASK_SIZE(cmd)) {
	case EVIOCGPROP(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			bits_to_user(s, n->caps.prop, INPUT_PROP_MAX, size);
		return true;
	case EVIOC_MASK_SIZE(EVIOCSFF):
		upload_effect(s, n, c, arg, size, in, in_size, out_size);
		return true;
	case EVIOCGMTSLOTS(0):
		if (!need(s, arg, sizeof(uint32_t), size, in_size, out_size))
			get_mt_slots(s, n, in, size);
		return true;
	case EVIOCGKEY(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			get_state_bits(s, c, EV_KEY, n->view.key, KEY_MAX, size);
		return true;
	case EVIOCGLED(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			get_state_bits(s, c, EV_LED, n->view.led, LED_MAX, size);
		return true;
	case EVIOCGSND(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			get_state_bits(s, c, EV_SND, n->view.snd, SND_MAX, size);
		return true;
	case EVIOCGSW(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			get_state_bits(s, c, EV_SW, n->view.sw, SW_MAX, size);
		return true;
	case EVIOCGNAME(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			str_to_user(s, libevdev_get_name(n->desc), size);
		return true;
	case EVIOCGPHYS(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			str_to_user(s, libevdev_get_phys(n->desc), size);
		return true;
	case EVIOCGUNIQ(0):
		if (!need(s, arg, 0, size, in_size, out_size))
			str_to_user(s, libevdev_get_uniq(n->desc), size);
		return true;
	default:
		return false;
	}
}

static void get_bit(struct evdev_ioctl_step *s, struct evdev_node *n, unsigned int type, void *arg, size_t size,
		    size_t out_size) {
	unsigned int max;
	const unsigned long *bits = evdev_caps_bits(&n->caps, type, &max);

	if (!bits)
		return fail(s, -EINVAL);
	if (!need(s, arg, 0, size, 0, out_size))
		bits_to_user(s, bits, max, size);
}

static void get_abs(struct evdev_ioctl_step *s, struct evdev_node *n, unsigned int code, void *arg, size_t size,
		    size_t out_size) {
	struct input_absinfo ai;
	size_t len = MIN(size, sizeof(ai));

	if (!bit_test(n->caps.ev, EV_ABS))
		return fail(s, -EINVAL);
	if (need(s, arg, 0, len, 0, out_size))
		return;
	ai = n->absinfo[code];
	ai.value = n->view.abs[code];
	done(s, 0, &ai, len);
}

static void set_abs(struct evdev_ioctl_step *s, struct evdev_node *n, unsigned int code, void *arg, size_t size,
		    const void *in, size_t in_size) {
	struct input_absinfo ai = { 0 };
	size_t len = MIN(size, sizeof(ai));

	if (!bit_test(n->caps.ev, EV_ABS))
		return fail(s, -EINVAL);
	if (need(s, arg, len, 0, in_size, 0))
		return;
	memcpy(&ai, in, len);
	if (code == ABS_MT_SLOT)
		return fail(s, -EINVAL);
	n->absinfo[code] = ai;
	n->view.abs[code] = ai.value;
	done(s, 0, NULL, 0);
}

void evdev_node_ioctl(struct evdev_node *n, struct evdev_client *c, unsigned int cmd, void *arg, const void *in,
		      size_t in_size, size_t out_size, struct evdev_ioctl_step *s) {
	unsigned int nr = _IOC_NR(cmd);
	size_t size = _IOC_SIZE(cmd);

	s->retry = false;
	s->n_in = s->n_out = 0;
	s->out_size = 0;
	s->result = 0;

	if (n->gone || c->revoked)
		return fail(s, -ENODEV);
	if (_IOC_TYPE(cmd) != 'E')
		return fail(s, -ENOTTY);
	if (fixed_ioctl(s, n, c, cmd, arg, in, in_size, out_size))
		return;
	if (sized_ioctl(s, n, c, cmd, arg, in, in_size, out_size))
		return;

	if (_IOC_DIR(cmd) == _IOC_READ) {
		if ((nr & ~EV_MAX) == _IOC_NR(EVIOCGBIT(0, 0)))
			return get_bit(s, n, nr & EV_MAX, arg, size, out_size);
		if ((nr & ~ABS_MAX) == _IOC_NR(EVIOCGABS(0)))
			return get_abs(s, n, nr & ABS_MAX, arg, size, out_size);
	}
	if (_IOC_DIR(cmd) == _IOC_WRITE && (nr & ~ABS_MAX) == _IOC_NR(EVIOCSABS(0)))
		return set_abs(s, n, nr & ABS_MAX, arg, size, in, in_size);

	fail(s, -ENOTTY);
}
