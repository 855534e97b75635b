#!/usr/bin/python3
"""LED views on a real kernel: the i8042 keyboard's input0::capslock LED
class device, with devnsd owning the keyboard's evdev device too. The
hardware LED follows the active persona, and each persona's sysfs view and
evdev LED state (EVIOCGLED on its node) agree. Keyboards plugged in while
devnsd runs bring their LEDs into every persona's view, and take them away
when they go; LEDs found before their evdev devices wait for them."""

import errno
import glob
import os
import subprocess
import time

from evdev import ecodes as e

import devnsrig as rig

VIEWS = "/run/devns"


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
        cls.led, cls.kbd = rig.find_capslock()
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
        rig.pending(fd)
        put(self.view("work"), "1\n")
        events = rig.read_until(fd, lambda evs: (e.EV_LED, e.LED_CAPSL, 1) in evs)
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


class EvdevComesLater(rig.PersonaTestCase):
    """devnsd starts before the evdev handler is loaded, as early in a boot: the keyboards' LEDs are
    there, their evdev devices not yet. Each LED waits for its evdev device and then goes through
    its persona nodes, as for a keyboard plugged in later."""

    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        # The test's own evdev handle of the keyboard would keep the handler loaded.
        cls.kbd.device.close()
        cls.kbd.device = None
        subprocess.run(["rmmod", "evdev"], check=True)
        try:
            cls.led = [l for l in glob.glob("/sys/class/leds/input*::capslock")
                       if read_file(os.path.join(l, "device", "name")).strip() == cls.kbd.name][0]
            cls.bus = rig.Bus()
            cls.daemon = rig.Daemon("\n".join([
                "[Input]", "Devices=/dev/input/event*",
                "[Leds]", "Devices=/sys/class/leds/input*::capslock",
                "[Persona work]", "Active=yes",
                "[Persona personal]", "",
            ]))
        finally:
            subprocess.run(["modprobe", "evdev"], check=True)

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def test_leds_wait_for_their_evdev_devices(self):
        name = os.path.basename(self.led)
        node = os.path.basename(glob.glob(os.path.join(os.path.realpath(os.path.join(self.led, "device")),
                                                       "event*"))[0])
        self.assertTrue(rig.eventually(lambda: os.path.exists(rig.persona_node("personal", node))),
                        "the keyboard has no persona nodes")
        view = os.path.join(VIEWS, "personal", "sys", "class", "leds", name, "brightness")
        self.assertTrue(rig.eventually(lambda: os.path.exists(view)), "the LED is not in personal's view")
        put(view, "1\n")
        time.sleep(0.2)
        self.assertEqual(read_file(os.path.join(self.led, "brightness")), "0\n",
                         "the background persona's LED reached the keyboard")
        rig.devnsctl("switch", "personal")
        self.assertTrue(rig.eventually(lambda: read_file(os.path.join(self.led, "brightness")) == "1\n", timeout=3),
                        "the keyboard does not show personal's LED")
        fd = rig.open_node(rig.persona_node("personal", node))
        try:
            self.assertIn(e.LED_CAPSL, rig.led_state(fd), "personal's evdev node")
        finally:
            os.close(fd)


class LedsComeAndGo(rig.PersonaTestCase):
    """[Leds] names the capslock LEDs of every keyboard, those plugged in later included."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        conf = "\n".join([
            "[Input]", "Devices=/dev/input/event*",
            "[Leds]", "Devices=/sys/class/leds/input*::capslock",
            "[Persona work]", "Active=yes",
            "[Persona personal]", "",
        ])
        cls.daemon = rig.Daemon(conf)

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    def views(self, persona):
        return sorted(os.listdir(os.path.join(VIEWS, persona, "sys", "class", "leds")))

    def view(self, persona, name):
        return os.path.join(VIEWS, persona, "sys", "class", "leds", name, "brightness")

    def status_rows(self, name):
        return [line for line in rig.devnsctl("status").stdout.splitlines() if name in line.split()]

    def test_keyboards_bring_their_leds_and_take_them_away(self):
        before = {p: self.views(p) for p in ("work", "personal")}
        fds = len(os.listdir("/proc/%d/fd" % self.daemon.proc.pid))
        for round in range(3):
            rig.devnsctl("switch", "work")
            kbd = rig.make_keyboard()
            try:
                node = os.path.basename(rig.event_node(kbd))
                led = [l for l in glob.glob("/sys/class/leds/input*::capslock")
                       if os.path.exists(os.path.join(os.path.realpath(os.path.join(l, "device")), node))][0]
                name = os.path.basename(led)
                for p in ("work", "personal"):
                    self.assertTrue(rig.eventually(lambda: name in self.views(p), timeout=5),
                                    "round %d: %s is not in %s's view: %s" % (round, name, p, self.views(p)))
                self.assertFalse(any(n.endswith("::numlock") for n in self.views("work")), "not configured")
                # Through the keyboard's evdev device, as for the LEDs devnsd found at start.
                self.assertTrue(rig.eventually(lambda: os.path.exists(rig.persona_node("personal", node))))
                put(self.view("personal", name), "1\n")
                put(self.view("work", name), "0\n")
                time.sleep(0.2)
                self.assertEqual(read_file(os.path.join(led, "brightness")), "0\n",
                                 "round %d: the background persona's LED reached the keyboard" % round)
                rig.devnsctl("switch", "personal")
                self.assertTrue(rig.eventually(lambda: read_file(os.path.join(led, "brightness")) == "1\n", timeout=3),
                                "round %d: the keyboard does not show personal's LED" % round)
                fd = rig.open_node(rig.persona_node("personal", node))
                try:
                    self.assertIn(e.LED_CAPSL, rig.led_state(fd), "personal's evdev node")
                finally:
                    os.close(fd)
                self.assertEqual(len(self.status_rows(name)), 2, rig.devnsctl("status").stdout)
                held = os.open(self.view("work", name), os.O_RDONLY)
            finally:
                kbd.close()
            try:
                for p in ("work", "personal"):
                    self.assertTrue(rig.eventually(lambda: name not in self.views(p), timeout=5),
                                    "round %d: %s stayed in %s's view" % (round, name, p))
                with self.assertRaises(OSError, msg="a view file held open across the unplug"):
                    os.pread(held, 16, 0)
            finally:
                os.close(held)
            self.assertEqual(self.status_rows(name), [])
            self.assertTrue(rig.answers_within(1.0))
        self.assertEqual({p: self.views(p) for p in ("work", "personal")}, before)
        self.assertTrue(rig.eventually(lambda: len(os.listdir("/proc/%d/fd" % self.daemon.proc.pid)) <= fds, timeout=5),
                        "devnsd holds %d descriptors, %d before" % (len(os.listdir("/proc/%d/fd" % self.daemon.proc.pid)),
                                                                   fds))


if __name__ == "__main__":
    rig.main()
