#!/usr/bin/python3
"""A client of a persona's endpoint (include/devns-endpoint.h), run inside a
container: endpoint_client.py ACTION [PATH]. Prints one JSON object.

  ask OP            one request (status, request-active): the reply
  garbage           a short packet, a long one, a bad magic, version 2, an
                    unknown op, each on one connection: the replies' statuses
  flood             requests sent without reading a reply until devnsd stops
                    taking them: how many went, and whether the connection ended
  connections       as many connections as devnsd takes, and one more: how many
                    got an answer
  hold              a connection kept open: prints {"ready": true}, then asks
                    for status once a line comes on stdin"""

import errno
import json
import socket
import struct
import sys

PATH = "/run/devnsd/persona/endpoint"
MAGIC = 0x50534E44
OPS = {"status": 1, "request-active": 2}
REPLY = struct.Struct("=IHHIiI33s160s3x")


def request(op, serial, magic=MAGIC, version=1, flags=0):
    return struct.pack("=IHHII", magic, version, op, serial, flags)


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(path)
    return s


def reply(s):
    data = s.recv(4096)
    if len(data) != REPLY.size:
        return {"size": len(data)}
    magic, version, op, serial, status, flags, persona, message = REPLY.unpack(data)
    return {"magic": magic == MAGIC, "version": version, "op": op, "serial": serial, "status": status,
            "flags": flags, "persona": persona.split(b"\0")[0].decode(),
            "message": message.split(b"\0")[0].decode()}


def ask(path, op):
    with connect(path) as s:
        s.send(request(OPS[op], 77))
        return reply(s)


def garbage(path):
    packets = {"short": b"\x01\x02\x03", "long": request(1, 5) + b"x" * 4000,
               "magic": request(1, 6, magic=0x12345678), "version": request(1, 7, version=2),
               "op": request(99, 8), "flags": request(1, 9, flags=4)}
    out = {}
    for name, packet in packets.items():
        with connect(path) as s:
            s.send(packet)
            r = reply(s)
            out[name] = [r.get("status"), r.get("serial"), r.get("message", "")]
    return out


def flood(path):
    s = connect(path)
    s.setblocking(False)
    sent = 0
    ended = False
    try:
        while sent < 100000:
            s.send(request(1, sent))
            sent += 1
    except BlockingIOError:
        pass
    except OSError as e:
        ended = e.errno in (errno.EPIPE, errno.ECONNRESET)
    # devnsd reads on, answers what it can, and closes a connection whose replies are left unread.
    s.settimeout(20)
    got = 0
    try:
        while True:
            data = s.recv(4096)
            if not data:
                ended = True
                break
            got += 1
    except OSError as e:
        ended = ended or e.errno in (errno.ECONNRESET, errno.EPIPE)
    except socket.timeout:
        pass
    return {"sent": sent, "replies": got, "ended": ended}


def connections(path):
    held = []
    answered = 0
    for i in range(20):
        try:
            s = connect(path)
            held.append(s)
            s.send(request(1, i))
            s.settimeout(3)
            r = reply(s)
            answered += r.get("status") == 0
        except OSError:
            pass
    for s in held:
        s.close()
    return {"answered": answered}


def hold(path):
    s = connect(path)
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()
    try:
        s.send(request(1, 1))
        data = s.recv(4096)
        return {"reply": len(data)}
    except OSError as e:
        return {"error": e.errno}


def main():
    action = sys.argv[1]
    if action == "ask":
        out = ask(sys.argv[3] if len(sys.argv) > 3 else PATH, sys.argv[2])
    else:
        path = sys.argv[2] if len(sys.argv) > 2 else PATH
        out = {"garbage": garbage, "flood": flood, "connections": connections, "hold": hold}[action](path)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
