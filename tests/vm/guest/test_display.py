#!/usr/bin/python3
"""Framebuffer personas on a real kernel: the bochs DRM driver behind QEMU's
-vga std, the built devnsd with [Display] Backend=drm, persona fb0 nodes
over CUSE, and QEMU's screendump as the independent observer of the screen."""

import errno
import fcntl
import os
import re
import signal
import struct
import subprocess
import tempfile
import threading
import time
import unittest

import devnsrig as rig
import fbrig
from test_fb_track import Program, hexrgb

BUILD = rig.BUILD
FBDRAW = os.path.join(BUILD, "tests", "vm", "fbdraw")
PRELOAD = os.path.join(BUILD, "src", "libdevns-fbmmap.so")
SECCOMP_DENY = os.path.join(BUILD, "tests", "vm", "seccomp-deny")
OUT = os.environ.get("DEVNS_OUT", "/tmp")


class WithBus(unittest.TestCase):
    """A system bus of its own for the class's tests, each of which starts its own devnsd."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()

    @classmethod
    def tearDownClass(cls):
        cls.bus.stop()


class DisplayComesLater(WithBus):
    """devnsd started before the display's driver is loaded, as early in a boot: it waits for the
    device, up to 10 s, and drives it once it comes; without one it fails and says why, unless
    Mode= makes the personas' mode known, and a stop while it waits is a clean stop."""

    def setUp(self):
        subprocess.run(["rmmod", "bochs"], check=True)
        self.assertFalse(os.path.exists("/dev/dri"))

    def tearDown(self):
        if not os.path.exists("/dev/dri/card0"):
            subprocess.run(["modprobe", "bochs"], check=True)

    def test_waits_for_the_display_and_drives_it(self):
        loader = threading.Timer(3, subprocess.run, (["modprobe", "bochs"],), {"check": True})
        loader.start()
        daemon = rig.Daemon(fbrig.conf_display(), timeout=60)
        try:
            loader.join()
            self.assertIn("/dev/dri/card0: not there yet; waiting up to 10 s for it", daemon.output())
            fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
            try:
                var = fbrig.get_var(fd)
                w, h = var["xres"], var["yres"]
                frame = fbrig.frame(w, h, (200, 40, 40), band=(10, 50))
                fbrig.write_all(fd, frame)
            finally:
                os.close(fd)
            ok, diff = fbrig.screen_shows("display-later", w, h, frame)
            self.assertTrue(ok, "the screen does not show work's frame (%s pixels differ)" % diff)
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_fails_without_a_display(self):
        start = time.monotonic()
        with self.assertRaises(RuntimeError) as cm:
            rig.Daemon(fbrig.conf_display(), timeout=60)
        took = time.monotonic() - start
        self.assertIn("/dev/dri/card0: still not there after 10 s", str(cm.exception))
        self.assertGreater(took, 9.5)

    def test_with_a_mode_set_it_starts_without_the_display_and_shows_it_when_it_comes(self):
        """Mode= makes the personas' mode known without the device: past the wait devnsd starts
        without it, the personas draw and switch in memory, and the device that comes later shows
        the active persona's frame."""
        w, h = 1024, 768
        daemon = rig.Daemon(fbrig.conf_display(mode=(w, h)), timeout=60)
        try:
            self.assertIn("/dev/dri/card0: still not there after 10 s; starting without it, at 1024x768 (Mode=)",
                          daemon.output())
            self.assertIn("Display: gone", rig.devnsctl("status").stdout)
            frames = {p: fbrig.frame(w, h, color, band=(10, 50)) for p, color in
                      (("work", (30, 160, 60)), ("personal", (160, 30, 160)))}
            for p, data in frames.items():
                fd = os.open(fbrig.fb_node(p), os.O_RDWR)
                try:
                    self.assertEqual((fbrig.get_var(fd)["xres"], fbrig.get_var(fd)["yres"]), (w, h))
                    fbrig.write_all(fd, data)
                finally:
                    os.close(fd)
            rig.devnsctl("switch", "personal")
            subprocess.run(["modprobe", "bochs"], check=True)
            ok, diff = fbrig.screen_shows("display-mode-later", w, h, frames["personal"], timeout=20)
            self.assertTrue(ok, "the screen does not show personal's frame (%s pixels differ)\n%s"
                            % (diff, daemon.output()))
            self.assertIn("Display: on", rig.devnsctl("status").stdout)
            rig.devnsctl("switch", "work")
            ok, diff = fbrig.screen_shows("display-mode-later", w, h, frames["work"])
            self.assertTrue(ok, "the screen does not show work's frame (%s pixels differ)" % diff)
        finally:
            self.assertEqual(daemon.stop(), 0, daemon.output())

    def test_a_stop_while_waiting_is_a_clean_stop(self):
        conf = os.path.join(tempfile.mkdtemp(prefix="devnsd-"), "devnsd.conf")
        with open(conf, "w") as f:
            f.write(fbrig.conf_display())
        p = subprocess.Popen([rig.DEVNSD, "--config", conf], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        lines = []
        reader = threading.Thread(target=rig.collect, args=(p.stdout, lines), daemon=True)
        reader.start()
        try:
            self.assertTrue(rig.eventually(lambda: any("waiting up to 10 s" in l for l in lines), timeout=8),
                            "\n".join(lines))
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(5), 0, "\n".join(lines))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        reader.join(5)
        self.assertIn("/dev/dri/card0: asked to stop while waiting for it", "\n".join(lines))
        self.assertFalse(os.path.exists(fbrig.fb_node("work")), "a node outlived the stop")


def display_pci_device():
    """The PCI device behind /dev/dri/card0 (QEMU's VGA, bound to bochs)."""
    return os.path.realpath("/sys/class/drm/card0/device")


def card0_again():
    """Leaves the display as card0, as the tests that follow expect it: a test may leave it gone, or back
    as card1 (a device that came back while devnsd, or the old framebuffer, held the old one)."""
    if os.path.exists("/dev/dri/card0"):
        assert os.path.realpath("/sys/class/graphics/fb0/device") == os.path.realpath("/sys/class/drm/card0/device"), \
            "fb0 is not the display's: %s" % os.path.realpath("/sys/class/graphics/fb0/device")
        return
    if os.path.exists("/sys/class/drm/card1"):
        rig.write_file(os.path.join(os.path.realpath("/sys/class/drm/card1/device"), "remove"), "1")
    rig.write_file("/sys/bus/pci/rescan", "1")
    assert rig.eventually(lambda: os.path.exists("/dev/dri/card0"), timeout=20), \
        "the display did not come back as card0: %s" % sorted(os.listdir("/sys/class/drm"))


