/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What /dev/devns/PERSONA/card0 adds to the DRM API: mapping dumb buffers.
 *
 * CUSE devices cannot be mapped. A program maps a dumb buffer at the
 * offset DRM_IOCTL_MODE_MAP_DUMB gave it through libdevns-fbmmap.so, which
 * trades the offset for the buffer's memory (a memfd sealed against
 * resizing) over the persona's framebuffer socket, the one fb0 names
 * (devns-fb.h), with a ticket of the open card0 file:
 *
 * 1. DEVNS_DRM_IOCTL_GET_SOCKET on the open file names the socket.
 * 2. DEVNS_DRM_IOCTL_GET_TICKET on the open file, with the MAP_DUMB offset
 *    in struct devns_drm_ticket's offset, returns a ticket for that buffer
 *    (-ENOENT for an offset of no buffer the file holds a handle to, as
 *    the kernel lets a file map only its own objects). Tickets are good for
 *    one use within DEVNS_FB_TICKET_SECONDS, only while the file stays open
 *    and is not revoked; a file has at most DEVNS_FB_TICKETS_PER_FILE
 *    outstanding, a new one replacing its oldest.
 * 3. The program sends one struct devns_fb_request with the ticket, as for
 *    fb0 (either intent gives the same), and devnsd answers with one struct
 *    devns_fb_grant (size: the buffer's bytes; serial: the buffer's, never
 *    0, never reused) and the buffer's memfd, open as the card0 file was
 *    opened, then closes the connection. The program maps the memfd from
 *    its start: the buffer's offset 0 is the MAP_DUMB offset.
 *
 * PRIME. Where devnsd can make dma-bufs (udmabuf: DRM_CAP_PRIME answers
 * DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT), the library does
 * DRM_IOCTL_PRIME_HANDLE_TO_FD itself: MAP_DUMB for the handle's offset, a
 * ticket for it as above, and a request with DEVNS_FB_INTENT_DMABUF. devnsd
 * answers with the grant and the buffer's dma-buf, the same one each time
 * (a program maps it writable: only a file open for reading and writing
 * gets it), or with a grant that carries no fd and says why in error
 * (EACCES, EOPNOTSUPP, or UDMABUF_CREATE's errno, such as EINVAL for a
 * buffer over udmabuf's size limit or EMFILE). DRM_IOCTL_PRIME_FD_TO_HANDLE
 * needs no library: devnsd takes its own reference to the caller's file
 * (pidfd_getfd(2)), compares it with the card's own dma-bufs (kcmp(2)) and
 * takes those, of any open file of the persona's card0. A buffer whose dma-buf a program still holds stays, and counts
 * against the persona's budget, after its last handle and framebuffer went.
 *
 * A DRM client tells the display what it drew (SETCRTC, PAGE_FLIP,
 * DIRTYFB, an atomic commit), so a mapping needs no connection of its own.
 *
 * The numbers: the kernel's DRM core matches an ioctl by its number alone
 * and answers -EINVAL to numbers at and past its table's end below the
 * driver range (DRM_COMMAND_BASE to DRM_COMMAND_END), and to those past
 * the driver range that it does not know: 0xF0 and 0xF1 reach no real
 * driver.
 */
#include <linux/ioctl.h>
#include <linux/types.h>

#include "devns-fb.h"

#define DEVNS_DRM_IOCTL_GET_SOCKET _IOR('d', 0xF0, struct devns_fb_socket)

struct devns_drm_ticket {
	__u64 offset; /* in: the MAP_DUMB offset */
	struct devns_fb_ticket ticket; /* out */
};
#define DEVNS_DRM_IOCTL_GET_TICKET _IOWR('d', 0xF1, struct devns_drm_ticket)
