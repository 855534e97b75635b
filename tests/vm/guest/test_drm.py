#!/usr/bin/python3
"""DRM/KMS personas on a real kernel: each persona's card0 served by devnsd over CUSE, bound into
its container as /dev/dri/card0, driven by unmodified clients (libdrm's modetest, drm_info, a plain
dumb-buffer client) and checked on the real screen (bochs behind QEMU's -vga std, seen through
QEMU's screendump): the active persona's frames show, a background persona's stay off the screen
and come at a switch, and fb0's frame comes back when the card's master goes. The clients of
CardPersonas run in the phone's whole configuration (phonerig: input, LEDs, backlight and routed
nodes beside the display); PRIME's with the display alone (the phone's own test shares a buffer
by PRIME in that configuration), and the routed card's in containers that share the host's
/dev."""

import errno
import os
import re
import select
import signal
import subprocess
import sys
import tempfile

import devnsrig as rig
import drmrig
import fbrig
from drmrig import CARD, DRAW, shows_bars
from fbrig import solid


class CardPersonas(drmrig.CardTestCase):
    phone = True

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

    def test_last_close_gives_fb0_back(self):
        """A client shows a frame, takes it off the primary plane with the CRTC left on, and ends: with the
        card's last file gone its state goes, as at the kernel's last close, and the screen shows fb0's frame
        again."""
        draw = self.start(self.work, DRAW, CARD, "0x3060a0", "--plane-off")
        text = draw.finish(120)
        self.assertEqual(draw.proc.returncode, 0, text)
        self.assertRegex(text, r"\nplane \d+ off\n", text)
        self.assert_fb0_shown("work", "last-close")

    def test_modetest_vsynced_flipping(self):
        mt = self.start(self.work, *(self.modetest_args() + ["-v"]))
        self.assertTrue(mt.wait_for(r"freq: \d+\.\d+Hz", 90), mt.text)
        rate = float(re.search(r"freq: (\d+\.\d+)Hz", mt.text).group(1))
        self.assertGreater(rate, 0)
        mt.proc.send_signal(signal.SIGINT)


FB0_WORK = drmrig.FB0_COLORS["work"]
FUSE_STALL = os.path.join(rig.BUILD, "tests", "vm", "fuse-stall")
# DRM_PRIME_CAP_IMPORT | DRM_PRIME_CAP_EXPORT
PRIME_CAPS = 3
# The default budget of a persona's dumb buffers (drm-node.h): the larger of 64 MiB and six frames.
BUDGET_MIN, BUDGET_FRAMES = 64 << 20, 6


