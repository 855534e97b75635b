"""A minimal D-Bus client on one connection, to time devnsd's answers
without counting the start of a process: connect and authenticate once,
then each ping() is one ListPersonas call and its reply.

It authenticates with EXTERNAL and no uid of its own, leaving the bus to
take the kernel's: so it also connects from inside a user namespace, where
sd-bus (systemd 252) sends the namespace's uid and is refused."""

import os
import socket
import struct
import time


def _pad(buf, n):
    buf.extend(b"\0" * (-len(buf) % n))


def _field(buf, code, sig, value):
    _pad(buf, 8)
    buf.extend(bytes([code, 1, ord(sig), 0]))
    data = value.encode()
    _pad(buf, 4)
    buf.extend(struct.pack("<I", len(data)) + data + b"\0")


def _call(serial, dest, path, iface, member, arg=None):
    """A method call; arg: None, or one string argument."""
    fields = bytearray()
    _field(fields, 1, "o", path)
    _field(fields, 2, "s", iface)
    _field(fields, 3, "s", member)
    _field(fields, 6, "s", dest)
    body = b""
    if arg is not None:
        _pad(fields, 8)
        fields.extend(bytes([8, 1, ord("g"), 0, 1, ord("s"), 0]))
        data = arg.encode()
        body = struct.pack("<I", len(data)) + data + b"\0"
    msg = bytearray(b"l\x01\x00\x01" + struct.pack("<III", len(body), serial, len(fields)))
    msg.extend(fields)
    _pad(msg, 8)
    msg.extend(body)
    return bytes(msg)


def _signal(serial, dest, path, iface, member, name, obj):
    """A signal to one destination, with a string and an object path (signature "so")."""
    fields = bytearray()
    _field(fields, 1, "o", path)
    _field(fields, 2, "s", iface)
    _field(fields, 3, "s", member)
    _field(fields, 6, "s", dest)
    _pad(fields, 8)
    fields.extend(bytes([8, 1, ord("g"), 0, 2]) + b"so\0")
    body = bytearray()
    for value in (name, obj):
        _pad(body, 4)
        data = value.encode()
        body.extend(struct.pack("<I", len(data)) + data + b"\0")
    msg = bytearray(b"l\x04\x01\x01" + struct.pack("<III", len(body), serial, len(fields)))
    msg.extend(fields)
    _pad(msg, 8)
    msg.extend(body)
    return bytes(msg)


def _reply(serial, dest, reply_serial, sig, body):
    """A method return to dest for the call reply_serial, with body of signature sig."""
    fields = bytearray()
    _pad(fields, 8)
    fields.extend(bytes([5, 1, ord("u"), 0]) + struct.pack("<I", reply_serial))
    _field(fields, 6, "s", dest)
    _pad(fields, 8)
    fields.extend(bytes([8, 1, ord("g"), 0, len(sig)]) + sig.encode() + b"\0")
    msg = bytearray(b"l\x02\x01\x01" + struct.pack("<III", len(body), serial, len(fields)))
    msg.extend(fields)
    _pad(msg, 8)
    msg.extend(body)
    return bytes(msg)


class Connection:
    def __init__(self, address=None):
        address = address or os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(address.split("unix:path=", 1)[1].split(",")[0])
        self.sock.sendall(b"\0AUTH EXTERNAL\r\n")
        line = self._line()
        if line.startswith(b"DATA"):
            self.sock.sendall(b"DATA\r\n")
            line = self._line()
        if not line.startswith(b"OK"):
            raise RuntimeError("D-Bus authentication failed: %r" % line)
        self.sock.sendall(b"BEGIN\r\n")
        self.buf = b""
        self.serial = 0
        self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello")

    def _line(self):
        line = b""
        while not line.endswith(b"\r\n"):
            chunk = self.sock.recv(1)
            if not chunk:
                raise RuntimeError("bus closed the connection")
            line += chunk
        return line

    def _recv(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise RuntimeError("bus closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def _read(self):
        """The next message: its type, serial, header fields by code and body."""
        head = self._recv(16)
        body_len, serial, fields_len = struct.unpack_from("<III", head, 4)
        rest = self._recv(fields_len + (-(16 + fields_len) % 8) + body_len)
        fields, off, values = rest[:fields_len], 0, {}
        while off < len(fields):
            off += -off % 8
            code, siglen = fields[off], fields[off + 1]
            sig = chr(fields[off + 2])
            off += 3 + siglen
            if sig == "g":
                off += 2 + fields[off]
                continue
            off += -off % 4
            (value,) = struct.unpack_from("<I", fields, off)
            if sig == "u":
                values[code] = value
                off += 4
            else:
                values[code] = fields[off + 4:off + 4 + value].decode()
                off += 5 + value
        return head[1], serial, values, rest[len(rest) - body_len:]

    def _message(self):
        mtype, _, values, self.body = self._read()
        return mtype, values.get(5)

    def call(self, dest, path, iface, member, arg=None):
        """Sends a call with no arguments or one string; returns True for a reply, False for an error."""
        self.serial += 1
        self.sock.sendall(_call(self.serial, dest, path, iface, member, arg))
        while True:
            mtype, reply_serial = self._message()
            if reply_serial == self.serial and mtype in (2, 3):
                return mtype == 2

    def signal(self, dest, path, iface, member, name, obj):
        """Sends a signal (arguments: a string and an object path) to dest; no answer comes."""
        self.serial += 1
        self.sock.sendall(_signal(self.serial, dest, path, iface, member, name, obj))

    def serve(self, answer, seconds):
        """For seconds, answers each method call that comes: answer(member) gives (signature, body) or
        None to leave it unanswered. Returns the members of the calls that came."""
        came = []
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return came
            self.sock.settimeout(left)
            try:
                mtype, serial, values, _ = self._read()
            except (socket.timeout, BlockingIOError):
                return came
            self.sock.settimeout(None)
            if mtype != 1:
                continue
            came.append(values.get(3, ""))
            out = answer(values.get(3, ""))
            if out is not None:
                self.serial += 1
                self.sock.sendall(_reply(self.serial, values.get(7, ""), serial, *out))

    def request_active(self):
        """RequestActive: "granted", "refused", or the error's message."""
        ok = self.call("org.devns1", "/org/devns1", "org.devns1.Manager", "RequestActive")
        if ok:
            return "granted" if struct.unpack_from("<I", self.body)[0] else "refused"
        (n,) = struct.unpack_from("<I", self.body)
        return self.body[4:4 + n].decode()

    def switch_to(self, persona):
        """SwitchTo: "ok", or the error's message."""
        if self.call("org.devns1", "/org/devns1", "org.devns1.Manager", "SwitchTo", persona):
            return "ok"
        (n,) = struct.unpack_from("<I", self.body)
        return self.body[4:4 + n].decode()

    def ping(self, timeout=1.0):
        """Seconds devnsd took to answer ListPersonas; raises if it took more than timeout."""
        self.sock.settimeout(timeout)
        start = time.monotonic()
        if not self.call("org.devns1", "/org/devns1", "org.devns1.Manager", "ListPersonas"):
            raise RuntimeError("ListPersonas failed")
        return time.monotonic() - start

    def close(self):
        self.sock.close()
