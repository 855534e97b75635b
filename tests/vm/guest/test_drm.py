#!/usr/bin/python3
"""DRM/KMS personas on a real kernel: each persona's card0 served by devnsd over CUSE, bound into
its container as /dev/dri/card0, driven by unmodified clients (libdrm's modetest, drm_info, a plain
dumb-buffer client) and checked on the real screen (bochs behind QEMU's -vga std, seen through
QEMU's screendump): the active persona's frames show, a background persona's stay off the screen
and come at a switch, and fb0's frame comes back when the card's master goes."""

import os
import re
import signal
import tempfile

import devnsrig as rig
import drmrig
import fbrig
from drmrig import CARD, DRAW, shows_bars
from fbrig import solid


class CardPersonas(drmrig.CardTestCase):
    def modetest_args(self):
        return ["modetest", "-M", "devns", "-s", "35@32:%dx%d" % (self.w, self.h)]

    # --- the node ------------------------------------------------------------------

    def test_each_container_has_its_card(self):
        for name, c in (("work", self.work), ("personal", self.personal)):
            st = os.stat("/dev/devns/%s/card0" % name)
            inside = c.run("stat", "-c", "%t %T", CARD).stdout.split()
            self.assertEqual((int(inside[0], 16), int(inside[1], 16)), (os.major(st.st_rdev), os.minor(st.st_rdev)))
            # libdrm takes a primary node's kind from its minor.
            self.assertLess(os.minor(st.st_rdev), 64)

    def test_drm_info_describes_the_card(self):
        out = self.work.run("drm_info", CARD).stdout
        self.assertRegex(out, r"Driver: devns")
        self.assertIn("DUMB_BUFFER", out)
        self.assertIn("XRGB8888", out)
        self.assertRegex(out, r"%dx%d" % (self.w, self.h))

    # --- what reaches the screen -------------------------------------------------

    def test_modetest_shows_only_while_active(self):
        mt = self.start(self.work, *self.modetest_args())
        self.assertTrue(self.wait_screen("drm-modetest", shows_bars, 60),
                        "the screen does not show modetest's bars: %s" % mt.text)
        # personal draws on its own card meanwhile: nothing of it reaches the screen.
        color = 0x3060c0
        draw = self.start(self.personal, DRAW, CARD, "0x%06x" % color, "--hold", "600000")
        self.assertTrue(draw.wait_for(r"\nshown", 60), draw.text)
        rig.devnsctl("list")
        self.assertTrue(shows_bars(self.screen("drm-background")), "personal's card reached the screen")
        # Screenshots show what each card shows, the background persona's too.
        shots = tempfile.mkdtemp(prefix="drm-shots-")
        for p, check in (("work", shows_bars), ("personal", lambda s: solid(s, (0x30, 0x60, 0xc0)))):
            path = os.path.join(shots, p + ".png")
            rig.devnsctl("screenshot", p, path)
            self.assertTrue(check(fbrig.read_png_rgb(path)), "%s's screenshot does not show its card" % p)
        # A switch shows personal's card, and one back modetest's bars again.
        rig.devnsctl("switch", "personal")
        self.assertTrue(solid(self.screen("drm-switched"), (0x30, 0x60, 0xc0)),
                        "the switch does not show personal's card")
        rig.devnsctl("switch", "work")
        self.assertTrue(shows_bars(self.screen("drm-switched-back")), "the switch back does not show modetest's bars")
        # modetest ends: its framebuffer goes with its master, and work's fb0 frame is back.
        mt.proc.stdin.write("\n")
        mt.proc.stdin.flush()
        text = mt.finish(30)
        self.assertEqual(mt.proc.returncode, 0, text)
        self.assertRegex(text, r"setting mode %dx%d" % (self.w, self.h))
        self.assertNotIn("failed", text)
        ok, diff = fbrig.screen_shows("drm-fb0-back", self.w, self.h, self.fb0["work"])
        self.assertTrue(ok, "work's fb0 frame is not back (%s pixels differ)" % diff)

    def test_background_flips_complete(self):
        """A background persona's flips complete at its own vblank, one a refresh, in order."""
        draw = self.start(self.personal, DRAW, CARD, "0x102030", "--flips", "20")
        text = draw.finish(120)
        self.assertEqual(draw.proc.returncode, 0, text)
        seqs = [int(s) for s in re.findall(r"^flip \d+ fb \d+ sequence (\d+)$", text, re.M)]
        self.assertEqual(len(seqs), 20, text)
        self.assertEqual(seqs, sorted(set(seqs)), "sequence numbers do not increase: %s" % seqs)
        ok, diff = fbrig.screen_shows("drm-background-flips", self.w, self.h, self.fb0["work"])
        self.assertTrue(ok, "a background persona's flips reached the screen (%s pixels differ)" % diff)

    def test_active_flips_reach_the_screen(self):
        """The active persona's flips each complete once shown; the last frame is on the screen."""
        draw = self.start(self.work, DRAW, CARD, "0x00ff00", "--color2", "0xff0000", "--flips", "10")
        text = draw.finish(120)
        self.assertEqual(draw.proc.returncode, 0, text)
        self.assertEqual(len(re.findall(r"^flip ", text, re.M)), 10, text)

    def test_modetest_vsynced_flipping(self):
        mt = self.start(self.work, *(self.modetest_args() + ["-v"]))
        self.assertTrue(mt.wait_for(r"freq: \d+\.\d+Hz", 90), mt.text)
        rate = float(re.search(r"freq: (\d+\.\d+)Hz", mt.text).group(1))
        self.assertGreater(rate, 0)
        mt.proc.send_signal(signal.SIGINT)


if __name__ == "__main__":
    rig.main()
