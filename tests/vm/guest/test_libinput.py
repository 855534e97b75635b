#!/usr/bin/python3
"""libinput's udev backend inside attached containers, as every compositor
uses it: `libinput list-devices` and `libinput debug-events` without
--device, on seat0. They enumerate the input subsystem in the container's
sysfs, read udev's database, open DEVNAME and check that the opened node is
the device they enumerated; then they follow udev's netlink events."""

import os
import re
import signal
import subprocess
import time

from evdev import ecodes as e

import devnsrig as rig

UEVENT_SEND = os.path.join(rig.BUILD, "tests", "vm", "uevent-send")


def device_blocks(text):
    """list-devices output as {device name: {field: value}}."""
    devices = {}
    for block in text.strip().split("\n\n"):
        fields = dict(re.split(r":\s*", line, maxsplit=1) for line in block.splitlines() if ":" in line)
        if "Device" in fields:
            devices[fields["Device"].strip()] = {k: v.strip() for k, v in fields.items()}
    return devices


class LibinputInContainers(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.ts = rig.make_touchscreen()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.ts_hw = rig.event_node(cls.ts)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw, cls.ts_hw], active="work"))
        # A container as runtimes make them: its own /dev, /run and network namespace.
        cls.work = rig.Container(private_dev=True, netns=True)
        # And one with a user namespace too, as unprivileged runtimes make them.
        cls.personal = rig.Container(private_dev=True, netns=True, userns=True)
        for name, c in (("work", cls.work), ("personal", cls.personal)):
            out = rig.devnsctl("attach", name, "--pid", str(c.pid)).stdout
            assert "nodes made" in out, out

    @classmethod
    def tearDownClass(cls):
        for c in (cls.work, cls.personal):
            c.stop()
        cls.stop_daemon()
        cls.kbd.close()
        cls.ts.close()

    def tap(self, code):
        rig.press(self.kbd, code, 1)
        rig.press(self.kbd, code, 0)

    def touch(self):
        rig.touch(self.ts, 0, 7, 300, 200)
        rig.touch(self.ts, 0, -1)

    def debug_events(self, c):
        p = c.popen("libinput", "debug-events", "--show-keycodes", stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
        return p, rig.Output(p)

    def stop(self, p, out):
        os.killpg(p.pid, signal.SIGTERM)
        text = out.finish()
        p.stdout.close()
        return text

    def test_list_devices_shows_the_personas_devices(self):
        for c in (self.work, self.personal):
            with self.subTest(userns=c.userns):
                p = c.run("libinput", "list-devices", check=False)
                devices = device_blocks(p.stdout)
                self.assertIn("devns test keyboard", devices, p.stdout + p.stderr)
                self.assertIn("devns test touchscreen", devices, p.stdout + p.stderr)
                kbd, ts = devices["devns test keyboard"], devices["devns test touchscreen"]
                self.assertEqual(kbd["Kernel"], "/dev/input/" + os.path.basename(self.kbd_hw))
                self.assertEqual(ts["Kernel"], "/dev/input/" + os.path.basename(self.ts_hw))
                self.assertEqual(kbd["Capabilities"].split(), ["keyboard"])
                self.assertEqual(ts["Capabilities"].split(), ["touch"])
                self.assertTrue(kbd["Seat"].startswith("seat0"), kbd)
                # Only the persona's devices: the host's own (QEMU's keyboard) has no udev record there.
                self.assertEqual(len(devices), 2, p.stdout)

    def test_the_container_sees_its_node_where_sysfs_says(self):
        """sysfs in the container gives the persona's node number, and the record is under it."""
        node = os.stat(rig.persona_node("work", self.kbd_hw)).st_rdev
        name = os.path.basename(self.kbd_hw)
        inside = self.work.run("stat", "-c", "%t:%T", "/dev/input/" + name).stdout.strip()
        self.assertEqual(inside, "%x:%x" % (os.major(node), os.minor(node)))
        dev = self.work.run("cat", "/sys/class/input/%s/dev" % name).stdout.strip()
        self.assertEqual(dev, "%d:%d" % (os.major(node), os.minor(node)))
        link = self.work.run("readlink", "-f", "/sys/dev/char/" + dev).stdout.strip()
        self.assertEqual(link, self.work.run("readlink", "-f", "/sys/class/input/" + name).stdout.strip())
        udev = self.work.run("cat", "/run/udev/data/c" + dev).stdout
        for line in ("E:ID_INPUT=1", "E:ID_INPUT_KEYBOARD=1", "G:seat", "Q:seat", "G:uaccess"):
            self.assertIn(line, udev.splitlines())
        self.assertRegex(udev, r"(?m)^I:\d+$")
        # The host's sysfs is untouched.
        with open("/sys/class/input/%s/dev" % name) as f:
            self.assertEqual(f.read().strip(), "13:%d" % (64 + int(name[5:])))

    def test_the_keyboards_parent_is_a_seat_device(self):
        """systemd-logind takes an evdev node for a session only when the node's parent input device
        is one of the seat's devices: sd-device in the container finds that parent tagged "seat", as
        udevd's 71-seat.rules tag it, when it enumerates the seat's devices."""
        name = os.path.basename(self.kbd_hw)
        parent = os.path.basename(os.path.dirname(os.path.realpath("/sys/class/input/" + name)))
        self.assertRegex(parent, r"^input\d+$")
        info = self.work.run("udevadm", "info", "--query=all", "/sys/class/input/" + parent).stdout
        self.assertRegex(info, r"(?m)^G: seat$|TAGS=.*:seat:", info)
        seat_devices = self.work.run("udevadm", "trigger", "--dry-run", "--verbose", "--tag-match=seat",
                                     "--subsystem-match=input").stdout.split()
        self.assertIn(os.path.realpath("/sys/class/input/" + parent), seat_devices)

    def test_debug_events_follow_the_active_persona(self):
        kbd = os.path.basename(self.kbd_hw)
        ts = os.path.basename(self.ts_hw)
        p, out = self.debug_events(self.work)
        try:
            self.assertTrue(out.wait_for(r"%s\s+DEVICE_ADDED.*devns test keyboard" % kbd), out.text)
            self.assertTrue(out.wait_for(r"%s\s+DEVICE_ADDED.*devns test touchscreen" % ts), out.text)
            self.assertNotIn("Expected device added events", out.text)

            self.tap(e.KEY_A)
            self.touch()
            self.assertTrue(out.wait_for(r"KEYBOARD_KEY.*KEY_A \(30\) pressed"), out.text)
            self.assertTrue(out.wait_for(r"%s\s+TOUCH_DOWN" % ts), out.text)

            # In the background the persona's devices stay, and stay silent.
            rig.devnsctl("switch", "personal")
            mark = len(out.text)
            self.tap(e.KEY_B)
            self.touch()
            time.sleep(2)
            quiet = out.text[mark:]
            self.assertNotRegex(quiet, r"KEY_B|TOUCH_DOWN|DEVICE_REMOVED", quiet)

            rig.devnsctl("switch", "work")
            self.tap(e.KEY_C)
            self.touch()
            self.assertTrue(out.wait_for(r"KEYBOARD_KEY.*KEY_C \(46\) pressed"), out.text[mark:])
            self.assertTrue(re.search(r"%s\s+TOUCH_DOWN" % ts, out.text[mark:]) or
                            out.wait_for(r"(?s)KEY_C.*%s\s+TOUCH_DOWN" % ts), out.text[mark:])
        finally:
            self.stop(p, out)

    def test_debug_events_in_a_user_namespace(self):
        p, out = self.debug_events(self.personal)
        try:
            self.assertTrue(out.wait_for(r"DEVICE_ADDED.*devns test keyboard"), out.text)
            self.tap(e.KEY_A)
            time.sleep(1)
            self.assertNotIn("KEY_A", out.text)
            rig.devnsctl("switch", "personal")
            self.tap(e.KEY_B)
            self.assertTrue(out.wait_for(r"KEYBOARD_KEY.*KEY_B \(48\) pressed"), out.text)
        finally:
            self.stop(p, out)

    def send(self, c, action):
        name = os.path.basename(self.kbd_hw)
        persona = "work" if c is self.work else "personal"
        uid = c.host_id(0)
        p = subprocess.run([UEVENT_SEND, str(c.pid), str(uid), str(uid), action,
                            rig.persona_node(persona, self.kbd_hw), self.kbd_hw, "input/" + name],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout.strip()

    def test_uevents_reach_libinput_in_the_container(self):
        """devnsd's sender speaks udev's monitor protocol to the container's netns."""
        name = os.path.basename(self.kbd_hw)
        for c in (self.work, self.personal):
            with self.subTest(userns=c.userns):
                mon = c.popen("udevadm", "monitor", "--udev", "--property", "--subsystem-match=input",
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              start_new_session=True)
                mon_out = rig.Output(mon)
                p, out = self.debug_events(c)
                try:
                    self.assertTrue(mon_out.wait_for(r"monitor will print"), mon_out.text)
                    self.assertTrue(out.wait_for(r"%s\s+DEVICE_ADDED.*devns test keyboard" % name), out.text)
                    self.assertEqual(self.send(c, "remove"), "sent")
                    self.assertTrue(out.wait_for(r"%s\s+DEVICE_REMOVED.*devns test keyboard" % name), out.text)
                    self.assertEqual(self.send(c, "add"), "sent")
                    self.assertTrue(out.wait_for(r"(?s)DEVICE_REMOVED.*%s\s+DEVICE_ADDED.*devns test keyboard" % name),
                                    out.text)
                    self.assertTrue(mon_out.wait_for(r"(?s)UDEV.*remove.*UDEV.*add"), mon_out.text)
                    self.assertRegex(mon_out.text, r"DEVNAME=/dev/input/%s" % name)
                    self.assertRegex(mon_out.text, r"ID_INPUT_KEYBOARD=1")
                finally:
                    self.stop(p, out)
                    self.stop(mon, mon_out)

    def test_no_uevents_into_the_hosts_namespace(self):
        host = rig.Container()
        try:
            name = os.path.basename(self.kbd_hw)
            p = subprocess.run([UEVENT_SEND, str(host.pid), "0", "0", "add", rig.persona_node("work", self.kbd_hw),
                                self.kbd_hw, "input/" + name], capture_output=True, text=True, timeout=30)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, "not sent"), p.stderr)
        finally:
            host.stop()


