#!/usr/bin/python3
"""Run as a host user, to pose as systemd-machined: sends devnsd COUNT
MachineNew signals for machine NAME, then asks devnsd for ListPersonas, then
for SECONDS answers every call that comes its way as systemd-machined
would, with LEADER as the machine's leader. Prints "sent COUNT", "answered
in SECONDS" (ListPersonas, queued behind the signals) and "came MEMBER..."
with the calls that came."""

import struct
import sys

import busping

name, leader, count, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
path = "/org/freedesktop/machine1/machine/" + name


def answer(member):
    if member == "GetMachine":
        return "o", struct.pack("<I", len(path)) + path.encode() + b"\0"
    if member == "Get":
        # A variant holding a uint32: its signature "u", padding to 4, the value.
        return "v", b"\x01u\0\0" + struct.pack("<I", leader)
    return None


c = busping.Connection()
for _ in range(count):
    c.signal("org.devns1", "/org/freedesktop/machine1", "org.freedesktop.machine1.Manager", "MachineNew", name, path)
print("sent %d" % count, flush=True)
print("answered in %.3f" % c.ping(60.0), flush=True)
print("came " + " ".join(c.serve(answer, seconds)), flush=True)