class CardPrime(drmrig.CardTestCase):
    """PRIME on a kernel with udmabuf (Debian 13's 6.12): dumb buffers shared as dma-bufs between
    a card's files, as wlroots' dumb allocator and DRM backend share them. Without udmabuf
    (Debian 12's 6.1) the card says it has no PRIME, and export fails with EOPNOTSUPP."""

    colors = ((0x20, 0x50, 0xa0), (0xe0, 0xc0, 0x20))

    def prime(self, container, *args):
        return self.start(container, drmrig.PRIME, CARD, "0x205aa0", "0xe0c020", *args)

    def shows_prime_frame(self, shot):
        w, h, _ = shot
        return (drmrig.pixel_at(shot, w // 2, h // 8) == (0xe0, 0xc0, 0x20)
                and drmrig.pixel_at(shot, w // 2, 3 * h // 4) == (0x20, 0x5a, 0xa0))

    def without_udmabuf(self, c):
        """On a kernel without udmabuf: whether the client c was told plainly that there is no PRIME."""
        if os.path.exists("/dev/udmabuf"):
            return False
        text = c.finish(60)
        self.assertIn("prime 0\n", text)
        self.assertIn("PRIME_HANDLE_TO_FD: Operation not supported", text)
        return True

    def test_dumb_buffers_shared_as_dmabufs(self):
        c = self.prime(self.work, "--reopen", "--hold", "600000")
        if self.without_udmabuf(c):
            return
        self.assertTrue(c.wait_for(r"\nshown", 90), c.text)
        self.assertIn("prime %d\n" % PRIME_CAPS, c.text)
        # The second file is the one libdrm names: the container's own card0.
        self.assertIn("reopened %s\n" % CARD, c.text)
        self.assertRegex(c.text, r"exported \d+ cloexec 1\n")
        self.assertIn("dmabuf maps the buffer\n", c.text)
        self.assertRegex(c.text, r"imported \d+ same 1\n")
        self.assertIn("refused pipe EINVAL\n", c.text)
        self.assertIn("refused memfd EINVAL\n", c.text)
        # The frame imported from the dma-buf is on the screen, the band drawn through it too.
        self.assertTrue(self.wait_screen("prime-shown", self.shows_prime_frame, 30),
                        "the imported frame is not on the screen: %s" % c.text)
        rig.devnsctl("switch", "personal")
        self.assert_fb0_shown("personal", "prime-background")
        rig.devnsctl("switch", "work")
        self.assertTrue(self.wait_screen("prime-back", self.shows_prime_frame, 30),
                        "the imported frame is not back after the switch")

    def test_held_dmabufs_count_against_the_budget(self):
        c = self.prime(self.personal, "--fill-budget")
        if self.without_udmabuf(c):
            return
        text = c.finish(180)
        self.assertEqual(c.proc.returncode, 0, text)
        m = re.search(r"^held (\d+) of (\d+) bytes, then (\w+), with \d+ locks$", text, re.M)
        self.assertIsNotNone(m, text)
        held, size, err = int(m.group(1)), int(m.group(2)), m.group(3)
        budget = max(BUDGET_MIN, BUDGET_FRAMES * self.w * self.h * 4)
        # The shown buffer and the held ones fill the budget: buffers whose dma-buf a program
        # holds are still counted after their last handle went, and count no more once let go.
        self.assertEqual(err, "ENOMEM", text)
        # Each dma-buf was also locked (flock and byte ranges) by the program, which shares devnsd's open file.
        self.assertGreater(int(re.search(r", with (\d+) locks", text).group(1)), held, text)
        self.assertLessEqual((held + 1) * size, budget, text)
        self.assertGreater((held + 2) * size, budget, text)
        self.assertIn("room again\n", text)
        # The background persona's frame never reached the screen.
        self.assert_fb0_shown("work", "prime-budget-background")

    def test_cage_shows_only_while_active(self):
        """cage, a kiosk compositor on wlroots, draws with wlroots' pixman renderer into dumb
        buffers that its allocator shares with its DRM backend as dma-bufs. It needs PRIME import:
        without udmabuf it says so and stops."""
        # cage refuses to run as root. A user in the video group may open the card and its socket;
        # libseat's built-in seat server opens the card for cage.
        self.work.run("sh", "-c", "rm -rf /tmp/cage-xdg && mkdir -m 700 /tmp/cage-xdg && chown 65534:65534 /tmp/cage-xdg")
        c = self.start(self.work, "setpriv", "--reuid=65534", "--regid=65534", "--groups=44", "--",
                       "cage", "--", "weston-simple-shm",
                       env=("LIBSEAT_BACKEND=builtin", "SEATD_VTBOUND=0", "WLR_RENDERER=pixman",
                            "WLR_LIBINPUT_NO_DEVICES=1", "XDG_RUNTIME_DIR=/tmp/cage-xdg"))
        if not os.path.exists("/dev/udmabuf"):
            text = c.finish(90)
            drmrig.keep("cage.log", text)
            self.assertIn("PRIME import not supported", text)
            return
        fb0 = FB0_WORK

        def cage_drawing(shot):
            self.assertIsNone(c.proc.poll(), "cage stopped: %s" % c.text)
            colors = set(shot[2][i:i + 3] for i in range(0, len(shot[2]), 3 * 997))
            return drmrig.share_of(shot, fb0) < 0.05 and len(colors) > 2

        try:
            self.assertTrue(drmrig.changing(lambda: self.screen("cage"), cage_drawing, 120),
                            "cage's frames are not on the screen: %s" % c.text)
            rig.devnsctl("switch", "personal")
            self.assert_fb0_shown("personal", "cage-background")
            rig.devnsctl("switch", "work")
            self.assertTrue(drmrig.changing(lambda: self.screen("cage-back"), cage_drawing, 60),
                            "cage's frames are not back after the switch: %s" % c.text)
        finally:
            drmrig.keep("cage.log", c.text)

    def offer_stalled_file(self, comm, option, answered, timeout=60):
        """drm-prime on work's card from the host, given (option) a file of fuse-stall that never
        answers processes named comm; answered: the regex of its answers. Whether they came and
        devnsd answers after them (None on a kernel without udmabuf, where export fails first).
        The client's own close of the file at its end may wait on the server too: it is stopped
        after the server."""
        mnt = tempfile.mkdtemp(prefix="prime-stall-")
        server = subprocess.Popen([FUSE_STALL, comm, mnt, "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            self.assertTrue(rig.eventually(lambda: os.path.exists(os.path.join(mnt, "file")), timeout=10),
                            "fuse-stall did not mount")
            c = self.start_host(drmrig.PRIME, "/dev/devns/work/card0", "0x102030", "0x405060",
                                option, os.path.join(mnt, "file"))
            if not os.path.exists("/dev/udmabuf"):
                self.assertTrue(c.wait_for("PRIME_HANDLE_TO_FD: Operation not supported", timeout), c.text)
                return None
            self.assertTrue(c.wait_for(answered, timeout), "the imports are not answered: " + c.text)
            self.assertTrue(rig.answers_within(5), "devnsd does not answer after the imports")
            return c.text
        finally:
            server.kill()
            server.wait(30)
            subprocess.run(["umount", "-l", mnt], capture_output=True)

    def test_import_of_an_epoll_held_by_a_file_system(self):
        """An epoll whose lock a thread holds while a FUSE server never answers its poll is offered
        for import: refused at once, and devnsd, which never looks into the caller's files, goes on."""
        text = self.offer_stalled_file("drm-prime", "--import-epoll-on", r"refused epoll \w+\n")
        if text is not None:
            self.assertIn("refused epoll EINVAL\n", text)

    def test_import_of_a_file_whose_close_waits(self):
        """A FUSE file whose flush never answers devnsd is offered for import, again and again:
        devnsd's own reference to it is closed on its closer thread, never in its loop."""
        text = self.offer_stalled_file("devnsd", "--import-file", r"(refused file \w+\n){6}")
        if text is not None:
            self.assertEqual(re.findall(r"refused file (\w+)", text), ["EINVAL"] * 6, text)

    def test_another_persona_cannot_import(self):
        # A program of personal's that got hold of work's dma-buf (here: one program, given both
        # cards from the host) cannot make a handle of it on personal's card.
        p = subprocess.run(["env", "LD_PRELOAD=" + drmrig.PRELOAD, drmrig.PRIME, "/dev/devns/work/card0", "0x102030",
                            "0x405060", "--import-into", "/dev/devns/personal/card0"],
                           capture_output=True, text=True, timeout=120)
        if not os.path.exists("/dev/udmabuf"):
            self.assertIn("PRIME_HANDLE_TO_FD: Operation not supported", p.stderr)
            return
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("refused by DEVICE2 EINVAL\n", p.stdout)


class CardRouted(drmrig.CardTestCase):
    """The routed card, /dev/devns/card0 (Routed=yes): every container binds the same node as its
    /dev/dri/card0, as a container manager binds the routed fb0, and the opener's persona decides
    whose card it works on."""

    ROUTED = "/dev/devns/card0"
    routed = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # The containers' manager binds the routed card over their /dev/dri/card0.
        try:
            cls.bind_routed()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def bind_routed(cls):
        for c in (cls.work, cls.personal):
            c.run("sh", "-c", "mkdir -p /dev/dri && touch /dev/dri/card0 && umount /dev/dri/card0 2>/dev/null; "
                  "mount --bind %s /dev/dri/card0" % cls.ROUTED)

    def screenshot(self, persona):
        path = os.path.join(tempfile.mkdtemp(prefix="drm-routed-"), persona + ".png")
        rig.devnsctl("screenshot", persona, path)
        return fbrig.read_png_rgb(path)

    def test_routed_card_gives_each_container_its_persona(self):
        st = os.stat(self.ROUTED)
        self.assertLess(os.minor(st.st_rdev), 64, "libdrm takes a primary node's kind from its minor")
        # modetest finds the card by its driver's name among /dev/dri/card*: the routed node.
        mt = self.start(self.work, "modetest", "-M", "devns", "-s", "35@32:%dx%d" % (self.w, self.h))
        self.assertTrue(self.wait_screen("routed-modetest", shows_bars, 60),
                        "the screen does not show work's modetest through the routed card: %s" % mt.text)
        color = (0x30, 0x60, 0xc0)
        draw = self.start(self.personal, DRAW, CARD, "0x%02x%02x%02x" % color, "--hold", "600000")
        self.assertTrue(draw.wait_for(r"\nshown", 60), draw.text)
        self.assertTrue(solid(self.screenshot("personal"), color), "personal's client did not draw on personal's card")
        self.assertTrue(shows_bars(self.screenshot("work")), "personal's client reached work's card")
        self.assertTrue(shows_bars(self.screen("routed-background")), "personal's card reached the screen")
        rig.devnsctl("switch", "personal")
        self.assertTrue(self.wait_screen("routed-personal", lambda s: solid(s, color), 15),
                        "the switch does not show personal's card")
        rig.devnsctl("switch", "work")
        self.assertTrue(self.wait_screen("routed-work", shows_bars, 15), "the switch back does not show work's card")
        # A container attached to no persona is refused.
        stranger = rig.Container()
        try:
            p = stranger.run(sys.executable, "-c", "import os; os.open(%r, os.O_RDWR)" % self.ROUTED, check=False)
            self.assertIn("PermissionError", p.stderr)
        finally:
            stranger.stop()

    def test_stop_answers_the_routed_cards_callers(self):
        """devnsd stops while a container's programs wait on the routed card (a blocked read, a
        poll): they are answered (ENODEV, a hang-up) and devnsd exits cleanly; started again, it
        serves the routed card to the same containers."""
        waiters = []
        for code in ("import os; fd = os.open('/dev/dri/card0', os.O_RDWR); print('waiting', flush=True)\n"
                     "try:\n    os.read(fd, 4096)\nexcept OSError as e:\n    print('read', e.errno)",
                     "import os, select; fd = os.open('/dev/dri/card0', os.O_RDWR); p = select.poll()\n"
                     "p.register(fd, select.POLLIN); print('waiting', flush=True); print('poll', p.poll()[0][1])"):
            proc = self.work.popen(sys.executable, "-c", code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, start_new_session=True)
            self.procs.append(proc)
            w = rig.Output(proc)
            self.assertTrue(w.wait_for("waiting", 30), w.text)
            waiters.append(w)
        try:
            code = self.daemon.stop()
            self.assertEqual(code, 0, "devnsd exited with %s:\n%s" % (code, self.daemon.output()))
            self.assertIn("read %d" % errno.ENODEV, waiters[0].finish(30))
            self.assertRegex(waiters[1].finish(30), r"poll \d+")
            self.assertTrue(int(re.search(r"poll (\d+)", waiters[1].text).group(1)) & (select.POLLERR | select.POLLHUP),
                            waiters[1].text)
        finally:
            if not self.daemon.alive():
                type(self).daemon = rig.Daemon(fbrig.conf_display(routed=self.routed))
                for name, c in (("work", self.work), ("personal", self.personal)):
                    rig.devnsctl("attach", name, "--pid", str(c.pid))
                self.bind_routed()
        out = self.work.run("drm_info", CARD).stdout
        self.assertIn("Driver: devns", out)

    def test_reattach_revokes_routed_files(self):
        """personal attached to another container: what the old one opened through the routed card
        ends, its framebuffer with it, and the new container's opens reach personal's card."""
        color = (0xa0, 0x30, 0x60)
        draw = self.start(self.personal, DRAW, CARD, "0x%02x%02x%02x" % color, "--hold", "600000")
        self.assertTrue(draw.wait_for(r"\nshown", 60), draw.text)
        self.assertTrue(solid(self.screenshot("personal"), color))
        c = rig.Container()
        try:
            rig.devnsctl("attach", "personal", "--pid", str(c.pid))
            # The old container's file is revoked: the card's framebuffer went, and personal shows its
            # fb0, fresh black memory for the new container.
            self.assertTrue(rig.eventually(lambda: solid(self.screenshot("personal"), (0, 0, 0)), 15),
                            "personal still shows the revoked client's frame")
            # The new container's client, through the same routed node, draws on personal's card.
            later = (0x30, 0xa0, 0x60)
            again = self.start(c, DRAW, self.ROUTED, "0x%02x%02x%02x" % later, "--hold", "600000")
            self.assertTrue(again.wait_for(r"\nshown", 60), again.text)
            self.assertTrue(solid(self.screenshot("personal"), later), "the new container's client is not on personal's card")
            # work is active: its fb0 frame is what the screen shows.
            self.assert_fb0_shown("work", "routed-reattached")
        finally:
            c.stop()
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))


if __name__ == "__main__":
    rig.main()
