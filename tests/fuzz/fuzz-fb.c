/* SPDX-License-Identifier: MIT */
/*
 * A persona's framebuffer as a container reaches it through
 * /dev/devns/PERSONA/fb0: ioctls (with CUSE's retries), read()s and
 * write()s at each open file's stream position, mapped onto the fb node
 * the way src/cuse/cuse-fb.c maps them, on a node of a mode the input
 * picks; tickets for the memory issued to open files and redeemed with
 * what the caller's memory holds (as the fb socket redeems a request),
 * time passing, files closing, and the node getting fresh memory as a
 * revocation gives it. What the display does next is checked instead of
 * done: the rows a write or DEVNS_FBIO_WROTE reports, and the visible frame
 * after a pan or a new screen info, must lie inside the node's memory. A
 * ticket must lead to the open file it was issued for, once.
 */
#include <fcntl.h>
#include <linux/fb.h>
#include <sys/mman.h>

#include "devns-fb.h"
#include "fb-ioctl.h"
#include "fb-node.h"
#include "fb-ticket.h"
#include "fuzz-cuse.h"

#define FILES 8
#define OPS_MAX 128
#define SIDE_MAX 320
/* What one CUSE read or write request carries at most. */
#define IO_MAX (128u * 1024)

struct file {
	uint64_t pos;
	bool open;
};

struct rig {
	struct fb_node *node;
	struct file files[FILES];
	struct fb_tickets tickets;
	uint64_t now; /* CLOCK_MONOTONIC, as the input lets it pass */
	const char *socket_path;
	uint8_t user[FUZZ_USER_SIZE];
};

static struct rig rig;
static uint8_t io_buf[IO_MAX];

/* The display reads the visible frame: line_length bytes a row, yres rows from the pan offset. */
static void check_visible(const struct fb_node *n) {
	const struct fb_state *s = &n->state;
	size_t start = fb_state_visible_offset(s);

	fuzz_assert(s->var.xres == s->width && s->var.yres == s->height);
	fuzz_assert(s->var.yres_virtual >= s->var.yres && s->var.yres_virtual <= s->height * FB_STATE_VIRTUAL_FRAMES);
	fuzz_assert(start <= n->size);
	fuzz_assert((size_t)s->fix.line_length * (s->var.yres - 1) + (size_t)s->var.xres * 4 <= n->size - start);
	fuzz_assert(fb_node_visible(n) == n->mem + start);
}

/* cuse-fb.c's written hook: the display shows the rows of the visible frame that changed. */
static void rows_written(const struct fb_node *n, const struct fb_rows *rows) {
	struct fb_rows vis;

	fuzz_assert(rows->y0 < rows->y1);
	fuzz_assert((size_t)rows->y1 * n->state.fix.line_length <= n->size);
	if (fb_node_visible_rows(n, rows, &vis))
		fuzz_assert(vis.y0 < vis.y1 && vis.y1 <= n->state.var.yres);
}

/* cuse-fb.c's issue_ticket(): a ticket bound to the open file. */
static int issue_ticket(void *userdata, struct devns_fb_ticket *ret) {
	int r = fb_tickets_issue(&rig.tickets, userdata, rig.now, ret);

	fuzz_assert(r == 0);
	return r;
}

struct ioctl_call {
	struct rig *rig;
	struct file *file;
	unsigned int cmd;
	enum fb_effect effect;
	struct fb_rows rows;
};

static void ioctl_step(void *userdata, void *arg, const void *in, size_t in_size, size_t out_size,
		       struct fuzz_step *ret) {
	static struct fb_ioctl_step step;
	struct ioctl_call *call = userdata;
	struct fb_ioctl_file file = {
		.pos = &call->file->pos,
		.socket_path = call->rig->socket_path,
		.serial = call->rig->node->serial,
		.ticket = call->rig->socket_path ? issue_ticket : NULL,
		.userdata = call->file,
	};

	fb_ioctl(&call->rig->node->state, &file, call->cmd, arg, in, in_size, out_size, &step);
	call->effect = step.effect;
	call->rows = step.rows;
	*ret = FUZZ_STEP_OF(step);
}

static unsigned int pick_cmd(struct fuzz_input *in) {
	static const unsigned int known[] = {
		FBIOGET_VSCREENINFO, FBIOPUT_VSCREENINFO, FBIOGET_FSCREENINFO, FBIOPAN_DISPLAY,
		FBIOGETCMAP, FBIOPUTCMAP, FBIOBLANK, FBIO_WAITFORVSYNC,
		DEVNS_FBIOGET_POS, DEVNS_FBIOSET_POS, DEVNS_FBIO_TELL, DEVNS_FBIO_SEEK,
		DEVNS_FBIO_WROTE, DEVNS_FBIOGET_SOCKET, DEVNS_FBIOGET_TICKET, DEVNS_FBIO_WROTE_AT,
		DEVNS_FBIO_PAN_AT,
	};
	uint8_t how = fuzz_u8(in);

	return how % 8 == 0 ? fuzz_u32(in) : known[how % ELEMENTSOF(known)];
}

static void file_ioctl(struct rig *r, struct file *f, struct fuzz_input *in) {
	struct ioctl_call call = { .rig = r, .file = f, .cmd = pick_cmd(in) };
	/* FBIOBLANK, DEVNS_FBIO_SEEK, DEVNS_FBIO_TELL, DEVNS_FBIO_WROTE_AT and DEVNS_FBIO_PAN_AT take a value. */
	void *arg = fuzz_ioctl_arg(in, true);
	int k;

	k = fuzz_cuse_ioctl(r->user, arg, ioctl_step, &call);
	if (k < 0)
		return;
	if (call.effect == FB_EFFECT_WROTE)
		rows_written(r->node, &call.rows);
	check_visible(r->node);
}

