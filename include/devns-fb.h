/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What /dev/devns/PERSONA/fb0 adds to the fbdev API. CUSE never tells the
 * daemon a file position, so each open file of the node has its own stream
 * position: read() and write() start there and advance it; lseek(),
 * pread() and pwrite() do not reach the daemon. These ioctls read and set it.
 */
#include <linux/ioctl.h>
#include <linux/types.h>

/* The open file's stream position in bytes from the start of the framebuffer. */
#define DEVNS_FBIOGET_POS _IOR('F', 0xD0, __u64)
/* Sets it; a position past the end is allowed (read returns 0, write -EFBIG). */
#define DEVNS_FBIOSET_POS _IOW('F', 0xD1, __u64)

/*
 * For writers that store data through the persona's memfd themselves
 * (libdevns-fbmmap.so's write() and lseek()). DEVNS_FBIO_TELL returns the
 * stream position as the ioctl's result (-EOVERFLOW past INT_MAX); its
 * argument, passed by value, is 0 or the serial of the memory the caller
 * holds (struct devns_fb_grant), and then it fails with -ESTALE unless that
 * is the framebuffer's memory now (the persona was revoked and got fresh
 * memory, or a routed node leads to another persona). DEVNS_FBIO_SEEK sets
 * the position to its argument, passed by value: one round trip each.
 * DEVNS_FBIO_WROTE says that count bytes at pos changed, as a write()
 * there would have: they are shown, and the stream position moves past
 * them (-EINVAL past the end, -EBADF on a file open only for reading). It
 * passes its range through memory, which costs CUSE a second round trip;
 * DEVNS_FBIO_WROTE_AT says the same in one, with pos and count below 2^32
 * packed into its argument, passed by value (DEVNS_FB_WROTE_AT_ARG; an
 * unsigned long of 64 bits only).
 */
struct devns_fb_wrote {
	__u64 pos;
	__u64 count;
};
#define DEVNS_FBIO_TELL _IO('F', 0xD3)
#define DEVNS_FBIO_WROTE _IOW('F', 0xD4, struct devns_fb_wrote)
#define DEVNS_FBIO_SEEK _IO('F', 0xD5)
#define DEVNS_FBIO_WROTE_AT _IO('F', 0xD7)
#define DEVNS_FB_WROTE_AT_ARG(pos, count) (((__u64)(pos) << 32) | (__u64)(__u32)(count))

/*
 * FBIOPAN_DISPLAY in one round trip, where CUSE needs two for the struct
 * it points at: the offsets are the argument, passed by value
 * (DEVNS_FB_PAN_AT_ARG: yoffset in the upper 32 bits, xoffset in the
 * lower; an unsigned long of 64 bits only), with the same checks and
 * effect as FBIOPAN_DISPLAY without FB_VMODE_YWRAP.
 */
#define DEVNS_FBIO_PAN_AT _IO('F', 0xD8)
#define DEVNS_FB_PAN_AT_ARG(xoffset, yoffset) (((__u64)(yoffset) << 32) | (__u64)(__u32)(xoffset))

/*
 * Mapping the framebuffer. CUSE devices cannot be mapped, so the persona's
 * framebuffer memory (a memfd, sealed against resizing) is handed out over
 * a unix socket, /run/devnsd/fb/PERSONA/fb0, mode 0660, owned by the
 * container's root and video group. It goes only to a program that holds
 * an open file of the persona's fb0, so the rule for the memory is the
 * rule for opening the node: devnsd's check of the opener's container and
 * the kernel's check of the node's mode and owner.
 *
 * 1. DEVNS_FBIOGET_SOCKET on the open file names the socket.
 * 2. DEVNS_FBIOGET_TICKET on the open file returns a ticket: 16 random
 *    bytes, good for one use within DEVNS_FB_TICKET_SECONDS, and only while
 *    that file stays open and is not revoked. An open file has at most
 *    DEVNS_FB_TICKETS_PER_FILE tickets outstanding; a new one replaces its
 *    oldest.
 * 3. The program connects and sends one struct devns_fb_request, in one
 *    write, within DEVNS_FB_REQUEST_SECONDS.
 * 4. devnsd answers with one struct devns_fb_grant and the memfd
 *    (SCM_RIGHTS), open for what the file was opened for: a file opened
 *    O_RDONLY gets a read-only memfd (PROT_WRITE shared mappings of it fail
 *    with EACCES, as on the kernel's fb0), O_WRONLY a write-only one.
 *    With DEVNS_FB_INTENT_MAP the connection stands for a mapping: the
 *    program keeps it open until munmap(), and devnsd refreshes the screen
 *    from the memory meanwhile. With DEVNS_FB_INTENT_WRITE (the program
 *    stores writes itself and reports them with DEVNS_FBIO_WROTE) devnsd
 *    closes the connection after sending.
 *
 * Anything else (no request in time, a short or malformed one, a ticket
 * unknown, used, expired, of a closed or revoked file or of another
 * persona, a uid over its share) gets nothing: devnsd closes the
 * connection without a word, and logs the first refusal per uid.
 * When a persona is revoked (attached to another container, detached)
 * its mapping connections are closed, its tickets void, and it gets fresh
 * memory: what old mappings draw is no longer shown.
 */
