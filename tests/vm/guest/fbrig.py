"""Helpers for framebuffer tests in the VM: fbdev ioctls, frames, and
comparing what QEMU's screendump saw with what a persona drew."""

import fcntl
import glob
import os
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.environ.get("DEVNS_HOSTCTL", "/nonexistent")))
import hostctl  # noqa: E402

FBIOGET_VSCREENINFO = 0x4600
FBIOPUT_VSCREENINFO = 0x4601
FBIOGET_FSCREENINFO = 0x4602
FBIOGETCMAP = 0x4604
FBIOPUTCMAP = 0x4605
FBIOPAN_DISPLAY = 0x4606
FBIOBLANK = 0x4611
FBIO_WAITFORVSYNC = (1 << 30) | (4 << 16) | (ord("F") << 8) | 0x20
DEVNS_FBIOGET_POS = (2 << 30) | (8 << 16) | (ord("F") << 8) | 0xD0
DEVNS_FBIOSET_POS = (1 << 30) | (8 << 16) | (ord("F") << 8) | 0xD1

VAR_FIELDS = ("xres yres xres_virtual yres_virtual xoffset yoffset bits_per_pixel grayscale "
              "red_off red_len red_msb green_off green_len green_msb blue_off blue_len blue_msb "
              "transp_off transp_len transp_msb nonstd activate height width accel_flags pixclock "
              "left_margin right_margin upper_margin lower_margin hsync_len vsync_len sync vmode "
              "rotate colorspace r0 r1 r2 r3").split()
VAR = struct.Struct("=40I")
FIX = struct.Struct("@16sLIIIIHHHILIIHHH")
FB_ACTIVATE_TEST = 2


def get_var(fd):
    buf = bytearray(VAR.size)
    fcntl.ioctl(fd, FBIOGET_VSCREENINFO, buf, True)
    return dict(zip(VAR_FIELDS, VAR.unpack(buf)))


def put_var(fd, var):
    buf = bytearray(VAR.pack(*(var[k] for k in VAR_FIELDS)))
    fcntl.ioctl(fd, FBIOPUT_VSCREENINFO, buf, True)
    return dict(zip(VAR_FIELDS, VAR.unpack(buf)))


def pan(fd, var, yoffset):
    var = dict(var, yoffset=yoffset, xoffset=0)
    fcntl.ioctl(fd, FBIOPAN_DISPLAY, bytes(VAR.pack(*(var[k] for k in VAR_FIELDS))))


def get_fix(fd):
    buf = bytearray(FIX.size)
    fcntl.ioctl(fd, FBIOGET_FSCREENINFO, buf, True)
    f = FIX.unpack(buf)
    return {"id": f[0].rstrip(b"\0").decode(), "smem_len": f[2], "type": f[3], "visual": f[5],
            "line_length": f[9]}


def screen_info(persona="work"):
    """(var, fix) of persona's fb0, as FBIOGET_VSCREENINFO and FBIOGET_FSCREENINFO give them."""
    fd = os.open(fb_node(persona), os.O_RDWR)
    try:
        return get_var(fd), get_fix(fd)
    finally:
        os.close(fd)


def set_pos(fd, pos):
    fcntl.ioctl(fd, DEVNS_FBIOSET_POS, struct.pack("Q", pos))


def get_pos(fd):
    buf = bytearray(8)
    fcntl.ioctl(fd, DEVNS_FBIOGET_POS, buf, True)
    return struct.unpack("Q", buf)[0]


def waitforvsync(fd):
    fcntl.ioctl(fd, FBIO_WAITFORVSYNC, struct.pack("I", 0))


def dpms():
    """The display's power as DRM shows it for the connected connector: "On" or "Off"."""
    for status in sorted(glob.glob("/sys/class/drm/card*-*/status")):
        with open(status) as f:
            if f.read().strip() != "connected":
                continue
        with open(os.path.join(os.path.dirname(status), "dpms")) as f:
            return f.read().strip()
    return None


