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
 * stream position as the ioctl's result (-EOVERFLOW past INT_MAX), and
 * DEVNS_FBIO_SEEK sets it to its argument, passed by value: one round trip
 * each. DEVNS_FBIO_WROTE says that count bytes at pos changed, as a write()
 * there would have: they are shown, and the stream position moves past
 * them (-EINVAL past the end).
 */
struct devns_fb_wrote {
	__u64 pos;
	__u64 count;
};
#define DEVNS_FBIO_TELL _IO('F', 0xD3)
#define DEVNS_FBIO_WROTE _IOW('F', 0xD4, struct devns_fb_wrote)
#define DEVNS_FBIO_SEEK _IO('F', 0xD5)

/* Where the persona's framebuffer memory is handed out (libdevns-fbmmap.so). */
struct devns_fb_socket {
	char path[108];
};
#define DEVNS_FBIOGET_SOCKET _IOR('F', 0xD2, struct devns_fb_socket)

/*
 * The socket sends the memfd at once. The program then sends one byte:
 * DEVNS_FB_INTENT_MAP while it keeps a mapping (it stays connected until
 * munmap(), and devnsd refreshes the screen from the memory meanwhile), or
 * DEVNS_FB_INTENT_WRITE before it hangs up (it reports its writes with
 * DEVNS_FBIO_WROTE).
 */
#define DEVNS_FB_INTENT_MAP 'm'
#define DEVNS_FB_INTENT_WRITE 'w'

/* The header the socket sends with the memfd (SCM_RIGHTS). */
struct devns_fb_grant {
	__u32 magic; /* DEVNS_FB_GRANT_MAGIC */
	__u32 reserved;
	__u64 size;  /* bytes of the memfd, the framebuffer's smem_len */
};
#define DEVNS_FB_GRANT_MAGIC 0x64666230u