struct devns_fb_socket {
	char path[108];
};
#define DEVNS_FBIOGET_SOCKET _IOR('F', 0xD2, struct devns_fb_socket)

struct devns_fb_ticket {
	__u8 token[16];
};
#define DEVNS_FBIOGET_TICKET _IOR('F', 0xD6, struct devns_fb_ticket)
#define DEVNS_FB_TICKET_SECONDS 5
#define DEVNS_FB_TICKETS_PER_FILE 4
#define DEVNS_FB_REQUEST_SECONDS 2

#define DEVNS_FB_INTENT_MAP 'm'
#define DEVNS_FB_INTENT_WRITE 'w'
/* A card0 buffer's dma-buf instead of its memfd (PRIME export, devns-drm.h). */
#define DEVNS_FB_INTENT_DMABUF 'd'

/* What the program sends after connecting. */
struct devns_fb_request {
	__u32 magic; /* DEVNS_FB_REQUEST_MAGIC */
	__u8 intent; /* DEVNS_FB_INTENT_MAP, DEVNS_FB_INTENT_WRITE or (card0) DEVNS_FB_INTENT_DMABUF */
	__u8 reserved[3];
	struct devns_fb_ticket ticket;
};
#define DEVNS_FB_REQUEST_MAGIC 0x64667271u

/* The header the socket sends with the memfd. */
struct devns_fb_grant {
	__u32 magic; /* DEVNS_FB_GRANT_MAGIC */
	__u32 error; /* 0; for DEVNS_FB_INTENT_DMABUF, why no fd came with it (an errno) */
	__u64 size;   /* bytes of the memfd, the framebuffer's smem_len */
	__u64 serial; /* this memory's serial, never 0, never reused (DEVNS_FBIO_TELL) */
};
#define DEVNS_FB_GRANT_MAGIC 0x64666230u

/*
 * Dirty tracking of a mapping (optional). A program that maps the
 * framebuffer with DEVNS_FB_INTENT_MAP may, once it has the memfd and
 * has mapped it, make a userfaultfd that also takes faults of the kernel
 * (no UFFD_USER_MODE_ONLY), do UFFDIO_API, register its mapping with
 * UFFDIO_REGISTER_MODE_WP, and send one struct devns_fb_track in one
 * sendmsg() on the mapping's connection with that userfaultfd
 * (SCM_RIGHTS). It then closes its own copy of the userfaultfd: devnsd
 * holds the only one, so if devnsd goes away the kernel releases the
 * mapping from tracking. devnsd answers with one struct
 * devns_fb_track_reply; status 0 means devnsd tracks the mapping:
 * it write-protects it while nothing changes and needs no refresh
 * until a write faults. A negative errno means it refused and refreshes
 * from the memory as before (-EBADF: no userfaultfd, or the
 * connection of a read-only memfd, which needs none; -EINVAL: a
 * malformed message, or a range that is not within the framebuffer or
 * not registered for write-protection in that userfaultfd; -EBUSY:
 * devnsd has too many of the persona's foreign descriptors still to
 * close, or tracks too many mappings of the persona already; -EOPNOTSUPP: tracking is off in
 * devnsd's configuration; -ETIMEDOUT: a program of the persona held
 * devnsd's change of a mapping's write protection up, and the persona
 * is no longer tracked). Any byte sent on the connection after the track
 * message ends tracking (a child forked with the mapping sends one:
 * its writes fault in nobody's userfaultfd).
 */
struct devns_fb_track {
	__u32 magic; /* DEVNS_FB_TRACK_MAGIC */
	__u32 flags; /* 0 or DEVNS_FB_TRACK_ASYNC */
	__u64 addr;   /* where the mapping starts in the program, page-aligned */
	__u64 len;    /* its length in bytes, page-aligned */
	__u64 offset; /* its offset in the framebuffer, page-aligned */
};
#define DEVNS_FB_TRACK_MAGIC 0x64667477u
/*
 * The userfaultfd was made with UFFD_FEATURE_WP_ASYNC (Linux 6.7): the
 * kernel resolves write faults itself and no write waits. Two more
 * descriptors follow it in the same message: the program's own
 * /proc/self/pagemap, which devnsd asks which pages were written
 * (PAGEMAP_SCAN with PM_SCAN_WP_MATCHING, which protects them again), and
 * a second userfaultfd of the program, made without the feature and with
 * nothing registered: while the frame does not change devnsd moves the
 * range to it, protected, so that the next write faults and wakes
 * devnsd, and moves it back then. Descriptors that are not what they
 * should be, or a range not registered so, end the tracking as soon as
 * devnsd finds out; the frame is then scanned every refresh.
 */
#define DEVNS_FB_TRACK_ASYNC 1u

struct devns_fb_track_reply {
	__u32 magic; /* DEVNS_FB_TRACK_MAGIC */
	__s32 status; /* 0 or a negative errno */
};
