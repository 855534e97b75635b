#!/usr/bin/python3
"""devnsd killed with SIGKILL and started again loses nothing: the phone's
setup (the display, a uinput keyboard, the i8042 keyboard with its capslock
LED, a backlight, routed nodes, a persona created at runtime with a
container attached to it), two personas drawn into (one through the mapping
libdevns-fbmmap.so gives, one panned), a background persona holding caps
lock through its evdev node. After the restart the screen (QEMU's
screendump), each persona's screenshot, its mode and pan, LED and backlight
state, the active persona, the created persona, the attachment and device
numbers are what they were; the nodes never leave /dev, an old reader or
poller gets ENODEV (on a routed node too), a program that opens a node
while devnsd is down waits and then gets a working handle, and reopening at
the same path works, in the container too; programs under the library pan
by value and write through the memfd on the new devnsd. The same through an emulated
systemd fd store, and a corrupt state file gives a clean start."""

import errno
import fcntl
import glob
import os
import re
import select
import signal
import socket
import array
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from evdev import ecodes as e

import devnsrig as rig
from devnsrig import eventually
import fbrig
import phonerig

BUILD = rig.BUILD
FBDRAW = os.path.join(BUILD, "tests", "vm", "fbdraw")
SECCOMP_DENY = os.path.join(BUILD, "tests", "vm", "seccomp-deny")
FBWRITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fbwrite.py")
PRELOAD = os.path.join(BUILD, "src", "libdevns-fbmmap.so")
OUT = os.environ.get("DEVNS_OUT", "/tmp")
I8042 = "/dev/input/event0"
STATE = "/run/devnsd/state"
EVIOCGVERSION = 0x80044501
BL_MAX = 1000
LEVELS = {"work": 120, "personal": 880, "guest": 450}


def read_file(path):
    with open(path) as f:
        return f.read()


def read_in_thread(fd, result, key, size=24):
    """Starts a thread that reads fd once and puts the errno it got (0 for data) in result[key]."""
    def run():
        try:
            os.read(fd, size)
            result[key] = 0
        except OSError as err:
            result[key] = err.errno
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def holder_pids():
    pids = []
    for comm in glob.glob("/proc/[0-9]*/comm"):
        try:
            if read_file(comm).strip() == "devnsd-fdstore":
                pids.append(int(comm.split("/")[2]))
        except OSError:
            pass
    return pids


