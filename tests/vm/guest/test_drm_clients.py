#!/usr/bin/python3
"""Display stacks on a persona's card0, each unmodified in an attached container with
libdevns-fbmmap.so preloaded, checked on the real screen (QEMU's screendump): Xorg's modesetting
driver (shadow framebuffer, no glamor) painting its root with xsetroot, Qt's linuxfb platform in
its DRM mode running a Qt example, and mpv's drm video output playing lavfi's testsrc. devnsd runs
the phone's whole configuration (input, LEDs, backlight and routed nodes beside the display,
phonerig), and the containers are made as a container manager makes them. Each client shows
while its persona is active, stays off the screen while another is (personal, whose fb0 frame
shows then), and comes back at the switch back, by the hotkey.

What Xorg needs in a container: no VT (-sharevts -novtswitch, as over fb0), no logind (it logs
that it found no session and opens the node itself), no glamor (AccelMethod none: there is no
GPU, and ShadowFB copies X's drawing into the dumb buffer), and -nocursor (no cursor plane: a
software cursor would mark the root). Its udev probe finds the container's card0 through the
udev record and sysfs that attach made ("xfree86: Adding drm device (/dev/dri/card0)"); Option
"kmsdev" names the same node, so that the driver takes no other. Xorg makes a session of its
own: qtrig.XServer.stop() ends it by the pid in its lock file."""

import shutil
import tempfile
import time
import unittest

import devnsrig as rig
import drmrig
import fbrig
import qtrig
from drmrig import CARD

# Qt's Fusion style (linuxfb's default): window and menu bar grey, and the editor's white.
QT_WINDOW = (239, 239, 239)
QT_BASE = (255, 255, 255)


def share(shot, rgb):
    """The share of the screenshot's pixels that are exactly rgb, from 0 to 1."""
    w, h, data = shot
    masks = []
    for i, value in enumerate(rgb):
        table = bytes(1 if v == value else 0 for v in range(256))
        masks.append(int.from_bytes(data[i::3].translate(table), "little"))
    return bin(masks[0] & masks[1] & masks[2]).count("1") / max(1, w * h)


def testsrc(shot):
    """Whether the screenshot shows lavfi's testsrc: its bars of pure colours, scaled up."""
    return all(share(shot, rgb) > 0.04 for rgb in ((255, 255, 0), (0, 255, 255), (0, 255, 0), (255, 0, 255),
                                                     (0, 0, 255)))


