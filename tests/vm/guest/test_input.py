#!/usr/bin/python3
"""Input personas on a real kernel: uinput hardware, CUSE persona nodes,
the built devnsd and devnsctl on a private system bus."""

import array
import errno
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import threading
import time

import evdev
from evdev import ecodes as e

import devnsrig as rig


class InputPersonas(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.ts = rig.make_touchscreen()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.ts_hw = rig.event_node(cls.ts)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw, cls.ts_hw], active="work"))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()
        cls.ts.close()

    def node(self, persona, hw, flags=os.O_RDWR | os.O_NONBLOCK):
        fd = rig.open_node(rig.persona_node(persona, hw), flags)
        self.fds.append(fd)
        return fd

    def drain(self, *fds):
        """Empties the handles' queues (what a switch or an earlier test left)."""
        for fd in fds:
            rig.pending(fd)

    # --- description ---------------------------------------------------------

    def describe(self, path):
        dev = evdev.InputDevice(path)
        try:
            return {
                "name": dev.name,
                "phys": dev.phys,
                "uniq": dev.uniq,
                "info": dev.info,
                "version": dev.version,
                "props": dev.input_props(),
                "caps": dev.capabilities(absinfo=True),
                "caps_verbose": dev.capabilities(verbose=True, absinfo=False),
            }
        finally:
            dev.close()

    def test_description_matches_hardware(self):
        for hw in (self.kbd_hw, self.ts_hw):
            want = self.describe(hw)
            for persona in ("work", "personal"):
                with self.subTest(device=want["name"], persona=persona):
                    self.assertEqual(self.describe(rig.persona_node(persona, hw)), want)
        # The touchscreen really is a direct multitouch device on the node.
        caps = self.describe(rig.persona_node("work", self.ts_hw))
        self.assertIn(e.INPUT_PROP_DIRECT, caps["props"])
        absinfo = dict(caps["caps"][e.EV_ABS])
        self.assertEqual(absinfo[e.ABS_MT_SLOT].max, 9)
        self.assertEqual(absinfo[e.ABS_MT_POSITION_X].max, 1279)

    def test_raw_bitmap_lengths_match_hardware(self):
        hw = rig.open_node(self.kbd_hw)
        self.fds.append(hw)
        node = self.node("work", self.kbd_hw)
        for ev in (0, e.EV_KEY, e.EV_REL, e.EV_ABS, e.EV_MSC, e.EV_LED, e.EV_SND, e.EV_FF, e.EV_SW):
            for size in (1, 4, 8, 64, 96, 0x1FF, 200):
                with self.subTest(ev=ev, size=size):
                    self.assertEqual(rig.ioctl_bytes(node, rig.EVIOCGBIT(ev, size), size),
                                     rig.ioctl_bytes(hw, rig.EVIOCGBIT(ev, size), size))
        for size in (1, 5, 64):
            self.assertEqual(rig.ioctl_bytes(node, rig.EVIOCGNAME(size), size),
                             rig.ioctl_bytes(hw, rig.EVIOCGNAME(size), size))
        self.assertEqual(rig.ioctl_bytes(node, rig.EVIOCGVERSION, 4),
                         rig.ioctl_bytes(hw, rig.EVIOCGVERSION, 4))

    # --- events ----------------------------------------------------------------

    def test_events_reach_the_active_persona_only(self):
        work = self.node("work", self.kbd_hw)
        personal = self.node("personal", self.kbd_hw)
        self.drain(work, personal)

        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        marker = rig.send_marker(self.kbd)
        got = rig.read_to(work, marker)
        self.assertIn((e.EV_KEY, e.KEY_A, 1), got)
        self.assertIn((e.EV_KEY, e.KEY_A, 0), got)
        # The marker reached work behind the keys: by then the keys reached personal too, or never will.
        self.assertEqual(rig.pending(personal), [])

        rig.devnsctl("switch", "personal")
        self.drain(work, personal)
        rig.press(self.kbd, e.KEY_C, 1)
        rig.press(self.kbd, e.KEY_C, 0)
        marker = rig.send_marker(self.kbd)
        got = rig.read_to(personal, marker)
        self.assertIn((e.EV_KEY, e.KEY_C, 1), got)
        self.assertEqual([ev for ev in rig.pending(work) if ev[0] == e.EV_KEY], [])

    def test_switch_releases_held_keys_and_touches(self):
        kw = self.node("work", self.kbd_hw)
        tw = self.node("work", self.ts_hw)
        kp = self.node("personal", self.kbd_hw)
        self.drain(kw, tw, kp)

        rig.press(self.kbd, e.KEY_B, 1)
        rig.touch(self.ts, 0, 7, 300, 400)
        rig.touch(self.ts, 3, 8, 500, 600)
        rig.read_events(kw, until=lambda ev: (e.EV_KEY, e.KEY_B, 1) in ev)
        rig.read_events(tw, until=lambda ev: (e.EV_ABS, e.ABS_MT_TRACKING_ID, 8) in ev)

        rig.devnsctl("switch", "personal")
        keys = rig.read_events(kw, until=lambda ev: (e.EV_SYN, e.SYN_REPORT, 0) in ev)
        self.assertIn((e.EV_KEY, e.KEY_B, 0), keys)
        self.assertEqual(keys[-1], (e.EV_SYN, e.SYN_REPORT, 0))
        self.assertEqual(rig.key_state(kw), set())

        touches = rig.read_events(tw, until=lambda ev: (e.EV_SYN, e.SYN_REPORT, 0) in ev)
        ups = [ev for ev in touches if ev[:2] == (e.EV_ABS, e.ABS_MT_TRACKING_ID)]
        self.assertEqual(ups, [(e.EV_ABS, e.ABS_MT_TRACKING_ID, -1)] * 2)
        self.assertIn((e.EV_ABS, e.ABS_MT_SLOT, 0), touches)
        self.assertIn((e.EV_KEY, e.BTN_TOUCH, 0), touches)

        # The new persona is told to resync, and then sees the key as held.
        got = rig.read_events(kp, until=lambda ev: (e.EV_SYN, e.SYN_REPORT, 0) in ev)
        self.assertIn((e.EV_SYN, e.SYN_DROPPED, 0), got)
        self.assertEqual(rig.key_state(kp), {e.KEY_B})
        rig.press(self.kbd, e.KEY_B, 0)
        self.assertIn((e.EV_KEY, e.KEY_B, 0),
                      rig.read_events(kp, until=lambda ev: (e.EV_KEY, e.KEY_B, 0) in ev))
        rig.touch(self.ts, 0, -1)
        rig.touch(self.ts, 3, -1)
        rig.read_to(kp, rig.send_marker(self.kbd))
        self.assertEqual(rig.pending(kw), [])

    def test_libevdev_style_resync_on_switch(self):
        personal = evdev.InputDevice(rig.persona_node("personal", self.ts_hw))
        try:
            rig.touch(self.ts, 2, 42, 640, 400)
            time.sleep(0.2)
            rig.devnsctl("switch", "personal")
            rig.read_until(personal.fd, lambda evs: (e.EV_SYN, e.SYN_DROPPED, 0) in evs)
            # After SYN_DROPPED a client asks for the slots: the touch in slot 2 is there.
            req = array.array("i", [e.ABS_MT_TRACKING_ID] + [0] * 10)
            fcntl.ioctl(personal.fd, rig.EVIOCGMTSLOTS(len(req) * 4), req, True)
            self.assertEqual(req[1 + 2], 42)
            self.assertEqual(req[1 + 0], -1)
        finally:
            rig.touch(self.ts, 2, -1)
            personal.close()

    def test_background_led_writes_stay_off_the_hardware(self):
        hw = evdev.InputDevice(self.kbd_hw)
        self.addCleanup(hw.close)
        work = self.node("work", self.kbd_hw)
        personal = self.node("personal", self.kbd_hw)

        rig.write_event(work, e.EV_LED, e.LED_NUML, 1)
        rig.write_event(work, e.EV_SYN, e.SYN_REPORT, 0)
        time.sleep(0.3)
        self.assertEqual(set(hw.leds()), {e.LED_NUML})

        rig.write_event(personal, e.EV_LED, e.LED_CAPSL, 1)
        rig.write_event(personal, e.EV_SYN, e.SYN_REPORT, 0)
        time.sleep(0.3)
        self.assertEqual(set(hw.leds()), {e.LED_NUML}, "a background LED write reached the hardware")
        self.assertEqual(rig.led_state(personal), {e.LED_CAPSL})
        self.assertEqual(rig.led_state(work), {e.LED_NUML})

        rig.devnsctl("switch", "personal")
        time.sleep(0.3)
        self.assertEqual(set(hw.leds()), {e.LED_CAPSL})
        rig.devnsctl("switch", "work")
        time.sleep(0.3)
        self.assertEqual(set(hw.leds()), {e.LED_NUML})

        rig.write_event(work, e.EV_LED, e.LED_NUML, 0)
        rig.write_event(work, e.EV_SYN, e.SYN_REPORT, 0)
        rig.write_event(personal, e.EV_LED, e.LED_CAPSL, 0)
        rig.write_event(personal, e.EV_SYN, e.SYN_REPORT, 0)
        time.sleep(0.3)
        self.assertEqual(set(hw.leds()), set())

    def test_led_on_and_off_in_one_write_reaches_the_hardware_in_order(self):
        """A program turns an LED on and off again in one write(), before the hardware reported the
        first change back: the keyboard gets both, as from the kernel's evdev, and the LED ends off."""
        hw = evdev.InputDevice(self.kbd_hw)
        self.addCleanup(hw.close)
        work = self.node("work", self.kbd_hw)
        self.drain(self.kbd.fd)
        os.write(work, b"".join(rig.EVENT.pack(0, 0, *ev) for ev in (
            (e.EV_LED, e.LED_SCROLLL, 1), (e.EV_SYN, e.SYN_REPORT, 0),
            (e.EV_LED, e.LED_SCROLLL, 0), (e.EV_SYN, e.SYN_REPORT, 0))))
        got = [ev for ev in rig.read_events(self.kbd.fd, until=lambda evs: (e.EV_LED, e.LED_SCROLLL, 0) in evs)
               if ev[0] == e.EV_LED]
        self.assertEqual(got, [(e.EV_LED, e.LED_SCROLLL, 1), (e.EV_LED, e.LED_SCROLLL, 0)])
        time.sleep(0.3)
        self.assertNotIn(e.LED_SCROLLL, hw.leds())
        self.assertNotIn(e.LED_SCROLLL, rig.led_state(work))

    # --- errors ---------------------------------------------------------------

    def assertErrno(self, code, fn, *args):
        with self.assertRaises(OSError) as cm:
            fn(*args)
        self.assertEqual(cm.exception.errno, code, os.strerror(cm.exception.errno))

    def test_bad_requests_get_kernel_errors(self):
        fd = self.node("work", self.kbd_hw)
        self.assertErrno(errno.EINVAL, os.read, fd, 10)
        self.assertErrno(errno.EINVAL, os.write, fd, b"short")
        self.assertErrno(errno.EAGAIN, os.read, fd, 24)
        self.assertErrno(errno.EINVAL, rig.ioctl_bytes, fd, rig.EVIOCGBIT(e.EV_REP, 8), 8)
        self.assertErrno(errno.ENOTTY, rig.ioctl_bytes, fd, rig._ioc(rig.IOC_READ, 0x0F, 8), 8)
        self.assertErrno(errno.ENOTTY, rig.ioctl_bytes, fd, 0x5401, 60)  # TCGETS
        self.assertErrno(errno.EINVAL, fcntl.ioctl, fd, rig.EVIOCSCLOCKID, struct.pack("i", 99))
        other = self.node("work", self.kbd_hw)
        fcntl.ioctl(fd, rig.EVIOCGRAB, 1)
        self.assertErrno(errno.EBUSY, fcntl.ioctl, other, rig.EVIOCGRAB, 1)
        self.assertErrno(errno.EINVAL, fcntl.ioctl, other, rig.EVIOCGRAB, 0)
        fcntl.ioctl(fd, rig.EVIOCGRAB, 0)
        self.assertErrno(errno.EINVAL, fcntl.ioctl, fd, rig.EVIOCREVOKE, 1)
        fcntl.ioctl(fd, rig.EVIOCREVOKE, 0)
        self.assertErrno(errno.ENODEV, os.read, fd, 24)
        rig.devnsctl("status")

    def test_grab_is_among_the_personas_openers(self):
        a = self.node("work", self.kbd_hw)
        b = self.node("work", self.kbd_hw)
        self.drain(a, b)
        fcntl.ioctl(a, rig.EVIOCGRAB, 1)
        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        marker = rig.send_marker(self.kbd)
        self.assertIn((e.EV_KEY, e.KEY_A, 0), rig.read_to(a, marker))
        self.assertEqual(rig.pending(b), [])
        fcntl.ioctl(a, rig.EVIOCGRAB, 0)

    def test_stalled_reader_gets_syn_dropped(self):
        slow = self.node("work", self.kbd_hw)
        fast = self.node("work", self.kbd_hw)
        self.drain(slow, fast)
        before = rig.rss_kib(self.daemon.proc.pid)
        for _ in range(300):
            rig.press(self.kbd, e.KEY_A, 1)
            rig.press(self.kbd, e.KEY_A, 0)
            rig.read_events(fast, timeout=0.0)
        marker = rig.send_marker(self.kbd)
        rig.read_to(fast, marker)
        got = rig.read_to(slow, marker)
        self.assertIn((e.EV_SYN, e.SYN_DROPPED, 0), got)
        self.assertLess(len(got), 300 * 4)
        after = rig.rss_kib(self.daemon.proc.pid)
        # AddressSanitizer holds freed memory in quarantine: there growth says nothing about queues.
        if not os.environ.get("DEVNS_SANITIZE"):
            self.assertLess(after - before, 1024, "devnsd grew by %d KiB" % (after - before))

    # --- waiting -------------------------------------------------------------

    def test_blocking_read_poll_and_epoll(self):
        blocking = self.node("work", self.kbd_hw, os.O_RDWR)
        polled = self.node("work", self.kbd_hw)
        self.drain(polled)
        result = {}

        def reader():
            result["data"] = os.read(blocking, 24 * 8)

        t = threading.Thread(target=reader)
        t.start()
        time.sleep(0.3)
        self.assertTrue(t.is_alive(), "a blocking read returned with nothing to read")
        ep = select.epoll()
        ep.register(polled, select.EPOLLIN)
        self.assertEqual(ep.poll(0.2), [])
        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        t.join(5)
        self.assertFalse(t.is_alive())
        self.assertEqual(len(result["data"]) % 24, 0)
        self.assertEqual(ep.poll(2), [(polled, select.EPOLLIN)])
        p = select.poll()
        p.register(polled, select.POLLIN)
        self.assertTrue(p.poll(1000))
        ep.close()

    def test_every_way_of_waiting_is_woken_every_time(self):
        """poll(), select() and epoll, level- and edge-triggered, on one handle: each of six
        waits that start with nothing to read is woken by the next key press, and a wait that
        starts after a press returns at once."""
        fd = self.node("work", self.kbd_hw)
        self.drain(fd)

        def with_poll():
            p = select.poll()
            p.register(fd, select.POLLIN)
            return lambda timeout: bool(p.poll(timeout * 1000)), lambda: None

        def with_select():
            return lambda timeout: bool(select.select([fd], [], [], timeout)[0]), lambda: None

        def with_epoll(flags):
            def make():
                ep = select.epoll()
                ep.register(fd, select.EPOLLIN | flags)
                return lambda timeout: bool(ep.poll(timeout)), ep.close
            return make

        ways = [("poll", with_poll), ("select", with_select), ("epoll", with_epoll(0)),
                ("epoll edge-triggered", with_epoll(select.EPOLLET))]
        for name, make in ways:
            wait, close = make()
            try:
                for i in range(6):
                    self.assertFalse(wait(0.05), "%s, wait %d: ready with nothing to read" % (name, i))
                    woken = []
                    # poll() and select() look once more when their time is up: a wait that took it all was not woken.
                    t = threading.Thread(target=lambda: woken.append((wait(20), time.monotonic())))
                    t.start()
                    # The waiter is asleep in devnsd's poll by now.
                    time.sleep(0.2)
                    rig.press(self.kbd, e.KEY_A, 1)
                    rig.press(self.kbd, e.KEY_A, 0)
                    pressed = time.monotonic()
                    marker = rig.send_marker(self.kbd)
                    t.join(30)
                    self.assertEqual([w for w, _ in woken], [True], "%s, wait %d: nothing to read" % (name, i))
                    self.assertLess(woken[0][1] - pressed, 10, "%s, wait %d: not woken by a key press" % (name, i))
                    self.assertEqual(rig.read_to(fd, marker), [(e.EV_KEY, e.KEY_A, 1), (e.EV_SYN, e.SYN_REPORT, 0),
                                                               (e.EV_KEY, e.KEY_A, 0), (e.EV_SYN, e.SYN_REPORT, 0)],
                                     "%s, wait %d" % (name, i))
                rig.press(self.kbd, e.KEY_A, 1)
                rig.press(self.kbd, e.KEY_A, 0)
                time.sleep(0.2)
                self.assertTrue(wait(2), "%s: events already there, but the wait did not return" % name)
                self.drain(fd)
            finally:
                close()

    def test_signal_interrupts_a_blocking_read(self):
        fd = self.node("personal", self.kbd_hw, os.O_RDWR)

        class Interrupted(Exception):
            pass

        def on_alarm(signum, frame):
            raise Interrupted()

        old = signal.signal(signal.SIGALRM, on_alarm)
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.5)
            with self.assertRaises(Interrupted):
                os.read(fd, 24)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)

    # --- control ----------------------------------------------------------------

    def test_devnsctl(self):
        out = rig.devnsctl("list").stdout
        self.assertRegex(out, r"(?m)^\* work\s+.*" + re.escape(rig.persona_node("work", self.kbd_hw)))
        self.assertRegex(out, r"(?m)^  personal\s+")
        bad = rig.devnsctl("switch", "nosuch", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("nosuch", bad.stderr)
        self.assertEqual(len(bad.stderr.strip().splitlines()), 1)

        self.node("personal", self.kbd_hw)  # held open: status counts it
        status = rig.devnsctl("status").stdout
        self.assertIn("Active persona: work", status)
        line = [l for l in status.splitlines() if rig.persona_node("personal", self.kbd_hw) in l][0]
        self.assertRegex(line, r"\b1 open\b")

        mon = subprocess.Popen(["dbus-monitor", "--system",
                                "type='signal',interface='org.freedesktop.DBus.Properties'"],
                               stdout=subprocess.PIPE, text=True)
        # dbus-monitor gives its name up once it is a monitor: from then on it sees every signal.
        seen = ""
        while "member=NameLost" not in seen:
            line = mon.stdout.readline()
            self.assertTrue(line, "dbus-monitor ended: " + seen)
            seen += line
        rig.devnsctl("switch", "personal")
        time.sleep(0.5)
        mon.terminate()
        out = seen + mon.communicate()[0]
        self.assertIn("ActivePersona", out)
        self.assertIn('"personal"', out)

    def test_evtest_sees_the_same_device_and_only_active_events(self):
        def evtest(path, action=None):
            p = subprocess.Popen(["evtest", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            out = rig.Output(p)
            self.assertTrue(out.wait_for(r"Testing \.\.\. \(interrupt to exit\)"), out.text)
            if action:
                action()
                out.wait_for(r"KEY_SPACE\), value 0", timeout=3)
            p.send_signal(signal.SIGINT)
            return out.finish()

        def header(text):
            return text.split("Testing ...")[0]

        for hw in (self.kbd_hw, self.ts_hw):
            want = header(evtest(hw))
            got = header(evtest(rig.persona_node("work", hw)))
            self.assertIn("Input device name", want)
            self.assertEqual(got.replace(rig.persona_node("work", hw), hw), want)

        def tap():
            rig.press(self.kbd, e.KEY_SPACE, 1)
            rig.press(self.kbd, e.KEY_SPACE, 0)

        active = evtest(rig.persona_node("work", self.kbd_hw), tap)
        self.assertRegex(active, r"code 57 \(KEY_SPACE\), value 1")
        background = evtest(rig.persona_node("personal", self.kbd_hw), tap)
        self.assertNotRegex(background, r"KEY_SPACE\), value")


if __name__ == "__main__":
    rig.main()