class SystemdEmulation:
    """What systemd does for a Type=notify service with FileDescriptorStoreMax=:
    a NOTIFY_SOCKET that takes READY=1 and FDSTORE=1/FDNAME= with their fds
    (SCM_RIGHTS), FDSTOREREMOVE=1; a restart passes the store with
    LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "notify-systemd")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.store = {}
        # FDSTORE=1 messages, each one fd handed to the service manager.
        self.stores = 0
        self.ready = threading.Event()
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            fds = array.array("i")
            msg, anc, _, _ = self.sock.recvmsg(4096, socket.CMSG_SPACE(64 * 4))
            for level, kind, body in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(body[:len(body) - len(body) % 4])
            fields = dict(line.split("=", 1) for line in msg.decode().split("\n") if "=" in line)
            with self.lock:
                name = fields.get("FDNAME", "stored")
                if fields.get("FDSTOREREMOVE") == "1":
                    for fd in self.store.pop(name, []):
                        os.close(fd)
                if fields.get("FDSTORE") == "1":
                    self.stores += 1
                    self.store.setdefault(name, []).extend(fds)
                    fds = array.array("i")
            for fd in fds:
                os.close(fd)
            if fields.get("READY") == "1":
                self.ready.set()

    def start(self, conf, log):
        """Starts devnsd as the service manager would, with what the store holds."""
        self.ready.clear()
        with self.lock:
            names, fds = [], []
            for name, kept in sorted(self.store.items()):
                for fd in kept:
                    names.append(name)
                    fds.append(fd)
        env = dict(os.environ, NOTIFY_SOCKET=self.path, FDSTORE="1024")
        if fds:
            env.update(LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=":".join(names))
        # Out of the way first (above the numbers they will get), then at 3, 4, ...
        # as systemd passes them.
        dups = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3 + len(fds)) for fd in fds]

        def place():
            for i, fd in enumerate(dups):
                os.dup2(fd, 3 + i, inheritable=True)
                os.close(fd)
        proc = subprocess.Popen(["sh", "-c", 'export LISTEN_PID=$$; exec "$@"', "sh", rig.DEVNSD, "--config", conf],
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                close_fds=False, preexec_fn=place)
        for fd in dups:
            os.close(fd)
        if not self.ready.wait(90):
            proc.kill()
            raise RuntimeError("devnsd did not become ready under the emulated systemd")
        return proc

    def flush(self):
        """Closes everything the store holds."""
        with self.lock:
            for fds in self.store.values():
                for fd in fds:
                    os.close(fd)
            self.store.clear()

    def names(self):
        with self.lock:
            return {name: len(fds) for name, fds in self.store.items()}

    def records(self):
        """The state records in the store, by name, as (seq, text, fd)."""
        out = {}
        with self.lock:
            for name, fds in self.store.items():
                if name.startswith("state") and fds:
                    text = os.pread(fds[-1], 1 << 20, 0).decode(errors="replace")
                    m = re.search(r"^seq (\d+)$", text, re.M)
                    out[name] = (int(m.group(1)) if m else 0, text, fds[-1])
        return out


class Restart(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.led = rig.find_capslock()[0]
        cls.led_input = os.path.basename(glob.glob(os.path.join(os.path.realpath(
            os.path.join(cls.led, "device")), "event*"))[0])
        cls.bl_dir = os.path.join(tempfile.mkdtemp(prefix="restart-sys-"), "panel0")
        os.mkdir(cls.bl_dir)
        for name, value in (("max_brightness", BL_MAX), ("brightness", 500), ("actual_brightness", 500),
                            ("bl_power", 0)):
            rig.write_file(os.path.join(cls.bl_dir, name), "%d\n" % value)
        cls.conf = "\n".join([
            "[Daemon]", "Routed=yes", "",
            "[Display]", "Backend=drm", "Device=/dev/dri/card0", "",
            "[Input]", "Devices=%s %s" % (cls.kbd_hw, I8042), "",
            "[Leds]", "Devices=" + cls.led, "",
            "[Backlight]", "Devices=" + cls.bl_dir, "",
            "[Persona work]", "Active=yes", "",
            "[Persona personal]", "",
        ])
        cls.bus = rig.Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.stop()
        cls.kbd.close()

    def setUp(self):
        self.fds = []
        self.containers = []

    def tearDown(self):
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        for c in self.containers:
            c.stop()

    # --- helpers ------------------------------------------------------------

    def open_fd(self, path, flags=os.O_RDWR):
        fd = os.open(path, flags | os.O_CLOEXEC)
        self.fds.append(fd)
        return fd

    def screenshot(self, persona, tag):
        path = os.path.join(OUT, "restart-%s-%s.png" % (tag, persona))
        rig.devnsctl("screenshot", persona, path)
        return fbrig.read_png_rgb(path)

    def screen(self, tag):
        return fbrig.screendump("restart-" + tag)

    def screen_becomes(self, want, tag, timeout=15.0):
        """Screendumps until the screen shows want (width, height, rgb); the number of differing pixels."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.screen(tag)
            if got == want:
                return 0
            if time.monotonic() > deadline:
                if got[:2] != want[:2]:
                    return "size %dx%d" % got[:2]
                return sum(1 for i in range(0, len(got[2]), 3) if got[2][i:i + 3] != want[2][i:i + 3])
            time.sleep(0.3)

    def assert_serves(self, path):
        """A fresh handle on the node works: nothing to read yet."""
        fd = self.open_fd(path, os.O_RDONLY | os.O_NONBLOCK)
        with self.assertRaises(BlockingIOError):
            os.read(fd, 24)

    def routed_node(self):
        return "/dev/devns/" + os.path.basename(self.kbd_hw)

    def assert_old_handle(self, fd):
        """A handle of a devnsd that is no more gets ENODEV."""
        with self.assertRaises(OSError) as err:
            os.read(fd, 24)
        self.assertEqual(err.exception.errno, errno.ENODEV, "a handle of the dead devnsd")

    def persona_node(self, persona, hw):
        return "/dev/devns/%s/%s" % (persona, os.path.basename(hw))

    def view(self, persona, kind, name, attr="brightness"):
        return "/run/devns/%s/sys/class/%s/%s/%s" % (persona, kind, name, attr)

    def leds(self, persona):
        fd = rig.open_node(self.persona_node(persona, I8042))
        try:
            return rig.led_state(fd)
        finally:
            os.close(fd)

    def capslock(self, persona):
        return e.LED_CAPSL in self.leds(persona)

    def personas(self):
        out = rig.devnsctl("list").stdout.split("\n")
        names = {line[2:].split()[0] for line in out if len(line) > 2 and line[2:].strip()}
        active = [line[2:].split()[0] for line in out if line.startswith("*")]
        return names, active[0] if active else None

    def numbers(self):
        found = {}
        for path in glob.glob("/dev/devns/**", recursive=True):
            st = os.stat(path)
            if os.path.isdir(path):
                continue
            found[path] = st.st_rdev
        return found

    def wait_saved(self, marker):
        """The state file has caught up with the last change (a save follows within 20 ms)."""
        self.assertTrue(eventually(lambda: os.path.exists(STATE) and marker in read_file(STATE)),
                        "the state file never recorded %r:\n%s" % (marker, read_file(STATE)
                                                                     if os.path.exists(STATE) else "(none)"))

    def kill(self, daemon):
        os.kill(daemon.proc.pid, signal.SIGKILL)
        daemon.proc.wait()

    def draw_personas(self, w, h):
        """work: fbdraw through the mapping; personal: two frames, panned to the second."""
        env = dict(os.environ, LD_PRELOAD=PRELOAD)
        p = subprocess.run([FBDRAW, fbrig.fb_node("work"), "7", "--no-pan"], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        fd = self.open_fd(fbrig.fb_node("personal"))
        var = fbrig.put_var(fd, dict(fbrig.get_var(fd), yres_virtual=2 * h, activate=0))
        self.assertEqual(var["yres_virtual"], 2 * h)
        fbrig.write_all(fd, fbrig.frame(w, h, (30, 30, 200)) + fbrig.pattern_frame(w, h, 9))
        fbrig.pan(fd, var, h)
        return fbrig.get_var(fd)

    # --- the tests -------------------------------------------------------------

    def test_1_sigkill_and_start_again(self):
        daemon = rig.Daemon(self.conf)
        try:
            self.run_sigkill(daemon)
        except BaseException:
            print(daemon.output())
            raise
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())
        # A clean stop forgets: no state file, no holder.
        self.assertFalse(os.path.exists(STATE), "a clean stop left the state file")
        self.assertTrue(eventually(lambda: not holder_pids(), 5), "a clean stop left the holder running")

    def run_sigkill(self, daemon):
        led = os.path.basename(self.led)
        bl = os.path.basename(self.bl_dir)
        fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        base_var = fbrig.get_var(fd)
        os.close(fd)
        w, h = base_var["xres"], base_var["yres"]

        # A persona created at runtime, with a container attached as a manager makes one.
        rig.devnsctl("create", "guest")
        c = phonerig.Container("guest")
        self.containers.append(c)
        out = rig.devnsctl("attach", "guest", "--pid", str(c.pid)).stdout
        self.assertRegex(out, r"attached, [1-9]\d* nodes made")
        guest_frame = fbrig.frame(w, h, (20, 160, 40), band=(300, 340))
        raw = os.path.join(tempfile.mkdtemp(), "guest")
        with open(raw, "wb") as f:
            f.write(guest_frame)
        c.run("dd", "if=" + raw, "of=/dev/fb0", "bs=1M", "status=none")

        personal_var = self.draw_personas(w, h)
        # Backlight levels through each persona's view (the container's through its bound view).
        for p in ("work", "personal"):
            rig.write_file(self.view(p, "backlight", bl), "%d\n" % LEVELS[p])
        c.run("sh", "-c", "echo %d > /sys/class/backlight/%s/brightness" % (LEVELS["guest"], bl))
        rig.devnsctl("switch", "personal")
        # work, in the background, holds caps lock through its evdev node.
        kfd = self.open_fd(self.persona_node("work", I8042), os.O_RDWR | os.O_NONBLOCK)
        rig.write_event(kfd, e.EV_LED, e.LED_CAPSL, 1)
        rig.write_event(kfd, e.EV_SYN, e.SYN_REPORT, 0)
        self.assertTrue(eventually(lambda: self.capslock("work")), "work's caps lock did not take")
        self.assertEqual(int(read_file(os.path.join(self.led, "brightness"))), 0, "the LED shows work's state")

        before_screen = self.screen("before")
        self.assertEqual(self.screen_becomes(before_screen[:2] + (fbrig.to_rgb(fbrig.pattern_frame(w, h, 9)),),
                                             "before"), 0, "the screen does not show personal's panned frame")
        before_shots = {p: self.screenshot(p, "before") for p in ("work", "personal", "guest")}
        self.assertEqual(before_shots["work"][2], fbrig.to_rgb(fbrig.pattern_frame(w, h, 7)))
        before_numbers = self.numbers()
        before_personas = self.personas()
        self.assertEqual(before_personas, ({"work", "personal", "guest"}, "personal"))
        self.wait_saved("active personal")
        self.wait_saved("leds 0x2")
        # personal, active, turns num lock on through its node: the hardware takes it, the record too.
        pfd = self.open_fd(self.persona_node("personal", I8042), os.O_RDWR | os.O_NONBLOCK)
        rig.write_event(pfd, e.EV_LED, e.LED_NUML, 1)
        rig.write_event(pfd, e.EV_SYN, e.SYN_REPORT, 0)
        self.wait_saved("leds 0x1")

        # An old reader, blocked in read() when devnsd dies, and one blocked in poll().
        node = self.persona_node("work", self.kbd_hw)
        reader = self.open_fd(node, os.O_RDONLY)
        poller_fd = self.open_fd(node, os.O_RDONLY | os.O_NONBLOCK)
        result = {}

        def blocked_poll():
            p = select.poll()
            p.register(poller_fd, select.POLLIN)
            result["poll"] = p.poll()
        threads = [read_in_thread(reader, result, "read", 24 * 64), threading.Thread(target=blocked_poll, daemon=True)]
        threads[1].start()
        time.sleep(0.5)
        self.assertTrue(all(t.is_alive() for t in threads), "the reader or the poller did not block")

        # A host program's handle on the routed node, which follows the active persona.
        routed = self.routed_node()
        routed_fd = self.open_fd(routed, os.O_RDONLY | os.O_NONBLOCK)
        routed_ino = os.stat(routed).st_ino

        holder = holder_pids()
        self.assertEqual(len(holder), 1, "one holder keeps the framebuffers and the connections")
        node_ino = os.stat(node).st_ino
        start = time.monotonic()
        self.kill(daemon)
        # The node stays while devnsd is down (the holder keeps its connection), and a
        # program that opens it then waits for the next devnsd.
        self.assertEqual(os.stat(node).st_ino, node_ino, "the node left /dev with devnsd")
        opened = {}

        def open_while_down():
            fd = os.open(node, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            self.fds.append(fd)
            read_in_thread(fd, opened, "read").join()
        opener = threading.Thread(target=open_while_down, daemon=True)
        opener.start()
        time.sleep(0.5)
        self.assertTrue(all(t.is_alive() for t in threads + [opener]),
                        "a client of the node did not wait for the next devnsd")
        self.assertEqual(holder_pids(), holder, "the holder died with devnsd")
        print("holder: VmRSS %d KiB" % rig.rss_kib(holder[0]))

        daemon.start()
        print("restart to READY=1: %.2f s" % (time.monotonic() - start))
        for t in threads + [opener]:
            t.join(10)
        self.assertFalse(any(t.is_alive() for t in threads + [opener]), "a client hangs after the restart")
        # The next devnsd answers what the dead one left unanswered, and every later call
        # on a handle it did not open, with ENODEV; it wakes the pollers to find that out.
        print("old reader, blocked in read() when devnsd died:", errno.errorcode.get(result.get("read"), result))
        self.assertEqual(result.get("read"), errno.ENODEV)
        with self.assertRaises(OSError) as err:
            os.read(reader, 24)
        print("old reader, next read():", errno.errorcode[err.exception.errno])
        self.assertEqual(err.exception.errno, errno.ENODEV)
        print("old poller, blocked in poll() when devnsd died:", result.get("poll"))
        self.assertTrue(result.get("poll") and result["poll"][0][1] & select.POLLERR, result.get("poll"))
        with self.assertRaises(OSError) as err:
            fcntl.ioctl(reader, EVIOCGVERSION, bytearray(4))
        self.assertEqual(err.exception.errno, errno.ENODEV)
        # The one that opened while devnsd was down holds a working handle: nothing to read yet.
        self.assertEqual(opened.get("read"), errno.EAGAIN, opened)
        self.assertEqual(os.stat(node).st_ino, node_ino, "the node was made again")
        # The routed node is kept the same way.
        self.assert_old_handle(routed_fd)
        self.assertEqual(os.stat(routed).st_ino, routed_ino, "the routed node was made again")
        self.assert_serves(routed)

        # The active persona, the created persona, device numbers.
        self.assertEqual(self.personas(), before_personas, "personas or the active persona changed")
        self.assertEqual(self.numbers(), before_numbers, "device numbers changed")
        # The screen and each persona's frame, mode and pan.
        self.assertEqual(self.screen_becomes(before_screen, "after"), 0,
                         "the screen differs from before the crash")
        for p, shot in before_shots.items():
            self.assertEqual(self.screenshot(p, "after"), shot, "%s's screenshot differs" % p)
        fd = self.open_fd(fbrig.fb_node("personal"))
        var = fbrig.get_var(fd)
        for k in ("xres", "yres", "xres_virtual", "yres_virtual", "xoffset", "yoffset"):
            self.assertEqual(var[k], personal_var[k], "personal's %s" % k)
        # LEDs and backlight, per persona and on the hardware for the active one.
        self.assertTrue(self.capslock("work"), "work's caps lock is lost")
        self.assertEqual(self.leds("personal"), {e.LED_NUML}, "personal's LEDs")
        self.assertEqual(int(read_file(os.path.join(self.led, "brightness"))), 0)
        self.assertEqual(read_file(self.view("work", "leds", led)), "1\n")
        for p in ("work", "personal", "guest"):
            self.assertEqual(read_file(self.view(p, "backlight", bl)).strip(), str(LEVELS[p]), p)
        self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")).strip(), str(LEVELS["personal"]))
        # Reopening at the same path works.
        self.assert_serves(self.persona_node("work", self.kbd_hw))
        # The container: bound again, its node opens again, its view is the live one.
        self.assertTrue(eventually(lambda: "re-attached" not in daemon.output() and
                                   "views bound again" in daemon.output(), 20), daemon.output())
        self.assertRegex(daemon.output(), r"persona guest: [1-9]\d* nodes in its container again, 2 views bound again")
        # Its endpoint is the new devnsd's: the one of the last run, removed, is unmounted there.
        self.assertIn("Persona: guest", c.run(rig.DEVNSCTL, "status").stdout)
        got = c.run("sh", "-c", "dd if=/dev/fb0 bs=%d count=1 status=none | od -An -tx1 -N4" % (w * 4)).stdout
        self.assertEqual(got.split(), ["28", "a0", "14", "00"], "the container's fb0 does not read guest's frame")
        self.assertEqual(c.run("cat", "/sys/class/backlight/%s/brightness" % bl).stdout.strip(),
                         str(LEVELS["guest"]), "the container's view is not back")
        # And the hardware follows a switch as before: work's caps lock reaches the LED.
        rig.devnsctl("switch", "work")
        self.assertTrue(eventually(lambda: int(read_file(os.path.join(self.led, "brightness"))) > 0),
                        "work's caps lock does not reach the LED")
        self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")).strip(), str(LEVELS["work"]))
        rig.devnsctl("switch", "personal")

        # Programs under libdevns-fbmmap.so draw on the new devnsd by the library's own paths, with the
        # calls it stands in for refused: a pan by value, then a write() copied into the memfd.
        env = dict(os.environ, LD_PRELOAD=PRELOAD, PYTHONPATH=os.path.dirname(FBWRITE))
        p = subprocess.run([SECCOMP_DENY, "ioctl=%#x" % fbrig.FBIOPAN_DISPLAY, FBDRAW, fbrig.fb_node("personal"),
                            "13"], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(self.screen_becomes((w, h, fbrig.to_rgb(fbrig.pattern_frame(w, h, 13))), "preload-pan"),
                         0, "a program mapping and panning through the library after the restart is not shown")
        frame = fbrig.frame(w, h, (200, 120, 40), band=(10, 50))
        pos = fbrig.get_fix(fd)["line_length"] * fbrig.get_var(fd)["yoffset"]
        with tempfile.NamedTemporaryFile() as raw:
            raw.write(frame)
            raw.flush()
            p = subprocess.run([SECCOMP_DENY, "pwrite64,ioctl=%#x" % fbrig.DEVNS_FBIO_WROTE, sys.executable, FBWRITE,
                                fbrig.fb_node("personal"), str(pos), raw.name], env=env, capture_output=True,
                               text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.split()[:2] + p.stdout.split()[-2:], ["n", str(len(frame)), "memfd", "yes"],
                         p.stdout)
        self.assertEqual(self.screen_becomes((w, h, fbrig.to_rgb(frame)), "preload-write"), 0,
                         "a write() through the library after the restart is not shown")

    def test_2_systemd_fd_store(self):
        """The same memory and record through systemd's fd store, with no holder and no state file."""
        d = tempfile.mkdtemp(prefix="devnsd-systemd-")
        conf = os.path.join(d, "devnsd.conf")
        rig.write_file(conf, self.conf)
        log = open(os.path.join(d, "log"), "a+")
        systemd = SystemdEmulation(d)
        proc = systemd.start(conf, log)
        try:
            self.assertEqual(holder_pids(), [], "a holder runs although systemd keeps the fds")
            fd = self.open_fd(fbrig.fb_node("work"))
            var = fbrig.get_var(fd)
            w, h = var["xres"], var["yres"]
            rig.devnsctl("create", "guest")
            env = dict(os.environ, LD_PRELOAD=PRELOAD)
            p = subprocess.run([FBDRAW, fbrig.fb_node("guest"), "5", "--no-pan"], env=env, capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            rig.devnsctl("switch", "guest")
            self.assertTrue(eventually(lambda: {"fb-work", "fb-personal", "fb-guest", "state"} <=
                                       set(systemd.names())), systemd.names())
            self.assertTrue(eventually(lambda: "active guest" in read_file(STATE)))
            self.assertEqual(systemd.names().get("state"), 1, "the old record was not removed from the store")
            # A program panning at full rate costs the service manager nothing: the
            # record's two copies are rewritten in place, not handed over per save.
            gfd = self.open_fd(fbrig.fb_node("work"))
            gvar = fbrig.put_var(gfd, dict(fbrig.get_var(gfd), yres_virtual=2 * h, activate=0))
            stores = systemd.stores
            for i in range(60):
                fbrig.pan(gfd, gvar, h if i % 2 == 0 else 0)
                time.sleep(0.005)
            fbrig.pan(gfd, gvar, 0)
            self.assertTrue(eventually(lambda: all("active guest" in rec[1] for rec in systemd.records().values())
                                       and len(systemd.records()) == 2), systemd.records().keys())
            self.assertLessEqual(systemd.stores - stores, 1, "each save went to the service manager")
            before = self.screenshot("guest", "systemd-before")
            # Each node's connection and its record are in the store too.
            kept = [n for n in systemd.names() if n.startswith("cuse.")]
            self.assertTrue(kept and len(kept) % 2 == 0 and all(n + ".j" in kept for n in kept if not n.endswith(".j")),
                            kept)
            old = self.open_fd(fbrig.fb_node("guest"))
            old_routed = self.open_fd(self.routed_node(), os.O_RDONLY | os.O_NONBLOCK)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            # Death in the middle of rewriting the newer copy: the other one stands.
            records = systemd.records()
            newest = max(records.values(), key=lambda rec: rec[0])
            os.ftruncate(newest[2], len(newest[1]) // 2)
            # Only the fd store has it now.
            os.unlink(STATE)
            proc = systemd.start(conf, log)
            self.assertEqual(self.personas(), ({"work", "personal", "guest"}, "guest"))
            self.assertEqual(self.screenshot("guest", "systemd-after"), before)
            with self.assertRaises(OSError) as err:
                fbrig.get_var(old)
            self.assertEqual(err.exception.errno, errno.ENODEV, "a handle of the dead devnsd")
            self.assert_old_handle(old_routed)
            self.assert_serves(self.routed_node())
            self.assertEqual(before[2], fbrig.to_rgb(fbrig.pattern_frame(w, h, 5)))
        except BaseException:
            log.seek(0)
            print(log.read())
            # As systemd when the unit has stopped for good: the kept connections go, so
            # closing the test's handles does not wait on a devnsd that is not there.
            proc.kill()
            proc.wait()
            systemd.flush()
            log.close()
            raise
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(20), 0)
        log.close()
        # A clean stop empties the store.
        self.assertTrue(eventually(lambda: not any(systemd.names().values())), systemd.names())

    def test_5_clients_stop_waiting_when_devnsd_does_not_come_back(self):
        """Without a clean stop and without a next devnsd, the holder lets the nodes go
        after its grace (30 s): their clients get the kernel's ECONNABORTED, not a hang."""
        daemon = rig.Daemon(self.conf)
        try:
            node = self.persona_node("work", self.kbd_hw)
            reader = self.open_fd(node, os.O_RDONLY)
            result = {}
            t = read_in_thread(reader, result, "read")
            time.sleep(0.5)
            self.kill(daemon)
            start = time.monotonic()
            t.join(20)
            self.assertTrue(t.is_alive(), "the reader did not wait for the next devnsd")
            self.assertTrue(os.path.exists(node), "the node went before the grace ended")
            t.join(30)
            waited = time.monotonic() - start
            print("reader of a node whose devnsd never came back: %s after %.1f s"
                  % (errno.errorcode.get(result.get("read"), result), waited))
            self.assertFalse(t.is_alive(), "the reader still waits %.0f s after devnsd died" % waited)
            self.assertEqual(result.get("read"), errno.ECONNABORTED)
            self.assertTrue(eventually(lambda: not os.path.exists(node)), "the node outlived the grace")
            # The holder still has the framebuffers: a late start takes them back.
            daemon.start()
            self.assert_serves(node)
        except BaseException:
            print(daemon.output())
            raise
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_6_device_gone_while_devnsd_was_down(self):
        """A device unplugged while devnsd is down: the next devnsd does not have its nodes,
        and their clients get ENODEV as from a device that went away; then the nodes go, in the
        attached container too, with their udev records."""
        pad = rig.make_keyboard()
        pad_hw = rig.event_node(pad)
        conf = self.conf.replace("Devices=%s %s" % (self.kbd_hw, I8042),
                                 "Devices=%s %s %s" % (self.kbd_hw, I8042, pad_hw))
        daemon = rig.Daemon(conf)
        try:
            node = self.persona_node("work", pad_hw)
            name = os.path.basename(pad_hw)
            record = "/run/udev/data/c%d:%d" % (os.major(os.stat(node).st_rdev), os.minor(os.stat(node).st_rdev))
            # An attached container has the node and its udev record.
            c = phonerig.Container("work")
            self.containers.append(c)
            rig.devnsctl("attach", "work", "--pid", str(c.pid))
            self.assertEqual(c.run("sh", "-c", "test -c /dev/input/%s && test -f %s && echo yes" % (name, record))
                             .stdout.strip(), "yes")
            self.wait_saved("attach work")
            reader = self.open_fd(node, os.O_RDONLY)
            result = {}
            t = read_in_thread(reader, result, "read")
            time.sleep(0.5)
            self.kill(daemon)
            pad.close()
            self.assertTrue(eventually(lambda: not os.path.exists(pad_hw)), "the uinput device stayed")
            daemon.start()
            t.join(10)
            self.assertFalse(t.is_alive(), "a reader of a node that is no more hangs")
            self.assertEqual(result.get("read"), errno.ENODEV)
            with self.assertRaises(OSError) as err:
                os.read(reader, 24)
            self.assertEqual(err.exception.errno, errno.ENODEV)
            self.assertIn("is a node that is no more: ended", daemon.output())
            self.assertTrue(eventually(lambda: not os.path.exists(node), 10), "the node stayed in /dev")
            # The container, bound again, loses the node and its udev record as at an unplug.
            self.assertTrue(eventually(lambda: c.run("sh", "-c", "test -e /dev/input/%s || test -e %s || echo gone"
                                                     % (name, record)).stdout.strip() == "gone", 20),
                            c.run("ls", "-l", "/dev/input", "/run/udev/data").stdout + daemon.output())
            # The other nodes are served as before.
            self.assert_serves(self.persona_node("work", self.kbd_hw))
        except BaseException:
            print(daemon.output())
            raise
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_7_a_blanked_display_stays_down_across_a_restart(self):
        """The active persona blanked its screen, so the display and the backlight are powered down:
        devnsd killed and started again powers them down again, a persona made then starts with the
        backlight on, and the persona's unblank brings up what it wrote. devnsd stopped while they
        are down leaves both up."""
        bl_power = os.path.join(self.bl_dir, "bl_power")
        daemon = rig.Daemon(self.conf)
        try:
            fd = self.open_fd(fbrig.fb_node("work"))
            var = fbrig.get_var(fd)
            w, h = var["xres"], var["yres"]
            frame = fbrig.frame(w, h, (90, 200, 90), band=(20, 60))
            fbrig.write_all(fd, frame)
            fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4)
            self.assertTrue(eventually(lambda: fbrig.dpms() == "Off"), "the blanked display is not down")
            self.assertTrue(eventually(lambda: read_file(bl_power).strip() == "4"), "the backlight is not down")
            # The blanking is in the record (saved within 20 ms of a change).
            time.sleep(0.5)
            self.kill(daemon)
            daemon = rig.Daemon(self.conf)
            self.assertTrue(eventually(lambda: fbrig.dpms() == "Off"), "the display came back up after the restart")
            self.assertTrue(eventually(lambda: read_file(bl_power).strip() == "4"),
                            "the backlight came back up after the restart")
            self.assertIn("Display: powered down", rig.devnsctl("status").stdout)
            # A persona made now starts with the backlight on, not as the killed devnsd left the hardware.
            rig.devnsctl("create", "ghost")
            ghost_power = self.view("ghost", "backlight", os.path.basename(self.bl_dir), "bl_power")
            self.assertEqual(read_file(ghost_power).strip(), "0", "a persona made after the restart")
            rig.devnsctl("switch", "ghost")
            self.assertTrue(eventually(lambda: fbrig.dpms() == "On"), "the display stays down for ghost")
            self.assertTrue(eventually(lambda: read_file(bl_power).strip() == "0"),
                            "the backlight stays down for ghost")
            rig.devnsctl("switch", "work")
            self.assertTrue(eventually(lambda: (fbrig.dpms(), read_file(bl_power).strip()) == ("Off", "4")),
                            "the display and backlight, back to blanked work")
            rig.devnsctl("remove", "ghost")
            fd = self.open_fd(fbrig.fb_node("work"))
            fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 0)
            self.assertTrue(eventually(lambda: fbrig.dpms() == "On"), "the unblanked display stays down")
            self.assertEqual(self.screen_becomes((w, h, fbrig.to_rgb(frame)), "unblanked"), 0,
                             "the unblanked persona's frame is not shown")
            self.assertEqual(read_file(bl_power).strip(), "0", "the backlight stayed down")
            fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4)
            self.assertTrue(eventually(lambda: read_file(bl_power).strip() == "4"), "blanked again")
            self.assertEqual(daemon.stop(), 0, daemon.output())
            self.assertEqual((fbrig.dpms(), read_file(bl_power).strip()), ("On", "0"), "after devnsd stopped")
        except BaseException:
            print(daemon.output())
            raise
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_8_started_again_while_the_display_is_gone(self):
        """devnsd killed, and the display's device removed while it is down: the next devnsd waits for
        it, then starts without it at the last run's mode; the personas' frames and input are back,
        and the device, once back, shows the active persona's frame."""
        pci = os.path.realpath("/sys/class/drm/card0/device")
        daemon = rig.Daemon(self.conf)
        try:
            fd = self.open_fd(fbrig.fb_node("work"))
            var = fbrig.get_var(fd)
            w, h = var["xres"], var["yres"]
            frame = fbrig.frame(w, h, (200, 120, 40), band=(30, 70))
            fbrig.write_all(fd, frame)
            time.sleep(0.5)
            self.kill(daemon)
            rig.write_file(os.path.join(pci, "remove"), "1")
            self.assertTrue(eventually(lambda: not os.path.exists("/dev/dri/card0")), "card0 did not go")
            daemon = rig.Daemon(self.conf)
            self.assertIn("/dev/dri/card0: still not there after 10 s; starting without it, at %dx%d (the last "
                          "run's mode)" % (w, h), daemon.output())
            self.assertIn("Display: gone", rig.devnsctl("status").stdout)
            self.assertTrue(self.screenshot("work", "display-gone")[2] == fbrig.to_rgb(frame),
                            "work's frame of the last run is not back")
            self.assert_serves(self.persona_node("work", self.kbd_hw))
            rig.write_file("/sys/bus/pci/rescan", "1")
            self.assertTrue(eventually(lambda: os.path.exists("/dev/dri/card0"), 20), "card0 did not come back")
            self.assertEqual(self.screen_becomes((w, h, fbrig.to_rgb(frame)), "display-back"), 0,
                             "work's frame is not shown once the display is back")
            self.assertIn("Display: on", rig.devnsctl("status").stdout)
        except BaseException:
            print(daemon.output())
            raise
        finally:
            if not os.path.exists("/sys/class/drm/card0"):
                rig.write_file("/sys/bus/pci/rescan", "1")
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_9_card0_frame_stays_across_a_restart(self):
        """What the active persona's card0 shows (a DRM client's dumb buffer) is still on the screen after
        devnsd is killed and started again, the client gone with it; fb0's next frame then takes over."""
        draw_bin = os.path.join(BUILD, "tests", "vm", "drm-dumb-draw")
        env = dict(os.environ, LD_PRELOAD=PRELOAD)
        daemon = rig.Daemon(self.conf)
        drawer = None
        try:
            var, _ = fbrig.screen_info("work")
            w, h = var["xres"], var["yres"]
            drawer = subprocess.Popen([draw_bin, "/dev/devns/work/card0", "0x2080c0", "--hold", "300000"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = rig.Output(drawer)
            self.assertTrue(out.wait_for(r"\nshown", 60), out.text)
            card = (w, h, bytes((0x20, 0x80, 0xc0)) * (w * h))
            self.assertEqual(self.screen_becomes(card, "card"), 0, "card0's frame is not shown")
            # Kept for a restart within a second of being shown.
            self.wait_saved("item work display card %d %d " % (w, h))
            self.kill(daemon)
            drawer.kill()
            drawer.wait()
            daemon = rig.Daemon(self.conf)
            self.assertIn("the frame card0 showed in the last run is back", daemon.output())
            self.assertEqual(self.screen_becomes(card, "card-after"), 0, "card0's frame is gone after the restart")
            # fb0 is written: its frame is what the persona shows from now on.
            frame = fbrig.frame(w, h, (200, 60, 60), band=(10, 40))
            fd = self.open_fd(fbrig.fb_node("work"))
            fbrig.write_all(fd, frame)
            self.assertEqual(self.screen_becomes((w, h, fbrig.to_rgb(frame)), "fb0-after-card"), 0,
                             "fb0's frame does not replace the last run's card0 frame")
        except BaseException:
            print(daemon.output())
            raise
        finally:
            if drawer and drawer.poll() is None:
                drawer.kill()
                drawer.wait()
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_3_corrupt_state_file_gives_a_clean_start(self):
        good = "devnsd-state 1\nactive personal\npersona work configured\npersona personal configured\n" \
               "persona ghost created\npersona gone configured\nend\n"
        for label, text in (("garbage", "\x00\xff garbage\n" * 100), ("cut short", good[:-4]),
                            ("oversized", "devnsd-state 1\n" + "x" * (2 << 20))):
            os.makedirs("/run/devnsd", exist_ok=True)
            rig.write_file(STATE, text)
            daemon = rig.Daemon(self.conf)
            try:
                self.assertRegex(daemon.output(), r"state of the last run is unusable \(.+\); starting clean",
                                 label)
                self.assertEqual(self.personas(), ({"work", "personal"}, "work"), label)
            finally:
                self.assertEqual(daemon.stop(), 0, daemon.output())
        # And the good one is taken (the check above can fail).
        rig.write_file(STATE, good)
        daemon = rig.Daemon(self.conf)
        try:
            self.assertEqual(self.personas(), ({"work", "personal", "ghost"}, "personal"))
            # What could not be applied (a persona no longer configured) is said, also by devnsctl status.
            status = rig.devnsctl("status").stdout
            self.assertIn("Not taken back at the last restart:\n  persona gone is no longer configured", status)
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_10_pid_is_the_process_named_at_start(self):
        """Pid= names a container's process. devnsd opens a pidfd on it at start and attaches through that
        pidfd once every node exists. Meanwhile (devnsd waits here for its display) the process exits and
        the init of another container takes its pid: the persona is not attached to that container, and
        the log says the process has exited."""
        first = rig.Container()
        pid = first.pid
        link = "/run/devns-pid-card"
        # Mode=: should the display's wait (10 s) end first, devnsd starts without it all the same.
        conf = self.conf.replace("Device=/dev/dri/card0", "Device=%s\nMode=640x480" % link).replace(
            "[Persona personal]\n", "[Persona personal]\nPid=%d\n" % pid)
        daemon = rig.Daemon.__new__(rig.Daemon)
        daemon.dir = tempfile.mkdtemp(prefix="devnsd-")
        daemon.conf = os.path.join(daemon.dir, "devnsd.conf")
        rig.write_file(daemon.conf, conf)
        log = os.path.join(daemon.dir, "log")
        failed = []

        def start():
            try:
                daemon.start()
            except Exception as err:  # noqa: BLE001 (reported by the test)
                failed.append(err)

        starter = threading.Thread(target=start)
        starter.start()
        try:
            self.assertTrue(eventually(lambda: os.path.exists(log) and "not there yet" in read_file(log)),
                            "devnsd does not wait for its display")
            first.stop()
            self.assertTrue(eventually(lambda: not os.path.exists("/proc/%d" % pid)))
            taker = None
            for _ in range(20):
                # unshare takes pid - 1, and the container's init it forks pid.
                rig.write_file("/proc/sys/kernel/ns_last_pid", str(pid - 2))
                c = rig.Container()
                self.containers.append(c)
                if c.pid == pid:
                    taker = c
                    break
            self.assertIsNotNone(taker, "no container's init took pid %d" % pid)
            os.symlink("/dev/dri/card0", link)
            starter.join(120)
            self.assertEqual(failed, [])
            refused = "[Persona personal] Pid=%d: not attached" % pid
            bound = "persona personal bound to the pid namespace of process %d" % pid
            self.assertTrue(eventually(lambda: refused in daemon.output() or bound in daemon.output()),
                            daemon.output())
            self.assertNotIn(bound, daemon.output())
            self.assertIn(refused, daemon.output())
            p = taker.run("head", "-c", "4", fbrig.fb_node("personal"), check=False)
            self.assertNotEqual(p.returncode, 0, "the container that took the pid reaches the persona")
        except BaseException:
            if hasattr(daemon, "log"):
                print(daemon.output())
            raise
        finally:
            starter.join(120)
            if os.path.lexists(link):
                os.unlink(link)
            if hasattr(daemon, "proc"):
                self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_4_reattach_only_the_same_process(self):
        """A recorded process that is not the one any more (another start time) is not attached
        again; a container that is gone neither; both say so and leave the persona unbound."""
        for case in ("another process", "gone"):
            c = rig.Container()
            self.containers.append(c)
            daemon = rig.Daemon(self.conf)
            try:
                out = rig.devnsctl("attach", "personal", "--pid", str(c.pid)).stdout
                self.assertRegex(out, r"attached")
                self.wait_saved("attach personal %d " % c.pid)
                self.kill(daemon)
                if case == "gone":
                    c.stop()
                else:
                    text = read_file(STATE).split("\n")
                    for i, line in enumerate(text):
                        if line.startswith("attach personal "):
                            f = line.split()
                            f[3] = str(int(f[3]) + 1)
                            text[i] = " ".join(f)
                    rig.write_file(STATE, "\n".join(text))
                daemon.start()
                want = "is another process now" if case == "another process" else "is gone"
                line = "restart: persona personal: process %d %s; not re-attached" % (c.pid, want)
                # Containers are attached again once every node is in /dev, after READY=1.
                revoked = "/dev/devns/personal/fb0: revoked"
                eventually(lambda: line in daemon.output() and revoked in daemon.output())
                self.assertIn(line, daemon.output())
                self.assertIn(revoked, daemon.output())
                # Unbound: its container cannot open the persona's nodes.
                if case == "another process":
                    p = c.run("head", "-c", "4", fbrig.fb_node("personal"), check=False)
                    self.assertNotEqual(p.returncode, 0, "the container still reaches the persona")
                    rig.devnsctl("attach", "personal", "--pid", str(c.pid))
                    self.assertEqual(c.run("head", "-c", "4", fbrig.fb_node("personal")).returncode, 0)
            except BaseException:
                print(daemon.output())
                raise
            finally:
                self.assertEqual(daemon.stop(), 0, daemon.output())


if __name__ == "__main__":
    rig.main()