class DisplayGoesAndComesBack(WithBus):
    """The display's device goes away while devnsd runs (its PCI device removed, as a driver unbound
    or a USB display unplugged) and comes back (a PCI rescan): the personas go on drawing and
    switching meanwhile, devnsd lets go of the device so that it comes back under its name, and the
    screen then shows the active persona's latest frame, powered as that persona asks."""

    def setUp(self):
        self.pci = display_pci_device()
        self.daemon = rig.Daemon(fbrig.conf_display(), timeout=60)
        self.fds = {}
        for name in ("work", "personal"):
            self.fds[name] = os.open(fbrig.fb_node(name), os.O_RDWR)
        var = fbrig.get_var(self.fds["work"])
        self.w, self.h = var["xres"], var["yres"]

    def tearDown(self):
        for fd in self.fds.values():
            os.close(fd)
        try:
            self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        finally:
            card0_again()

    def write(self, persona, data):
        fbrig.set_pos(self.fds[persona], 0)
        fbrig.write_all(self.fds[persona], data)

    def assert_screen(self, name, data, what):
        ok, diff = fbrig.screen_shows(name, self.w, self.h, data)
        self.assertTrue(ok, "%s (%s pixels differ)\n%s" % (what, diff, self.daemon.output()))

    def go(self):
        rig.write_file(os.path.join(self.pci, "remove"), "1")
        self.assertTrue(rig.eventually(lambda: not os.path.exists("/dev/dri/card0")), "card0 did not go")
        self.assertTrue(rig.eventually(lambda: "/dev/dri/card0: gone" in self.daemon.output()),
                        "devnsd did not notice the display going:\n" + self.daemon.output())

    def come_back(self):
        rig.write_file("/sys/bus/pci/rescan", "1")
        self.assertTrue(rig.eventually(lambda: os.path.exists("/sys/class/drm/card0"), timeout=20),
                        "the display came back as %s, not as card0: devnsd still held the old one"
                        % sorted(os.listdir("/sys/class/drm")))

    def test_personas_outlive_the_display_and_the_active_one_is_shown_when_it_is_back(self):
        a = fbrig.frame(self.w, self.h, (200, 40, 40), band=(10, 50))
        self.write("work", a)
        self.assert_screen("gone-before", a, "work's frame is not on the screen before the display goes")
        self.go()
        self.assertIn("Display: gone", rig.devnsctl("status").stdout)

        # Drawing and switching go on without the display, and a switch is answered at once.
        b = fbrig.frame(self.w, self.h, (40, 40, 200), band=(300, 380))
        c = fbrig.frame(self.w, self.h, (40, 200, 40), band=(100, 150))
        self.write("work", b)
        self.write("personal", c)
        start = time.monotonic()
        rig.devnsctl("switch", "personal")
        self.assertLess(time.monotonic() - start, 5, "SwitchTo waited for a display that is gone")
        path = os.path.join(OUT, "gone-personal.png")
        rig.devnsctl("screenshot", "personal", path)
        self.assertTrue(fbrig.read_png_rgb(path)[2] == fbrig.to_rgb(c), "personal's frame was lost meanwhile")

        self.come_back()
        self.assert_screen("back-personal", c, "the display came back without the active persona's frame")
        self.assertIn("/dev/dri/card0: back; showing persona personal", self.daemon.output())
        self.assertIn("Display: on", rig.devnsctl("status").stdout)
        rig.devnsctl("switch", "work")
        self.assert_screen("back-work", b, "a switch after the display came back does not show work's frame")
        d = fbrig.frame(self.w, self.h, (90, 90, 20), band=(500, 520))
        self.write("work", d)
        self.assert_screen("back-work-drawn", d, "work's next frame does not reach the display that came back")

    def test_a_blanked_persona_keeps_the_display_that_comes_back_powered_down(self):
        a = fbrig.frame(self.w, self.h, (10, 120, 200), band=(60, 90))
        self.write("work", a)
        fbrig.fcntl.ioctl(self.fds["work"], fbrig.FBIOBLANK, 4)
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "blanking did not power the display down")
        self.go()
        self.come_back()
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"),
                        "the display came back lit for a blanked persona: %s" % fbrig.dpms())
        fbrig.fcntl.ioctl(self.fds["work"], fbrig.FBIOBLANK, 0)
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "unblanking did not power it up")
        self.assert_screen("back-unblanked", a, "work's frame is not shown once it unblanks")


    def test_a_driver_bound_again_before_devnsd_let_go_is_taken_under_its_new_name(self):
        """The display's device is removed and found again while devnsd is stopped (SIGSTOP), as when its
        driver is unbound and bound again quickly: devnsd still holds card0, so the device comes back as
        card1. devnsd knows it by its PCI device, takes it, and shows the active persona on it."""
        a = fbrig.frame(self.w, self.h, (200, 40, 40), band=(10, 50))
        self.write("work", a)
        self.assert_screen("rebound-before", a, "work's frame is not on the screen before the display goes")
        os.kill(self.daemon.proc.pid, signal.SIGSTOP)
        try:
            rig.write_file(os.path.join(self.pci, "remove"), "1")
            rig.write_file("/sys/bus/pci/rescan", "1")
            self.assertTrue(rig.eventually(lambda: os.path.exists("/dev/dri/card1"), timeout=20),
                            "the display did not come back as card1: %s" % sorted(os.listdir("/sys/class/drm")))
        finally:
            os.kill(self.daemon.proc.pid, signal.SIGCONT)
        self.assertTrue(rig.eventually(lambda: "/dev/dri/card0: back as /dev/dri/card1; showing persona work"
                                       in self.daemon.output(), timeout=20),
                        "devnsd did not take the display under its new name:\n" + self.daemon.output())
        self.assert_screen("rebound-after", a, "the display that came back as card1 does not show work's frame")
        b = fbrig.frame(self.w, self.h, (40, 40, 200), band=(300, 380))
        self.write("work", b)
        self.assert_screen("rebound-drawn", b, "work's next frame does not reach card1")
        self.assertIn("Display: on", rig.devnsctl("status").stdout)

        # devnsd killed and started again: card0 is not there, the last run's display is card1.
        os.kill(self.daemon.proc.pid, signal.SIGKILL)
        self.daemon.proc.wait()
        self.daemon.start()
        self.assertIn("/dev/dri/card0: taking /dev/dri/card1, where the last run's display is now",
                      self.daemon.output())
        self.assert_screen("rebound-restarted", b, "devnsd started again does not show work's frame on card1")
        for name in self.fds:
            os.close(self.fds[name])
            self.fds[name] = os.open(fbrig.fb_node(name), os.O_RDWR)

        # Gone again under its new name, and back once more.
        rig.write_file(os.path.join(self.pci, "remove"), "1")
        self.assertTrue(rig.eventually(lambda: self.daemon.output().count("/dev/dri/card0: gone;") == 2),
                        "devnsd did not notice card1 going:\n" + self.daemon.output())
        rig.write_file("/sys/bus/pci/rescan", "1")
        self.assertTrue(rig.eventually(lambda: os.path.exists("/dev/dri/card0"), timeout=20),
                        "the display did not come back as card0 once devnsd let go of card1: %s"
                        % sorted(os.listdir("/sys/class/drm")))
        self.assertTrue(rig.eventually(lambda: "/dev/dri/card0: back; showing persona work" in self.daemon.output(),
                                       timeout=20),
                        "devnsd did not take card0 again:\n" + self.daemon.output())
        self.assert_screen("rebound-again", b, "the display back as card0 does not show work's frame")

    def test_a_remove_event_for_a_device_still_there_is_not_a_device_gone(self):
        """A "remove" event the kernel sends for card0 on request (a write to its uevent file), with the
        device still there: devnsd keeps the display and goes on showing what the persona draws."""
        rig.write_file("/sys/class/drm/card0/uevent", "remove")
        time.sleep(1)
        a = fbrig.frame(self.w, self.h, (120, 20, 160), band=(200, 240))
        self.write("work", a)
        self.assert_screen("remove-event", a, "work's frame after a remove event for a device still there")
        self.assertNotIn("gone", self.daemon.output())
        self.assertIn("Display: on", rig.devnsctl("status").stdout)

    def test_a_tracked_mapping_is_shown_when_it_is_back_and_costs_nothing_idle(self):
        """A program draws through its mapping under the preload library (writes tracked through
        write faults): what it draws while the display is gone is shown when it is back, and once it is
        quiet devnsd sleeps again, as it does for an idle mapping on a display that never went."""
        first, second = (20, 140, 220), (220, 140, 20)
        p = Program(self, "fill", hexrgb(first), "wait", "fill", hexrgb(second), "sleep", "60000")
        p.wait_for("fill ok")
        self.assert_screen("tracked-before", fbrig.frame(self.w, self.h, first), "the mapped frame before")
        self.go()
        p.go()
        self.assertTrue(p.out.wait_for(r"(?s)fill ok.*fill ok", 30), "fbanim did not draw again:\n" + p.out.text)
        self.come_back()
        self.assert_screen("tracked-back", fbrig.frame(self.w, self.h, second),
                           "what the program drew while the display was gone")
        time.sleep(0.5)
        pid = self.daemon.proc.pid
        before = rig.sleeps(pid)
        time.sleep(3)
        n = rig.sleeps(pid) - before
        self.assertLessEqual(n, 3, "devnsd woke %d times in 3 s for an idle mapping once the display was back" % n)
        self.assertIsNone(p.proc.poll(), "fbanim stopped holding its mapping early")


