#!/usr/bin/python3
"""Input nodes and LED/backlight views against hostile users: `nobody` on the
host, an app's uid inside a container, a container that loses its persona
to another one, one uid that opens everything it can. Real uinput, CUSE and
the i8042 keyboard's caps lock LED; a backlight of plain files. After each
attack devnsd still answers D-Bus within a second."""

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from evdev import ecodes as e

import devnsrig as rig
from test_leds import put, read_file

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = os.path.join(HERE, "nsprobe.py")
VIEWS = "/run/devns"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# The limits devnsd(8) names.
NODE_CLIENTS_PER_UID = 16
PENDING_READS_PER_HANDLE = 16
VIEW_FILES_PER_UID = 64

# Tries a write() of argv[2] to argv[1]; prints "ok" or "errno N".
WRITE = r"""
import os, sys
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)
    os.write(fd, sys.argv[2].encode())
    os.close(fd)
    print("ok")
except OSError as err:
    print("errno %d" % err.errno)
"""

# Opens argv[1] up to argv[2] times and keeps what it got until stdin closes:
# prints "opened N errno E" (E 0 when every open worked).
FILL = r"""
import os, sys
fds, err = [], 0
while len(fds) < int(sys.argv[2]):
    try:
        fds.append(os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK))
    except OSError as ex:
        err = ex.errno
        break
print("opened %d errno %d" % (len(fds), err), flush=True)
sys.stdin.read()
"""

# Opens argv[1] once and starts argv[2] threads blocked in read() on that one
# handle. After 2 s prints "early" and what the reads answered so far, then,
# once stdin gets a line and 1 s later, "late" and what they answered by then:
# "E<errno>" for an error, "D<bytes>" for data, sorted.
READERS = r"""
import os, sys, threading, time
fd = os.open(sys.argv[1], os.O_RDONLY)
lock = threading.Lock()
answers = []

def reader():
    try:
        a = "D%d" % len(os.read(fd, 24 * 64))
    except OSError as err:
        a = "E%d" % err.errno
    with lock:
        answers.append(a)

for _ in range(int(sys.argv[2])):
    threading.Thread(target=reader, daemon=True).start()
time.sleep(2)
with lock:
    print("early", *sorted(answers), flush=True)
sys.stdin.readline()
time.sleep(1)
with lock:
    print("late", *sorted(answers), flush=True)
"""

# A container's program holding a persona's event node: a blocking reader
# (grabbing, and having written a key press into the node), a poller, and
# extra handles (more nodes, a view file). Prints what each gets; once the
# reader fails, tries every handle, and again after a line on stdin.
HOLD = r"""
import fcntl, os, select, struct, sys, threading
EV = struct.Struct("llHHi")
EVIOCGRAB = (1 << 30) | (4 << 16) | (ord("E") << 8) | 0x90
EVIOCGNAME = (2 << 30) | (64 << 16) | (ord("E") << 8) | 0x06
node, view, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
fd = os.open(node, os.O_RDWR)
fcntl.ioctl(fd, EVIOCGRAB, 1)
os.write(fd, EV.pack(0, 0, 1, 46, 1) + EV.pack(0, 0, 0, 0, 0))  # KEY_C down, into the persona's node
polled = os.open(node, os.O_RDONLY)
others = [os.open(p, os.O_RDONLY | os.O_NONBLOCK) for p in extra]
vfd = os.open(view, os.O_RDWR)

def poller():
    p = select.poll()
    p.register(polled, 0)
    print("poll %d" % p.poll()[0][1], flush=True)

def attempts():
    for i, o in enumerate(others):
        try:
            got = os.read(o, EV.size * 64)
            print("other%d read %d bytes" % (i, len(got)), flush=True)
        except OSError as err:
            print("other%d errno %d" % (i, err.errno), flush=True)
    for name, call in (("ioctl", lambda: fcntl.ioctl(fd, EVIOCGNAME, bytearray(64))),
                       ("write", lambda: os.write(fd, EV.pack(0, 0, 0, 0, 0))),
                       ("view read", lambda: os.pread(vfd, 64, 0)),
                       ("view write", lambda: os.write(vfd, b"0"))):
        try:
            call()
            print("%s ok" % name, flush=True)
        except OSError as err:
            print("%s errno %d" % (name, err.errno), flush=True)

threading.Thread(target=poller, daemon=True).start()
print("ready", flush=True)
while True:
    try:
        data = os.read(fd, EV.size * 64)
    except OSError as err:
        print("read errno %d" % err.errno, flush=True)
        break
    for off in range(0, len(data), EV.size):
        print("ev %d %d %d" % EV.unpack_from(data, off)[2:], flush=True)
attempts()
sys.stdin.readline()
print("again", flush=True)
attempts()
"""

