#!/usr/bin/python3
"""LED views on a real kernel: the i8042 keyboard's input0::capslock LED
class device, with devnsd owning the keyboard's evdev device too. The
hardware LED follows the active persona, and each persona's sysfs view and
evdev LED state (EVIOCGLED on its node) agree."""

import errno
import glob
import os
import time
import unittest

from evdev import ecodes as e

import devnsrig as rig

VIEWS = "/run/devns"


def find_capslock():
    """The capslock LED class device of a keyboard, and that keyboard's /dev/input/eventN."""
    for led in sorted(glob.glob("/sys/class/leds/input*::capslock")):
        input_dir = os.path.realpath(os.path.join(led, "device"))
        events = glob.glob(os.path.join(input_dir, "event*"))
        if events:
            return led, "/dev/input/" + os.path.basename(events[0])
    raise unittest.SkipTest("no keyboard with a capslock LED")


def read_file(path):
    with open(path) as f:
        return f.read()


def put(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


class CapslockViews(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.led, cls.kbd = find_capslock()
        cls.name = os.path.basename(cls.led)
        cls.bus = rig.Bus()
        conf = "\n".join([
            "[Input]",
            "Devices=" + cls.kbd,
            "[Leds]",
            "Devices=" + cls.led,
            "[Persona work]",
            "Active=yes",
            "[Persona personal]",
            "",
        ])
        cls.daemon = rig.Daemon(conf)

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    def view(self, persona, attr="brightness"):
        return os.path.join(VIEWS, persona, "sys", "class", "leds", self.name, attr)

    def node(self, persona):
        fd = rig.open_node(rig.persona_node(persona, self.kbd))
        self.fds.append(fd)
        return fd

    def hw(self):
        return read_file(os.path.join(self.led, "brightness"))

    def evdev_capslock(self, persona):
        return e.LED_CAPSL in rig.led_state(self.node(persona))

    def eventually(self, check, what, timeout=3.0):
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                self.fail(what)
            time.sleep(0.02)

    def agree(self, persona, on):
        """The persona's sysfs view and its evdev node both say on."""
        self.assertEqual(read_file(self.view(persona)), "1\n" if on else "0\n", persona)
        self.assertEqual(self.evdev_capslock(persona), on, persona)

    def test_routed_through_input(self):
        self.assertIn("driven through the input device's persona nodes", self.daemon.output())
        self.assertEqual(read_file(self.view("work", "max_brightness")), "1\n")
        trig = read_file(self.view("work", "trigger"))
        self.assertTrue(trig.startswith("none") or trig.startswith("[none]"), trig)
        self.assertEqual(trig.count("["), 1, trig)

    def test_hardware_follows_active_persona(self):
        put(self.view("work"), "0\n")
        put(self.view("personal"), "0\n")
        self.assertEqual(self.hw(), "0\n")

        put(self.view("work"), "1\n")
        self.assertEqual(self.hw(), "1\n")
        self.agree("work", True)
        self.agree("personal", False)

        # A background persona's write is kept for it and does not reach the LED.
        put(self.view("work"), "0\n")
        put(self.view("personal"), "1\n")
        self.assertEqual(self.hw(), "0\n")
        self.agree("personal", True)
        self.agree("work", False)

        rig.devnsctl("switch", "personal")
        self.assertEqual(self.hw(), "1\n")
        self.agree("personal", True)
        rig.devnsctl("switch", "work")
        self.assertEqual(self.hw(), "0\n")
        self.agree("work", False)
        self.agree("personal", True)

    def test_evdev_writes_show_in_the_view(self):
        put(self.view("work"), "0\n")
        put(self.view("personal"), "0\n")
        work = self.node("work")
        rig.write_event(work, e.EV_LED, e.LED_CAPSL, 1)
        rig.write_event(work, e.EV_SYN, e.SYN_REPORT, 0)
        self.eventually(lambda: read_file(self.view("work")) == "1\n", "work's view missed its EV_LED write")
        self.assertEqual(self.hw(), "1\n")

        personal = self.node("personal")
        rig.write_event(personal, e.EV_LED, e.LED_CAPSL, 1)
        rig.write_event(personal, e.EV_SYN, e.SYN_REPORT, 0)
        self.eventually(lambda: read_file(self.view("personal")) == "1\n", "personal's view missed its write")
        rig.write_event(work, e.EV_LED, e.LED_CAPSL, 0)
        rig.write_event(work, e.EV_SYN, e.SYN_REPORT, 0)
        self.eventually(lambda: self.hw() == "0\n", "the LED did not follow work")
        self.agree("personal", True)
        self.agree("work", False)

    def test_persona_readers_see_the_change(self):
        """A persona's evdev reader gets the EV_LED its sysfs write caused, like the kernel's."""
        put(self.view("work"), "0\n")
        fd = self.node("work")
        rig.read_events(fd, timeout=0.2)
        put(self.view("work"), "1\n")
        events = rig.read_events(fd, timeout=1.0, until=lambda evs: (e.EV_LED, e.LED_CAPSL, 1) in evs)
        self.assertIn((e.EV_LED, e.LED_CAPSL, 1), events)

    def test_refused_values(self):
        for text in ("2", "-1", "on"):
            with self.assertRaises(OSError) as cm:
                put(self.view("work"), text)
            self.assertEqual(cm.exception.errno, errno.EINVAL, text)
        with self.assertRaises(PermissionError):
            os.open(self.view("work", "max_brightness"), os.O_WRONLY)

    def test_many_switches(self):
        put(self.view("work"), "1\n")
        put(self.view("personal"), "0\n")
        for i in range(10):
            who = "personal" if i % 2 == 0 else "work"
            rig.devnsctl("switch", who)
            self.assertEqual(self.hw(), "0\n" if who == "personal" else "1\n", "switch %d" % i)
            self.agree(who, who == "work")

    def test_status(self):
        out = rig.devnsctl("status").stdout
        rows = [l for l in out.splitlines() if self.name in l and "leds" in l.split()]
        self.assertEqual(len(rows), 2, out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
