#!/usr/bin/python3
"""Guest-side client of vm-run's host services (inside a vm-run guest only).

As a command (tests/vm/hostctl is a link to this file):
  hostctl ping
  hostctl screendump NAME     prints the PPM path (NAME.png is written beside it)
  hostctl sendkey QCODE...    presses the keys together, e.g. `sendkey meta_l f1`
Exit status: 0 on OK, 1 when the host answers ERR or does not answer, 2 on usage.

As a module:
  import hostctl
  path = hostctl.screendump("x")
  hostctl.sendkey("meta_l", "f1")

Protocol: one request line written to /dev/hvc0, one reply line read back,
"OK [value]" or "ERR reason". Requests from several processes are serialized
with flock on the device.
"""

import fcntl
import os
import select
import sys
import termios
import time
import tty

DEVICE = "/dev/hvc0"
TIMEOUT = 60.0


class HostError(Exception):
    """The host answered ERR, or did not answer in time."""


def _read_line(fd, deadline):
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise HostError("no reply from the host")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise HostError("control console closed")
        data += chunk
    return data.decode("utf-8", "replace").strip()


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def request(line, timeout=TIMEOUT):
    """Sends one request line; returns the text after OK or raises HostError."""
    deadline = time.monotonic() + timeout
    fd = os.open(DEVICE, os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        tty.setraw(fd)
        termios.tcflush(fd, termios.TCIFLUSH)
        _write_all(fd, line.encode() + b"\n")
        reply = _read_line(fd, deadline)
    finally:
        os.close(fd)
    if reply == "OK" or reply.startswith("OK "):
        return reply[3:]
    raise HostError(reply[4:] if reply.startswith("ERR ") else f"bad reply {reply!r}")


def ping():
    request("PING")


def screendump(name):
    """Saves the emulated screen as $DEVNS_OUT/NAME.ppm (+ .png); returns the PPM path."""
    return request(f"SCREENDUMP {name}")


def sendkey(*qcodes):
    """Presses QEMU qcodes together on the emulated PS/2 keyboard."""
    request("SENDKEY " + " ".join(qcodes))


def main(argv):
    usage = "usage: hostctl ping | screendump NAME | sendkey QCODE..."
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    verb, params = argv[0], argv[1:]
    try:
        if verb == "ping" and not params:
            ping()
        elif verb == "screendump" and len(params) == 1:
            print(screendump(params[0]))
        elif verb == "sendkey" and params:
            sendkey(*params)
        else:
            print(usage, file=sys.stderr)
            return 2
    except (HostError, OSError) as e:
        print(f"hostctl: {verb}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
