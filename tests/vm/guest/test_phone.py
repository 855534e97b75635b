#!/usr/bin/python3
"""The configuration a phone has, all at once: the display (bochs DRM), a
keyboard and a touchscreen (uinput) and the i8042 keyboard, the keyboard's
capslock LED and a backlight, routed nodes, and two containers attached to
the two personas, each with its own /dev and /run and the persona's LED
and backlight views bound at /sys/class as a container manager does.
Attach must answer with every class configured, and each container gets
its own screen, input, LEDs and backlight, following the active persona.
A keyboard plugged in meanwhile reaches both containers, its capslock LED
in their views, and leaves them.
A program waiting in epoll_wait() in each container, as a compositor does,
is woken at each press while its persona is active, through switches.
Programs under libdevns-fbmmap.so in both containers take the library's
own paths (a write() copied into the memfd, a pan passed by value), a
DRM client in each draws on its persona's card0, following the hotkey, and
one on the routed card (bound in each container beside its own card0) draws
on its opener's persona's card. A container that blanks its screen, or
turns its card off, powers the display down, and the hotkey to the other
persona powers it up. The display's device goes and comes back while the
containers draw, type and switch, and while a card's client holds its
frame. What depends on the display runs twice: with the display on DRM, and
on the kernel's framebuffer (Backend=fbdev); input, the routed input nodes
and the views run with DRM only. The configuration and the containers are
phonerig's, which the display programs' tests run in too."""

import glob
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

from evdev import ecodes as e

import devnsrig as rig
import drmrig
import fbrig
import phonerig

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = [sys.executable, os.path.join(HERE, "nsprobe.py")]
WAITER = [sys.executable, os.path.join(HERE, "nswaiter.py")]
PRELOAD = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
FBDRAW = os.path.join(rig.BUILD, "tests", "vm", "fbdraw")
DRM_DRAW = os.path.join(rig.BUILD, "tests", "vm", "drm-dumb-draw")
SECCOMP_DENY = os.path.join(rig.BUILD, "tests", "vm", "seccomp-deny")
I8042 = "/dev/input/event0"
COLORS = {"work": (200, 30, 30), "personal": (30, 30, 200)}
PERSONAS = phonerig.PERSONAS


def read_file(path):
    with open(path) as f:
        return f.read()


def switches_by_flip():
    """How many switches the display showed by a flip to a kept frame (devnsctl status)."""
    for line in rig.devnsctl("status").stdout.splitlines():
        if line.startswith("Switches shown: "):
            return int(line.split()[2])
    return 0


