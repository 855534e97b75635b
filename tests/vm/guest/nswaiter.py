#!/usr/bin/python3
"""Run inside a container: waits for input as a compositor's event loop does.
Opens a node non-blocking and waits in epoll_wait() with no timeout; after
each wake it reads until EAGAIN. Prints "open ok" (or "open errno N"), then
for each wake "woke NS" (CLOCK_MONOTONIC) followed by "ev TYPE CODE VALUE"
for each event read. Ends when its stdin closes, after it printed, as a
last wake, what the node still holds."""

import os
import select
import struct
import sys
import time

EVENT = struct.Struct("llHHi")

try:
    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
except OSError as e:
    print("open errno %d" % e.errno, flush=True)
    sys.exit(0)
ep = select.epoll()
ep.register(fd, select.EPOLLIN)
ep.register(sys.stdin.fileno(), select.EPOLLIN)
print("open ok", flush=True)
while True:
    ready = [f for f, _ in ep.poll()]
    ending = sys.stdin.fileno() in ready
    lines = ["woke %d" % time.monotonic_ns()]
    while True:
        try:
            data = os.read(fd, EVENT.size * 64)
        except BlockingIOError:
            break
        except OSError as e:
            lines.append("read errno %d" % e.errno)
            print("\n".join(lines), flush=True)
            sys.exit(0)
        if not data:
            break
        for off in range(0, len(data), EVENT.size):
            _, _, t, c, v = EVENT.unpack_from(data, off)
            lines.append("ev %d %d %d" % (t, c, v))
    print("\n".join(lines), flush=True)
    if ending:
        break