# name: (max_brightness, brightness)
BACKLIGHT = ("panel", 1000, 500)

# Run by a container's root (host uid 0, the owner of its namespaces' files): asks for a write lease on
# its container's pid namespace ("lease container ok" or "... errno N"), then makes a pid namespace below
# it whose init takes a write lease on that namespace's file and ignores SIGIO, the lease's break, so as
# never to give it up. That init opens NODE ("open ok" or "open errno N", with the seconds it took), lets
# go of its lease and opens NODE again ("again ...").
NS_LEASE = r"""
import ctypes, fcntl, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGIO, signal.SIG_IGN)

def lease(what):
    fd = os.open("/proc/self/ns/pid", os.O_RDONLY)
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError as err:
        print("lease %s errno %d" % (what, err.errno), flush=True)
        os.close(fd)
        return None
    print("lease %s ok" % what, flush=True)
    return fd

def try_open(what):
    start = time.monotonic()
    try:
        os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK))
        result = "ok"
    except OSError as err:
        result = "errno %d" % err.errno
    print("%s %s after %.1f s" % (what, result, time.monotonic() - start), flush=True)

held = lease("container")
if held is not None:
    os.close(held)
if libc.unshare(0x20000000) != 0:
    sys.exit("unshare: errno %d" % ctypes.get_errno())
pid = os.fork()
if pid == 0:
    held = lease("nested")
    try_open("open")
    if held is not None:
        os.close(held)
    try_open("again")
    os._exit(0)
os.waitpid(pid, 0)
"""


def python(*args, prefix=(), container=None, **kw):
    """Runs python3 with args (after the prefix, e.g. setpriv), in the container if given."""
    cmd = list(prefix) + [sys.executable] + list(args)
    if container:
        return container.run(*cmd, check=False, **kw)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