def write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# --- frames ----------------------------------------------------------------------

def pixel(rgb):
    r, g, b = rgb
    return bytes((b, g, r, 0))


def frame(width, height, color, band=None, band_color=(255, 255, 255)):
    """A solid XRGB8888 frame with an optional horizontal band of rows [y0, y1)."""
    row = pixel(color) * width
    rows = [row] * height
    if band:
        brow = pixel(band_color) * width
        for y in range(max(0, band[0]), min(height, band[1])):
            rows[y] = brow
    return b"".join(rows)


def moving_frame(width, height, color, step):
    """A frame with a bar moving down and a block moving right, different every step."""
    bar = (step * 37) % max(1, height - 40)
    data = bytearray(frame(width, height, color, band=(bar, bar + 40)))
    x = (step * 53) % max(1, width - 80)
    block = pixel((255, 255, 0)) * 80
    for y in range(height // 2, height // 2 + 80):
        off = (y * width + x) * 4
        data[off:off + len(block)] = block
    return bytes(data)


def to_rgb(xrgb):
    rgb = bytearray(len(xrgb) // 4 * 3)
    rgb[0::3] = xrgb[2::4]
    rgb[1::3] = xrgb[1::4]
    rgb[2::3] = xrgb[0::4]
    return bytes(rgb)


# --- the screen as QEMU shows it ----------------------------------------------------

def parse_ppm(data):
    fields, pos = [], 0
    while len(fields) < 4:
        while data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            pos = data.index(b"\n", pos)
            continue
        start = pos
        while not data[pos:pos + 1].isspace():
            pos += 1
        fields.append(data[start:pos])
    width, height = int(fields[1]), int(fields[2])
    return width, height, data[pos + 1:pos + 1 + width * height * 3]


def screendump(name):
    """(width, height, RGB bytes) of what the emulated display shows now."""
    path = hostctl.screendump(name)
    with open(path, "rb") as f:
        return parse_ppm(f.read())


def solid(shot, rgb):
    """Whether every pixel of a screendump is rgb."""
    return shot[2] == bytes(rgb) * (shot[0] * shot[1])


def screen_shows(name, width, height, xrgb, timeout=10.0):
    """Takes screendumps until the screen shows exactly xrgb; returns (ok, differing pixels)."""
    want = to_rgb(xrgb)
    deadline = time.monotonic() + timeout
    while True:
        w, h, got = screendump(name)
        if (w, h) == (width, height) and got == want:
            return True, 0
        if time.monotonic() > deadline:
            diff = sum(1 for i in range(0, min(len(got), len(want)), 3) if got[i:i + 3] != want[i:i + 3])
            return False, diff if (w, h) == (width, height) else "size %dx%d" % (w, h)
        time.sleep(0.2)


def conf_display(personas=("work", "personal"), active="work", backend="drm", routed=False, track=None, mode=None):
    lines = ["[Daemon]", "Routed=yes", ""] if routed else []
    lines += ["[Display]", "Backend=" + backend]
    if backend == "drm":
        lines.append("Device=/dev/dri/card0")
    if mode:
        lines.append("Mode=%dx%d" % mode)
    if track is not None:
        lines.append("TrackWrites=" + ("yes" if track else "no"))
    lines.append("")
    for name in personas:
        lines.append("[Persona %s]" % name)
        if name == active:
            lines.append("Active=yes")
        lines.append("")
    return "\n".join(lines)


def fb_node(persona):
    return "/dev/devns/%s/fb0" % persona


def read_png_rgb(path):
    """(width, height, RGB bytes) of an 8-bit RGB PNG with unfiltered rows, as devnsctl writes it."""
    import zlib
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert (depth, ctype) == (8, 2), "not 8-bit RGB"
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3
    rows = []
    for y in range(height):
        off = y * (stride + 1)
        assert raw[off] == 0, "filtered row"
        rows.append(raw[off + 1:off + 1 + stride])
    return width, height, b"".join(rows)


def pattern_frame(width, height, seed):
    """What fbdraw DEVICE SEED draws (XRGB8888)."""
    out = bytearray(width * height * 4)
    xs = range(width)
    for y in range(height):
        g = (y + 2 * seed) & 0xff
        row = bytearray(width * 4)
        row[0::4] = bytes(((x ^ y) + seed) & 0xff for x in xs)
        row[1::4] = bytes([g]) * width
        row[2::4] = bytes((x + seed) & 0xff for x in xs)
        out[y * width * 4:(y + 1) * width * 4] = row
    return bytes(out)


# --- the framebuffer socket, as libdevns-fbmmap.so speaks to it (devns-fb.h) ---------------

DEVNS_FBIOGET_SOCKET = (2 << 30) | (108 << 16) | (ord("F") << 8) | 0xD2
DEVNS_FBIOGET_TICKET = (2 << 30) | (16 << 16) | (ord("F") << 8) | 0xD6
DEVNS_FBIO_WROTE = (1 << 30) | (16 << 16) | (ord("F") << 8) | 0xD4  # _IOW, struct devns_fb_wrote
DEVNS_FBIO_WROTE_AT = (ord("F") << 8) | 0xD7
REQUEST = struct.Struct("=IB3x16s")  # struct devns_fb_request
REQUEST_MAGIC = 0x64667271
GRANT = struct.Struct("=IIQQ")  # struct devns_fb_grant
GRANT_MAGIC = 0x64666230
INTENT_MAP, INTENT_WRITE = ord("m"), ord("w")


def card_node(persona):
    return "/dev/devns/%s/card0" % persona


def socket_path(persona):
    return "/run/devnsd/fb/%s/fb0" % persona


def get_ticket(fd):
    buf = bytearray(16)
    fcntl.ioctl(fd, DEVNS_FBIOGET_TICKET, buf, True)
    return bytes(buf)


def redeem(path, payload, timeout=10.0):
    """Connects to a framebuffer socket, sends payload in one piece and waits for the answer:
    (connection, memfd or None). Raises OSError when the connection cannot be made."""
    import array
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
        if payload:
            sock.sendall(payload)
        fds = array.array("i")
        try:
            data, anc, _, _ = sock.recvmsg(GRANT.size, socket.CMSG_SPACE(4))
        except (socket.timeout, ConnectionResetError):
            return sock, None
        for level, kind, body in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(body[:len(body) - len(body) % 4])
        return sock, (fds[0] if fds else None)
    except BaseException:
        sock.close()
        raise


# Dumb buffers of a card0 (struct drm_mode_create_dumb, drm_mode_map_dumb, drm_mode_destroy_dumb) and
# DEVNS_DRM_IOCTL_GET_TICKET's struct devns_drm_ticket: an offset in, a ticket out.
CREATE_DUMB = struct.Struct("=IIIIIIQ")
MAP_DUMB = struct.Struct("=IIQ")
DRM_IOCTL_MODE_CREATE_DUMB = (3 << 30) | (CREATE_DUMB.size << 16) | (ord("d") << 8) | 0xB2
DRM_IOCTL_MODE_MAP_DUMB = (3 << 30) | (MAP_DUMB.size << 16) | (ord("d") << 8) | 0xB3
DRM_IOCTL_MODE_DESTROY_DUMB = (3 << 30) | (4 << 16) | (ord("d") << 8) | 0xB4
DEVNS_DRM_IOCTL_GET_TICKET = (3 << 30) | (24 << 16) | (ord("d") << 8) | 0xF1


def create_dumb(fd, width, height):
    """A new dumb buffer of 32 bpp: (handle, size)."""
    buf = bytearray(CREATE_DUMB.pack(height, width, 32, 0, 0, 0, 0))
    fcntl.ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, buf, True)
    fields = CREATE_DUMB.unpack(buf)
    return fields[4], fields[6]


def map_dumb(fd, handle):
    buf = bytearray(MAP_DUMB.pack(handle, 0, 0))
    fcntl.ioctl(fd, DRM_IOCTL_MODE_MAP_DUMB, buf, True)
    return MAP_DUMB.unpack(buf)[2]


def card_ticket(fd, offset):
    buf = bytearray(struct.pack("=Q16x", offset))
    fcntl.ioctl(fd, DEVNS_DRM_IOCTL_GET_TICKET, buf, True)
    return bytes(buf[8:])


def access_of(memfd):
    if memfd is None:
        return "none"
    return {os.O_RDONLY: "ro", os.O_WRONLY: "wo", os.O_RDWR: "rw"}[fcntl.fcntl(memfd, fcntl.F_GETFL) & os.O_ACCMODE]


def probe(args):
    """Runs probe steps, printing one line each (see the command-line help below)."""
    import mmap
    import random
    files, tickets, held, last = {}, {}, [], [None]
    buffers, offsets = {}, {}
    flags = {"r": os.O_RDONLY, "w": os.O_WRONLY, "rw": os.O_RDWR}

    def attempt(label, fn):
        try:
            out = fn()
            print(label, out if isinstance(out, str) else "ok", flush=True)
        except OSError as err:
            print(label, "errno", err.errno, flush=True)

    def do_redeem(path, payload):
        sock, memfd = redeem(path, payload)
        if memfd is None:
            sock.close()
        else:
            held.append((sock, memfd))
            last[0] = memfd
        return "memfd " + access_of(memfd)

    def do_map_write():
        m = mmap.mmap(last[0], 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        m.close()

    def do_reopen_rw():
        os.close(os.open("/proc/self/fd/%d" % last[0], os.O_RDWR))

    def do_flood(name, width, height, path):
        """Dumb buffers until the card refuses one, each mapped through the socket and filled."""
        n = 0
        while True:
            try:
                handle, size = create_dumb(files[name], width, height)
            except OSError as err:
                return "%d size %d errno %d" % (n, width * height * 4, err.errno)
            n += 1
            payload = REQUEST.pack(REQUEST_MAGIC, ord("m"), card_ticket(files[name], map_dumb(files[name], handle)))
            sock, memfd = redeem(path, payload)
            if memfd is None:
                raise SystemExit("flood: buffer %d was not granted" % n)
            held.append((sock, memfd))
            os.pwrite(memfd, b"\xa5" * size, 0)

    i = 0
    while i < len(args):
        step, i = args[i], i + 1
        if step == "open":
            name, path, mode = args[i:i + 3]
            i += 3
            attempt("open " + name, lambda: files.__setitem__(name, os.open(path, flags[mode])))
        elif step == "info":
            name = args[i]
            i += 1
            attempt("info " + name, lambda: get_var(files[name]))
        elif step == "write":
            name = args[i]
            i += 1
            attempt("write " + name, lambda: os.write(files[name], b"\xff" * 4))
        elif step == "wrote":
            # DEVNS_FBIO_WROTE_AT: the first 4096 bytes changed.
            name = args[i]
            i += 1
            attempt("wrote " + name, lambda: fcntl.ioctl(files[name], DEVNS_FBIO_WROTE_AT, 4096))
        elif step == "blank":
            name, level = args[i:i + 2]
            i += 2
            attempt("blank " + name, lambda: fcntl.ioctl(files[name], FBIOBLANK, int(level)))
        elif step == "close":
            name = args[i]
            i += 1
            os.close(files.pop(name))
            print("close", name, "ok", flush=True)
        elif step == "ticket":
            name, tag = args[i:i + 2]
            i += 2
            attempt("ticket " + tag, lambda: tickets.__setitem__(tag, get_ticket(files[name])))
        elif step == "forge":
            tag = args[i]
            i += 1
            tickets[tag] = bytes(random.getrandbits(8) for _ in range(16))
            print("forge", tag, "ok", flush=True)
        elif step == "redeem":
            path, tag, intent = args[i:i + 3]
            i += 3
            if tag not in tickets:
                print("redeem", tag, "no ticket", flush=True)
                continue
            payload = REQUEST.pack(REQUEST_MAGIC, ord(intent), tickets[tag])
            attempt("redeem " + tag, lambda: do_redeem(path, payload))
        elif step == "legacy":
            path = args[i]
            i += 1
            attempt("legacy", lambda: do_redeem(path, b"m"))
        elif step == "raw":
            path, hexdata = args[i:i + 2]
            i += 2
            attempt("raw", lambda: do_redeem(path, bytes.fromhex(hexdata)))
        elif step == "dumb":
            name, tag, width, height = args[i:i + 4]
            i += 4
            attempt("dumb " + tag, lambda: buffers.__setitem__(tag, create_dumb(files[name], int(width), int(height))[0]))
        elif step == "mapdumb":
            name, tag = args[i:i + 2]
            i += 2
            attempt("mapdumb " + tag, lambda: "offset %d" % offsets.setdefault(tag, map_dumb(files[name], buffers[tag])))
        elif step == "destroy":
            name, tag = args[i:i + 2]
            i += 2
            attempt("destroy " + tag, lambda: fcntl.ioctl(files[name], DRM_IOCTL_MODE_DESTROY_DUMB,
                                                          struct.pack("=I", buffers[tag])))
        elif step == "cardticket":
            # A ticket for the buffer tagged BUF's offset, or for a number given as is.
            name, where, tag = args[i:i + 3]
            i += 3
            offset = int(where, 0) if where[0].isdigit() else offsets[where]
            attempt("cardticket " + tag, lambda: tickets.__setitem__(tag, card_ticket(files[name], offset)))
        elif step == "flood":
            name, width, height, path = args[i:i + 4]
            i += 4
            attempt("flood " + name, lambda: do_flood(name, int(width), int(height), path))
        elif step == "fill":
            value = bytes.fromhex(args[i])
            i += 1
            attempt("fill", lambda: os.pwrite(last[0], value * 4096, 0) and None)
        elif step == "peek":
            attempt("peek", lambda: "none" if last[0] is None else os.pread(last[0], 4, 0).hex())
        elif step == "mapwrite":
            attempt("mapwrite", do_map_write)
        elif step == "reopen-rw":
            attempt("reopen-rw", do_reopen_rw)
        elif step == "lease":
            # F_SETLEASE (r: read, w: write) on the last memfd. SIGIO is ignored: a program that holds on
            # to its lease is not ended when someone breaks it.
            kind = args[i]
            i += 1
            signal.signal(signal.SIGIO, signal.SIG_IGN)
            attempt("lease " + kind, lambda: fcntl.fcntl(last[0], fcntl.F_SETLEASE,
                                                         {"r": fcntl.F_RDLCK, "w": fcntl.F_WRLCK}[kind]))
        elif step == "held":
            print("held", len(held), flush=True)
        elif step == "sleep":
            time.sleep(float(args[i]))
            i += 1
        elif step == "wait":
            sys.stdin.readline()
            print("go", flush=True)
        else:
            raise SystemExit("unknown probe step " + step)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "probe":
        raise SystemExit("""usage: fbrig.py probe STEP...
  open NAME PATH r|w|rw     info NAME     write NAME     wrote NAME     blank NAME LEVEL     close NAME
  ticket NAME TAG           forge TAG     redeem SOCKET TAG m|w
  legacy SOCKET             raw SOCKET HEX
  mapwrite | reopen-rw | lease r|w | fill HEXBYTE | peek   (on the last memfd received)
  dumb NAME BUF W H         mapdumb NAME BUF     destroy NAME BUF     (dumb buffers of an open card0)
  cardticket NAME BUF|OFFSET TAG                flood NAME W H SOCKET
  held     sleep SECONDS    wait (for a line on stdin)""")
    probe(sys.argv[2:])
