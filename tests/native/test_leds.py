#!/usr/bin/python3
"""LED and backlight views over FUSE, natively: the built devnsd with a
private system bus, a tree of plain files standing in for sysfs, and the
persona views read and written the way a container would."""

import errno
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vm", "guest"))
import devnsrig as rig  # noqa: E402

PERSONAS = ("work", "personal", "games")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
# Files one uid may hold open in one persona's view (devnsd(8)).
VIEW_FILES_PER_UID = 64

# Run as another user or in a container: tries what argv names and prints one line per step.
TRY = r"""
import os, sys
path, what = sys.argv[1], sys.argv[2:]
def step(name, call):
    try:
        call()
        print(name, "ok", flush=True)
    except OSError as err:
        print(name, "errno", err.errno, flush=True)
fds = []
for w in what:
    if w == "write":
        step("write", lambda: os.write(os.open(path, os.O_WRONLY | os.O_TRUNC), b"7"))
    elif w == "read":
        step("read", lambda: os.read(os.open(path, os.O_RDONLY), 64))
    elif w == "fill":
        try:
            while len(fds) < 1000:
                fds.append(os.open(path, os.O_RDONLY))
            print("opened", len(fds), "errno 0", flush=True)
        except OSError as err:
            print("opened", len(fds), "errno", err.errno, flush=True)
    elif w == "hold":
        fd = os.open(path, os.O_RDWR)
        print("holding", flush=True)
        sys.stdin.readline()
        step("held read", lambda: os.pread(fd, 64, 0))
        step("held write", lambda: os.write(fd, b"9"))
    elif w == "wait":
        sys.stdin.readline()
"""

# name: (max_brightness, brightness, trigger list)
LEDS = {
    "platform::notification": (255, 0, "[none] timer heartbeat"),
    "white:status": (100, 7, "none [timer] heartbeat"),
    "test::stress": (100000, 0, "[none]"),
    "red:model": (100, 3, "[none]"),
}
BACKLIGHTS = {"panel": (1000, 500)}


def make_tree(root):
    for name, (mx, value, triggers) in LEDS.items():
        d = os.path.join(root, "leds", name)
        os.makedirs(d)
        write_file(os.path.join(d, "max_brightness"), "%d\n" % mx)
        write_file(os.path.join(d, "brightness"), "%d\n" % value)
        write_file(os.path.join(d, "trigger"), triggers + "\n")
    for name, (mx, value) in BACKLIGHTS.items():
        d = os.path.join(root, "backlight", name)
        os.makedirs(d)
        write_file(os.path.join(d, "max_brightness"), "%d\n" % mx)
        write_file(os.path.join(d, "brightness"), "%d\n" % value)
        write_file(os.path.join(d, "actual_brightness"), "%d\n" % value)
        write_file(os.path.join(d, "bl_power"), "0\n")


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def read_file(path):
    with open(path) as f:
        return f.read()