class LibinputFollowsHotplug(rig.PersonaTestCase):
    """A device that comes and goes while devnsd runs reaches libinput in an
    attached container through the udev events devnsd sends there."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for(["/dev/input/event*"], active="work"))
        cls.container = rig.Container(private_dev=True, netns=True, userns=True)
        rig.devnsctl("attach", "work", "--pid", str(cls.container.pid))

    @classmethod
    def tearDownClass(cls):
        cls.container.stop()
        cls.stop_daemon()

    def test_libinput_adds_and_removes_a_hotplugged_device(self):
        p = self.container.popen("libinput", "debug-events", "--show-keycodes", stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, start_new_session=True)
        out = rig.Output(p)
        kbd = None
        try:
            # QEMU's keyboard, there from the start.
            self.assertTrue(out.wait_for(r"DEVICE_ADDED"), out.text)
            kbd = rig.make_keyboard()
            name = os.path.basename(rig.event_node(kbd))
            self.assertTrue(out.wait_for(r"%s\s+DEVICE_ADDED.*devns test keyboard" % name), out.text)
            rig.press(kbd, e.KEY_A, 1)
            rig.press(kbd, e.KEY_A, 0)
            self.assertTrue(out.wait_for(r"%s\s+KEYBOARD_KEY.*KEY_A \(30\) pressed" % name), out.text)
            kbd.close()
            kbd = None
            self.assertTrue(out.wait_for(r"%s\s+DEVICE_REMOVED.*devns test keyboard" % name), out.text)
        finally:
            if kbd:
                kbd.close()
            os.killpg(p.pid, signal.SIGTERM)
            out.finish()
            p.stdout.close()


# An event loop as libinput's evdev backend has one: a device whose read fails with ENODEV is removed
# (its handle closed); any other error leaves it in the loop. Prints each error (the first few, then
# every thousandth) and "removed".
HELD_READER = """
import errno, os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
print("open", flush=True)
poller = select.poll()
poller.register(fd, select.POLLIN)
errors = 0
while True:
    poller.poll(1000)
    try:
        os.read(fd, 24 * 64)
    except OSError as err:
        if err.errno == errno.EAGAIN:
            continue
        errors += 1
        if errors <= 3 or errors % 1000 == 0:
            print("read errno", err.errno, flush=True)
        if err.errno == errno.ENODEV:
            os.close(fd)
            print("removed", flush=True)
            break