class DisplayStacks(drmrig.CardTestCase):
    phone = True

    home = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.home = tempfile.mkdtemp(prefix="drm-clients-")

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.home:
                shutil.rmtree(cls.home, ignore_errors=True)
        finally:
            super().tearDownClass()

    def fb0_rgb(self, persona):
        return fbrig.to_rgb(self.fb0[persona])

    def assert_stays_off(self, name, alive):
        """personal is active: the screen shows its fb0 frame, now and a while later (the client,
        alive() still, draws on meanwhile)."""
        self.assert_fb0_shown("personal", name)
        time.sleep(3)
        self.assertTrue(alive(), "the client ended in the background")
        self.assert_fb0_shown("personal", name + "-later")

    # --- Xorg ----------------------------------------------------------------------

    @unittest.skipUnless(qtrig.have_xorg_modesetting(), "Xorg's modesetting driver is not installed")
    def test_xorg_modesetting(self):
        color, later = (0x30, 0x60, 0xc0), (0xc0, 0x60, 0x30)
        x = qtrig.XServer(self.work, conf=qtrig.XORG_MODESETTING, args=["-nocursor"])
        try:
            def painted(rgb):
                return x.client("xsetroot", "-solid", "#%02x%02x%02x" % rgb).returncode == 0
            self.assertTrue(rig.eventually(lambda: painted(color), timeout=180, step=1),
                            "Xorg did not answer:\n" + x.log_text())
            self.assertTrue(self.wait_screen("xorg-root", lambda s: fbrig.solid(s, color), 60),
                            "the screen (xorg-root.png) is not X's root (%.3f of it is):\n%s" % (
                                share(self.screen("xorg-root"), color), x.log_text()))
            rig.devnsctl("switch", "personal")
            # X paints its root anew in the background: nothing of it reaches the screen.
            self.assertTrue(painted(later))
            self.assert_stays_off("xorg-background", lambda: x.proc.poll() is None)
            self.switch("work")
            self.assertTrue(self.wait_screen("xorg-back", lambda s: fbrig.solid(s, later), 30),
                            "the switch back does not show X's root painted in the background (%.3f of it)" %
                            share(self.screen("xorg-back"), later))
        finally:
            drmrig.keep("xorg-modesetting.log", x.stop())
        # X's framebuffer went with it: work's fb0 frame is back.
        self.assert_fb0_shown("work", "xorg-gone", timeout=30)

    # --- Qt ------------------------------------------------------------------------

    @unittest.skipUnless(qtrig.have_qt(), "qtbase5-examples is not installed")
    def test_qt_linuxfb_drm(self):
        env = ["HOME=" + self.home, "XDG_RUNTIME_DIR=" + self.home, "LANG=C.UTF-8",
               # linuxfb's DRM mode on the container's card0 (dumb buffers, page flips).
               "QT_QPA_PLATFORM=linuxfb:fb=" + CARD, "QT_QPA_FB_DRM=1",
               "QT_QPA_FB_HIDECURSOR=1", "QT_QPA_FB_DISABLE_INPUT=1",
               "QT_LOGGING_RULES=qt.qpa.*=true"]
        app = self.start(self.work, qtrig.app_path("work"), "-qwindowgeometry", "%dx%d+0+0" % (self.w, self.h),
                         env=env)

        def window(shot):
            return share(shot, QT_BASE) > 0.3 and share(shot, QT_WINDOW) > 0.02

        self.assertTrue(self.wait_screen("qt-drm", window, 240), "the screen (qt-drm.png) does not show the Qt "
                        "example's window (%.3f white, %.3f grey):\n%s" % (
                            share(self.screen("qt-drm"), QT_BASE), share(self.screen("qt-drm"), QT_WINDOW), app.text))
        drmrig.keep("qt-drm.log", app.text)
        shown = self.screen("qt-drm-shown")[2]
        rig.devnsctl("switch", "personal")
        self.assert_stays_off("qt-drm-background", lambda: app.proc.poll() is None)
        self.switch("work")
        # The same window (its text cursor blinking meanwhile).
        self.assertTrue(self.wait_screen("qt-drm-back", lambda s: qtrig.differing(s[2], shown) <= qtrig.NOISE, 30),
                        "the switch back does not show the Qt window (%d bytes differ)" % qtrig.differing(
                            self.screen("qt-drm-back")[2], shown))

    # --- mpv -----------------------------------------------------------------------

    @unittest.skipUnless(shutil.which("mpv"), "mpv is not installed")
    def test_mpv_drm(self):
        mpv = self.start(self.work, "mpv", "-v", "--no-config", "--vo=drm", "--drm-device=" + CARD, "--no-audio",
                         "--input-terminal=no", "--loop=inf", "av://lavfi:testsrc=size=320x240:rate=10",
                         env=["HOME=" + self.home])
        fb0 = self.fb0_rgb("work")

        def playing(name, timeout):
            """Two screenshots of testsrc's bars that differ: frames coming."""
            return drmrig.changing(lambda: self.screen(name), lambda shot: shot[2] != fb0 and testsrc(shot), timeout)

        self.assertTrue(playing("mpv", 180), "the screen (mpv.png) does not show mpv's frames:\n" + mpv.text)
        rig.devnsctl("switch", "personal")
        self.assert_stays_off("mpv-background", lambda: mpv.proc.poll() is None)
        self.switch("work")
        self.assertTrue(playing("mpv-back", 60), "the switch back does not show mpv's frames:\n" + mpv.text)
        drmrig.keep("mpv.log", mpv.text)


if __name__ == "__main__":
    rig.main()