class PhoneDisplay:
    """The phone's whole configuration, and what in it depends on how the display is driven: the
    two phones below, one for each display backend, share it."""
    # How the display is driven, and its node, which comes back when its PCI device is found again.
    DISPLAY = phonerig.DRM
    DISPLAY_NODE = "/dev/dri/card0"
    # Whether the display keeps the frames shown before in buffers of their own (spares).
    SPARES = True

    @classmethod
    def setUpClass(cls):
        cls.hw = phonerig.Hardware()
        cls.kbd, cls.touch, cls.kbd_hw, cls.touch_hw = cls.hw.kbd, cls.hw.touch, cls.hw.kbd_hw, cls.hw.touch_hw
        cls.led, cls.bl_dir = cls.hw.led, cls.hw.bl_dir
        cls.bus = cls.daemon = None
        cls.containers = {}
        try:
            cls.bus = rig.Bus()
            cls.daemon = rig.Daemon(cls.hw.conf(cls.DISPLAY))
            cls.containers, cls.attach_out = phonerig.containers(cls.hw)
            if not rig.answers_within(1.0):
                raise AssertionError("devnsd stopped answering after attach: %s\n%s" % (
                    {p: o.stderr for p, o in cls.attach_out.items()}, cls.daemon.output()))
            cls.var, _ = fbrig.screen_info("work")
        except BaseException:
            cls.tearDownClass()
            raise
        cls.w, cls.h = cls.var["xres"], cls.var["yres"]

    @classmethod
    def tearDownClass(cls):
        try:
            for c in cls.containers.values():
                c.stop()
            if cls.daemon:
                cls.stop_daemon()
            elif cls.bus:
                cls.bus.stop()
        finally:
            cls.hw.close()

    def tearDown(self):
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        super().tearDown()

    def inside(self, persona, *cmd, check=True):
        return self.containers[persona].run(*cmd, check=check)

    def probe_key(self, node, kbd, key, active, personas=PERSONAS):
        """Opens node in each of personas' containers (nsprobe.py, reading until its stdin ends),
        presses and releases key on kbd, and sends a marker behind it. Once a host handle on the
        active persona's node has read the marker, devnsd has dealt with the key for every persona:
        the probes are told to end, each printing what its node still holds. Returns each
        persona's output, to its end."""
        marker_fd = rig.open_node(rig.persona_node(active, rig.event_node(kbd)), os.O_RDONLY | os.O_NONBLOCK)
        probes = {}
        try:
            for p in personas:
                probes[p] = self.containers[p].popen(*PROBE, node, "-", stdin=subprocess.PIPE,
                                                     stdout=subprocess.PIPE, text=True)
                self.assertEqual(probes[p].stdout.readline().strip(), "open ok", p)
            rig.press(kbd, key, 1)
            rig.press(kbd, key, 0)
            rig.read_to(marker_fd, rig.send_marker(kbd))
        finally:
            os.close(marker_fd)
            outs = {}
            for p, proc in probes.items():
                outs[p] = proc.communicate(input="", timeout=60)[0]
        for p, out in outs.items():
            self.assertTrue(out.endswith("end\n"), "%s's probe did not end as told: %r" % (p, out))
        return outs

    def test_attach_answers_with_every_class_configured(self):
        for p, out in self.attach_out.items():
            self.assertEqual(out.returncode, 0, "%s: %s" % (p, out.stderr))
            self.assertRegex(out.stdout, r"attached, [1-9]\d* nodes made")
        for p in PERSONAS:
            for node in ("/dev/fb0", "/dev/input/" + os.path.basename(self.kbd_hw),
                         "/dev/input/" + os.path.basename(self.touch_hw), "/dev/input/event0"):
                line = self.inside(p, "stat", "-c", "%F %t:%T", node).stdout.split()
                self.assertEqual(line[:2], ["character", "special"], node)
                host = os.stat("/dev/devns/%s/%s" % (p, os.path.basename(node)))
                self.assertEqual(line[-1], "%x:%x" % (os.major(host.st_rdev), os.minor(host.st_rdev)))

    def test_screen_backlight_and_leds_follow_the_active_persona(self):
        levels = {"work": 120, "personal": 880}
        bl = os.path.basename(self.bl_dir)
        led = os.path.basename(self.led)
        for p in PERSONAS:
            fb = fbrig.frame(self.w, self.h, COLORS[p])
            path = os.path.join(tempfile.mkdtemp(), "frame")
            with open(path, "wb") as f:
                f.write(fb)
            self.inside(p, "dd", "if=" + path, "of=/dev/fb0", "bs=1M", "status=none")
            self.inside(p, "sh", "-c", "echo %d > /sys/class/backlight/%s/brightness" % (levels[p], bl))
            self.inside(p, "sh", "-c", "echo %d > /sys/class/leds/%s/brightness" % (1 if p == "personal" else 0,
                                                                                   led))
        flips = []
        for active in ("personal", "work", "personal"):
            rig.devnsctl("switch", active)
            flips.append(switches_by_flip())
            ok, diff = fbrig.screen_shows("phone-" + active, self.w, self.h,
                                          fbrig.frame(self.w, self.h, COLORS[active]))
            self.assertTrue(ok, "the screen does not show %s's frame (%s pixels differ)" % (active, diff))
            self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")).strip(), str(levels[active]))
            self.assertEqual(int(read_file(os.path.join(self.led, "brightness"))) > 0, active == "personal")
            for p in PERSONAS:
                self.assertEqual(self.inside(p, "cat", "/sys/class/backlight/%s/brightness" % bl).stdout.strip(),
                                 str(levels[p]))
        if not self.SPARES:
            return
        # Both frames were shown before the last two switches and did not change since: each was a flip to
        # a frame kept in video memory, and the one not shown is kept for the next switch.
        self.assertEqual([flips[1] - flips[0], flips[2] - flips[1]], [1, 1], flips)
        self.assertIn("Frames kept for a switch (most recent first): work", rig.devnsctl("status").stdout)

    def start_client(self, persona, *argv):
        """A program in persona's container under libdevns-fbmmap.so, in a session of its own, its
        stdin a pipe: (the process, its Output)."""
        proc = self.containers[persona].popen("env", "LD_PRELOAD=" + PRELOAD, *argv, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                              start_new_session=True)
        return proc, rig.Output(proc)

    @staticmethod
    def stop_client(proc):
        """Kills a start_client() program: it and nsenter, which forked it into the container, are one group."""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)

    def blank_inside(self, persona, level):
        """FBIOBLANK on the container's /dev/fb0, as Android's display HAL does at the power key."""
        self.inside(persona, sys.executable, "-c",
                    "import fcntl, os; fcntl.ioctl(os.open('/dev/fb0', os.O_RDWR), %d, %d)" % (fbrig.FBIOBLANK, level))

    def hotkey(self, persona):
        self.hw.hotkey(persona)

    def draw_fb0_inside(self):
        """Each container writes a frame of its persona's colour to its /dev/fb0: the frames."""
        frames = {p: fbrig.frame(self.w, self.h, COLORS[p], band=(60, 90)) for p in PERSONAS}
        for p in PERSONAS:
            path = os.path.join(tempfile.mkdtemp(), "frame")
            with open(path, "wb") as f:
                f.write(frames[p])
            self.inside(p, "dd", "if=" + path, "of=/dev/fb0", "bs=1M", "status=none")
        return frames

    def bl_power(self):
        return read_file(os.path.join(self.bl_dir, "bl_power")).strip()

    def test_a_blanked_persona_powers_the_display_down_and_the_hotkey_brings_the_other_up(self):
        """The active container blanks its screen: the display powers down, and the backlight with it,
        as the kernel's fbdev does; its keyboard still reaches it. The hotkey to the other persona powers
        the display and backlight up with that one's frame; the hotkey back powers them down again;
        unblanking in the container brings back its frame. The personas' own backlight states stay."""
        bl = os.path.basename(self.bl_dir)
        brightness = read_file(os.path.join(self.bl_dir, "brightness"))
        frames = self.draw_fb0_inside()
        rig.devnsctl("switch", "work")
        node = "/dev/input/" + os.path.basename(self.kbd_hw)
        try:
            self.blank_inside("work", 4)
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "work blanked its screen")
            self.assertIn("Display: powered down", rig.devnsctl("status").stdout)
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "4"), "the backlight stayed on")
            self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")), brightness)
            self.assertEqual(self.inside("work", "cat", "/sys/class/backlight/%s/bl_power" % bl).stdout.strip(), "0",
                             "work's own bl_power")
            out = self.probe_key(node, self.kbd, e.KEY_ENTER, "work", personas=("work",))["work"]
            self.assertIn("ev %d %d 1" % (e.EV_KEY, e.KEY_ENTER), out, "work's keyboard while blanked")
            self.assertEqual(fbrig.dpms(), "Off", "a key press on a blanked persona")

            self.hotkey("personal")
            self.assertTrue(rig.eventually(lambda: "Active persona: personal\n" in rig.devnsctl("status").stdout),
                            "the hotkey to personal")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "switched to personal")
            self.assertEqual(self.bl_power(), "0", "the backlight with the display, switched to personal")
            ok, diff = fbrig.screen_shows("phone-power", self.w, self.h, frames["personal"])
            self.assertTrue(ok, "personal's frame is not shown (%s pixels differ)" % diff)

            self.hotkey("work")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "switched back to blanked work")
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "4"), "the backlight, back to blanked work")
        finally:
            self.blank_inside("work", 0)
        rig.devnsctl("switch", "work")
        self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "work unblanked")
        self.assertEqual(self.bl_power(), "0", "the backlight, work unblanked")
        ok, diff = fbrig.screen_shows("phone-power", self.w, self.h, frames["work"])
        self.assertTrue(ok, "work's frame is not shown after it unblanked (%s pixels differ)" % diff)

    def test_a_card_turned_off_powers_the_display_down_and_the_hotkey_brings_the_other_up(self):
        """work's DRM client turns its connector off (DPMS, as a compositor does when idle): the
        display powers down, and the backlight with it. The hotkey to personal powers both up with
        personal's frame, the hotkey back down again; DPMS on brings the client's frame back."""
        color = (0x50, 0x90, 0x10)
        frames = self.draw_fb0_inside()
        rig.devnsctl("switch", "work")
        client, out = self.start_client("work", DRM_DRAW, "/dev/dri/card0", "0x%02x%02x%02x" % color, "--dpms")

        def dpms(value):
            client.stdin.write(value + "\n")
            client.stdin.flush()
            self.assertTrue(out.wait_for(r"\ndpms %s\n" % value, 30), out.text)

        try:
            self.assertTrue(out.wait_for(r"\nshown", 60), out.text)
            self.assertTrue(rig.eventually(lambda: fbrig.solid(fbrig.screendump("phone-dpms"), color), 15),
                            "the client's frame is not on the screen")
            dpms("off")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "work's card turned off")
            self.assertIn("Display: powered down", rig.devnsctl("status").stdout)
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "4"), "the backlight stayed on")

            self.hotkey("personal")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "the hotkey to personal")
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "0"),
                            "the backlight with the display, switched to personal")
            ok, diff = fbrig.screen_shows("phone-dpms", self.w, self.h, frames["personal"])
            self.assertTrue(ok, "personal's frame is not shown (%s pixels differ)" % diff)

            self.hotkey("work")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "Off"), "the hotkey back to work, turned off")
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "4"), "the backlight, back to work")
            dpms("on")
            self.assertTrue(rig.eventually(lambda: fbrig.dpms() == "On"), "work's card turned on")
            self.assertTrue(rig.eventually(lambda: self.bl_power() == "0"), "the backlight, work's card turned on")
            self.assertTrue(rig.eventually(lambda: fbrig.solid(fbrig.screendump("phone-dpms"), color), 15),
                            "the client's frame is not back")
        finally:
            self.stop_client(client)

    def test_cards_follow_the_hotkey(self):
        """A DRM client in each container draws on its persona's card0 (/dev/dri/card0), libdrm's
        modetest in personal's: the screen shows the active persona's card, the hotkey brings the
        other one's at once, and when the clients end each persona's fb0 frame is back. On a
        kernel with udmabuf, work's client shares its buffer as a dma-buf between two files of
        the card (PRIME), as wlroots does, and the master shows the imported buffer."""
        work = (0x20, 0xa0, 0x40)
        band = (0xe0, 0xc0, 0x20)
        prime = os.path.exists("/dev/udmabuf")
        frames = self.draw_fb0_inside()
        rig.devnsctl("switch", "work")

        def shows(p):
            shot = fbrig.screendump("phone-card-" + p)
            if p == "personal":
                return drmrig.shows_bars(shot)
            if not prime:
                return fbrig.solid(shot, work)
            # The band was drawn through the dma-buf, the rest through the dumb buffer's mapping.
            w, h, _ = shot
            return drmrig.pixel_at(shot, w // 2, h // 8) == band and drmrig.pixel_at(shot, w // 2, 3 * h // 4) == work

        color = "0x%02x%02x%02x" % work
        if prime:
            cmd = [drmrig.PRIME, "/dev/dri/card0", color, "0x%02x%02x%02x" % band, "--reopen", "--hold", "600000"]
        else:
            cmd = [DRM_DRAW, "/dev/dri/card0", color, "--hold", "600000"]
        shot = os.path.join(tempfile.mkdtemp(prefix="phone-card-"), "personal.png")

        def personal_drawn():
            rig.devnsctl("screenshot", "personal", shot)
            return drmrig.shows_bars(fbrig.read_png_rgb(shot))

        clients = {}
        try:
            for p, argv in (("work", cmd), ("personal", ["modetest", "-M", "devns", "-s",
                                                         "35@32:%dx%d" % (self.w, self.h)])):
                clients[p], out = self.start_client(p, *argv)
                if p == "work":
                    self.assertTrue(out.wait_for(r"\nshown", 60), "work's client: %s" % out.text)
                    if prime:
                        self.assertRegex(out.text, r"imported \d+ same 1\n")
                else:
                    # Drawn in the background: in personal's screenshot, not on the screen.
                    self.assertTrue(rig.eventually(personal_drawn, 60), "modetest: %s" % out.text)
                    self.assertTrue(shows("work"), "the background modetest reached the screen")
            for p in ("work", "personal", "work"):
                self.hotkey(p)
                self.assertTrue(rig.eventually(lambda: shows(p), 15), "the hotkey to %s does not show its card" % p)
        finally:
            for c in clients.values():
                self.stop_client(c)
        for p in ("personal", "work"):
            rig.devnsctl("switch", p)
            ok, diff = fbrig.screen_shows("phone-card-fb0", self.w, self.h, frames[p])
            self.assertTrue(ok, "%s's fb0 frame is not back after its card's client ended (%s pixels differ)"
                            % (p, diff))

    def test_the_routed_card_gives_each_container_its_persona(self):
        """Each container's phonerig.ROUTED_CARD is the routed card, its /dev/dri/card0 its
        persona's: a DRM client on the routed card draws on the opener's persona's card, on the
        screen while that persona is active and in its screenshot while it is in the background."""
        colors = {"work": (0x40, 0xc0, 0x80), "personal": (0xc0, 0x40, 0x80)}
        rig.devnsctl("switch", "work")
        shot = os.path.join(tempfile.mkdtemp(prefix="phone-routed-card-"), "personal.png")

        def personal_drawn():
            rig.devnsctl("screenshot", "personal", shot)
            return fbrig.solid(fbrig.read_png_rgb(shot), colors["personal"])

        clients = []
        try:
            for p in PERSONAS:
                client, out = self.start_client(p, DRM_DRAW, phonerig.ROUTED_CARD, "0x%02x%02x%02x" % colors[p],
                                                "--hold", "600000")
                clients.append(client)
                self.assertTrue(out.wait_for(r"\nshown", 60), "%s's client: %s" % (p, out.text))
            self.assertTrue(rig.eventually(personal_drawn, 30), "personal's screenshot is not its client's frame")
            self.assertTrue(rig.eventually(
                lambda: fbrig.solid(fbrig.screendump("phone-routed-card-work"), colors["work"]), 15),
                "the screen is not work's client's frame")
            rig.devnsctl("switch", "personal")
            # On the kernel's framebuffer the screen follows its memory a moment later (deferred I/O).
            self.assertTrue(rig.eventually(
                lambda: fbrig.solid(fbrig.screendump("phone-routed-card-personal"), colors["personal"]), 15),
                "the switch to personal does not show its client's frame")
        finally:
            for c in clients:
                self.stop_client(c)
            rig.devnsctl("switch", "work")

    def redraw_top_rows(self, persona, frame, color, rows):
        """Writes rows [0, rows) of the persona's visible frame in color, through its node on the host;
        returns frame with those rows so."""
        fd = os.open(fbrig.fb_node(persona), os.O_RDWR | os.O_CLOEXEC)
        try:
            var, fix = fbrig.get_var(fd), fbrig.get_fix(fd)
            top = var["yoffset"] * fix["line_length"] + var["xoffset"] * 4
            row = fbrig.pixel(color) * self.w
            for y in range(rows):
                os.pwrite(fd, row, top + y * fix["line_length"])
        finally:
            os.close(fd)
        return row * rows + frame[len(row) * rows:]

    def test_preloaded_programs_take_the_librarys_paths(self):
        """Under libdevns-fbmmap.so, with the calls the library replaces refused by a seccomp filter so
        that only its own paths can work: the active container maps, draws and pans (the offsets go by
        value), and the screen shows it; the background container writes a whole frame (copied into its
        memfd, reported by value), which stays off the screen until its persona is switched to."""
        rig.devnsctl("switch", "work")
        p = self.inside("work", "env", "LD_PRELOAD=" + PRELOAD, SECCOMP_DENY, "ioctl=%#x" % fbrig.FBIOPAN_DISPLAY,
                        FBDRAW, "/dev/fb0", "41", check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        drawn = fbrig.pattern_frame(self.w, self.h, 41)
        ok, diff = fbrig.screen_shows("phone-preload", self.w, self.h, drawn)
        self.assertTrue(ok, "work's mapped and panned frame is not shown (%s pixels differ)" % diff)

        written = fbrig.frame(self.w, self.h, (20, 160, 90), band=(100, 140))
        path = os.path.join(tempfile.mkdtemp(), "frame")
        with open(path, "wb") as f:
            f.write(written)
        p = self.inside("personal", "env", "LD_PRELOAD=" + PRELOAD, "PYTHONPATH=" + HERE, SECCOMP_DENY,
                        "pwrite64,ioctl=%#x" % fbrig.DEVNS_FBIO_WROTE, sys.executable, os.path.join(HERE, "fbwrite.py"),
                        "/dev/fb0", "0", path, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(p.stdout.split()[:2] + p.stdout.split()[-2:], ["n", str(len(written)), "memfd", "yes"],
                         p.stdout)
        # A marker: work changes its top rows after that write, and the screen must show work's frame
        # with them, and nothing of personal's.
        drawn = self.redraw_top_rows("work", drawn, (240, 200, 20), 24)
        ok, diff = fbrig.screen_shows("phone-preload", self.w, self.h, drawn)
        self.assertTrue(ok, "the screen does not show work's frame with its new top rows, drawn after the "
                        "background persona's write (%s pixels differ)" % diff)

        for active, shown in (("personal", written), ("work", drawn)):
            rig.devnsctl("switch", active)
            ok, diff = fbrig.screen_shows("phone-preload", self.w, self.h, shown)
            self.assertTrue(ok, "the screen does not show %s's frame (%s pixels differ)" % (active, diff))

    def remove_display(self):
        """Removes the display's PCI device; devnsd notices."""
        rig.write_file(os.path.join(os.path.realpath("/sys/class/drm/card0/device"), "remove"), "1")
        self.assertTrue(rig.eventually(lambda: "Display: gone" in rig.devnsctl("status").stdout),
                        "devnsd did not notice the display going:\n" + self.daemon.output())

    def rescan_display(self):
        """Finds the display's PCI device again: its node is back."""
        rig.write_file("/sys/bus/pci/rescan", "1")
        self.assertTrue(rig.eventually(lambda: os.path.exists(self.DISPLAY_NODE), timeout=20),
                        "the display did not come back as " + self.DISPLAY_NODE)

    def test_the_display_comes_back_with_a_cards_frame(self):
        """The display's device goes and comes back while work's DRM client holds its frame on
        its card0: once the display is back, the screen shows that frame."""
        color = (0x90, 0x20, 0x70)
        rig.devnsctl("switch", "work")
        client, out = self.start_client("work", DRM_DRAW, "/dev/dri/card0", "0x%02x%02x%02x" % color,
                                        "--hold", "600000")
        try:
            self.assertTrue(out.wait_for(r"\nshown", 60), out.text)
            self.assertTrue(rig.eventually(lambda: fbrig.solid(fbrig.screendump("phone-card-gone"), color), 15),
                            "the client's frame is not on the screen")
            try:
                self.remove_display()
            finally:
                self.rescan_display()
            self.assertTrue(rig.eventually(lambda: fbrig.solid(fbrig.screendump("phone-card-back"), color), 30),
                            "the client's frame is not on the screen once the display is back\n" +
                            self.daemon.output())
            self.assertIsNone(client.poll(), "the client ended: " + out.text)
        finally:
            self.stop_client(client)

    def test_the_display_goes_and_comes_back_while_the_containers_run(self):
        """The display's device goes (its PCI device removed) and comes back (a rescan) while both
        containers run: meanwhile they draw, their keyboard reaches the active one, the hotkey
        switches and the backlight follows; once it is back the screen shows the active persona's
        latest frame, and the next switch shows the other's."""
        bl = os.path.basename(self.bl_dir)
        levels = {"work": 300, "personal": 700}
        rig.devnsctl("switch", "work")
        for p in PERSONAS:
            self.inside(p, "sh", "-c", "echo %d > /sys/class/backlight/%s/brightness" % (levels[p], bl))
        frames = {p: fbrig.frame(self.w, self.h, COLORS[p], band=(200, 260)) for p in PERSONAS}
        try:
            self.remove_display()
            for p in PERSONAS:
                path = os.path.join(tempfile.mkdtemp(), "frame")
                with open(path, "wb") as f:
                    f.write(frames[p])
                self.inside(p, "dd", "if=" + path, "of=/dev/fb0", "bs=1M", "status=none")
            node = "/dev/input/" + os.path.basename(self.kbd_hw)
            out = self.probe_key(node, self.kbd, e.KEY_SPACE, "work", personas=("work",))["work"]
            self.assertIn("ev %d %d 1" % (e.EV_KEY, e.KEY_SPACE), out,
                          "work's keyboard while the display was gone\n" + self.daemon.output())
            self.hotkey("personal")
            self.assertTrue(rig.eventually(lambda: "Active persona: personal\n" in rig.devnsctl("status").stdout),
                            "the hotkey to personal while the display was gone")
            self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")).strip(), str(levels["personal"]))
            self.assertEqual(self.bl_power(), "0")
        finally:
            self.rescan_display()
        ok, diff = fbrig.screen_shows("phone-back", self.w, self.h, frames["personal"])
        self.assertTrue(ok, "personal's frame is not shown once the display is back (%s pixels differ)\n%s"
                        % (diff, self.daemon.output()))
        self.assertIn("Display: on", rig.devnsctl("status").stdout)
        self.hotkey("work")
        ok, diff = fbrig.screen_shows("phone-back", self.w, self.h, frames["work"])
        self.assertTrue(ok, "work's frame is not shown after the hotkey (%s pixels differ)" % diff)
        self.assertEqual(read_file(os.path.join(self.bl_dir, "brightness")).strip(), str(levels["work"]))


class Phone(PhoneDisplay, rig.PersonaTestCase):
    """The phone with a DRM display. Input, the routed input nodes and the views do not depend on
    the display's backend: they are checked here only."""

    def test_input_follows_the_active_persona(self):
        node = "/dev/input/" + os.path.basename(self.kbd_hw)
        for active in PERSONAS:
            rig.devnsctl("switch", active)
            for p, out in self.probe_key(node, self.kbd, e.KEY_A, active).items():
                saw = "ev %d %d 1" % (e.EV_KEY, e.KEY_A) in out
                self.assertEqual(saw, p == active, "%s saw %s while %s was active" % (p, out, active))

    def test_waiting_programs_are_woken_at_each_press_across_switches(self):
        """A program in each container waits in epoll_wait() on its keyboard node, as libinput does,
        and stays there through six switches: each press while its persona is active wakes it at
        once with the press; a press while its persona is in the background never reaches it."""
        node = "/dev/input/" + os.path.basename(self.kbd_hw)
        keys = [e.KEY_A, e.KEY_B, e.KEY_C, e.KEY_SPACE, e.KEY_ENTER, e.KEY_ESC]
        waiters, readers, lines = {}, [], {p: [] for p in PERSONAS}
        try:
            for p in PERSONAS:
                waiters[p] = self.containers[p].popen(*WAITER, node, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                      text=True)
                self.assertEqual(waiters[p].stdout.readline().strip(), "open ok")
                readers.append(threading.Thread(target=rig.collect, args=(waiters[p].stdout, lines[p]), daemon=True))
                readers[-1].start()
            for i, key in enumerate(keys):
                active = PERSONAS[i % 2]
                rig.devnsctl("switch", active)
                time.sleep(0.3)
                pressed = time.monotonic_ns()
                rig.press(self.kbd, key, 1)
                rig.press(self.kbd, key, 0)
                press = "ev %d %d 1" % (e.EV_KEY, key)
                # epoll_wait() has no timeout here: without a wake the press is never read at all.
                self.assertTrue(rig.eventually(lambda: press in lines[active], timeout=10),
                                "%s's waiter was not woken by press %d: %s" % (active, i, lines[active]))
                got = lines[active][:lines[active].index(press)]
                woke = int([line for line in got if line.startswith("woke ")][-1].split()[1])
                self.assertLess((woke - pressed) / 1e9, 5, "%s, press %d: woken late" % (active, i))
            # A marker behind the last press: once the active waiter read it, devnsd has dealt with
            # every press for both personas, and each waiter prints what its node still holds as it ends.
            marker = "ev %d %d %d" % rig.send_marker(self.kbd)
            self.assertTrue(rig.eventually(lambda: marker in lines[active], timeout=60),
                            "%s's waiter did not read the marker: %s" % (active, lines[active]))
        finally:
            for w in waiters.values():
                w.stdin.close()
                w.wait(timeout=30)
            for r in readers:
                r.join(30)
            for w in waiters.values():
                w.stdout.close()
        for p in PERSONAS:
            seen = [key for key in keys if "ev %d %d 1" % (e.EV_KEY, key) in lines[p]]
            self.assertEqual(seen, keys[PERSONAS.index(p)::2], "%s read %s" % (p, lines[p]))
            self.assertNotIn("read errno", " ".join(lines[p]))

    def test_routed_nodes_give_each_container_its_persona(self):
        routed = "/dev/input/routed0"
        rig.devnsctl("switch", "personal")
        for p in PERSONAS:
            out = self.probe_key(routed, self.kbd, e.KEY_B, "personal", personas=(p,))[p]
            self.assertEqual("ev %d %d 1" % (e.EV_KEY, e.KEY_B) in out, p == "personal", out)

    def test_keyboard_plugged_in_reaches_the_active_container_and_goes(self):
        kbd = rig.make_keyboard()
        try:
            name = os.path.basename(rig.event_node(kbd))
            node = "/dev/input/" + name
            led = [os.path.basename(l) for l in glob.glob("/sys/class/leds/input*::capslock")
                   if os.path.exists(os.path.join(os.path.realpath(os.path.join(l, "device")), name))][0]
            led_view = "/sys/class/leds/%s/brightness" % led
            for p in PERSONAS:
                self.assertTrue(rig.eventually(lambda: self.inside(p, "test", "-c", node, check=False).returncode == 0),
                                "%s did not appear in %s's container:\n%s" % (node, p, self.daemon.output()))
                # Its capslock LED, in the persona's view the container has at /sys/class/leds.
                self.assertTrue(rig.eventually(lambda: self.inside(p, "test", "-f", led_view, check=False).returncode == 0),
                                "%s did not appear in %s's container" % (led_view, p))
            for active in ("personal", "work"):
                rig.devnsctl("switch", active)
                for p, out in self.probe_key(node, kbd, e.KEY_C, active).items():
                    self.assertEqual("ev %d %d 1" % (e.EV_KEY, e.KEY_C) in out, p == active,
                                     "%s saw %s while %s was active" % (p, out, active))
        finally:
            kbd.close()
        for p in PERSONAS:
            self.assertTrue(rig.eventually(lambda: self.inside(p, "test", "-e", node, check=False).returncode != 0),
                            "%s stayed in %s's container" % (node, p))
            self.assertTrue(rig.eventually(lambda: self.inside(p, "test", "-e", led_view, check=False).returncode != 0),
                            "%s stayed in %s's container" % (led_view, p))
        # The rest of the phone is as it was: the first keyboard still reaches the active persona.
        self.test_input_follows_the_active_persona()

    def test_views_in_the_container_are_the_personas(self):
        bl = os.path.basename(self.bl_dir)
        for p in PERSONAS:
            names = self.inside(p, "ls", "/sys/class/backlight").stdout.split()
            self.assertEqual(names, [bl])
            st = os.stat("/run/devns/%s/sys/class/backlight/%s/brightness" % (p, bl))
            self.assertTrue(stat.S_ISREG(st.st_mode))


class PhoneFbdev(PhoneDisplay, rig.PersonaTestCase):
    """The same phone with a display the kernel offers as a framebuffer only (Backend=fbdev on
    /dev/fb0, bochs' fbdev emulation here), as older phones and SoC boards have: no spares, and
    blanking through FBIOBLANK."""
    DISPLAY = phonerig.FBDEV
    DISPLAY_NODE = "/dev/fb0"
    SPARES = False


if __name__ == "__main__":
    rig.main()