"""


def child_of(pid):
    """The one child of process pid (nsenter forks the command into the container's pid namespace)."""
    for _ in range(100):
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise RuntimeError("no child of %d" % pid)


def cpu_ticks(pid):
    """User and system time of process pid, in clock ticks."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class LibinputUnplugWithHandlesOpen(rig.PersonaTestCase):
    """A device unplugged while programs in the container hold its node: libinput removes it and does
    not spin, and a handle still open long after the node went answers ENODEV, as the kernel's evdev
    answers until close, never CUSE's ENOTCONN, on which an event loop that waits for ENODEV spins."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for(["/dev/input/event*"], active="work"))
        cls.container = rig.Container(private_dev=True, netns=True)
        rig.devnsctl("attach", "work", "--pid", str(cls.container.pid))

    @classmethod
    def tearDownClass(cls):
        cls.container.stop()
        cls.stop_daemon()

    def test_unplug_while_held(self):
        kbd = rig.make_keyboard()
        procs = []
        try:
            hw = rig.event_node(kbd)
            name = os.path.basename(hw)
            node = rig.persona_node("work", hw)
            self.assertTrue(rig.eventually(lambda: os.path.exists(node), 30), node)
            li = self.container.popen("libinput", "debug-events", "--show-keycodes", stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, start_new_session=True)
            li_out = rig.Output(li)
            procs.append((li, li_out))
            self.assertTrue(li_out.wait_for(r"%s\s+DEVICE_ADDED.*devns test keyboard" % name), li_out.text)
            reader = self.container.popen("python3", "-c", HELD_READER, "/dev/input/" + name,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True)
            held = rig.Output(reader)
            procs.append((reader, held))
            self.assertTrue(held.wait_for("open"), held.text)
            # The reader sleeps through the unplug and long after it, holding its handle.
            reader_pid = child_of(reader.pid)
            os.kill(reader_pid, signal.SIGSTOP)
            li_pid = child_of(li.pid)
            idle = cpu_ticks(li_pid)
            time.sleep(3)
            idle = cpu_ticks(li_pid) - idle

            kbd.close()
            kbd = None
            self.assertTrue(li_out.wait_for(r"%s\s+DEVICE_REMOVED.*devns test keyboard" % name), li_out.text)
            # The node leaves /dev while the handle is still open.
            self.assertTrue(rig.eventually(lambda: not os.path.exists(node), 30), node + " is still there")
            before = cpu_ticks(li_pid)
            time.sleep(3)
            busy = cpu_ticks(li_pid) - before
            self.assertLess(busy, idle + 100, "libinput spins after the unplug: %d ticks in 3 s (idle: %d)"
                            % (busy, idle))

            # nsenter stopped itself with its child: it goes on first, then the reader.
            os.kill(reader.pid, signal.SIGCONT)
            os.kill(reader_pid, signal.SIGCONT)
            self.assertTrue(held.wait_for("removed", timeout=30), held.text)
            errors = re.findall(r"read errno (\d+)", held.text)
            self.assertEqual(errors, ["19"], "the held handle answered:\n" + held.text)
            self.assertEqual(reader.wait(30), 0, held.text)
        finally:
            if kbd:
                kbd.close()
            for p, out in procs:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                out.finish()
                p.stdout.close()


if __name__ == "__main__":
    rig.main()
