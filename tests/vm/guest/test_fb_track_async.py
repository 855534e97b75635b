#!/usr/bin/python3
"""Dirty tracking of mapped framebuffers on Linux 6.7 and later (the 6.12 guest, --suite trixie): the
library's userfaultfd resolves write faults itself (UFFD_FEATURE_WP_ASYNC) and devnsd asks the program's
pagemap which pages were written (PAGEMAP_SCAN), so that no write waits for devnsd. Through the real node,
bochs DRM and QEMU's screendump. test_fb_track.py runs on both kernels."""

import os
import time

import devnsrig as rig
import fbrig
import test_fb_track as base

UFFD_FEATURE_WP_ASYNC = 1 << 15


def userfaultfds(pid):
    """The features of each userfaultfd pid holds, from its fdinfo."""
    found = []
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) != "anon_inode:[userfaultfd]":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, name)) as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue  # closed meanwhile
        found.append(int(info["API"].strip().split(":")[1], 16))
    return found


class AsynchronousTracking(rig.PersonaTestCase):
    track = None
    setUpClass = classmethod(base.FramebufferTracking.setUpClass.__func__)
    tearDownClass = classmethod(base.FramebufferTracking.tearDownClass.__func__)
    assert_screen = base.FramebufferTracking.assert_screen
    idle_wakeups = base.FramebufferTracking.idle_wakeups
    frames_shown = base.FramebufferTracking.frames_shown

    def test_rows_drawn_reach_the_screen_without_faults(self):
        """A program drawing a band of rows at 30 fps: devnsd says it tracks with PAGEMAP_SCAN and holds the
        program's two userfaultfds, the frames reach the screen, the program's writes do not wait for devnsd
        (it sleeps once a frame, between frames, and once more for the first write after the pause, which
        faults and wakes devnsd), and devnsd sleeps once the program is quiet."""
        color = (40, 20, 60)
        n = 30
        start = len(self.daemon.output())
        p = base.Program(self, "fill", base.hexrgb(color), "wait", "anim", str(n), "30", "sleep", "60000")
        p.wait_for("fill ok")
        self.assert_screen(fbrig.frame(self.w, self.h, color), "the first frame")
        # Each way is logged once a run, whichever program came first.
        self.assertIn("Tracking writes to mapped framebuffers with PAGEMAP_SCAN", self.daemon.output())
        self.assertNotIn("with userfaultfd write faults", self.daemon.output()[start:])
        time.sleep(0.5)
        before = self.frames_shown()
        slept = rig.sleeps(p.proc.pid)
        p.go()
        p.wait_for("anim ok")
        slept = rig.sleeps(p.proc.pid) - slept
        time.sleep(0.5)
        shown = self.frames_shown() - before
        self.assert_screen(fbrig.frame(self.w, self.h, color, band=(0, base.ANIM_ROWS),
                                       band_color=base.anim_color(n - 1)), "the last frame")
        uffds = userfaultfds(self.daemon.proc.pid)
        print("%d frames drawn, %d shown; the program slept %d times; devnsd's userfaultfds' features: %s" % (
            n, shown, slept, ", ".join("%#x" % u for u in uffds)), flush=True)
        self.assertEqual(sorted(bool(u & UFFD_FEATURE_WP_ASYNC) for u in uffds), [False, True],
                         "devnsd does not hold the program's two userfaultfds: %s" % uffds)
        # Waiting for devnsd at every frame's first write would double the sleeps.
        self.assertLessEqual(slept, n + n // 3, "the program slept %d times for %d frames" % (slept, n))
        self.assertGreater(shown, 0, "none of the %d frames drawn was shown" % n)
        time.sleep(0.5)
        idle = self.idle_wakeups(2.0)
        print("after the animation: %d devnsd wakeups in 2 s" % idle, flush=True)
        self.assertLessEqual(idle, 3, "devnsd went on waking (%d times in 2 s) after the program went quiet" % idle)

    def test_write_faults_when_the_program_asks(self):
        """A program started with DEVNS_FB_TRACK=faults is tracked through write faults, as on older kernels:
        devnsd holds one userfaultfd for it, without asynchronous write-protection, and its frames reach the
        screen."""
        color = (10, 70, 30)
        n = 10
        start = len(self.daemon.output())
        p = base.Program(self, "fill", base.hexrgb(color), "wait", "anim", str(n), "30", "sleep", "60000",
                         env={"DEVNS_FB_TRACK": "faults"})
        p.wait_for("fill ok")
        self.assert_screen(fbrig.frame(self.w, self.h, color), "the first frame")
        uffds = []

        def one_held():
            uffds[:] = userfaultfds(self.daemon.proc.pid)
            return len(uffds) == 1

        # The userfaultfds of an earlier test's program are closed off devnsd's loop, one after the other:
        # the program's own is held once devnsd says it tracks through write faults (once a run).
        if "with userfaultfd write faults" not in self.daemon.output()[:start]:
            self.assertTrue(rig.eventually(lambda: "with userfaultfd write faults" in self.daemon.output()[start:], 10),
                            "devnsd does not say it tracks the program through write faults")
        self.assertTrue(rig.eventually(one_held, 10), "devnsd does not hold one userfaultfd for the program: %s"
                        % ", ".join("%#x" % u for u in uffds))
        self.assertFalse(uffds[0] & UFFD_FEATURE_WP_ASYNC, "the program's userfaultfd resolves its faults itself")
        p.go()
        p.wait_for("anim ok")
        self.assert_screen(fbrig.frame(self.w, self.h, color, band=(0, base.ANIM_ROWS),
                                       band_color=base.anim_color(n - 1)), "the last frame")


if __name__ == "__main__":
    rig.main()
