#!/usr/bin/python3
"""Force feedback through persona nodes on a real kernel. The hardware is a
uinput game pad with EV_FF whose driver, here, answers the kernel's upload
and erase requests (UI_BEGIN_FF_UPLOAD / UI_END_FF_UPLOAD, UI_BEGIN_FF_ERASE
/ UI_END_FF_ERASE) as a real driver does, and records the plays it is sent.
Clients are raw ioctls on /dev/devns/PERSONA/eventN and fftest, unmodified."""

import errno
import fcntl
import os
import re
import select
import struct
import subprocess
import threading
import time

from evdev import ecodes as e

import devnsrig as rig

HW_EFFECTS = 4
# Gains sent as markers (ForceFeedback.quiet()), each once.
GAIN_MARKERS = iter(range(0xF000, 0x10000))

# struct ff_effect on 64-bit: 16 bytes of header, a 32-byte union.
EFFECT = struct.Struct("HhHHHHH2x32s")
EFFECT_SIZE = EFFECT.size
assert EFFECT_SIZE == 48

EVIOCSFF = rig._ioc(rig.IOC_WRITE, 0x80, EFFECT_SIZE)
EVIOCRMFF = rig._ioc(rig.IOC_WRITE, 0x81, 4)
EVIOCGEFFECTS = rig._ioc(rig.IOC_READ, 0x84, 4)

# uinput
EV_UINPUT = 0x0101
UI_FF_UPLOAD, UI_FF_ERASE = 1, 2
UPLOAD = struct.Struct("Ii48s48s")   # struct uinput_ff_upload
ERASE = struct.Struct("IiI")         # struct uinput_ff_erase
SETUP = struct.Struct("HHHH80sI")    # struct uinput_setup


def _uioc(direction, nr, size):
    return rig._ioc(direction, nr, size, typ=ord("U"))


UI_DEV_CREATE = _uioc(rig.IOC_NONE, 1, 0)
UI_DEV_DESTROY = _uioc(rig.IOC_NONE, 2, 0)
UI_DEV_SETUP = _uioc(rig.IOC_WRITE, 3, SETUP.size)
UI_SET_EVBIT = _uioc(rig.IOC_WRITE, 100, 4)
UI_SET_KEYBIT = _uioc(rig.IOC_WRITE, 101, 4)
UI_SET_FFBIT = _uioc(rig.IOC_WRITE, 107, 4)
UI_BEGIN_FF_UPLOAD = _uioc(rig.IOC_READ | rig.IOC_WRITE, 200, UPLOAD.size)
UI_END_FF_UPLOAD = _uioc(rig.IOC_WRITE, 201, UPLOAD.size)
UI_BEGIN_FF_ERASE = _uioc(rig.IOC_READ | rig.IOC_WRITE, 202, ERASE.size)
UI_END_FF_ERASE = _uioc(rig.IOC_WRITE, 203, ERASE.size)


