/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "fd-closer.h"

/*
 * Reading a unix socket whose peer is not trusted. A peer may send
 * descriptors along with any message, and the kernel lets go of those the
 * reader does not take when the read returns, on the reader's thread: for
 * the last reference to a file, that is the file's release, which can wait
 * for the peer as long as the peer likes (a userfaultfd's takes the
 * memory-map lock of the process that made it; a TCP socket's may linger).
 * The same goes for the messages still queued when the socket is closed.
 * And a descriptor taken is no better: its close() runs the file's flush,
 * which a FUSE server can keep from returning. So these calls look before
 * they read (MSG_PEEK), read only what carries no descriptor or what the
 * caller takes whole, and leave the closing of anything else to the closer
 * (fd-closer.h): descriptors taken, and a socket with descriptors queued.
 */

/*
 * Reads what comes next, at most len bytes, without waiting. Returns the
 * bytes read, 0 at the end, -EAGAIN when nothing waits, or -EBADMSG (and
 * reads nothing) when descriptors come with any of it, or with the message
 * right after it (a look past the bytes it reads finds those too). flags
 * are added to the read's (MSG_TRUNC, for a packet's whole size).
 */
ssize_t peer_recv(int fd, void *buf, size_t len, int flags);

/* Descriptors peer_recv_fds() takes at most. */
#define PEER_RECV_FDS_MAX 8

/*
 * Reads what comes next, at most len bytes, with the descriptors that come
 * with it if they are no more than max; each is then in ret_fds[], the
 * others -1. Returns the bytes read, 0 at the end, -EAGAIN, or -EMFILE (and
 * reads nothing) when more than max come. Counting them takes a reference
 * of each, up to max, closed on q's closer, past q's share if need be: the
 * caller sees to room for the max it takes.
 */
ssize_t peer_recv_fds(int fd, void *buf, size_t len, int *ret_fds, size_t max, struct fd_closer_quota *q);

/*
 * Closes a connection's socket: here when it is a stream on which nothing
 * queued carries a descriptor (it is shut down first, so nothing more
 * comes), on the closer counted against q otherwise. A listening socket,
 * whose connections not yet taken may hold descriptors, goes to the closer
 * with fd_closer_close_for().
 */
void peer_close(int fd, struct fd_closer_quota *q);

/*
 * Takes the next connection of a listening socket (non-blocking, close on
 * exec, out-of-band data in line). -EBUSY, and nothing taken, while q's
 * closer has no room for one more socket: the caller stops listening for
 * a while, so that a persona whose closes wait cannot make devnsd hold
 * ever more of its sockets.
 */
int peer_accept(int listen_fd, struct fd_closer_quota *q, int *ret_fd);

/*
 * Stops listener (the io source of a listening socket) for a second, as
 * when peer_accept() says -EBUSY or accept() failed: the socket stays
 * readable, and would otherwise wake the loop at once. *resume is the
 * timer that turns it on again, made the first time; its owner frees it
 * with the listener.
 */
void peer_listen_pause(sd_event_source *listener, sd_event_source **resume);

/*
 * From the handler of listener (the io source of a listening socket): the
 * next connection, as peer_accept() takes it, and its peer's credentials
 * as the kernel recorded them at connect() (SO_PEERCRED). A negative errno
 * when there is none to handle: nothing waited, or a failure for which
 * the listener is paused (peer_listen_pause()).
 */
struct ucred;
int peer_accept_next(sd_event_source *listener, sd_event_source **resume, struct fd_closer_quota *q, int *ret_fd,
		     struct ucred *ret_cred);