class Views(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access("/dev/fuse", os.R_OK | os.W_OK) or os.geteuid() != 0:
            raise unittest.SkipTest("needs root and /dev/fuse")
        cls.dir = tempfile.mkdtemp(prefix="devns-leds-")
        os.chmod(cls.dir, 0o755)  # other users reach the views below it
        cls.hw = os.path.join(cls.dir, "sys")
        cls.views = os.path.join(cls.dir, "run")
        make_tree(cls.hw)
        conf = "\n".join([
            "[Leds]",
            "Devices=%s/leds/*" % cls.hw,
            "Shared=platform::notification",
            "[Backlight]",
            "Devices=%s/backlight/*" % cls.hw,
            "[Persona work]",
            "Active=yes",
            "[Persona personal]",
            "[Persona games]",
            "",
        ])
        cls.bus = rig.Bus()
        os.environ["DEVNS_VIEW_DIR"] = cls.views
        # Device numbers and what a restart takes back stay out of this machine's /run.
        os.environ["DEVNS_STATE_DIR"] = os.path.join(cls.dir, "state")
        try:
            cls.daemon = rig.Daemon(conf)
        except Exception:
            cls.bus.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.daemon.stop()
        out = cls.daemon.output()
        cls.bus.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)
        if rc != 0:
            print(out, file=sys.stderr)

    def setUp(self):
        self.assertTrue(self.daemon.alive(), self.daemon.output())
        self.switch("work")

    # --- helpers ---

    def view(self, persona, kind, name, attr):
        return os.path.join(self.views, persona, "sys", "class", kind, name, attr)

    def led(self, persona, name, attr="brightness"):
        return self.view(persona, "leds", name, attr)

    def bl(self, persona, attr="brightness"):
        return self.view(persona, "backlight", "panel", attr)

    def hw_led(self, name, attr="brightness"):
        return read_file(os.path.join(self.hw, "leds", name, attr))

    def hw_bl(self, attr="brightness"):
        return read_file(os.path.join(self.hw, "backlight", "panel", attr))

    def put(self, path, text):
        """One write() call, as echo does."""
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            return os.write(fd, text.encode())
        finally:
            os.close(fd)

    def refused(self, path, text, err=errno.EINVAL):
        with self.assertRaises(OSError) as cm:
            self.put(path, text)
        self.assertEqual(cm.exception.errno, err, "%r -> %s" % (text, path))

    def switch(self, persona):
        rig.devnsctl("switch", persona)

    def try_as(self, prefix, path, *what, container=None, **kw):
        cmd = list(prefix) + [sys.executable, "-c", TRY, path] + list(what)
        if container:
            return container.run(*cmd, check=False, **kw).stdout
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw).stdout

    def container(self):
        c = rig.Container()
        self.addCleanup(c.stop)
        return c

    # --- tests ---

    def test_layout(self):
        self.assertEqual(sorted(os.listdir(self.views)), sorted(PERSONAS))
        for p in PERSONAS:
            classes = os.path.join(self.views, p, "sys", "class")
            self.assertEqual(sorted(os.listdir(classes)), ["backlight", "leds"])
            self.assertEqual(sorted(os.listdir(os.path.join(classes, "leds"))), sorted(LEDS))
            self.assertEqual(sorted(os.listdir(os.path.join(classes, "leds", "white:status"))),
                             ["brightness", "max_brightness", "trigger"])
            self.assertEqual(sorted(os.listdir(os.path.join(classes, "backlight", "panel"))),
                             ["actual_brightness", "bl_power", "brightness", "max_brightness"])
        st = os.stat(self.led("work", "white:status", "max_brightness"))
        self.assertEqual(st.st_mode & 0o777, 0o444)
        self.assertEqual(os.stat(self.led("work", "white:status")).st_mode & 0o777, 0o644)

    def test_owners_and_modes(self):
        """Unattached, a persona's view belongs to root, with the modes sysfs gives."""
        for path, mode in ((self.led("games", "white:status"), 0o644),
                           (self.led("games", "white:status", "trigger"), 0o644),
                           (self.led("games", "white:status", "max_brightness"), 0o444),
                           (self.bl("games", "actual_brightness"), 0o444),
                           (self.bl("games", "bl_power"), 0o644),
                           (os.path.dirname(self.bl("games")), 0o755),
                           (os.path.join(self.views, "games"), 0o755)):
            st = os.stat(path)
            self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0, mode), path)

    def test_nobody_on_the_host_cannot_write(self):
        self.put(self.bl("work"), "321")
        self.put(self.led("work", "white:status"), "9")
        for path in (self.bl("work"), self.bl("work", "bl_power"), self.led("work", "white:status"),
                     self.led("work", "white:status", "trigger"), self.bl("personal")):
            # Host users other than root get nothing at all, not even a read.
            self.assertEqual(self.try_as(NOBODY, path, "write", "read"),
                             "write errno %d\nread errno %d\n" % (errno.EACCES, errno.EACCES), path)
        self.assertEqual(self.hw_bl(), "321\n")
        self.assertEqual(self.hw_bl("bl_power"), "0\n")
        self.assertEqual(self.hw_led("white:status"), "9\n")
        # Root can.
        self.put(self.bl("work"), "322")
        self.assertEqual(self.hw_bl(), "322\n")

    def test_app_uid_in_a_container_cannot_write(self):
        c = self.container()
        rig.devnsctl("attach", "personal", "--pid", str(c.pid))
        app = ["setpriv", "--reuid=10050", "--regid=10050", "--clear-groups"]
        before = read_file(self.bl("personal"))
        self.assertEqual(self.try_as(app, self.bl("personal"), "write", container=c), "write errno %d\n" % errno.EACCES)
        self.assertEqual(read_file(self.bl("personal")), before)
        # The container's root (host root here: no user namespace) can.
        self.assertEqual(self.try_as([], self.bl("personal"), "write", container=c), "write ok\n")
        self.assertEqual(read_file(self.bl("personal")), "7\n")
        # Another persona's view stays closed to it.
        self.assertEqual(self.try_as([], self.bl("work"), "write", container=c), "write errno %d\n" % errno.EACCES)

    def test_root_hands_an_attribute_over_until_rebind(self):
        """As in sysfs, the container's root may chown an attribute to a service (Android's init does);
        attaching the persona again gives it back."""
        path = self.bl("games")
        c = self.container()
        rig.devnsctl("attach", "games", "--pid", str(c.pid))
        service = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
        other = ["setpriv", "--reuid=10050", "--regid=10050", "--clear-groups"]
        self.assertEqual(self.try_as(service, path, "write", container=c), "write errno %d\n" % errno.EACCES)
        c.run("chown", "1000:1000", path)
        c.run("chmod", "0600", path)
        st = os.stat(path)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (1000, 1000, 0o600))
        self.assertEqual(self.try_as(service, path, "write", "read", container=c), "write ok\nread ok\n")
        self.assertEqual(read_file(path), "7\n")
        self.assertEqual(self.try_as(other, path, "read", container=c), "read errno %d\n" % errno.EACCES)
        # A service cannot give it away further.
        p = c.run(*service, "chown", "10050", path, check=False)
        self.assertNotEqual(p.returncode, 0)
        again = self.container()
        rig.devnsctl("attach", "games", "--pid", str(again.pid))
        st = os.stat(path)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0, 0o644))
        self.assertEqual(self.try_as(service, path, "write", container=again), "write errno %d\n" % errno.EACCES)

    def test_reattach_revokes_open_files(self):
        old, new = self.container(), self.container()
        rig.devnsctl("attach", "personal", "--pid", str(old.pid))
        self.put(self.bl("personal"), "444")
        hold = old.popen(sys.executable, "-c", TRY, self.bl("personal"), "hold",
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(hold.kill)
        self.assertEqual(hold.stdout.readline(), "holding\n")
        rig.devnsctl("attach", "personal", "--pid", str(new.pid))
        out = hold.communicate("\n", timeout=30)[0]
        self.assertEqual(out, "held read errno %d\nheld write errno %d\n" % (errno.ENODEV, errno.ENODEV))
        self.assertEqual(read_file(self.bl("personal")), "444\n")
        # The new container works; the old one is refused at the door.
        self.assertEqual(self.try_as([], self.bl("personal"), "read", container=new), "read ok\n")
        self.assertEqual(self.try_as([], self.bl("personal"), "read", container=old), "read errno %d\n" % errno.EACCES)

    def test_one_uid_cannot_hold_every_file(self):
        c = self.container()
        rig.devnsctl("attach", "personal", "--pid", str(c.pid))
        path = self.bl("personal", "max_brightness")
        app = ["setpriv", "--reuid=10050", "--regid=10050", "--clear-groups"]
        hog = c.popen(*app, sys.executable, "-c", TRY, path, "fill", "wait",
                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(hog.kill)
        self.assertEqual(hog.stdout.readline(), "opened %d errno %d\n" % (VIEW_FILES_PER_UID, errno.EMFILE))
        other = ["setpriv", "--reuid=10051", "--regid=10051", "--clear-groups"]
        self.assertEqual(self.try_as(other, path, "read", container=c), "read ok\n")
        self.assertEqual(read_file(path), "1000\n")
        hog.communicate("\n", timeout=30)
        self.assertEqual(self.try_as(app, path, "read", container=c), "read ok\n")

    def test_text_format(self):
        p = "games"
        self.assertEqual(read_file(self.led(p, "white:status", "max_brightness")), "100\n")
        self.assertEqual(read_file(self.led(p, "red:model", "max_brightness")), "100\n")
        self.assertEqual(read_file(self.led(p, "white:status", "trigger")), "none [timer] heartbeat\n")
        self.assertEqual(read_file(self.led(p, "platform::notification", "trigger")), "[none] timer heartbeat\n")
        self.assertEqual(read_file(self.led(p, "test::stress", "trigger")), "[none]\n")
        self.assertEqual(read_file(self.bl(p, "max_brightness")), "1000\n")
        self.assertEqual(read_file(self.bl(p, "bl_power")), "0\n")

    def test_read_only_attributes(self):
        for path in (self.led("work", "white:status", "max_brightness"), self.bl("work", "max_brightness"),
                     self.bl("work", "actual_brightness")):
            with self.assertRaises(PermissionError):
                os.open(path, os.O_WRONLY)
            with self.assertRaises(PermissionError):
                os.open(path, os.O_RDWR)

    def test_refused_values(self):
        before_hw, before_view = self.hw_bl(), read_file(self.bl("work"))
        for text in ("1001", "1001\n", "-1", "abc", " 5", "5 ", "5\n\n", "", "99999999999999999999", "1.5"):
            if text:
                self.refused(self.bl("work"), text)
        self.assertEqual(self.hw_bl(), before_hw)
        self.assertEqual(read_file(self.bl("work")), before_view)
        self.refused(self.led("work", "white:status"), "101")
        self.refused(self.led("work", "white:status"), "0x10")  # LEDs take decimal only
        self.refused(self.led("work", "white:status", "trigger"), "bogus")
        self.refused(self.led("work", "white:status", "trigger"), "timer\n\n")
        self.refused(self.bl("work", "bl_power"), "5")
        self.refused(self.led("personal", "white:status"), "101")

    def test_accepted_forms(self):
        self.put(self.bl("games"), "0x10")  # backlights take C prefixes, as kstrtoul(.., 0)
        self.assertEqual(read_file(self.bl("games")), "16\n")
        self.put(self.bl("games"), "+20\n")
        self.assertEqual(read_file(self.bl("games")), "20\n")
        self.put(self.bl("games"), "1000")
        self.assertEqual(read_file(self.bl("games")), "1000\n")

    def test_exclusive_background_kept_and_applied(self):
        self.put(self.bl("work"), "300\n")
        self.assertEqual(self.hw_bl(), "300\n")
        self.put(self.bl("personal"), "800\n")
        self.put(self.bl("personal", "bl_power"), "4\n")
        self.assertEqual(self.hw_bl(), "300\n", "a background persona reached the hardware")
        self.assertEqual(self.hw_bl("bl_power"), "0\n")
        self.assertEqual(read_file(self.bl("personal")), "800\n")
        self.assertEqual(read_file(self.bl("work")), "300\n")
        # actual_brightness: the hardware's for the active persona, its own for the others
        write_file(os.path.join(self.hw, "backlight", "panel", "actual_brightness"), "299\n")
        self.assertEqual(read_file(self.bl("work", "actual_brightness")), "299\n")
        self.assertEqual(read_file(self.bl("personal", "actual_brightness")), "800\n")

        self.switch("personal")
        self.assertEqual(self.hw_bl(), "800\n")
        self.assertEqual(self.hw_bl("bl_power"), "4\n")
        self.put(self.bl("work"), "301\n")
        self.assertEqual(self.hw_bl(), "800\n")
        self.switch("work")
        self.assertEqual(self.hw_bl(), "301\n")
        self.assertEqual(self.hw_bl("bl_power"), "0\n")
        self.assertEqual(read_file(self.bl("personal")), "800\n")
        self.assertEqual(read_file(self.bl("personal", "bl_power")), "4\n")

    def test_trigger(self):
        name = "white:status"
        theirs = read_file(self.led("personal", name))
        self.put(self.led("work", name, "trigger"), "heartbeat\n")
        self.assertEqual(self.hw_led(name, "trigger"), "heartbeat\n")
        self.assertEqual(read_file(self.led("work", name, "trigger")), "none timer [heartbeat]\n")
        self.assertEqual(read_file(self.led("personal", name, "trigger")), "none [timer] heartbeat\n")
        # brightness 0 turns the trigger off, as in the kernel
        self.put(self.led("work", name), "0")
        self.assertEqual(read_file(self.led("work", name, "trigger")), "[none] timer heartbeat\n")
        self.assertEqual(self.hw_led(name, "trigger"), "none\n")
        self.put(self.led("work", name), "42")
        self.assertEqual(self.hw_led(name), "42\n")
        self.switch("personal")
        self.assertEqual(self.hw_led(name, "trigger"), "timer\n")
        self.assertEqual(self.hw_led(name), theirs)
        self.switch("work")
        self.assertEqual(self.hw_led(name, "trigger"), "none\n")
        self.assertEqual(self.hw_led(name), "42\n")

    def test_shared_shows_largest(self):
        name = "platform::notification"
        for p in PERSONAS:
            self.put(self.led(p, name), "0")
        self.assertEqual(self.hw_led(name), "0\n")
        self.put(self.led("personal", name), "200")  # a background persona lights it
        self.assertEqual(self.hw_led(name), "200\n")
        self.put(self.led("work", name), "10")
        self.put(self.led("games", name), "50")
        self.assertEqual(self.hw_led(name), "200\n")
        self.put(self.led("personal", name), "0")
        self.assertEqual(self.hw_led(name), "50\n")
        for p, want in (("work", "10\n"), ("personal", "0\n"), ("games", "50\n")):
            self.assertEqual(read_file(self.led(p, name)), want, p)
        self.switch("games")
        self.assertEqual(self.hw_led(name), "50\n")
        self.put(self.led("games", name), "0")
        self.assertEqual(self.hw_led(name), "10\n")
        self.put(self.led("work", name), "0")
        self.assertEqual(self.hw_led(name), "0\n")

    def test_status_shows_lights(self):
        self.put(self.bl("games"), "123")
        out = rig.devnsctl("status").stdout
        self.assertIn("Lights", out)
        line = [l for l in out.splitlines() if l.split()[:3] == ["games", "backlight", "panel"]]
        self.assertEqual(len(line), 1, out)
        self.assertIn("123/1000", line[0])
        shared = [l for l in out.splitlines() if "platform::notification" in l]
        self.assertEqual(len(shared), len(PERSONAS))
        self.assertTrue(all("shared" in l for l in shared))

    def test_model_random_writes_and_switches(self):
        """Every step checked against a model: what each persona reads and what the hardware shows."""
        rnd = random.Random(4)
        name = "red:model"
        model = {p: int(read_file(self.led(p, name))) for p in PERSONAS}
        active = "work"
        for step in range(300):
            if rnd.random() < 0.2:
                active = rnd.choice(PERSONAS)
                self.switch(active)
            else:
                p, v = rnd.choice(PERSONAS), rnd.randrange(1, 101)
                self.put(self.led(p, name), "%d\n" % v)
                model[p] = v
            self.assertEqual(self.hw_led(name), "%d\n" % model[active], "step %d" % step)
        for p in PERSONAS:
            self.assertEqual(read_file(self.led(p, name)), "%d\n" % model[p])

    def test_concurrent_writes_during_switches(self):
        """Writers in every persona while another thread switches: the hardware sees one persona at a time."""
        name = "test::stress"
        hwdir = os.path.join(self.hw, "leds", name)
        # A FIFO records every value devnsd writes to the hardware, in order.
        os.unlink(os.path.join(hwdir, "brightness"))
        os.mkfifo(os.path.join(hwdir, "brightness"))
        fifo = os.open(os.path.join(hwdir, "brightness"), os.O_RDWR)
        record = []
        stop = threading.Event()

        def recorder():
            buf = b""
            while True:
                data = os.read(fifo, 4096)
                if data == b"END\n" or data.endswith(b"END\n"):
                    buf += data[:-4]
                    break
                buf += data
            record.extend(int(x) for x in buf.split())

        base = {"work": 10000, "personal": 20000, "games": 30000}
        last = {}
        count = 400
        # Every persona's state starts as a value of its own, so that a switch to one that has not
        # written yet shows a value that names its owner (a leftover 0 would name nobody).
        for p in PERSONAS:
            self.put(self.led(p, name), "%d\n" % base[p])

        def writer(p):
            for i in range(1, count + 1):
                self.put(self.led(p, name), "%d\n" % (base[p] + i))
            last[p] = base[p] + count

        switches = []

        def switcher():
            order = ["personal", "games", "work"]
            i = 0
            while not stop.is_set():
                self.switch(order[i % 3])
                switches.append(order[i % 3])
                i += 1

        rec = threading.Thread(target=recorder)
        rec.start()
        sw = threading.Thread(target=switcher)
        sw.start()
        writers = [threading.Thread(target=writer, args=(p,)) for p in PERSONAS]
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        sw.join()
        active = switches[-1] if switches else "work"
        os.write(fifo, b"END\n")
        rec.join(30)
        os.close(fifo)
        os.unlink(os.path.join(hwdir, "brightness"))
        write_file(os.path.join(hwdir, "brightness"), "0\n")

        # Nothing lost: every persona reads its last write, and the hardware shows the active one's.
        for p in PERSONAS:
            self.assertEqual(read_file(self.led(p, name)), "%d\n" % last[p], p)
        self.assertTrue(record, "no hardware writes recorded")
        self.assertEqual(record[-1] // 10000, base[active] // 10000, "hardware does not show %s" % active)
        # One persona at a time: the owner of the hardware value changes only at a switch,
        # and each persona's values reach the hardware in the order it wrote them.
        owners = [v // 10000 for v in record]
        changes = sum(1 for a, b in zip(owners, owners[1:]) if a != b)
        self.assertLessEqual(changes, len(switches), "hardware changed hands %d times in %d switches" %
                             (changes, len(switches)))
        for p in PERSONAS:
            mine = [v for v in record if v // 10000 == base[p] // 10000]
            self.assertEqual(mine, sorted(mine), p)
        print("%d switches, %d writes, %d hardware writes" % (len(switches), count * len(PERSONAS),
                                                            len(record)), file=sys.stderr)


if __name__ == "__main__":
    rig.main()