def in_the_middle(xrgb, w, h, screen_w, screen_h):
    """A screen of screen_w x screen_h, black, with the w x h frame xrgb in its middle."""
    out = bytearray(screen_w * screen_h * 4)
    x, y = (screen_w - w) // 2, (screen_h - h) // 2
    for row in range(h):
        at = ((y + row) * screen_w + x) * 4
        out[at:at + w * 4] = xrgb[row * w * 4:(row + 1) * w * 4]
    return bytes(out)


class DeviceThroughALink(WithBus):
    """Device= names a link to the display's node, as udev's /dev/dri/by-path/ links are: devnsd
    drives the node it leads to."""

    def test_the_device_a_link_leads_to_is_driven(self):
        tmp = tempfile.TemporaryDirectory(prefix="by-path-")
        self.addCleanup(tmp.cleanup)
        link = os.path.join(tmp.name, "pci-card")
        os.symlink("/dev/dri/card0", link)
        conf = fbrig.conf_display().replace("Device=/dev/dri/card0", "Device=" + link)
        self.assertIn("Device=" + link, conf)
        daemon = rig.Daemon(conf, timeout=60)
        fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        try:
            var = fbrig.get_var(fd)
            a = fbrig.frame(var["xres"], var["yres"], (90, 20, 160), band=(100, 160))
            fbrig.write_all(fd, a)
            ok, diff = fbrig.screen_shows("through-a-link", var["xres"], var["yres"], a)
            self.assertTrue(ok, "work's frame is not on the screen (%s pixels differ)\n%s" % (diff, daemon.output()))
        finally:
            os.close(fd)
            self.assertTrue(daemon.alive(), "devnsd died:\n" + daemon.output())
            self.assertEqual(daemon.stop(), 0, daemon.output())


class ModeTheDisplayLacks(WithBus):
    """Mode= names a size the display has no mode of, as for a persona's system made for another
    panel: the personas get that size, and the screen, in its preferred mode, shows the active
    persona's frame in its middle, black around it."""

    def test_the_frames_are_shown_in_the_middle_of_the_screen(self):
        w, h = 1000, 700
        daemon = rig.Daemon(fbrig.conf_display(mode=(w, h)), timeout=60)
        try:
            self.assertRegex(daemon.output(), r"no 1000x700 mode; the personas' frames are shown in the middle "
                             r"of \d+x\d+")
            frames = {p: fbrig.frame(w, h, color, band=band) for p, color, band in
                      (("work", (200, 40, 40), (10, 50)), ("personal", (40, 40, 200), (600, 690)))}
            for p, data in frames.items():
                fd = os.open(fbrig.fb_node(p), os.O_RDWR)
                try:
                    var = fbrig.get_var(fd)
                    self.assertEqual((var["xres"], var["yres"]), (w, h))
                    fbrig.write_all(fd, data)
                finally:
                    os.close(fd)
            screen_w, screen_h, _ = fbrig.screendump("middle-size")
            self.assertTrue(screen_w > w and screen_h > h, "the screen is %dx%d" % (screen_w, screen_h))
            for p in ("work", "personal"):
                if p == "personal":
                    rig.devnsctl("switch", "personal")
                ok, diff = fbrig.screen_shows("middle-" + p, screen_w, screen_h,
                                              in_the_middle(frames[p], w, h, screen_w, screen_h))
                self.assertTrue(ok, "the screen does not show %s's frame in its middle (%s pixels differ)\n%s"
                                % (p, diff, daemon.output()))
        finally:
            self.assertTrue(daemon.alive(), "devnsd died:\n" + daemon.output())
            self.assertEqual(daemon.stop(), 0, daemon.output())


class FramebufferRegisteredAgain(WithBus):
    """Backend=fbdev on the kernel's framebuffer (bochs' fbdev emulation, /dev/fb0). Its PCI device
    is removed and found again while devnsd is stopped (SIGSTOP), so the new framebuffer has taken
    /dev/fb0 before devnsd hears of the removal, as when a driver is rebound quickly: a framebuffer's
    number is free again as soon as it is unregistered, while devnsd still holds the old one."""

    def setUp(self):
        self.pci = display_pci_device()
        self.daemon = rig.Daemon(fbrig.conf_display(backend="fbdev"), timeout=60)
        self.addCleanup(self.stop)
        self.fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        self.addCleanup(os.close, self.fd)
        var = fbrig.get_var(self.fd)
        self.w, self.h = var["xres"], var["yres"]
        self.draw_and_see("before", (200, 40, 40), (10, 50), "work's frame is not on the screen")

    def stop(self):
        try:
            self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
            self.assertEqual(self.daemon.stop(), 0, self.daemon.output())
        finally:
            if os.path.exists("/sys/bus/platform/drivers/vfb/vfb.0"):
                # fbcon may hold vfb's framebuffer: unbinding it lets go.
                rig.write_file("/sys/bus/platform/drivers/vfb/unbind", "vfb.0")
                subprocess.run(["rmmod", "vfb"], check=True)
            card0_again()
        self.assertEqual(console_mode(), KD_TEXT, "devnsd left the console in graphics mode")

    def draw_and_see(self, name, color, band, what):
        data = fbrig.frame(self.w, self.h, color, band=band)
        fbrig.set_pos(self.fd, 0)
        fbrig.write_all(self.fd, data)
        ok, diff = fbrig.screen_shows("fbdev-" + name, self.w, self.h, data, timeout=20)
        self.assertTrue(ok, "%s (%s pixels differ)\n%s" % (what, diff, self.daemon.output()))

    def while_stopped(self, *steps):
        """Runs steps while devnsd is stopped, so that it hears of what they do only afterwards."""
        os.kill(self.daemon.proc.pid, signal.SIGSTOP)
        try:
            for step in steps:
                step()
        finally:
            os.kill(self.daemon.proc.pid, signal.SIGCONT)

    def remove(self):
        rig.write_file(os.path.join(self.pci, "remove"), "1")

    def rescan(self, node):
        rig.write_file("/sys/bus/pci/rescan", "1")
        self.assertTrue(rig.eventually(lambda: os.path.exists(node), timeout=20),
                        "the display did not come back as %s: %s" % (node, sorted(os.listdir("/sys/class/graphics"))))

    def test_the_active_persona_is_shown_on_the_new_framebuffer(self):
        self.while_stopped(self.remove, lambda: self.rescan("/dev/fb0"))
        self.draw_and_see("again", (40, 40, 200), (300, 380), "the new framebuffer does not show work's frame")
        self.assertIn("Display: on", rig.devnsctl("status").stdout)
        self.assertEqual(console_mode(), KD_GRAPHICS, "the console may draw over the frame")

    def test_another_framebuffer_under_its_name_is_left_alone_and_its_own_taken_under_a_new_one(self):
        """While devnsd is stopped the display's PCI device is removed, vfb (a framebuffer in memory)
        registers as /dev/fb0, and the display comes back as /dev/fb1: devnsd leaves vfb alone and
        takes fb1, which belongs to the same PCI device as the framebuffer it held."""
        def vfb():
            subprocess.run(["modprobe", "vfb", "vfb_enable=1"], check=True)
            self.assertIn("vfb", os.path.realpath("/sys/class/graphics/fb0/device"))

        self.while_stopped(self.remove, vfb, lambda: self.rescan("/dev/fb1"))
        self.assertTrue(rig.eventually(lambda: "/dev/fb0: back as /dev/fb1; showing persona work"
                                       in self.daemon.output(), timeout=20),
                        "devnsd did not take the display as fb1:\n" + self.daemon.output())
        self.draw_and_see("fb1", (160, 20, 90), (400, 480), "fb1 does not show work's frame")
        self.assertNotIn("back, but", self.daemon.output(), "devnsd tried vfb's fb0")


KDGETMODE, KD_TEXT, KD_GRAPHICS = 0x4B3B, 0, 1


def console_mode():
    """The mode of the virtual terminal shown (KD_TEXT: the kernel's console draws on the framebuffer)."""
    fd = os.open("/dev/tty0", os.O_RDWR | os.O_NOCTTY)
    try:
        return struct.unpack("i", fcntl.ioctl(fd, KDGETMODE, bytes(4)))[0]
    finally:
        os.close(fd)


