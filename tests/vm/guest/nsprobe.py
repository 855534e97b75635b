#!/usr/bin/python3
"""Run inside a container: opens a node and reports, one line each, what
happened: "open ok" or "open errno N", then events as "ev TYPE CODE VALUE",
for the given number of seconds."""

import os
import select
import struct
import sys

EVENT = struct.Struct("llHHi")

path, seconds = sys.argv[1], float(sys.argv[2])
try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
except OSError as e:
    print("open errno %d" % e.errno, flush=True)
    sys.exit(0)
print("open ok", flush=True)
end = __import__("time").monotonic() + seconds
while True:
    left = end - __import__("time").monotonic()
    if left <= 0:
        break
    r, _, _ = select.select([fd], [], [], left)
    if not r:
        continue
    data = os.read(fd, EVENT.size * 64)
    for off in range(0, len(data), EVENT.size):
        _, _, t, c, v = EVENT.unpack_from(data, off)
        print("ev %d %d %d" % (t, c, v), flush=True)
