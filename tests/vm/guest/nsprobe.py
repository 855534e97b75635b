#!/usr/bin/python3
"""Run inside a container: opens a node and reports, one line each, what
happened: "open ok" or "open errno N", then events as "ev TYPE CODE VALUE",
for the given number of seconds; with "-" for the seconds, until its stdin
ends, and then it prints what the node still holds, read without waiting,
before it exits (so that the host, once a marker told it that devnsd has
dealt with a key, learns whether the key reached this node)."""

import os
import select
import struct
import sys
import time

EVENT = struct.Struct("llHHi")


def report(data):
    for off in range(0, len(data), EVENT.size):
        _, _, t, c, v = EVENT.unpack_from(data, off)
        print("ev %d %d %d" % (t, c, v), flush=True)


path, seconds = sys.argv[1], sys.argv[2]
try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
except OSError as e:
    print("open errno %d" % e.errno, flush=True)
    sys.exit(0)
print("open ok", flush=True)
if seconds == "-":
    while True:
        r, _, _ = select.select([fd, sys.stdin.fileno()], [], [])
        if fd in r:
            try:
                report(os.read(fd, EVENT.size * 64))
            except BlockingIOError:
                pass
        if sys.stdin.fileno() in r and not os.read(sys.stdin.fileno(), 4096):
            while True:
                try:
                    data = os.read(fd, EVENT.size * 64)
                except BlockingIOError:
                    break
                if not data:
                    break
                report(data)
            print("end", flush=True)
            sys.exit(0)
end = time.monotonic() + float(seconds)
while True:
    left = end - time.monotonic()
    if left <= 0:
        break
    r, _, _ = select.select([fd], [], [], left)
    if not r:
        continue
    report(os.read(fd, EVENT.size * 64))