class RumblePad:
    """A uinput game pad with force feedback and a driver thread that
    accepts every upload and erase the kernel passes on, and records them
    and the EV_FF events (plays, stops, gain) it receives."""

    def __init__(self):
        self.fd = os.open("/dev/uinput", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        fcntl.ioctl(self.fd, UI_SET_EVBIT, e.EV_KEY)
        fcntl.ioctl(self.fd, UI_SET_KEYBIT, e.BTN_SOUTH)
        fcntl.ioctl(self.fd, UI_SET_EVBIT, e.EV_FF)
        for bit in (e.FF_RUMBLE, e.FF_PERIODIC, e.FF_SINE, e.FF_SQUARE, e.FF_CONSTANT, e.FF_GAIN):
            fcntl.ioctl(self.fd, UI_SET_FFBIT, bit)
        fcntl.ioctl(self.fd, UI_DEV_SETUP,
                    SETUP.pack(e.BUS_USB, 0x3333, 0x4444, 1, b"devns test rumble pad", HW_EFFECTS))
        fcntl.ioctl(self.fd, UI_DEV_CREATE)
        self.lock = threading.Lock()
        self.uploads = []   # (hardware id, type)
        self.erases = []    # hardware ids
        self.ff = []        # (code, value)
        self.log = []       # ("upload" or "erase", hardware id), in the order the driver answered them
        self.loaded = set()
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.path = self._event_node()

    def _event_node(self):
        sysname = "/sys/devices/virtual/input"
        for _ in range(100):
            for inp in os.listdir(sysname):
                try:
                    with open(os.path.join(sysname, inp, "name")) as f:
                        if f.read().strip() != "devns test rumble pad":
                            continue
                except OSError:
                    continue
                for ent in os.listdir(os.path.join(sysname, inp)):
                    if ent.startswith("event") and os.path.exists("/dev/input/" + ent):
                        return "/dev/input/" + ent
            time.sleep(0.05)
        raise RuntimeError("no event node for the rumble pad")

    def _serve(self):
        while not self.stopping:
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if not r:
                continue
            try:
                data = os.read(self.fd, rig.EVENT.size * 64)
            except BlockingIOError:
                continue
            for off in range(0, len(data), rig.EVENT.size):
                _, _, typ, code, value = rig.EVENT.unpack_from(data, off)
                if typ == EV_UINPUT and code == UI_FF_UPLOAD:
                    self._upload(value)
                elif typ == EV_UINPUT and code == UI_FF_ERASE:
                    self._erase(value)
                elif typ == e.EV_FF:
                    with self.lock:
                        self.ff.append((code, value))

    def _upload(self, request_id):
        buf = bytearray(UPLOAD.pack(request_id, 0, bytes(48), bytes(48)))
        fcntl.ioctl(self.fd, UI_BEGIN_FF_UPLOAD, buf, True)
        _, _, effect, _ = UPLOAD.unpack(bytes(buf))
        typ, hw_id = struct.unpack_from("Hh", effect)
        with self.lock:
            self.uploads.append((hw_id, typ))
            self.log.append(("upload", hw_id))
            self.loaded.add(hw_id)
        fcntl.ioctl(self.fd, UI_END_FF_UPLOAD, UPLOAD.pack(request_id, 0, effect, bytes(48)))

    def _erase(self, request_id):
        buf = bytearray(ERASE.pack(request_id, 0, 0))
        fcntl.ioctl(self.fd, UI_BEGIN_FF_ERASE, buf, True)
        _, _, hw_id = ERASE.unpack(bytes(buf))
        with self.lock:
            self.erases.append(hw_id)
            self.log.append(("erase", hw_id))
            self.loaded.discard(hw_id)
        fcntl.ioctl(self.fd, UI_END_FF_ERASE, ERASE.pack(request_id, 0, hw_id))

    def take(self):
        """What the driver saw since the last take: (uploads, erases, ff events)."""
        with self.lock:
            seen = (self.uploads, self.erases, self.ff)
            self.uploads, self.erases, self.ff, self.log = [], [], [], []
        return seen

    def take_log(self):
        """The uploads and erases since the last take, in order; and the ids loaded now."""
        with self.lock:
            log, loaded = self.log, set(self.loaded)
            self.uploads, self.erases, self.ff, self.log = [], [], [], []
        return log, loaded

    def wait_log(self, count, timeout=60):
        """Waits until the driver answered count uploads and erases since the last take."""
        return rig.eventually(lambda: len(self.log) >= count, timeout)

    def wait_ff(self, want, timeout=3.0):
        """Waits until the EV_FF events in want were all seen; returns everything seen."""
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            with self.lock:
                seen = list(self.ff)
            if all(w in seen for w in want):
                break
            time.sleep(0.05)
        return seen

    def close(self):
        self.stopping = True
        self.thread.join(5)
        fcntl.ioctl(self.fd, UI_DEV_DESTROY)
        os.close(self.fd)


def rumble(effect_id=-1, strong=0x8000, length=1000):
    union = struct.pack("HH", strong, 0x4000).ljust(32, b"\0")
    return EFFECT.pack(e.FF_RUMBLE, effect_id, 0, 0, 0, length, 0, union)


def sine(effect_id=-1, period=100, magnitude=0x4000):
    union = struct.pack("HHhhH", e.FF_SINE, period, magnitude, 0, 0).ljust(32, b"\0")
    return EFFECT.pack(e.FF_PERIODIC, effect_id, 0x4000, 0, 0, 1000, 0, union)


def upload(fd, effect):
    """EVIOCSFF; returns the id the kernel (or devnsd) wrote back."""
    buf = bytearray(effect)
    fcntl.ioctl(fd, EVIOCSFF, buf, True)
    return struct.unpack_from("h", buf, 2)[0]


def erase(fd, effect_id):
    fcntl.ioctl(fd, EVIOCRMFF, effect_id)


def effects(fd):
    buf = bytearray(4)
    fcntl.ioctl(fd, EVIOCGEFFECTS, buf, True)
    return struct.unpack("i", buf)[0]


def play(fd, effect_id, value):
    rig.write_event(fd, e.EV_FF, effect_id, value)


class ForceFeedback(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.pad = RumblePad()
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.pad.path], active="work"))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.pad.close()

    def setUp(self):
        super().setUp()
        self.pad.take()

    def node(self, persona):
        fd = rig.open_node(rig.persona_node(persona, self.pad.path))
        self.fds.append(fd)
        return fd

    def close(self, fd):
        self.fds.remove(fd)
        os.close(fd)

    def quiet(self):
        """Takes what the pad's driver saw, once anything in flight reached it: a marker (a gain not
        sent before) goes through a handle of its own on the active persona's node, and devnsd passes
        it to the pad behind everything it passed before. The marker is left out of what is returned."""
        active = re.search(r"^Active persona: (\S+)$", rig.devnsctl("status").stdout, re.M).group(1)
        fd = rig.open_node(rig.persona_node(active, self.pad.path))
        try:
            marker = (e.FF_GAIN, next(GAIN_MARKERS))
            rig.write_event(fd, e.EV_FF, *marker)
            self.assertIn(marker, self.pad.wait_ff([marker], timeout=rig.MARKER_TIMEOUT),
                          "the marker gain did not reach the pad")
        finally:
            os.close(fd)
        uploads, erases, ff = self.pad.take()
        return uploads, erases, [f for f in ff if f != marker]

    def test_effects_count(self):
        """Each persona's node reports the pad's number of effects, as the kernel's node does."""
        hw = rig.open_node(self.pad.path)
        try:
            self.assertEqual(effects(hw), HW_EFFECTS)
        finally:
            os.close(hw)
        for persona in ("work", "personal"):
            self.assertEqual(effects(self.node(persona)), HW_EFFECTS)

    def test_active_upload_play_stop_erase(self):
        """The active persona's upload, play, stop and erase reach the pad's driver."""
        fd = self.node("work")
        eid = upload(fd, rumble())
        self.assertEqual(eid, 0)
        uploads, _, _ = self.pad.take()
        self.assertEqual(len(uploads), 1)
        hw_id, typ = uploads[0]
        self.assertEqual(typ, e.FF_RUMBLE)

        play(fd, eid, 3)
        self.pad.wait_ff([(hw_id, 3)])
        play(fd, eid, 0)
        seen = self.pad.wait_ff([(hw_id, 3), (hw_id, 0)])
        self.assertEqual(seen, [(hw_id, 3), (hw_id, 0)])

        erase(fd, eid)
        _, erases, _ = self.quiet()
        self.assertEqual(erases, [hw_id])
        with self.assertRaises(OSError) as cm:
            erase(fd, eid)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_kernel_rules(self):
        """Types the pad lacks are EINVAL; another file's id is EACCES, an unused one EINVAL."""
        fd, other = self.node("work"), self.node("work")
        spring = EFFECT.pack(e.FF_SPRING, -1, 0, 0, 0, 100, 0, bytes(32))
        for effect, err in ((spring, errno.EINVAL), (rumble(effect_id=3), errno.EINVAL)):
            with self.assertRaises(OSError) as cm:
                upload(fd, effect)
            self.assertEqual(cm.exception.errno, err)
        eid = upload(fd, rumble())
        with self.assertRaises(OSError) as cm:
            upload(other, rumble(effect_id=eid, strong=1))
        self.assertEqual(cm.exception.errno, errno.EACCES)
        with self.assertRaises(OSError) as cm:
            erase(other, eid)
        self.assertEqual(cm.exception.errno, errno.EACCES)

    def test_background_play_never_reaches_the_pad(self):
        """The background persona uploads and plays; the pad's driver sees nothing of it."""
        fd = self.node("personal")
        eid = upload(fd, rumble())
        self.assertEqual(eid, 0)
        play(fd, eid, 1)
        uploads, erases, ff = self.quiet()
        self.assertEqual((uploads, erases, ff), ([], [], []))

        # Coming forward uploads its effect; the play made in the background is not resumed.
        rig.devnsctl("switch", "personal")
        uploads, _, ff = self.quiet()
        self.assertEqual([t for _, t in uploads], [e.FF_RUMBLE])
        self.assertEqual([f for f in ff if f[0] != e.FF_GAIN], [])
        play(fd, eid, 1)
        self.assertIn((uploads[0][0], 1), self.pad.wait_ff([(uploads[0][0], 1)]))

    def test_switch_stops_playing_effect(self):
        """A switch stops and erases the previous persona's playing effect on the pad."""
        fd = self.node("work")
        eid = upload(fd, sine())
        uploads, _, _ = self.pad.take()
        hw_id = uploads[0][0]
        play(fd, eid, 1)
        self.pad.wait_ff([(hw_id, 1)])
        self.pad.take()
        rig.devnsctl("switch", "personal")
        _, erases, ff = self.quiet()
        self.assertIn((hw_id, 0), ff)
        self.assertEqual(erases, [hw_id])
        # Back at work, the effect is there again under the id the persona knows.
        rig.devnsctl("switch", "work")
        uploads, _, _ = self.quiet()
        self.assertEqual([t for _, t in uploads], [e.FF_PERIODIC])
        play(fd, eid, 2)
        self.assertIn((uploads[0][0], 2), self.pad.wait_ff([(uploads[0][0], 2)]))

    def test_slots_run_out(self):
        """Each persona has the pad's four slots; a fifth upload is ENOSPC, as the kernel gives."""
        for persona in ("work", "personal"):
            fd = self.node(persona)
            ids = [upload(fd, rumble(strong=0x1000 * (k + 1))) for k in range(HW_EFFECTS)]
            self.assertEqual(ids, list(range(HW_EFFECTS)))
            with self.assertRaises(OSError) as cm:
                upload(fd, rumble())
            self.assertEqual(cm.exception.errno, errno.ENOSPC)
        uploads, _, _ = self.quiet()
        self.assertEqual(len(uploads), HW_EFFECTS)
        rig.devnsctl("switch", "personal")
        uploads, erases, _ = self.quiet()
        self.assertEqual(len(erases), HW_EFFECTS)
        self.assertEqual(len(uploads), HW_EFFECTS)

    def test_close_erases(self):
        """Closing the file that uploaded an effect erases it on the pad."""
        fd = self.node("work")
        upload(fd, rumble())
        uploads, _, _ = self.pad.take()
        self.close(fd)
        _, erases, _ = self.quiet()
        self.assertEqual(erases, [uploads[0][0]])

    def test_round_trips_and_a_full_switch(self):
        """Twenty upload and erase pairs through the active persona's node reach the driver in
        that order, one slot reused, none left loaded; a switch with both personas' four slots
        full erases the four of the one going back before it uploads the four of the one coming
        forward. (bench/ff-bench.py times the same steps.)"""
        fd = self.node("work")
        ids = []
        for _ in range(20):
            eid = upload(fd, rumble())
            ids.append(eid)
            erase(fd, eid)
        self.assertTrue(self.pad.wait_log(40))
        log, loaded = self.pad.take_log()
        self.assertEqual(ids, [0] * 20)
        self.assertEqual([what for what, _ in log], ["upload", "erase"] * 20, log)
        self.assertEqual(len({hw_id for _, hw_id in log}), 1, log)
        self.assertEqual(loaded, set())

        for name in ("work", "personal"):
            fd = self.node(name)
            for _ in range(HW_EFFECTS):
                upload(fd, rumble())
        self.assertTrue(self.pad.wait_log(HW_EFFECTS))
        log, work_loaded = self.pad.take_log()
        self.assertEqual([what for what, _ in log], ["upload"] * HW_EFFECTS, log)
        self.assertEqual(len(work_loaded), HW_EFFECTS)
        rig.devnsctl("switch", "personal")
        self.assertTrue(self.pad.wait_log(2 * HW_EFFECTS), self.pad.log)
        log, loaded = self.pad.take_log()
        self.assertEqual(sorted(i for _, i in log[:HW_EFFECTS]), sorted(work_loaded), log)
        self.assertEqual([what for what, _ in log], ["erase"] * HW_EFFECTS + ["upload"] * HW_EFFECTS, log)
        self.assertEqual(len(loaded), HW_EFFECTS)

    def test_fftest(self):
        """fftest, unmodified, uploads its effects through the persona node and plays the one asked for."""
        node = rig.persona_node("work", self.pad.path)
        p = subprocess.Popen(["stdbuf", "-oL", "fftest", node], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        out = rig.Output(p)
        self.assertTrue(out.wait_for("Enter effect number"), out.text)
        uploads, _, ff = self.quiet()
        types = {t for _, t in uploads}
        self.assertLessEqual({e.FF_PERIODIC, e.FF_CONSTANT, e.FF_RUMBLE}, types, out.text)
        sine_hw = [i for i, t in uploads if t == e.FF_PERIODIC][0]
        # fftest's effect 0 is its sine wave.
        p.stdin.write("0\n")
        p.stdin.flush()
        self.assertIn((sine_hw, 1), self.pad.wait_ff([(sine_hw, 1)]), out.text)
        p.stdin.write("-1\n")
        p.stdin.flush()
        p.stdin.close()
        out.finish()
        p.stdout.close()
        self.assertEqual(p.returncode, 0, out.text)
        # Its file closed: every effect it uploaded is erased.
        _, erases, _ = self.quiet()
        self.assertEqual(sorted(erases), sorted(i for i, _ in uploads), out.text)


if __name__ == "__main__":
    rig.main()