static void file_read(struct rig *r, uint64_t *pos, size_t count) {
	uint64_t before = *pos;
	const void *data;
	ssize_t n = fb_node_read(r->node, pos, count, &data);

	fuzz_assert(n >= 0 && (size_t)n <= count);
	if (n == 0)
		return;
	fuzz_assert(before < r->node->size && (size_t)n <= r->node->size - before);
	fuzz_assert((const uint8_t *)data == r->node->mem + before && *pos == before + (uint64_t)n);
	memcpy(io_buf, data, (size_t)n);
}

static void file_write(struct rig *r, uint64_t *pos, struct fuzz_input *in) {
	size_t count = fuzz_u8(in) & 1 ? fuzz_u32(in) % (IO_MAX + 1) : fuzz_len(in, IO_MAX);
	uint64_t before = *pos;
	struct fb_rows rows;
	ssize_t n;

	fuzz_bytes(in, io_buf, fuzz_len(in, count));
	n = fb_node_write(r->node, pos, io_buf, count, &rows);
	fuzz_assert(n <= (ssize_t)count && (n > 0 || n == -EFBIG || n == -ENOSPC || count == 0));
	if (n <= 0)
		return;
	fuzz_assert(before + (uint64_t)n <= r->node->size && *pos == before + (uint64_t)n);
	rows_written(r->node, &rows);
}

static void poke_user(struct rig *r, struct fuzz_input *in) {
	size_t off = fuzz_u16(in) % FUZZ_USER_SIZE;

	fuzz_bytes(in, r->user + off, fuzz_len(in, FUZZ_USER_SIZE - off));
}

/* The fb socket's request: a ticket, read from where the caller's ioctl put it. */
static void redeem(struct rig *r, struct fuzz_input *in) {
	struct devns_fb_ticket token;
	const void *file = NULL;
	int k;

	memcpy(&token, r->user + fuzz_u16(in) % (FUZZ_USER_SIZE - sizeof(token)), sizeof(token));
	k = fb_tickets_redeem(&r->tickets, &token, r->now, &file);
	fuzz_assert(k == 0 || k == -ENOENT);
	if (k < 0)
		return;
	fuzz_assert(file >= (const void *)r->files && file < (const void *)(r->files + FILES));
	fuzz_assert(((const struct file *)file)->open);
	fuzz_assert(fb_tickets_redeem(&r->tickets, &token, r->now, &file) == -ENOENT);
}

/* Less often: tickets, time, a revocation's fresh memory, the memfd reopened for the socket. */
static void other_op(struct rig *r, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	int fd;

	switch (op % 5) {
	case 0:
		redeem(r, in);
		break;
	case 1:
		r->now += fuzz_u32(in);
		break;
	case 2:
		fuzz_assert(fb_node_renew(r->node) == 0);
		fb_tickets_clear(&r->tickets);
		check_visible(r->node);
		break;
	case 3:
		if (fb_node_reopen(r->node, (op >> 3) % 3, &fd) == 0)
			close(fd);
		break;
	default:
		if (fuzz_u8(in) == 'S' && fb_node_snapshot(r->node, &fd) == 0)
			close(fd);
		break;
	}
}

static void one_op(struct rig *r, struct fuzz_input *in) {
	uint8_t op = fuzz_u8(in);
	struct file *f = &r->files[fuzz_u8(in) % FILES];

	if (op % 7 < 3 && !f->open)
		return;
	switch (op % 7) {
	case 0:
		file_ioctl(r, f, in);
		break;
	case 1:
		file_read(r, &f->pos, fuzz_u8(in) & 1 ? fuzz_u32(in) % (IO_MAX + 1) : fuzz_len(in, IO_MAX));
		break;
	case 2:
		file_write(r, &f->pos, in);
		break;
	case 3:
		*f = (struct file){ .open = true };
		break;
	case 4: /* cuse-fb.c's release: the file's tickets go with it */
		f->open = false;
		fb_tickets_drop_file(&r->tickets, f);
		break;
	case 5:
		poke_user(r, in);
		break;
	default:
		other_op(r, in);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	static const char *const socket_paths[] = {
		"/run/devnsd/fb/work/fb0",
		NULL,
		"/run/devnsd/fb/a-persona-name-of-thirty-two-chr/fb0/and/then/some/more/directories/to/go/past/108/bytes",
	};
	struct fuzz_input in = { data, size };
	struct rig *r = &rig;
	struct fb_mode mode = { 0 };
	uint8_t setup = fuzz_u8(&in);

	memset(r, 0, sizeof(*r));
	mode.width = fuzz_u16(&in) % (SIDE_MAX + 1);
	mode.height = fuzz_u16(&in) % (SIDE_MAX + 1);
	if (setup & 1) {
		mode.refresh_hz = fuzz_u32(&in);
		mode.pixclock_khz = fuzz_u32(&in);
		mode.hsync_start = fuzz_u32(&in);
		mode.hsync_end = fuzz_u32(&in);
		mode.htotal = fuzz_u32(&in);
		mode.vsync_start = fuzz_u32(&in);
		mode.vsync_end = fuzz_u32(&in);
		mode.vtotal = fuzz_u32(&in);
	}
	r->socket_path = socket_paths[(setup >> 1) % ELEMENTSOF(socket_paths)];
	if (fb_node_new(&r->node, &mode, "fuzz") < 0)
		return 0;
	r->files[0].open = true;
	r->now = 1000000;
	check_visible(r->node);

	for (unsigned int i = 0; i < OPS_MAX && !fuzz_done(&in); i++)
		one_op(r, &in);

	fb_node_free(r->node);
	return 0;
}