class InputAndViewAttacks(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.led, cls.i8042 = rig.find_capslock()
        cls.led_name = os.path.basename(cls.led)
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.name = os.path.basename(cls.kbd_hw)
        cls.dir = tempfile.mkdtemp(prefix="devns-attack-input-")
        os.chmod(cls.dir, 0o755)
        bl = os.path.join(cls.dir, "backlight", BACKLIGHT[0])
        os.makedirs(bl)
        for attr, value in (("max_brightness", BACKLIGHT[1]), ("brightness", BACKLIGHT[2]),
                            ("actual_brightness", BACKLIGHT[2]), ("bl_power", 0)):
            with open(os.path.join(bl, attr), "w") as f:
                f.write("%d\n" % value)
        cls.bl_hw = bl
        cls.bus = rig.Bus()
        conf = "\n".join([
            "[Daemon]", "Routed=yes",
            "[Input]", "Devices=%s %s" % (cls.kbd_hw, cls.i8042),
            "[Leds]", "Devices=" + cls.led,
            "[Backlight]", "Devices=%s/backlight/*" % cls.dir,
            "[Persona work]", "Active=yes",
            "[Persona personal]",
            "[Persona spare]",
            "[Persona idle]",  # never attached
            "",
        ])
        cls.daemon = rig.Daemon(conf)

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.boxes = []
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for b in self.boxes:
            b.stop()
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        super().tearDown()

    # --- helpers ---

    def box(self, userns=False):
        b = rig.Container(userns=userns)
        self.boxes.append(b)
        return b

    def attach(self, persona, box):
        rig.devnsctl("attach", persona, "--pid", str(box.pid))

    def view(self, persona, kind, attr="brightness"):
        name = self.led_name if kind == "leds" else BACKLIGHT[0]
        return os.path.join(VIEWS, persona, "sys", "class", kind, name, attr)

    def hw_bl(self, attr="brightness"):
        return read_file(os.path.join(self.bl_hw, attr))

    def hw_led(self):
        return read_file(os.path.join(self.led, "brightness"))

    def node(self, persona, hw=None):
        return rig.persona_node(persona, hw or self.kbd_hw)

    def tap(self, code):
        rig.press(self.kbd, code, 1)
        rig.press(self.kbd, code, 0)

    def start(self, proc):
        self.procs.append(proc)
        return rig.Output(proc)

    def assert_owned(self, path, uid, gid, mode):
        st = os.stat(path)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (uid, gid, mode), path)

    # --- the views: who may write ---

    def test_views_have_sysfs_modes_and_owners(self):
        """Unattached, a persona's view belongs to host root, with sysfs' modes."""
        for kind, attrs in (("leds", {"brightness": 0o644, "max_brightness": 0o444, "trigger": 0o644}),
                            ("backlight", {"brightness": 0o644, "max_brightness": 0o444,
                                           "actual_brightness": 0o444, "bl_power": 0o644})):
            for attr, mode in attrs.items():
                self.assert_owned(self.view("idle", kind, attr), 0, 0, mode)
            self.assert_owned(os.path.dirname(self.view("idle", kind)), 0, 0, 0o755)
        self.assert_owned(os.path.join(VIEWS, "idle"), 0, 0, 0o755)

    def test_host_nobody_cannot_write_views(self):
        put(self.view("work", "backlight"), "500")
        put(self.view("work", "leds"), "1")
        self.assertEqual((self.hw_bl(), self.hw_led()), ("500\n", "1\n"))
        for kind, attr, text in (("backlight", "brightness", "0"), ("backlight", "bl_power", "4"),
                                 ("leds", "brightness", "0"), ("leds", "trigger", "none")):
            for persona in ("work", "personal"):
                out = python("-c", WRITE, self.view(persona, kind, attr), text, prefix=NOBODY).stdout.strip()
                self.assertEqual(out, "errno %d" % errno.EACCES, "nobody wrote %s/%s of %s" % (kind, attr, persona))
        self.assertEqual((self.hw_bl(), self.hw_bl("bl_power"), self.hw_led()), ("500\n", "0\n", "1\n"))
        self.assertEqual(read_file(self.view("work", "backlight")), "500\n")
        # Host users other than root get nothing, not even a read.
        out = python("-c", "print(open(%r).read().strip())" % self.view("work", "backlight"), prefix=NOBODY)
        self.assertIn("PermissionError", out.stderr)
        # Root on the host still can.
        put(self.view("work", "backlight"), "400")
        self.assertEqual(self.hw_bl(), "400\n")

    def test_container_app_uid_cannot_write_views_but_its_root_can(self):
        c = self.box(userns=True)
        self.attach("personal", c)
        rig.devnsctl("switch", "personal")
        bl, led = self.view("personal", "backlight"), self.view("personal", "leds")
        # The container's root (host uid 100000) owns its persona's view.
        st = os.stat(bl)
        self.assertEqual(st.st_uid, 100000)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        self.assertEqual(c.run("stat", "-c", "%u %a", bl).stdout.split(), ["0", "644"])

        self.assertEqual(python("-c", WRITE, bl, "300", container=c).stdout.strip(), "ok")
        self.assertEqual(python("-c", WRITE, led, "1", container=c).stdout.strip(), "ok")
        self.assertEqual((self.hw_bl(), self.hw_led()), ("300\n", "1\n"))
        app = ["setpriv", "--reuid=10050", "--regid=10050", "--clear-groups"]
        for path, text in ((bl, "0"), (led, "0"), (self.view("personal", "backlight", "bl_power"), "4")):
            out = python("-c", WRITE, path, text, prefix=app, container=c)
            self.assertEqual(out.stdout.strip(), "errno %d" % errno.EACCES, (path, out.stderr))
        self.assertEqual((self.hw_bl(), self.hw_bl("bl_power"), self.hw_led()), ("300\n", "0\n", "1\n"))
        # Another persona's view stays closed to the container, its root included.
        out = python("-c", WRITE, self.view("work", "backlight"), "1", container=c)
        self.assertEqual(out.stdout.strip(), "errno %d" % errno.EACCES)

    # --- the nodes on the host ---

    def test_host_nodes_belong_to_their_container(self):
        for persona in ("work", "personal", "spare", "idle"):
            self.assertEqual(stat.S_IMODE(os.stat(self.node(persona)).st_mode), 0o660, persona)
        st = os.stat(self.node("idle"))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))
        out = python(PROBE, self.node("idle"), "0", prefix=NOBODY).stdout.strip()
        self.assertEqual(out, "open errno %d" % errno.EACCES)

        c = self.box(userns=True)
        self.attach("personal", c)
        for hw in (self.kbd_hw, self.i8042):
            st = os.stat(self.node("personal", hw))
            self.assertEqual(st.st_uid, 100000, hw)
            self.assertTrue(100000 <= st.st_gid < 165536, st.st_gid)
            self.assertEqual(stat.S_IMODE(st.st_mode), 0o660)
        # Its root opens them through the user namespace; its apps do not.
        self.assertEqual(python(PROBE, self.node("personal"), "0", container=c).stdout.strip(), "open ok")
        app = ["setpriv", "--reuid=10050", "--regid=10050", "--clear-groups"]
        out = python(PROBE, self.node("personal"), "0", prefix=app, container=c).stdout.strip()
        self.assertEqual(out, "open errno %d" % errno.EACCES)

    def test_a_lease_on_a_pid_namespace_holds_nothing_up(self):
        """devnsd reads an opener's pid namespace, and walks up from it (NS_GET_PARENT) to the persona's.
        An open of a namespace's file waits while another process holds a write lease on it, until the
        lease is given up or breaks (fs.lease-break-time, 45 s, past devnsd's watchdog). A container's root
        (host uid 0) takes a lease on a pid namespace it made below its container's, and a process there
        opens the persona's node: devnsd does not wait, it refuses that open (EACCES) at once, and the
        same open passes once the lease is gone. On the container's own namespace, which devnsd holds
        open, no lease can be taken: the walk from a namespace one level below it never waits either."""
        box = self.box()
        self.attach("spare", box)
        p = box.run(sys.executable, "-c", NS_LEASE, self.node("spare"), check=False)
        lines = p.stdout.splitlines()
        print("\n".join(lines))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(lines[:2], ["lease container errno %d" % errno.EAGAIN, "lease nested ok"])
        self.assertEqual(len(lines), 4, lines)
        self.assertRegex(lines[2], r"^open errno %d after [0-4]\.\d s$" % errno.EACCES)
        self.assertRegex(lines[3], r"^again ok after")
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona spare's nodes")

    # --- re-attach revokes ---

    def test_reattach_revokes_the_old_containers_handles(self):
        old, new = self.box(), self.box()
        self.attach("work", old)
        routed = "/dev/devns/" + self.name
        view = self.view("work", "backlight")
        put(view, "600")
        hold = self.start(old.popen(sys.executable, "-c", HOLD, self.node("work"), view,
                                    self.node("work"), routed,
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True))
        self.assertTrue(hold.wait_for(r"ready"), hold.text)
        self.tap(e.KEY_A)
        self.assertTrue(hold.wait_for(r"ev 1 30 0"), "the old container did not read before:\n" + hold.text)

        self.attach("work", new)
        self.assertTrue(hold.wait_for(r"read errno %d" % errno.ENODEV, 10),
                        "the blocked reader was not revoked:\n" + hold.text)
        self.assertTrue(hold.wait_for(r"poll \d+", 10), "the poller was not woken:\n" + hold.text)
        revents = int(hold.text.split("poll ")[1].split()[0])
        self.assertEqual(revents & (0x8 | 0x10), 0x8 | 0x10, "poll reported %#x" % revents)  # POLLERR|POLLHUP
        self.assertTrue(hold.wait_for(r"view write errno"), hold.text)
        for what in ("other0", "other1", "ioctl", "write", "view read", "view write"):
            self.assertIn("%s errno %d" % (what, errno.ENODEV), hold.text, what)
        self.assertEqual(self.hw_bl(), "600\n")

        # New input goes to the new container alone; the old grab holds nothing back.
        res, events = self.probe(new, self.node("work"), lambda: self.tap(e.KEY_B))
        self.assertEqual(res, "open ok")
        self.assertIn((e.EV_KEY, e.KEY_B, 1), events)
        hold.proc.stdin.write("\n")
        hold.proc.stdin.flush()
        text = hold.finish()
        self.assertNotIn("ev 1 48", text, "the old container saw new input")
        again = text.split("again")[1]
        self.assertIn("other0 errno %d" % errno.ENODEV, again)
        self.assertIn("other1 errno %d" % errno.ENODEV, again)
        # The key the old container wrote into its node is not left held for the new one.
        fd = rig.open_node(self.node("work"))
        self.fds.append(fd)
        self.assertNotIn(e.KEY_C, rig.key_state(fd))
        # The old container can no longer reach the view either.
        out = python("-c", WRITE, view, "1", container=old).stdout.strip()
        self.assertEqual(out, "errno %d" % errno.EACCES)
        self.assertEqual(self.hw_bl(), "600\n")

    def probe(self, container, path, action, seconds=2.0):
        p = container.popen(sys.executable, PROBE, path, str(seconds), stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        first = p.stdout.readline().strip()
        if first == "open ok":
            time.sleep(0.3)
            action()
        out = p.communicate(timeout=60)[0]
        return first, [tuple(int(x) for x in line.split()[1:]) for line in out.splitlines() if line.startswith("ev ")]

    # --- limits ---

    def fill(self, path, count, uid, gid, container):
        """Opens path count times as uid (with group gid) inside the container; keeps them open."""
        prefix = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--groups=%d" % gid]
        proc = container.popen(*prefix, sys.executable, "-c", FILL, path, str(count),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.procs.append(proc)
        words = proc.stdout.readline().split()
        return int(words[1]), int(words[3])

    def test_one_uid_cannot_take_every_client_slot(self):
        c = self.box(userns=True)
        self.attach("spare", c)
        node = self.node("spare")
        self.assertEqual(os.stat(node).st_uid, 100000, "the node does not belong to the container")
        gid = os.stat(node).st_gid - 100000  # the node's group, as the container numbers it
        opened, err = self.fill(node, 200, 10050, gid, c)
        self.assertEqual((opened, err), (NODE_CLIENTS_PER_UID, errno.EMFILE))
        # Other apps and the container's root still get in.
        self.assertEqual(self.fill(node, 4, 10051, gid, c), (4, 0))
        self.assertEqual(self.fill(node, 1, 0, gid, c), (1, 0))
        # The routed node counts on the same persona's node: no way around through it.
        routed = "/dev/devns/" + self.name
        os.chmod(routed, 0o666)
        try:
            self.assertEqual(self.fill(routed, 4, 10050, gid, c), (0, errno.EMFILE))
            self.assertEqual(self.fill(routed, 1, 10052, gid, c), (1, 0))
        finally:
            os.chmod(routed, 0o600)

    def test_one_handle_cannot_park_unbounded_reads(self):
        """A container's program with 40 threads blocked in read() on one handle: devnsd keeps 16 of the
        reads waiting and answers the other 24 EBUSY at once, and the ones kept still get the persona's
        input once it is shown."""
        c = self.box(userns=True)
        self.attach("spare", c)
        p = c.popen(sys.executable, "-c", READERS, self.node("spare"), "40", stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        early = p.stdout.readline().split()
        self.assertEqual(early, ["early"] + ["E%d" % errno.EBUSY] * (40 - PENDING_READS_PER_HANDLE))
        self.assertTrue(rig.answers_within(1.0))
        rig.devnsctl("switch", "spare")
        try:
            self.tap(e.KEY_A)
            p.stdin.write("\n")
            p.stdin.flush()
            late = p.stdout.readline().split()
        finally:
            rig.devnsctl("switch", "work")
        self.assertEqual(late[0], "late")
        data = [a for a in late[1:] if a.startswith("D")]
        self.assertEqual(late[1:].count("E%d" % errno.EBUSY), 40 - PENDING_READS_PER_HANDLE, late)
        self.assertTrue(1 <= len(data) <= 2, late)
        self.assertEqual(len(late) - 1, 40 - PENDING_READS_PER_HANDLE + len(data), late)
        for a in data:
            self.assertEqual(int(a[1:]) % 24, 0, a)

    def test_one_uid_cannot_take_every_view_file(self):
        c = self.box(userns=True)
        self.attach("spare", c)
        path = self.view("spare", "backlight")
        put(path, "321")
        self.assertEqual(self.fill(path, 1000, 10050, 10050, c), (VIEW_FILES_PER_UID, errno.EMFILE))
        self.assertEqual(self.fill(path, 4, 10051, 10051, c), (4, 0))
        # The file still opens for others, and reads what was written before the flood.
        self.assertEqual(read_file(path), "321\n")
        out = python("-c", "print(open(%r).read().strip())" % path, container=c)
        self.assertEqual(out.stdout.strip(), "321", out.stderr)

    # --- routed handles of removed personas ---

    def test_routed_handles_survive_their_personas_removal(self):
        """A routed handle whose persona went away, then another removal: devnsd must not trip over it."""
        rig.devnsctl("create", "gone1")
        rig.devnsctl("create", "gone2")
        c = self.box()
        self.attach("gone1", c)
        hold = self.start(c.popen(sys.executable, "-c", FILL, "/dev/devns/" + self.name, "1",
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        self.assertTrue(hold.wait_for(r"opened 1 errno 0"), hold.text)
        rig.devnsctl("remove", "gone1")
        rig.devnsctl("remove", "gone2")
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
        self.assertRegex(rig.devnsctl("list").stdout, r"work")


# Opens argv[1] (a routed node) up to argv[2] times, 16 handles a uid from uid
# 1000 on (the persona node's limit per uid), until a fresh uid is refused
# too; then parks argv[3] blocking reads on each handle, each in a thread of
# its own. Prints "handles H parked P busy B" once the refused reads have come
# back (P reads still wait in devnsd, B got EBUSY), and keeps everything until
# stdin closes.
FLOOD_ROUTED = r"""
import errno, os, sys, threading, time, _thread
threading.stack_size(64 * 1024)
path, max_handles, per_handle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fds, uid, err = [], 1000, 0
while len(fds) < max_handles:
    got = 0
    os.seteuid(uid)
    while len(fds) < max_handles and got < 16:
        try:
            fds.append(os.open(path, os.O_RDONLY))
            got += 1
        except OSError as ex:
            err = ex.errno
            break
    os.seteuid(0)
    if got == 0:
        break
    uid += 1
lock = threading.Lock()
answers = {"busy": 0, "other": 0}

def reader(fd):
    try:
        os.read(fd, 24 * 64)
        key = "other"
    except OSError as ex:
        key = "busy" if ex.errno == errno.EBUSY else "other"
    with lock:
        answers[key] += 1

started = 0
for fd in fds:
    for _ in range(per_handle):
        _thread.start_new_thread(reader, (fd,))
        started += 1
last = None
while True:
    time.sleep(2)
    with lock:
        now = dict(answers)
    if now == last:
        break
    last = now
print("handles %d parked %d busy %d" % (len(fds), started - now["busy"] - now["other"], now["busy"]), flush=True)
sys.stdin.read()
os._exit(0)
"""

# Opens argv[1] and prints "open ok" or "open errno N", then each event it reads as "ev TYPE CODE VALUE".
READ_ROUTED = r"""
import os, struct, sys
EV = struct.Struct("llHHi")
try:
    fd = os.open(sys.argv[1], os.O_RDONLY)
except OSError as err:
    print("open errno %d" % err.errno, flush=True)
    sys.exit(0)
print("open ok", flush=True)
while True:
    try:
        data = os.read(fd, EV.size * 64)
    except OSError as err:
        print("read errno %d" % err.errno, flush=True)
        break
    for off in range(0, len(data), EV.size):
        print("ev %d %d %d" % EV.unpack_from(data, off)[2:], flush=True)
"""

# A routed node is split among every persona and the host (devnsd(8)).
ROUTED_SHARES = 64 + 1
ROUTED_HANDLES_PER_PERSONA = 1024 // ROUTED_SHARES
ROUTED_REQUESTS_PER_PERSONA = (4096 - 1024) // ROUTED_SHARES


class RoutedShareAttacks(rig.PersonaTestCase):
    """Two hostile personas' containers flood a routed node with handles and parked reads; a third
    persona's container still opens it and reads its input."""

    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.routed = "/dev/devns/" + os.path.basename(cls.kbd_hw)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw], personas=("work", "hostile1", "hostile2", "victim"),
                                             active="work", daemon={"Routed": "yes"}))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def setUp(self):
        super().setUp()
        self.boxes, self.procs = [], []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for b in self.boxes:
            b.stop()
        os.chmod(self.routed, 0o600)
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        super().tearDown()

    def box(self, persona):
        b = rig.Container()
        self.boxes.append(b)
        rig.devnsctl("attach", persona, "--pid", str(b.pid))
        return b

    def start(self, container, script, *args):
        p = container.popen(sys.executable, "-c", script, *args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
        self.procs.append(p)
        return rig.Output(p)

    def test_two_personas_flooding_a_routed_node_leave_a_third_its_input(self):
        # App uids in the containers open the routed node (it is root's alone otherwise).
        os.chmod(self.routed, 0o666)
        floods = []
        for persona in ("hostile1", "hostile2"):
            out = self.start(self.box(persona), FLOOD_ROUTED, self.routed, "100", "16")
            self.assertTrue(out.wait_for(r"handles \d+ parked \d+ busy \d+", timeout=600), out.text)
            floods.append(out.text.split())
        print("floods:", floods, file=sys.stderr)
        victim = self.box("victim")
        rig.devnsctl("switch", "victim")
        reader = self.start(victim, READ_ROUTED, self.routed)
        self.assertTrue(reader.wait_for(r"open (ok|errno \d+)"), reader.text)
        self.assertIn("open ok", reader.text, "the victim's open of the routed node was refused")
        self.tap_and_mark(reader)
        # Each flooding persona got its share, no more.
        for words in floods:
            self.assertLessEqual(int(words[1]), ROUTED_HANDLES_PER_PERSONA, words)
            self.assertLessEqual(int(words[3]), ROUTED_REQUESTS_PER_PERSONA, words)

    def tap_and_mark(self, reader):
        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        marker = rig.send_marker(self.kbd)
        self.assertTrue(reader.wait_for(r"ev %d %d %d\n" % marker, timeout=60), reader.text)
        self.assertIn("ev %d %d 1\n" % (e.EV_KEY, e.KEY_A), reader.text)



def keys_in(events):
    """(code, value) of each key event among (type, code, value) events."""
    return [(c, v) for t, c, v in events if t == e.EV_KEY]


def read_now(fd):
    """Every event fd holds now, without waiting, as (type, code, value)."""
    events = []
    while True:
        try:
            data = os.read(fd, rig.EVENT.size * 64)
        except BlockingIOError:
            return events
        if not data:
            return events
        events += [rig.EVENT.unpack_from(data, off)[2:] for off in range(0, len(data), rig.EVENT.size)]


class FocusRig(rig.PersonaTestCase):
    """Personas work (active), thief (may come forward, attached to a container that asks through its
    endpoint) and home, with a keyboard; the host reads each persona's node."""

    conf_extra = {}

    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for(
            [cls.kbd_hw], personas=("work", "thief", "home"), active="work", daemon=cls.conf_extra or None,
            persona_keys={"thief": {"AllowRequestActive": "yes"}}))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def setUp(self):
        super().setUp()
        # A /dev and /run of its own: devnsctl request-active takes the persona's endpoint there.
        self.thief = rig.Container(private_dev=True)
        self.addCleanup(self.thief.stop)
        rig.devnsctl("attach", "thief", "--pid", str(self.thief.pid))
        self.fd = {p: rig.open_node(rig.persona_node(p, self.kbd_hw)) for p in ("work", "thief", "home")}
        self.fds += list(self.fd.values())

    def active(self):
        return rig.devnsctl("status").stdout.splitlines()[0].split(": ")[1]

    def request_active(self):
        return self.thief.run(rig.DEVNSCTL, "request-active", check=False)

    def tap(self, code):
        rig.press(self.kbd, code, 1)
        rig.press(self.kbd, code, 0)


class FocusSteal(FocusRig):
    """A background persona allowed to come forward (RequestActive) takes the screen while the user
    holds a key in another persona and types on: what is typed before every key is up never reaches it."""

    def test_keys_typed_before_every_key_is_up_never_reach_the_thief(self):
        rig.press(self.kbd, e.KEY_A, 1)
        self.assertIn((e.KEY_A, 1), keys_in(rig.read_to(self.fd["work"], rig.send_marker(self.kbd))))
        p = self.request_active()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(self.active(), "thief")
        # The rest of a password, typed while A is still down.
        self.tap(e.KEY_B)
        rig.press(self.kbd, e.KEY_A, 0)
        # Every key is up: what comes now is the thief's.
        self.tap(e.KEY_C)
        got = keys_in(rig.read_to(self.fd["thief"], rig.send_marker(self.kbd)))
        self.assertNotIn((e.KEY_B, 1), got, "a key typed before every key was up reached the new persona")
        self.assertNotIn((e.KEY_A, 0), got)
        self.assertEqual(got, [(e.KEY_C, 1), (e.KEY_C, 0)])
        # The persona that lost the screen let go of A, and got nothing typed after.
        self.assertNotIn((e.KEY_B, 1), keys_in(read_now(self.fd["work"])))
        self.assertTrue(rig.answers_within(1.0))


class SecureAttention(FocusRig):
    """The secure attention chord (SecureAttentionKey=) is seen by no persona, always brings its
    persona forward, and personas' requests wait until the user switches."""

    conf_extra = {"SecureAttentionKey": "KEY_LEFTMETA+KEY_ESC:home"}

    def sak(self):
        rig.press(self.kbd, e.KEY_LEFTMETA, 1)
        rig.press(self.kbd, e.KEY_ESC, 1)
        rig.press(self.kbd, e.KEY_ESC, 0)
        rig.press(self.kbd, e.KEY_LEFTMETA, 0)

    def test_chord_is_never_seen_and_lands_on_its_persona(self):
        p = self.request_active()
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(self.active(), "thief")
        self.sak()
        self.tap(e.KEY_C)
        # Typed right after the chord, before the switch could have run: home's all the same.
        got = keys_in(rig.read_to(self.fd["home"], rig.send_marker(self.kbd)))
        self.assertEqual(self.active(), "home")
        self.assertEqual(got, [(e.KEY_C, 1), (e.KEY_C, 0)], "the chord reached the persona")
        for persona in ("thief", "work"):
            seen = [c for c, _ in keys_in(read_now(self.fd[persona]))]
            self.assertNotIn(e.KEY_ESC, seen, persona)
            self.assertNotIn(e.KEY_LEFTMETA, seen, persona)
        # The thief asks again: it stays behind until the user switches.
        self.request_active()
        self.assertEqual(self.active(), "home")
        self.assertRegex(self.daemon.output(), r"persona thief asks to come forward: refused: the secure attention")
        rig.devnsctl("switch", "work")
        p = self.request_active()
        self.assertEqual(self.active(), "thief", p.stdout + p.stderr)


if __name__ == "__main__":
    rig.main()
