#!/usr/bin/python3
"""Input hotplug on a real kernel: uinput devices made and destroyed while
devnsd runs (kernel uevents, no udevd in the guest), seen through the
persona nodes, an attached container's /dev/input and udev database, and
devnsctl."""

import errno
import os
import select
import signal
import stat
import subprocess
import threading
import time

from evdev import ecodes as e

import devnsrig as rig

PERSONAS = ("work", "personal")


wait_for = rig.poll


def is_chr(path):
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def persona_nodes():
    """Every persona's input nodes: {(persona, name)}."""
    found = set()
    for persona in PERSONAS:
        d = "/dev/devns/" + persona
        for name in os.listdir(d) if os.path.isdir(d) else []:
            if name.startswith("event"):
                found.add((persona, name))
    return found


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class BlockingReader(threading.Thread):
    """Reads a node with blocking reads until an error; keeps the events and the errno."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.events = []
        self.errno = None
        self.got = threading.Event()

    def run(self):
        while True:
            try:
                data = os.read(self.fd, rig.EVENT.size * 64)
            except OSError as err:
                self.errno = err.errno
                return
            for off in range(0, len(data), rig.EVENT.size):
                _, _, typ, code, value = rig.EVENT.unpack_from(data, off)
                self.events.append((typ, code, value))
            self.got.set()


class Hotplug(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for(["/dev/input/event*"], personas=PERSONAS, active="work"))
        # A container as runtimes make them: its own /dev, /run and network namespace.
        cls.container = rig.Container(private_dev=True, netns=True)
        rig.devnsctl("attach", "work", "--pid", str(cls.container.pid))
        cls.kbd = None
        # libinput's udev backend in the container, as a compositor runs it, from before any device comes.
        cls.libinput = cls.container.popen("libinput", "debug-events", stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
        cls.libinput_out = rig.Output(cls.libinput)
        assert cls.libinput_out.wait_for(r"DEVICE_ADDED"), cls.libinput_out.text

    @classmethod
    def tearDownClass(cls):
        if cls.kbd:
            cls.kbd.close()
        os.killpg(cls.libinput.pid, signal.SIGTERM)
        cls.libinput_out.finish()
        cls.container.stop()
        cls.stop_daemon()

    def in_container(self, *cmd):
        return self.container.run(*cmd, check=False).returncode == 0

    def udev_record(self, rdev):
        p = self.container.run("cat", "/run/udev/data/c%d:%d" % (os.major(rdev), os.minor(rdev)), check=False)
        return p.stdout if p.returncode == 0 else None

    def container_mounts(self):
        with open("/proc/%d/mountinfo" % self.container.pid) as f:
            return f.read().splitlines()

    def plug(self):
        kbd = rig.make_keyboard()
        name = os.path.basename(rig.event_node(kbd))
        return kbd, name

    def assert_mirrored(self, name):
        """The node is in every persona and in the container, with its udev record; returns its number."""
        for persona in PERSONAS:
            path = "/dev/devns/%s/%s" % (persona, name)
            self.assertTrue(wait_for(lambda: is_chr(path)), path + " did not appear:\n" + self.daemon.output())
        rdev = os.stat("/dev/devns/work/" + name).st_rdev
        inside = "/dev/input/" + name
        self.assertTrue(wait_for(lambda: self.in_container("test", "-c", inside)),
                        inside + " did not appear in the container:\n" + self.daemon.output())
        seen = self.container.run("stat", "-c", "%t:%T", inside).stdout.strip()
        self.assertEqual(seen, "%x:%x" % (os.major(rdev), os.minor(rdev)))
        record = wait_for(lambda: self.udev_record(rdev))
        self.assertIsNotNone(record, "no udev record for " + name)
        self.assertIn("E:ID_INPUT_KEYBOARD=1", record)
        return rdev

    def assert_gone(self, name, rdev):
        for persona in PERSONAS:
            path = "/dev/devns/%s/%s" % (persona, name)
            self.assertTrue(wait_for(lambda: not os.path.exists(path)), path + " stayed:\n" + self.daemon.output())
        inside = "/dev/input/" + name
        self.assertTrue(wait_for(lambda: not self.in_container("test", "-e", inside)),
                        inside + " stayed in the container")
        self.assertTrue(wait_for(lambda: self.udev_record(rdev) is None), "the udev record stayed")

    # The tests run in name order: each leaves the device as the next expects it.

    def test_1_device_made_after_start_appears_everywhere(self):
        # devnsd answers before the device exists (the class set-up waited for READY=1).
        rig.devnsctl("list")
        start = time.monotonic()
        Hotplug.kbd, Hotplug.name = self.plug()
        Hotplug.rdev = self.assert_mirrored(self.name)
        mirrored = time.monotonic()
        self.assertIn("(added)", self.daemon.output())
        # libinput in the container learns of it from udev's event, takes it, and gets its keys.
        out = self.libinput_out
        self.assertTrue(out.wait_for(r"%s\s+DEVICE_ADDED\s+devns test keyboard" % self.name), out.text)
        print("plugged to in every persona, the container and its udev data: %.2f s; to libinput's DEVICE_ADDED: "
              "%.2f s" % (mirrored - start, time.monotonic() - start))
        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        self.assertTrue(out.wait_for(r"%s\s+KEYBOARD_KEY.*pressed" % self.name), out.text)

        work = rig.open_node("/dev/devns/work/" + self.name)
        personal = rig.open_node("/dev/devns/personal/" + self.name)
        self.fds += [work, personal]
        rig.press(self.kbd, e.KEY_B, 1)
        rig.press(self.kbd, e.KEY_B, 0)
        marker = rig.send_marker(self.kbd)
        got = rig.read_to(work, marker)
        self.assertIn((e.EV_KEY, e.KEY_B, 1), got)
        # The marker reached work behind the key: by then the key reached personal too, or never will.
        self.assertNotIn((e.EV_KEY, e.KEY_B, 1), rig.pending(personal))
        # The container's own node (a bind mount of the persona's) gives the same.
        p = self.container.popen("python3", "-c", READ_ONE, "/dev/input/" + self.name, stdout=subprocess.PIPE,
                                 text=True)
        self.assertEqual(p.stdout.readline().strip(), "open")
        rig.press(self.kbd, e.KEY_C, 1)
        rig.press(self.kbd, e.KEY_C, 0)
        self.assertEqual(p.communicate(timeout=30)[0].strip(), "key %d 1" % e.KEY_C)
        self.assertTrue(rig.answers_within(1.0))

    def test_2_destroyed_device_releases_then_gives_enodev_then_goes(self):
        reader_fd = rig.open_node("/dev/devns/work/" + self.name, os.O_RDONLY)
        other = rig.open_node("/dev/devns/work/" + self.name)
        reader = BlockingReader(reader_fd)
        reader.start()
        try:
            rig.press(self.kbd, e.KEY_A, 1)
            self.assertTrue(reader.got.wait(10), "the press did not arrive")
            rig.read_events(other, timeout=1)
            time.sleep(0.5)  # the reader waits in read() again
            # devnsd reads nothing while the device goes: the kernel's own release events never reach it
            # (a removed evdev device answers ENODEV even with events queued), so what the reader sees
            # is devnsd's doing.
            self.daemon.proc.send_signal(signal.SIGSTOP)
            try:
                Hotplug.kbd.close()
                Hotplug.kbd = None
                removed = time.monotonic()
                time.sleep(0.3)
            finally:
                self.daemon.proc.send_signal(signal.SIGCONT)
            reader.join(15)
            self.assertFalse(reader.is_alive(), "the reader still waits")
            # The key goes up, in a packet of its own, and then the device is gone.
            after = reader.events[reader.events.index((e.EV_KEY, e.KEY_A, 1)) + 1:]
            self.assertIn((e.EV_KEY, e.KEY_A, 0), after)
            self.assertEqual(after[-1][:2], (e.EV_SYN, e.SYN_REPORT))
            self.assertEqual(reader.errno, errno.ENODEV)
            # Any other handle: poll says POLLERR|POLLHUP, read and ioctl ENODEV.
            poller = select.poll()
            poller.register(other, select.POLLIN)
            revents = dict(poller.poll(5000)).get(other, 0)
            self.assertEqual(revents & (select.POLLERR | select.POLLHUP), select.POLLERR | select.POLLHUP)
            with self.assertRaises(OSError) as ctx:
                os.read(other, rig.EVENT.size * 8)
            self.assertEqual(ctx.exception.errno, errno.ENODEV)
            with self.assertRaises(OSError) as ctx:
                rig.ioctl_bytes(other, rig.EVIOCGNAME(64), 64)
            self.assertEqual(ctx.exception.errno, errno.ENODEV)
        finally:
            os.close(reader_fd)
            os.close(other)
        self.assert_gone(self.name, self.rdev)
        print("unplugged to gone from every persona, the container and its udev data (devnsd stopped for 0.3 s "
              "of it): %.2f s" % (time.monotonic() - removed))
        out = self.libinput_out
        self.assertTrue(out.wait_for(r"%s\s+DEVICE_REMOVED\s+devns test keyboard" % self.name), out.text)
        self.assertTrue(rig.answers_within(1.0))

    def test_3_device_that_comes_back_is_mirrored_again(self):
        Hotplug.kbd, name = self.plug()
        # The kernel gives the lowest free number: the same eventN, and devnsd the same device numbers.
        self.assertEqual(name, self.name)
        self.assertEqual(self.assert_mirrored(name), self.rdev)
        mark = len(self.libinput_out.text)
        self.assertTrue(self.libinput_out.wait_for(r"(?s)DEVICE_REMOVED.*%s\s+DEVICE_ADDED\s+devns test keyboard" % name),
                        self.libinput_out.text[mark:])
        work = rig.open_node("/dev/devns/work/" + name)
        self.fds.append(work)
        rig.press(self.kbd, e.KEY_B, 1)
        rig.press(self.kbd, e.KEY_B, 0)
        got = rig.read_events(work, timeout=5, until=lambda evs: (e.EV_KEY, e.KEY_B, 0) in evs)
        self.assertIn((e.EV_KEY, e.KEY_B, 1), got)
        Hotplug.kbd.close()
        Hotplug.kbd = None
        self.assert_gone(name, self.rdev)

    def test_4_a_flood_of_devices_wedges_nothing_and_leaks_nothing(self):
        pid = self.daemon.proc.pid
        nodes, fds = persona_nodes(), open_fds(pid)
        inside = set(self.container.run("ls", "/dev/input").stdout.split())
        mounts = self.container_mounts()
        # devnsd keeps answering while the devices come and go.
        answers, flooding = [], threading.Event()
        flooding.set()

        def ask():
            while flooding.is_set():
                answers.append(rig.answers_within(1.0))

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        start = time.monotonic()
        for _ in range(20):
            rig.make_keyboard().close()
        print("20 devices made and destroyed in %.2f s" % (time.monotonic() - start))
        time.sleep(2)
        flooding.clear()
        asker.join(60)
        self.assertTrue(answers and all(answers), "devnsctl list answers: %s" % answers)
        self.assertTrue(rig.answers_within(1.0))
        # Still following: one more device comes and goes.
        kbd, name = self.plug()
        try:
            rdev = self.assert_mirrored(name)
        finally:
            kbd.close()
        self.assert_gone(name, rdev)
        self.assertEqual(wait_for(lambda: persona_nodes() == nodes), True,
                         "nodes left: %s" % (persona_nodes() - nodes))
        self.assertTrue(wait_for(lambda: open_fds(pid) == fds), "devnsd's fds: %d before, %d after" %
                        (fds, open_fds(pid)))
        self.assertTrue(wait_for(lambda: set(self.container.run("ls", "/dev/input").stdout.split()) == inside),
                        "the container's /dev/input changed")
        # Nothing piles up in the container's mount table (node binds, /sys/dev/char overlays).
        self.assertTrue(wait_for(lambda: len(self.container_mounts()) == len(mounts)),
                        "the container's mounts: %d before, now also:\n%s" %
                        (len(mounts), "\n".join(sorted(set(self.container_mounts()) - set(mounts)))))
        self.assertTrue(rig.answers_within(1.0))


# Inside the container: opens a node, says so, prints the first key press.
READ_ONE = """
import os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
print("open", flush=True)
ev = struct.Struct("llHHi")
while True:
    data = os.read(fd, ev.size * 64)
    for off in range(0, len(data), ev.size):
        _, _, typ, code, value = ev.unpack_from(data, off)
        if typ == 1 and value == 1:
            print("key %d %d" % (code, value), flush=True)
            sys.exit(0)
"""


if __name__ == "__main__":
    rig.main()
