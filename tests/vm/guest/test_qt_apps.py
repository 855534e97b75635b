#!/usr/bin/python3
"""Real GUI applications in two persona containers: Debian's Qt examples on
platform linuxfb (the container's /dev/fb0, mapped through
libdevns-fbmmap.so) with input from Qt's libinput plugin (libinput's udev
backend on the nodes and udev records that attach made). The real screen
(QEMU's screendump) must show the active persona's application; a uinput
keyboard and touchscreen must change the active application's pixels and
never the background one's; a switch by devnsctl or by the hotkey must
bring the other application to the screen. Xorg (drivers fbdev and
libinput), when installed, runs in a third persona's container without a
VT, and has to take the screen and the input only while its persona is
active, also after its persona was switched away from and back, twice (X
drawing in the background stays off the screen, X drawing while active
again reaches it, and a key typed for the active persona never reaches
X)."""

import os
import signal
import sys
import time
import unittest

from evdev import ecodes as e

import devnsrig as rig
import qtrig

PERSONAS = ("work", "personal")
OTHER = {"work": "personal", "personal": "work"}


@unittest.skipUnless(qtrig.have_qt(), "qtbase5-examples is not installed")
class QtApps(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = qtrig.make_keyboard()
        cls.ts = rig.make_touchscreen()
        devices = [rig.event_node(cls.kbd), rig.event_node(cls.ts)]
        cls.xorg = None
        personas = PERSONAS + (("kiosk",) if qtrig.have_xorg() else ())
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(qtrig.conf(devices, personas))
        cls.containers, cls.apps, cls.frames = {}, {}, {}
        try:
            # As runtimes make them: their own /dev, /run and network namespace;
            # personal's in a user namespace too, as unprivileged runtimes do.
            cls.containers = {
                "work": rig.Container(private_dev=True, netns=True),
                "personal": rig.Container(private_dev=True, netns=True, userns=True),
            }
            if "kiosk" in personas:
                cls.kiosk = rig.Container(private_dev=True, netns=True)
            for p in personas:
                c = cls.kiosk if p == "kiosk" else cls.containers[p]
                rig.devnsctl("attach", p, "--pid", str(c.pid))
            cls.frames = qtrig.open_frames(personas)
            cls.w, cls.h = cls.frames["work"].width, cls.frames["work"].height
            if "kiosk" in personas:
                cls.xorg = qtrig.XServer(cls.kiosk)
            names = ["devns qt keyboard", "devns test touchscreen"]
            cls.apps, took = qtrig.start_apps(cls.containers, cls.frames, names)
            print("both Qt applications drawn, with their devices, %.1f s after start" % took,
                  file=sys.stderr)
            if cls.xorg:
                cls.xorg.wait_devices(names)
                print("Xorg answering, with its devices, %.1f s after start" % (
                    time.monotonic() - cls.xorg.started), file=sys.stderr)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p, app in cls.apps.items():
            text = app.stop()
            if os.environ.get("DEVNS_QT_LOG"):
                print("--- %s's application\n%s" % (p, text), file=sys.stderr)
        for f in cls.frames.values():
            f.close()
        for c in list(cls.containers.values()) + ([cls.kiosk] if hasattr(cls, "kiosk") else []):
            c.stop()
        cls.stop_daemon()
        cls.kbd.close()
        cls.ts.close()

    def shots(self):
        return {p: self.frames[p].rgb() for p in PERSONAS}

    def assert_screen_shows(self, persona, name):
        ok, near, far = qtrig.screen_shows(self.frames, persona, name)
        if not ok and os.environ.get("DEVNS_OUT"):
            for p, f in self.frames.items():
                with open(os.path.join(os.environ["DEVNS_OUT"], "%s-frame-%s.ppm" % (name, p)), "wb") as out:
                    out.write(b"P6\n%d %d\n255\n" % (f.width, f.height) + f.rgb())
        self.assertTrue(ok, "the screen (%s.png) does not show %s's application: %s bytes differ from its "
                        "frame, %s from the nearest other persona's" % (name, persona, near, far))

    def wait_changed(self, persona, before, threshold, timeout=30):
        """Waits until the persona's frame differs from before by more than threshold; returns the
        last difference."""
        deadline = time.monotonic() + timeout
        while True:
            diff = qtrig.differing(self.frames[persona].rgb(), before)
            if diff > threshold or time.monotonic() > deadline:
                return diff
            time.sleep(0.3)

    def assert_unchanged(self, persona, before, what):
        time.sleep(1.0)
        diff = qtrig.differing(self.frames[persona].rgb(), before)
        self.assertLessEqual(diff, qtrig.NOISE, "%s reached %s's application in the background "
                             "(%d bytes of its frame changed)" % (what, persona, diff))

    def test_1_a_switch_shows_the_other_application(self):
        self.assert_screen_shows("work", "qt-0-work")
        steps = [("devnsctl", "personal"), ("hotkey", "work"), ("hotkey", "personal"), ("devnsctl", "work")]
        for n, (how, persona) in enumerate(steps, 1):
            with self.subTest(how=how, persona=persona):
                if how == "devnsctl":
                    rig.devnsctl("switch", persona)
                else:
                    qtrig.hotkey(self.kbd, persona)
                self.assert_screen_shows(persona, "qt-%d-%s-by-%s" % (n, persona, how))
                self.assertIn("Active persona: " + persona, rig.devnsctl("status").stdout)

    def test_2_the_keyboard_types_into_the_active_application_only(self):
        for active in PERSONAS:
            with self.subTest(active=active):
                rig.devnsctl("switch", active)
                before = self.shots()
                qtrig.type_text(self.kbd, "typed in %s on the keyboard " % active)
                diff = self.wait_changed(active, before[active], qtrig.TYPED)
                self.assertGreater(diff, qtrig.TYPED, "typing did not reach %s's application" % active)
                self.assert_unchanged(OTHER[active], before[OTHER[active]], "typing")
                self.assert_screen_shows(active, "qt-typed-in-" + active)

    def test_3_the_touchscreen_opens_the_active_applications_menu_only(self):
        for active in PERSONAS:
            with self.subTest(active=active):
                rig.devnsctl("switch", active)
                before = self.shots()
                # The menu bar's first entry, File, at the window's top left.
                qtrig.tap_screen(self.ts, self.w, self.h, 20, 10)
                diff = self.wait_changed(active, before[active], qtrig.MENU)
                self.assertGreater(diff, qtrig.MENU, "a tap did not open %s's File menu" % active)
                self.assert_unchanged(OTHER[active], before[OTHER[active]], "a tap")
                self.assert_screen_shows(active, "qt-menu-of-" + active)
                # Escape closes the menu again: keys go to the popup the tap opened. (The menu
                # bar's File stays lit under the touch point.)
                qtrig.tap_key(self.kbd, e.KEY_ESC)
                deadline = time.monotonic() + 20
                while qtrig.differing(self.frames[active].rgb(), before[active]) > qtrig.MENU:
                    self.assertLess(time.monotonic(), deadline, "Escape did not close %s's menu" % active)
                    time.sleep(0.3)
                # The menu bar keeps the keyboard (File stays lit) until a second Escape gives it back to
                # the text: keys typed later are text again.
                qtrig.tap_key(self.kbd, e.KEY_ESC)

    def test_4_xorg_in_a_third_persona(self):
        if not self.xorg:
            self.skipTest("Xorg, its fbdev and libinput drivers, xinput or xsetroot are not installed")
        # X draws its root in the background, into its persona's memory only.
        p = self.xorg.client("xsetroot", "-solid", "#3060c0")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        events = self.xorg.client_popen("xinput", "test-xi2", "--root")
        out = rig.Output(events)
        try:
            time.sleep(3)  # for xinput to connect and select events
            before = self.shots()
            qtrig.tap_key(self.kbd, e.KEY_Q)  # work is active: not for X
            rig.devnsctl("switch", "kiosk")
            self.assert_screen_shows("kiosk", "qt-xorg-kiosk")
            qtrig.tap_key(self.kbd, e.KEY_X)
            qtrig.tap_screen(self.ts, self.w, self.h, 600, 400)
            # Keycodes in X are evdev's plus 8.
            self.assertTrue(out.wait_for(r"(?s)KeyPress.*detail: %d\b" % (e.KEY_X + 8), 30), out.text)
            self.assertTrue(out.wait_for(r"TouchBegin", 30), out.text)
            for q in PERSONAS:
                self.assert_unchanged(q, before[q], "input for X")
            rig.devnsctl("switch", "work")
            self.assert_screen_shows("work", "qt-xorg-back-to-work")
            # Back in the background, X draws a root of another colour into its persona's memory only.
            self.x_draws("#c06030", "in the background")
            # Keys typed now are work's: they must change work's application, on the screen (which is no
            # later than X's drawing would have reached it), and never reach X.
            work_before = self.frames["work"].rgb()
            qtrig.type_text(self.kbd, "zzzz zzzz zzzz zzzz")
            self.assertGreater(self.wait_changed("work", work_before, qtrig.TYPED), qtrig.TYPED,
                               "keys typed after switching back from X did not reach work's application")
            self.assert_screen_shows("work", "qt-xorg-drew-in-the-background")
            # X's next key, once its persona is active again, comes behind the key typed for work.
            rig.devnsctl("switch", "kiosk")
            self.assert_screen_shows("kiosk", "qt-xorg-kiosk-again")
            qtrig.tap_key(self.kbd, e.KEY_C)
            self.assertTrue(out.wait_for(r"(?s)KeyPress.*detail: %d\b" % (e.KEY_C + 8), 30), out.text)
            # Active again, what X draws reaches the screen.
            self.x_draws("#30c060", "while active again")
            self.assert_screen_shows("kiosk", "qt-xorg-drew-while-active-again")
            rig.devnsctl("switch", "work")
            self.assert_screen_shows("work", "qt-xorg-back-to-work-again")
            # The second time in the background as the first: X's drawing stays off the screen, keys typed for
            # work reach work's application only.
            self.x_draws("#c0c030", "in the background again")
            work_before = self.frames["work"].rgb()
            qtrig.type_text(self.kbd, "vvvv vvvv vvvv vvvv")
            self.assertGreater(self.wait_changed("work", work_before, qtrig.TYPED), qtrig.TYPED,
                               "keys typed after switching back from X again did not reach work's application")
            self.assert_screen_shows("work", "qt-xorg-drew-in-the-background-again")
        finally:
            os.killpg(events.pid, signal.SIGTERM)
            text = out.finish()
            events.stdout.close()
        self.assertNotRegex(text, r"detail: %d\b" % (e.KEY_Q + 8), "X got a key typed while work was active")
        self.assertNotRegex(text, r"detail: %d\b" % (e.KEY_Z + 8), "X got a key typed after switching back to work")
        self.assertNotRegex(text, r"detail: %d\b" % (e.KEY_V + 8),
                            "X got a key typed after switching back to work the second time")

    def x_draws(self, colour, when):
        """X paints its root colour; waits until its persona's frame has it."""
        before = self.frames["kiosk"].rgb()
        p = self.xorg.client("xsetroot", "-solid", colour)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertGreater(self.wait_changed("kiosk", before, qtrig.MENU), qtrig.MENU,
                           "X did not draw its new root " + when)


if __name__ == "__main__":
    rig.main()