class FramebufferPersonas(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.native = cls.kernel_behaviour()
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(fbrig.conf_display(routed=True))
        fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        try:
            cls.var = fbrig.get_var(fd)
            cls.fix = fbrig.get_fix(fd)
        finally:
            os.close(fd)
        cls.w, cls.h = cls.var["xres"], cls.var["yres"]
        cls.frame_size = cls.w * cls.h * 4
        cls.n_dumps = 0

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    @staticmethod
    def kernel_behaviour():
        """The errors the kernel's own fbdev (bochs' DRM emulation, /dev/fb0) gives, before devnsd takes the display."""
        fd = os.open("/dev/fb0", os.O_RDWR)
        try:
            fix = fbrig.get_fix(fd)
            size = fix["smem_len"]
            return {
                "write_at_end": errno_of(lambda: os.pwrite(fd, b"x", size)),
                "write_past_end": errno_of(lambda: os.pwrite(fd, b"x", size + 4096)),
                "write_across_end": os.pwrite(fd, b"\0" * 100, size - 40),
                "read_at_end": len(os.pread(fd, 100, size)),
                "bad_ioctl": errno_of(lambda: fbrig.fcntl.ioctl(fd, 0x46FF, b"\0" * 8)),
                "huge_var": errno_of(lambda: fbrig.put_var(fd, dict(fbrig.get_var(fd), xres=100000,
                                                                     xres_virtual=100000))),
                # The display's power after FBIOBLANK to POWERDOWN, then after unblanking.
                "blank_dpms": blank_dpms(fd),
            }
        finally:
            os.close(fd)

    def open_fb(self, persona, flags=os.O_RDWR):
        fd = os.open(fbrig.fb_node(persona), flags)
        self.fds.append(fd)
        return fd

    def draw(self, persona, data):
        fd = self.open_fb(persona)
        fbrig.write_all(fd, data)
        return fd

    def assert_screen(self, data, what, timeout=10.0):
        type(self).n_dumps += 1
        name = "%s-%02d" % (self.id().split(".")[-1], self.n_dumps)
        ok, diff = fbrig.screen_shows(name, self.w, self.h, data, timeout=timeout)
        self.assertTrue(ok, "%s: screen (%s.png) differs from the expected frame: %s pixels" % (what, name, diff))

    # --- what the screen shows ---------------------------------------------------------

    def test_switch_shows_latest_frame(self):
        a = fbrig.frame(self.w, self.h, (200, 0, 0), band=(10, 50))
        b = fbrig.frame(self.w, self.h, (0, 0, 200), band=(300, 380))
        self.draw("work", a)
        self.draw("personal", b)
        self.assert_screen(a, "work active")
        rig.devnsctl("switch", "personal")
        self.assert_screen(b, "after switching to personal")
        c = fbrig.frame(self.w, self.h, (0, 150, 0), band=(500, 520))
        self.draw("personal", c)
        self.assert_screen(c, "personal drew while active")
        d = fbrig.frame(self.w, self.h, (90, 90, 90), band=(0, 799))
        self.draw("work", d)
        self.assert_screen(c, "work drew in the background")
        rig.devnsctl("switch", "work")
        self.assert_screen(d, "after switching back to work")
        rig.devnsctl("switch", "personal")
        self.assert_screen(c, "after switching to personal again")

    def test_switch_answer_means_on_screen(self):
        """Once SwitchTo answers, one screendump shows the persona: no waiting, also when switching back
        to a frame shown before that changed meanwhile (by write() of whole frames or of a few rows,
        through a mapping, by blanking) or did not."""
        frames = {
            "work": fbrig.frame(self.w, self.h, (120, 10, 10), band=(100, 140)),
            "personal": fbrig.frame(self.w, self.h, (10, 10, 120), band=(600, 640)),
        }
        for name, data in frames.items():
            self.draw(name, data)
        steps = [
            ("personal", None), ("work", None), ("personal", None),
            ("work", "write"), ("personal", None), ("work", "mmap"), ("personal", "write"), ("work", None),
            ("personal", "rows"), ("work", "rows"), ("personal", "rows"), ("work", "blank"), ("personal", None),
            ("work", "unblank"),
        ]
        row = self.w * 4
        for i, (to, change) in enumerate(steps):
            if change == "write":
                frames[to] = fbrig.frame(self.w, self.h, (30 * i % 256, 200, 40), band=(10 * i, 10 * i + 30))
                self.draw(to, frames[to])
            elif change == "mmap":
                self.run_fbdraw(to, 20 + i)
                frames[to] = fbrig.pattern_frame(self.w, self.h, 20 + i)
            elif change == "rows":
                # Two bands of rows, each by its own write() at its own position; the rest stays.
                fd = self.open_fb(to)
                for y0, n in ((37 * i % (self.h - 20), 7), (self.h - 3, 3)):
                    band = fbrig.pixel((i * 20 % 256, 255 - i, 9)) * self.w * n
                    fbrig.set_pos(fd, y0 * row)
                    fbrig.write_all(fd, band)
                    frames[to] = frames[to][:y0 * row] + band + frames[to][(y0 + n) * row:]
                # The background persona's frame is kept ready off screen, never shown before the switch.
                shown = steps[i - 1][0]
                self.assert_screen(frames[shown], "step %d: %s wrote rows in the background" % (i, to), timeout=0)
            elif change in ("blank", "unblank"):
                fd = self.open_fb(to)
                fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4 if change == "blank" else 0)
            rig.devnsctl("switch", to)
            if change == "blank":
                self.assert_screen(bytes(self.frame_size), "step %d: switched to %s (blanked)" % (i, to), timeout=0)
                continue
            self.assert_screen(frames[to], "step %d: switched to %s (%s)" % (i, to, change or "unchanged"),
                               timeout=0)

    def test_background_writes_never_appear(self):
        a = fbrig.frame(self.w, self.h, (10, 20, 30))
        self.draw("work", a)
        fd = self.open_fb("personal")
        for i in range(5):
            fbrig.set_pos(fd, 0)
            fbrig.write_all(fd, fbrig.moving_frame(self.w, self.h, (250, 0, 250), i))
            fbrig.pan(fd, fbrig.get_var(fd), 0)
            self.assert_screen(a, "background write %d" % i)

    def test_cat_frame(self):
        path = os.path.join("/tmp", "frame.raw")
        data = fbrig.frame(self.w, self.h, (1, 2, 3), band=(400, 600), band_color=(250, 128, 7))
        with open(path, "wb") as f:
            f.write(data)
        subprocess.run("cat %s > %s" % (path, fbrig.fb_node("work")), shell=True, check=True)
        self.assert_screen(data, "cat frame.raw > fb0")

    def test_pan_double_buffer(self):
        fd = self.open_fb("work")
        var = fbrig.put_var(fd, dict(fbrig.get_var(fd), yres_virtual=2 * self.h))
        self.assertEqual(var["yres_virtual"], 2 * self.h)
        first = fbrig.frame(self.w, self.h, (0, 0, 90))
        second = fbrig.frame(self.w, self.h, (90, 0, 0), band=(0, 100))
        fbrig.write_all(fd, first + second)
        self.assert_screen(first, "yoffset 0")
        fbrig.pan(fd, var, self.h)
        self.assert_screen(second, "panned to yoffset %d" % self.h)
        fbrig.pan(fd, var, 0)
        self.assert_screen(first, "panned back")
        fbrig.put_var(fd, dict(fbrig.get_var(fd), yres_virtual=self.h))

    def test_pan_through_preload(self):
        """Under libdevns-fbmmap.so FBIOPAN_DISPLAY passes its offsets by value: the same view, the same
        errors (EINVAL out of range or with FB_VMODE_YWRAP, EFAULT for a bad pointer), on the routed node too."""
        fd = self.open_fb("work")
        var = fbrig.put_var(fd, dict(fbrig.get_var(fd), yres_virtual=2 * self.h))
        first = fbrig.frame(self.w, self.h, (0, 60, 0))
        second = fbrig.frame(self.w, self.h, (60, 60, 0), band=(500, 540))
        fbrig.write_all(fd, first + second)
        self.assert_screen(first, "yoffset 0")
        code = ("import ctypes, fcntl, os, sys\n"
                "sys.path.insert(0, %r)\n"
                "import fbrig\n"
                "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                "var = fbrig.get_var(fd)\n"
                "def pan(**changes):\n"
                "    try:\n"
                "        fcntl.ioctl(fd, fbrig.FBIOPAN_DISPLAY, bytes(fbrig.VAR.pack(\n"
                "            *(dict(var, **changes)[k] for k in fbrig.VAR_FIELDS))))\n"
                "        return 0\n"
                "    except OSError as err:\n"
                "        return err.errno\n"
                "libc = ctypes.CDLL(None, use_errno=True)\n"
                "bad = libc.ioctl(fd, ctypes.c_ulong(fbrig.FBIOPAN_DISPLAY), ctypes.c_void_p(8))\n"
                "print(pan(yoffset=var['yres'] + 1), pan(xoffset=1), pan(yoffset=0, vmode=1 << 8),\n"
                "      bad and ctypes.get_errno(), pan(yoffset=int(sys.argv[2])))\n"
                % os.path.dirname(os.path.abspath(__file__)))
        for node, yoffset, shown in ((fbrig.fb_node("work"), self.h, second),
                                     ("/dev/devns/fb0", 0, first)):
            p = subprocess.run(["/usr/bin/python3", "-c", code, node, str(yoffset)],
                               env=dict(os.environ, LD_PRELOAD=PRELOAD), capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.split(), [str(errno.EINVAL)] * 3 + [str(errno.EFAULT), "0"], node)
            self.assert_screen(shown, "panned to yoffset %d through %s under the preload library" % (yoffset, node))
        self.assertEqual(fbrig.get_var(fd)["yoffset"], 0)
        # The offsets go by value: with FBIOPAN_DISPLAY itself refused by a seccomp filter, the pan
        # still works under the library, and fails without it.
        pan = ("import os, sys\nsys.path.insert(0, %r)\nimport fbrig\n"
               "fd = os.open(sys.argv[1], os.O_RDWR)\nvar = fbrig.get_var(fd)\n"
               "try:\n    fbrig.pan(fd, var, int(sys.argv[2]))\n    print(0)\n"
               "except OSError as err:\n    print(err.errno)\n" % os.path.dirname(os.path.abspath(__file__)))
        for preload, want in ((False, errno.EPERM), (True, 0)):
            env = dict(os.environ, LD_PRELOAD=PRELOAD) if preload else dict(os.environ)
            p = subprocess.run([SECCOMP_DENY, "ioctl=%#x" % fbrig.FBIOPAN_DISPLAY, "/usr/bin/python3", "-c", pan,
                                fbrig.fb_node("work"), str(self.h)], env=env, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, str(want)), "preload=%s: %s" % (preload, p.stderr))
        self.assert_screen(second, "panned by value with FBIOPAN_DISPLAY refused")
        fbrig.pan(fd, var, 0)
        fbrig.put_var(fd, dict(fbrig.get_var(fd), yres_virtual=self.h))

    def test_blank(self):
        data = fbrig.frame(self.w, self.h, (0, 200, 200))
        fd = self.draw("work", data)
        fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4)
        self.assert_screen(bytes(self.frame_size), "blanked")
        fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 0)
        self.assert_screen(data, "unblanked")

    def test_blank_powers_the_display_down(self):
        """As the kernel's own fbdev does, the active persona's blank powers the display down and its
        unblank up again; a background persona's blank changes nothing, and a switch follows the
        blanking of the persona switched to. What a persona writes while blanked shows once it unblanks."""
        self.assertEqual(self.native["blank_dpms"], ("Off", "On"), "the kernel's fbdev")
        frames = {"work": fbrig.frame(self.w, self.h, (200, 100, 0)),
                  "personal": fbrig.frame(self.w, self.h, (0, 100, 200))}
        fds = {p: self.draw(p, frames[p]) for p in frames}
        rig.devnsctl("switch", "work")
        self.assertEqual(fbrig.dpms(), "On")
        fbrig.fcntl.ioctl(fds["personal"], fbrig.FBIOBLANK, 4)
        # A marker: a frame work draws after the blank, which the screen must show.
        frames["work"] = fbrig.frame(self.w, self.h, (200, 100, 0), band=(60, 90))
        fbrig.set_pos(fds["work"], 0)
        fbrig.write_all(fds["work"], frames["work"])
        self.assert_screen(frames["work"], "work drew after a background persona blanked")
        self.assertEqual(fbrig.dpms(), "On", "a background persona's blank")
        fbrig.fcntl.ioctl(fds["work"], fbrig.FBIOBLANK, 4)
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "the active persona blanked")
        self.assertIn("Display: powered down (the active persona blanked it)\n", rig.devnsctl("status").stdout)
        frames["work"] = fbrig.frame(self.w, self.h, (250, 250, 0), band=(10, 40))
        fbrig.set_pos(fds["work"], 0)
        fbrig.write_all(fds["work"], frames["work"])
        time.sleep(0.5)
        self.assertEqual(fbrig.dpms(), "Off", "a blanked persona wrote")
        for to, fd in (("personal", fds["personal"]), ("work", fds["work"])):
            rig.devnsctl("switch", to)
            # Down since work blanked, for personal; down again, once a power-down is due, for work.
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off", timeout=0 if to == "personal" else 5.0),
                            "switched to %s, blanked" % to)
            fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 0)
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "%s unblanked" % to)
            self.assert_screen(frames[to], "%s unblanked" % to)
        rig.devnsctl("switch", "personal")
        self.assertEqual(fbrig.dpms(), "On")
        self.assertIn("Display: on\n", rig.devnsctl("status").stdout)

    def test_blanking_in_a_loop_powers_the_display_down_a_bounded_number_of_times(self):
        """An active persona that blanks and unblanks in a loop has the display powered down a few
        times at first, then at most once per interval; it goes down once due after the loop, and
        unblanking brings the frame back at once."""
        frame = fbrig.frame(self.w, self.h, (200, 100, 0))
        fd = self.draw("work", frame)
        rig.devnsctl("switch", "work")
        self.assertEqual(fbrig.dpms(), "On")
        downs, stop = [0], threading.Event()

        def watch():
            last = "On"
            while not stop.is_set():
                now = fbrig.dpms()
                if now == "Off" and last != "Off":
                    downs[0] += 1
                last = now
                time.sleep(0.001)

        watcher = threading.Thread(target=watch)
        watcher.start()
        start, cycles = time.monotonic(), 0
        try:
            while time.monotonic() - start < 4.0:
                fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4)
                time.sleep(0.03)
                fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 0)
                time.sleep(0.03)
                cycles += 1
        finally:
            stop.set()
            watcher.join()
        took = time.monotonic() - start
        # A burst of 3, then one every 2 s.
        bound = 3 + int(took / 2.0) + 1
        print("%d blank cycles in %.1f s: the display went down %d times (at most %d)"
              % (cycles, took, downs[0], bound))
        self.assertGreater(cycles, 2 * bound, "the loop was too slow to tell")
        self.assertGreater(downs[0], 0, "the display was never powered down")
        self.assertLessEqual(downs[0], bound, "powered down once per blank")
        self.assertEqual(fbrig.dpms(), "On")
        self.assert_screen(frame, "unblanked after the loop")
        fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 4)
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off", timeout=5.0),
                        "blanked after the loop: down once the next power-down is due")
        fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, 0)
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On", timeout=1.0), "unblanked")
        self.assert_screen(frame, "unblanked")

    # --- real clients ---------------------------------------------------------------------

    def test_fbset_reports_mode(self):
        out = subprocess.run(["fbset", "-fb", fbrig.fb_node("work"), "-i"], capture_output=True, text=True,
                             check=True).stdout
        self.assertIn("geometry %d %d %d %d 32" % (self.w, self.h, self.w, self.h), out)
        self.assertIn("LineLength  : %d" % (self.w * 4), out)
        self.assertIn("Visual      : TRUECOLOR", out)
        self.assertIn("rgba 8/16,8/8,8/0,0/0", out)

    def run_fbdraw(self, persona, seed, *args):
        env = dict(os.environ, LD_PRELOAD=PRELOAD)
        p = subprocess.run([FBDRAW, fbrig.fb_node(persona), str(seed), *args], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_mmap_program_draws(self):
        self.run_fbdraw("work", 7)
        self.assert_screen(fbrig.pattern_frame(self.w, self.h, 7), "fbdraw through the preload library")

    def run_fbwrite(self, persona, writes, preload=True, seek=False, read_only=False, bad_buffer=False, wrap=()):
        """writes: (position, bytes) pairs, each one write() by a separate program (run under wrap); its
        report as a dict of lists."""
        args = []
        for i, (pos, data) in enumerate(writes):
            path = os.path.join("/tmp", "fbwrite-%d.raw" % i)
            with open(path, "wb") as f:
                f.write(data)
            args += [str(pos), path]
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
        if preload:
            env["LD_PRELOAD"] = PRELOAD
        p = subprocess.run(list(wrap) + ["/usr/bin/python3",
                                         os.path.join(os.path.dirname(os.path.abspath(__file__)), "fbwrite.py")]
                           + (["--seek"] if seek else []) + (["--read-only"] if read_only else [])
                           + (["--bad-buffer"] if bad_buffer else [])
                           + [fbrig.fb_node(persona)] + args, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        report = {}
        for line in p.stdout.splitlines():
            key, value = line.split()
            report.setdefault(key, []).append(value)
        return report

    def test_write_through_preload(self):
        """Large write()s under libdevns-fbmmap.so go through the memfd: same results, bounds and errors as
        the node's own write(), on screen when active, kept back and shown at the switch when not.
        lseek() moves the stream position."""
        size = self.fix["smem_len"]
        big = 256 * 1024
        a = fbrig.frame(self.w, self.h, (222, 33, 44), band=(200, 260), band_color=(1, 250, 3))
        r = self.run_fbwrite("work", [(0, a)])
        self.assertEqual(r["memfd"], ["yes"], "the write did not take the memfd path")
        self.assertEqual(r["n"], [str(len(a))])
        self.assertEqual(r["pos"], [str(len(a))])
        self.assert_screen(a, "one write() of a whole frame through the preload library")

        # Rows in the middle, through the library and (for comparison) without it.
        row = self.w * 4
        band = fbrig.pixel((5, 6, 7)) * (big // 4)
        expected = a[:300 * row] + band + a[300 * row + big:]
        r = self.run_fbwrite("work", [(300 * row, band)])
        self.assertEqual((r["n"], r["pos"]), ([str(big)], [str(300 * row + big)]))
        self.assert_screen(expected, "a band of rows written at a position")

        # lseek() works too under the library; SEEK_END is the end of the framebuffer.
        band2 = fbrig.pixel((99, 0, 99)) * (big // 4)
        expected = expected[:10 * row] + band2 + expected[10 * row + big:]
        r = self.run_fbwrite("work", [(10 * row, band2)], seek=True)
        self.assertEqual((r["n"], r["pos"], r["cur"], r["end"]),
                         ([str(big)], [str(10 * row + big)], [str(10 * row + big)], [str(size)]))
        self.assert_screen(expected, "a band of rows written after lseek()")

        # The kernel's bounds: cut short across the end, ENOSPC at the end, EFBIG past it.
        for preload in (True, False):
            r = self.run_fbwrite("work", [(size - 40, bytes(big)), (size, bytes(big)), (size + 4096, bytes(big))],
                                 preload=preload)
            self.assertEqual(r["n"], ["40"], "preload=%s" % preload)
            self.assertEqual(r["errno"], [str(self.native["write_at_end"]), str(self.native["write_past_end"])],
                             "preload=%s" % preload)
            self.assertEqual(r["pos"], [str(size + 4096)])
            # An fd open only for reading cannot write, large write or not.
            r = self.run_fbwrite("work", [(0, bytes(big))], preload=preload, read_only=True)
            self.assertEqual(r["errno"], [str(errno.EBADF)], "preload=%s" % preload)
            # A buffer the program cannot read: EFAULT, the position stays, the screen too.
            r = self.run_fbwrite("work", [(row, bytes(big))], preload=preload, bad_buffer=True)
            self.assertEqual((r.get("errno"), r["pos"]), ([str(errno.EFAULT)], [str(row)]), "preload=%s" % preload)
        self.assert_screen(expected, "after writes that failed")

        # The library's own path, seen: a frame written with pwrite() and DEVNS_FBIO_WROTE refused by a
        # seccomp filter still arrives (copied into the mapping, reported by value).
        d = fbrig.frame(self.w, self.h, (200, 130, 20), band=(600, 640), band_color=(0, 0, 250))
        r = self.run_fbwrite("work", [(0, d)], wrap=(SECCOMP_DENY, "pwrite64,ioctl=%#x" % fbrig.DEVNS_FBIO_WROTE))
        self.assertEqual((r["n"], r["memfd"]), ([str(len(d))], ["yes"]))
        self.assert_screen(d, "a whole frame written through the library's mapping, reported by value")

        # Where the library cannot copy with process_vm_readv() (a seccomp filter), it stores with pwrite().
        c = fbrig.frame(self.w, self.h, (12, 130, 240), band=(100, 120), band_color=(250, 250, 0))
        r = self.run_fbwrite("work", [(0, c)], wrap=(SECCOMP_DENY, "process_vm_readv"))
        self.assertEqual((r["n"], r["memfd"]), ([str(len(c))], ["yes"]))
        self.assert_screen(c, "a whole frame written through the library without process_vm_readv()")
        expected = c

        # A background persona's write stays off screen until the switch.
        b = fbrig.frame(self.w, self.h, (40, 41, 42), band=(0, 30), band_color=(200, 0, 200))
        r = self.run_fbwrite("personal", [(0, b)])
        self.assertEqual(r["memfd"], ["yes"])
        self.assert_screen(expected, "personal wrote through the library in the background")
        rig.devnsctl("switch", "personal")
        self.assert_screen(b, "switched to personal", timeout=0)
        rig.devnsctl("switch", "work")
        self.assert_screen(expected, "switched back to work", timeout=0)

    def test_mmap_read_only_file(self):
        """Under libdevns-fbmmap.so an fd open only for reading maps the frame for reading; a shared
        writable mapping of it fails with EACCES, as on the kernel's fb0."""
        data = fbrig.frame(self.w, self.h, (77, 88, 99), band=(40, 80))
        self.draw("personal", data)
        code = ("import mmap, os, sys\n"
                "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
                "m = mmap.mmap(fd, int(sys.argv[2]), mmap.MAP_SHARED, mmap.PROT_READ)\n"
                "sys.stdout.buffer.write(m[:int(sys.argv[2])])\n"
                "try:\n"
                "    mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)\n"
                "    sys.stderr.write('writable\\n')\n"
                "except OSError as err:\n"
                "    sys.stderr.write('errno %d\\n' % err.errno)\n")
        p = subprocess.run(["/usr/bin/python3", "-c", code, fbrig.fb_node("personal"), str(self.frame_size)],
                           env=dict(os.environ, LD_PRELOAD=PRELOAD), capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout == data, "the read-only mapping shows something else than personal's frame")
        self.assertEqual(p.stderr.decode().strip(), "errno %d" % errno.EACCES)

    def test_mmap_changes_reach_screen_without_pan(self):
        self.run_fbdraw("work", 11, "--no-pan", "--hold", "500")
        self.assert_screen(fbrig.pattern_frame(self.w, self.h, 11), "fbdraw --no-pan")
        # Drawn, unmapped and gone at once: the frame is shown all the same.
        for seed in (17, 18, 19):
            self.run_fbdraw("work", seed, "--no-pan")
            self.assert_screen(fbrig.pattern_frame(self.w, self.h, seed), "fbdraw --no-pan without holding")

    def frames_shown(self):
        out = rig.devnsctl("status").stdout
        for line in out.splitlines():
            if line.startswith("Frames shown:"):
                return int(line.split(":")[1])
        self.fail("devnsctl status shows no frame count:\n" + out)

    def start_fbdraw(self, persona, seed, *args):
        env = dict(os.environ, LD_PRELOAD=PRELOAD)
        p = subprocess.Popen([FBDRAW, fbrig.fb_node(persona), str(seed), *args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(p.kill)
        return p

    def test_mmap_partial_change_reaches_screen(self):
        """A few rows changed through a mapping, with no pan and no vsync wait, reach the screen."""
        p = self.start_fbdraw("work", 13, "--no-pan", "--change-on-signal", "14", "300", "340", "--hold", "8000")
        first = fbrig.pattern_frame(self.w, self.h, 13)
        self.assert_screen(first, "fbdraw drew through the mapping")
        p.send_signal(signal.SIGUSR1)
        changed = bytearray(first)
        row = self.w * 4
        changed[300 * row:340 * row] = fbrig.pattern_frame(self.w, self.h, 14)[300 * row:340 * row]
        self.assert_screen(bytes(changed), "fbdraw changed rows 300 to 339 through the mapping")
        p.kill()
        p.wait()

    def test_mmap_redrawn_in_place_settles(self):
        """A program that clears and redraws its mapped frame over and over (no pan, no double buffering)
        leaves the screen showing its last frame, not rows caught half redrawn."""
        p = self.start_fbdraw("work", 21, "--no-pan", "--flicker", "2500", "--hold", "8000")
        time.sleep(3.5)
        self.assertIsNone(p.poll(), "fbdraw stopped early")
        self.assert_screen(fbrig.pattern_frame(self.w, self.h, 21), "after the redrawing stopped", timeout=2)
        p.kill()
        p.wait()

    def test_mmap_idle_costs_no_frames(self):
        """While a mapped frame does not change the display shows no new frames (devnsctl status counts them)."""
        p = self.start_fbdraw("work", 15, "--no-pan", "--hold", "120000")
        self.assert_screen(fbrig.pattern_frame(self.w, self.h, 15), "fbdraw drew through the mapping")
        time.sleep(0.2)
        before = self.frames_shown()
        time.sleep(1.0)
        after = self.frames_shown()
        self.assertLessEqual(after - before, 1, "an unchanged mapped frame was shown %d times in a second" %
                             (after - before))
        self.assertIsNone(p.poll(), "fbdraw stopped holding its mapping early")
        p.kill()
        p.wait()

    def test_mmap_in_background_then_switch(self):
        a = fbrig.frame(self.w, self.h, (50, 60, 70))
        self.draw("work", a)
        self.run_fbdraw("personal", 3)
        self.assert_screen(a, "personal mapped and drew in the background")
        rig.devnsctl("switch", "personal")
        self.assert_screen(fbrig.pattern_frame(self.w, self.h, 3), "switched to personal")

    def test_mmap_program_inside_a_container(self):
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "work", "--pid", str(c.pid))
            c.run("test", "-c", "/dev/fb0")
            c.run("test", "-S", "/run/devnsd/fb/work/fb0")
            p = c.run("env", "LD_PRELOAD=" + PRELOAD, FBDRAW, "/dev/fb0", "5", check=False)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assert_screen(fbrig.pattern_frame(self.w, self.h, 5), "fbdraw inside a container")
        finally:
            c.stop()

    def screenshot_is(self, persona, data):
        path = os.path.join(OUT, "routed-%s.png" % persona)
        rig.devnsctl("screenshot", persona, path)
        return fbrig.read_png_rgb(path)[2] == fbrig.to_rgb(data)

    def test_routed_node_gives_each_container_its_framebuffer(self):
        routed = "/dev/devns/fb0"
        a = fbrig.frame(self.w, self.h, (10, 120, 30))
        b = fbrig.frame(self.w, self.h, (200, 20, 90), band=(100, 200), band_color=(9, 9, 9))
        fbrig.write_all(self.open_fb_path(routed), a)
        self.assertTrue(self.screenshot_is("work", a), "the host's write through fb0 did not reach work")

        raw = os.path.join(OUT, "routed-b.raw")
        with open(raw, "wb") as f:
            f.write(b)
        c = rig.Container()
        stranger = rig.Container()
        try:
            rig.devnsctl("attach", "personal", "--pid", str(c.pid))
            c.run("dd", "if=" + raw, "of=" + routed, "bs=128k")
            self.assertTrue(self.screenshot_is("personal", b), "personal's container did not get personal's fb0")
            self.assertTrue(self.screenshot_is("work", a), "personal's write reached work")
            self.assert_screen(a, "work is active: its frame stays on screen")
            p = stranger.run("dd", "if=" + raw, "of=" + routed, "bs=128k", check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("Permission denied", p.stderr)
        finally:
            c.stop()
            stranger.stop()

    def open_fb_path(self, path, flags=os.O_RDWR):
        fd = os.open(path, flags)
        self.fds.append(fd)
        return fd

    def test_screenshot_of_background_persona(self):
        data = fbrig.frame(self.w, self.h, (33, 66, 99), band=(123, 456), band_color=(1, 2, 3))
        self.draw("personal", data)
        path = os.path.join(OUT, "screenshot-personal.png")
        rig.devnsctl("screenshot", "personal", path)
        w, h, rgb = fbrig.read_png_rgb(path)
        self.assertEqual((w, h), (self.w, self.h))
        self.assertTrue(rgb == fbrig.to_rgb(data), "the screenshot differs from what personal wrote")
        p = rig.devnsctl("screenshot", "nobody", "/tmp/x.png", check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("nobody", p.stderr)

    # --- stream semantics and errors ----------------------------------------------------------

    def test_stream_position(self):
        fd = self.open_fb("personal")
        self.assertEqual(fbrig.get_pos(fd), 0)
        os.write(fd, b"\x11" * 8)
        self.assertEqual(fbrig.get_pos(fd), 8)
        fbrig.set_pos(fd, 4094)
        os.write(fd, b"ZZZZZZZZ")
        fbrig.set_pos(fd, 4096)
        os.write(fd, b"ABCD")
        fbrig.set_pos(fd, 4094)
        self.assertEqual(os.read(fd, 8), b"ZZABCDZZ")
        self.assertEqual(fbrig.get_pos(fd), 4102)
        other = self.open_fb("personal")
        self.assertEqual(fbrig.get_pos(other), 0, "each open file has its own position")

    def test_errors_match_kernel(self):
        fd = self.open_fb("personal")
        size = self.fix["smem_len"]
        fbrig.set_pos(fd, size)
        self.assertEqual(errno_of(lambda: os.write(fd, b"x")), self.native["write_at_end"])
        fbrig.set_pos(fd, size + 4096)
        self.assertEqual(errno_of(lambda: os.write(fd, b"x")), self.native["write_past_end"])
        fbrig.set_pos(fd, size - 40)
        self.assertEqual(os.write(fd, b"\0" * 100), self.native["write_across_end"])
        fbrig.set_pos(fd, size)
        self.assertEqual(len(os.read(fd, 100)), self.native["read_at_end"])
        self.assertEqual(errno_of(lambda: fbrig.fcntl.ioctl(fd, 0x46FF, b"\0" * 8)), self.native["bad_ioctl"])
        var = fbrig.get_var(fd)
        self.assertEqual(errno_of(lambda: fbrig.put_var(fd, dict(var, xres=100000, xres_virtual=100000))),
                         self.native["huge_var"])
        for bad in (dict(var, yres_virtual=3 * self.h), dict(var, bits_per_pixel=16),
                    dict(var, xres=0xFFFFFFFF, yres=0xFFFFFFFF), dict(var, yoffset=self.h)):
            self.assertEqual(errno_of(lambda: fbrig.put_var(fd, bad)), errno.EINVAL, bad)
        self.assertEqual(errno_of(lambda: fbrig.pan(fd, var, 1)), errno.EINVAL)
        self.assertEqual(errno_of(lambda: fbrig.fcntl.ioctl(fd, fbrig.FBIO_WAITFORVSYNC,
                                                             fbrig.struct.pack("I", 1))), errno.EINVAL)
        self.assertEqual(errno_of(lambda: fbrig.fcntl.ioctl(fd, 0x5401, b"\0" * 64)), errno.ENOTTY)
        self.assertEqual(fbrig.get_var(fd), var, "a refused FBIOPUT_VSCREENINFO changed nothing")
        self.assertTrue(self.daemon.alive())

    def test_cmap_and_vsync(self):
        fd = self.open_fb("personal")
        red = fbrig.struct.pack("4H", 1, 2, 3, 4)
        arrays = [bytearray(red), bytearray(red), bytearray(red)]
        import ctypes
        bufs = [ctypes.create_string_buffer(bytes(a), len(a)) for a in arrays]
        cmap = fbrig.struct.pack("IIQQQQ", 16, 4, *(ctypes.addressof(b) for b in bufs), 0)
        fbrig.fcntl.ioctl(fd, fbrig.FBIOPUTCMAP, cmap)
        out = [ctypes.create_string_buffer(8) for _ in range(3)]
        cmap = fbrig.struct.pack("IIQQQQ", 16, 4, *(ctypes.addressof(b) for b in out), 0)
        fbrig.fcntl.ioctl(fd, fbrig.FBIOGETCMAP, cmap)
        self.assertEqual([b.raw for b in out], [red] * 3)
        bad = fbrig.struct.pack("IIQQQQ", 250, 10, *(ctypes.addressof(b) for b in bufs), 0)
        self.assertEqual(errno_of(lambda: fbrig.fcntl.ioctl(fd, fbrig.FBIOPUTCMAP, bad)), errno.EINVAL)
        # Vsync waits keep the display's pace, active or not: each waits for the next refresh, so 20 of
        # them at 60 Hz span at least 19 refreshes (a third of a second); a slow machine only makes them
        # longer, and none may wait for nothing (the time-out below only catches a wait that never ends).
        for persona in ("personal", "work"):
            vfd = self.open_fb(persona)
            start = time.monotonic()
            for _ in range(20):
                fbrig.waitforvsync(vfd)
            took = time.monotonic() - start
            self.assertGreater(took, 19 / 60 * 0.8, "20 vsync waits of %s returned without waiting" % persona)
            self.assertLess(took, 60, "20 vsync waits of %s" % persona)


def blank_dpms(fd):
    powers = []
    for level in (4, 0):
        fbrig.fcntl.ioctl(fd, fbrig.FBIOBLANK, level)
        powers.append(fbrig.dpms())
    return tuple(powers)


def errno_of(fn):
    try:
        fn()
    except OSError as e:
        return e.errno
    return 0


class RecentPersonas(rig.PersonaTestCase):
    """Five personas on one display with the default configuration: the frames of the three shown
    before the active one stay in video memory, so a switch to any of them shows their latest frame
    at once, and devnsctl says what that costs."""
    NAMES = ("work", "p2", "p3", "p4")

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(fbrig.conf_display(personas=cls.NAMES))
        var, _ = fbrig.screen_info()
        cls.w, cls.h = var["xres"], var["yres"]

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    def draw(self, persona, data, y0=0):
        fd = os.open(fbrig.fb_node(persona), os.O_RDWR)
        try:
            fbrig.set_pos(fd, y0 * self.w * 4)
            fbrig.write_all(fd, data)
        finally:
            os.close(fd)

    def status(self):
        """(display buffers, personas whose frames are kept, (switches shown by a flip, by copying))."""
        out = rig.devnsctl("status").stdout
        buffers = kept = None
        shown = (0, 0)
        for line in out.splitlines():
            if line.startswith("Display buffers:"):
                buffers = line.split(":", 1)[1].strip()
            elif line.startswith("Frames kept for a switch"):
                kept = line.split(":", 1)[1].split()
            elif line.startswith("Switches shown:"):
                m = re.match(r"Switches shown: (\d+) by a flip to a kept frame, (\d+) by copying", line)
                self.assertIsNotNone(m, line)
                shown = (int(m.group(1)), int(m.group(2)))
        self.assertIsNotNone(buffers, "devnsctl status does not say what the display's buffers are:\n" + out)
        self.assertIsNotNone(kept, "devnsctl status does not say whose frames are kept:\n" + out)
        return buffers, [] if kept == ["none"] else kept, shown

    def switch_and_see(self, persona, data, what):
        rig.devnsctl("switch", persona)
        ok, diff = fbrig.screen_shows("recent-" + persona, self.w, self.h, data, timeout=0)
        self.assertTrue(ok, "%s: the screen differs in %s pixels right after SwitchTo answered" % (what, diff))

    def test_any_of_three_recent_personas_is_a_flip_away(self):
        frames = {name: fbrig.frame(self.w, self.h, (40 * i + 30, 200 - 40 * i, 90), band=(60 * i, 60 * i + 40))
                  for i, name in enumerate(self.NAMES)}
        for name in self.NAMES:
            self.draw(name, frames[name])
        for name in self.NAMES[1:]:
            self.switch_and_see(name, frames[name], "first switch to " + name)
        buffers, kept, _ = self.status()
        frame_mib = self.w * self.h * 4 / (1024 * 1024)
        m = re.match(r"(\d+) \(([\d.]+) MiB\)", buffers)
        self.assertTrue(m and m.group(1) == "5", "two buffers to flip between and three spares: %s" % buffers)
        # A driver may pad its lines: at least five frames.
        self.assertGreaterEqual(float(m.group(2)), round(5 * frame_mib, 1), buffers)
        self.assertEqual(kept, ["p3", "p2", "work"], "the three personas shown before p4, the most recent first")

        # Personas write rows while in the background: their kept frames take the rows off screen.
        for i, name in enumerate(("work", "p2", "p3")):
            band = fbrig.pixel((250, 20 * i, 250)) * self.w * 8
            y0 = 100 + 50 * i
            self.draw(name, band, y0)
            row = self.w * 4
            frames[name] = frames[name][:y0 * row] + band + frames[name][(y0 + 8) * row:]
        ok, diff = fbrig.screen_shows("recent-background", self.w, self.h, frames["p4"], timeout=0)
        self.assertTrue(ok, "background writes reached the screen (%s pixels)" % diff)
        self.assertEqual(self.status()[1], ["p3", "p2", "work"], "background writes cost a persona its kept frame")

        # Round and round: each switch goes to one of the three shown before, the least recent too.
        order = ["work", "p2", "p3", "p4", "work", "p3", "p2", "p4", "p2"]
        shown = "p4"
        for step, name in enumerate(order):
            _, before, (flips, copies) = self.status()
            self.assertIn(name, before, "step %d: %s is not among the kept frames %s" % (step, name, before))
            self.switch_and_see(name, frames[name], "step %d: switch to %s" % (step, name))
            _, after, (flips_after, copies_after) = self.status()
            self.assertEqual((flips_after - flips, copies_after - copies), (1, 0),
                             "step %d: the switch to %s was not a flip to its kept frame" % (step, name))
            self.assertEqual(after, [shown] + [p for p in before if p != name],
                             "step %d: after the switch to %s the frame of %s is the most recent kept" %
                             (step, name, shown))
            shown = name

        # A fifth persona pushes out the least recently shown one, which then comes back by a copy.
        rig.devnsctl("create", "p5")
        self.addCleanup(rig.devnsctl, "remove", "p5", check=False)
        deadline = time.monotonic() + 10
        while not os.path.exists(fbrig.fb_node("p5")) and time.monotonic() < deadline:
            time.sleep(0.05)
        frames["p5"] = fbrig.frame(self.w, self.h, (5, 5, 250), band=(700, 760))
        self.draw("p5", frames["p5"])
        _, before, (flips, copies) = self.status()
        self.switch_and_see("p5", frames["p5"], "switch to a new persona")
        self.assertEqual(self.status()[2], (flips, copies + 1), "the new persona's frame was not copied")
        # Until p5 draws again its next frame's buffer still holds the frame that gave way.
        frames["p5"] = fbrig.frame(self.w, self.h, (5, 250, 5), band=(720, 780))
        self.draw("p5", frames["p5"])
        ok, diff = fbrig.screen_shows("recent-p5-drew", self.w, self.h, frames["p5"])
        self.assertTrue(ok, "p5's second frame is not on the screen (%s pixels differ)" % diff)
        _, after, (flips, copies) = self.status()
        self.assertEqual(after, [shown] + before[:2], "the least recently shown frame (%s) gave way" % before[2])
        self.switch_and_see(before[2], frames[before[2]], "switch to the persona whose frame gave way")
        self.assertEqual(self.status()[2], (flips, copies + 1), "the frame that gave way came back without a copy")


if __name__ == "__main__":
    rig.main()
