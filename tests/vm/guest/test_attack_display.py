#!/usr/bin/python3
"""The framebuffer path under attack, on a real kernel: the persona's CUSE
fb0 node, its memfd socket under /run/devnsd/fb and libdevns-fbmmap.so.
Attackers are a non-root user on the host, an app uid inside a container,
anyone with a forged, replayed or expired ticket, one uid hoarding a
persona's slots, and a container that keeps drawing after its persona was
attached to another one. The persona's card0 (AttackCard) faces the same
attackers, and a flood of dumb buffers, ioctl arguments racing between CUSE
rounds and callers blocked on it. Each attack runs against its own persona (and its
own container where there is one). After each, the other personas' frames
and the screen are as they were, and devnsd answers D-Bus within a second."""

import errno
import grp
import os
import re
import signal
import subprocess
import sys
import time

import devnsrig as rig
import fbrig

HERE = os.path.dirname(os.path.abspath(__file__))
FBRIG = [sys.executable, os.path.join(HERE, "fbrig.py"), "probe"]
FBDRAW = os.path.join(rig.BUILD, "tests", "vm", "fbdraw")
DRAW = os.path.join(rig.BUILD, "tests", "vm", "drm-dumb-draw")
ATTACK = os.path.join(rig.BUILD, "tests", "vm", "drm-attack")
PRELOAD = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
OUT = os.environ.get("DEVNS_OUT", "/tmp")

PERSONAS = ("work", "personal", "tickets", "appuid", "limits", "reattach", "owned", "lease")
EACCES, EBADF, EMFILE, ENODEV = 13, 9, 24, 19
APP_UID = 1000
# Tickets live 5 s (devns-fb.h).
TICKET_LIFETIME = 5.0
# Per persona, one uid may hold a quarter of the mappings (64) and open files (64).
MAPPINGS_PER_UID = 16
OPEN_PER_UID = 16


def as_user(uid, groups=()):
    """setpriv arguments that run a command as uid, with only the given supplementary groups."""
    args = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid]
    return args + (["--groups=" + ",".join(str(g) for g in groups)] if groups else ["--clear-groups"])


class Attacks(rig.PersonaTestCase):
    """What the attacks on the display share: probes, screens, and checks that devnsd still answers."""

    # --- helpers -------------------------------------------------------------------------

    def probe(self, *steps, user=None, container=None, check_exit=True):
        """Runs fbrig.py's probe (as user, inside container); its output lines."""
        cmd = (user or []) + FBRIG + [str(s) for s in steps]
        env = dict(os.environ, PYTHONPATH=HERE)
        if container:
            p = container.run(*cmd, check=False, env=env)
        else:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        if check_exit:
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout.splitlines()

    def hold_probe(self, container, user, steps):
        """Starts a probe (inside container, or on the host) whose steps end with "held", "wait": its output up to
        "held", while it holds on."""
        cmd = [*user, *FBRIG, *map(str, steps)]
        env = dict(os.environ, PYTHONPATH=HERE)
        if container:
            p = container.popen(*cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        else:
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.addCleanup(p.kill)
        lines = []
        while not (lines and lines[-1].startswith("held")):
            line = p.stdout.readline()
            self.assertTrue(line, "the probe ended early:\n" + "\n".join(lines))
            lines.append(line.strip())
        return p, lines

    @staticmethod
    def release(p):
        p.stdin.write("\n")
        p.stdin.close()
        p.wait(60)
        p.stdout.close()

    def assert_screen(self, data, what, timeout=10.0):
        type(self).n_dumps += 1
        name = "attack-%s-%02d" % (self.id().split(".")[-1], self.n_dumps)
        ok, diff = fbrig.screen_shows(name, self.w, self.h, data, timeout=timeout)
        self.assertTrue(ok, "%s: screen (%s.png) differs from the expected frame: %s pixels" % (what, name, diff))

    def screenshot(self, persona):
        path = os.path.join(OUT, "attack-%s.png" % persona)
        rig.devnsctl("screenshot", persona, path)
        return fbrig.read_png_rgb(path)[2]

    def assert_bus_answers(self):
        """devnsd answers D-Bus within a second: `devnsctl list` takes at most a second longer than
        starting devnsctl without a bus call. The emulated machine shares its host with other work and
        stalls now and then, so one answer in three tries counts; a devnsd that is stuck fails all three."""
        times = []
        for _ in range(3):
            start = time.monotonic()
            subprocess.run([rig.DEVNSCTL, "--help"], capture_output=True, timeout=30)
            spawn = time.monotonic() - start
            start = time.monotonic()
            try:
                p = subprocess.run([rig.DEVNSCTL, "list"], capture_output=True, text=True, timeout=spawn + 1)
            except subprocess.TimeoutExpired:
                times.append("over %.2f s (starting devnsctl: %.2f s)" % (spawn + 1, spawn))
                continue
            self.assertEqual(p.returncode, 0, p.stderr)
            return
        self.fail("devnsd did not answer `devnsctl list` within a second: " + ", ".join(times))

    def assert_untouched(self, screen=True):
        """Nothing outside the attacked persona changed, and devnsd answers."""
        self.assert_bus_answers()
        for persona, data in self.frames.items():
            self.assertTrue(self.screenshot(persona) == fbrig.to_rgb(data), "persona %s's frame changed" % persona)
        if screen:
            self.assert_screen(self.frames["work"], "the active persona's frame")
        self.assertTrue(self.daemon.alive())

    def assert_no_memfd(self, lines):
        got = [line for line in lines if line.endswith(("memfd rw", "memfd ro", "memfd wo"))]
        self.assertEqual(got, [], "a program got the framebuffer memory:\n" + "\n".join(lines))

    def assert_private(self, path):
        """0660 (never world-accessible), and owned as the persona's node and socket must be alike."""
        st = os.lstat(path)
        self.assertEqual(st.st_mode & 0o777, 0o660, "%s has mode %o" % (path, st.st_mode & 0o777))
        return st

    def assert_no_process_in_d_state(self):
        """No process sleeps uninterruptibly (state D) in three looks half a second apart."""
        def stuck():
            found = set()
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open("/proc/%s/stat" % pid) as f:
                        stat = f.read()
                except OSError:
                    continue
                if stat[stat.rindex(")") + 2] == "D":
                    found.add(stat[:stat.rindex(")") + 1])
            return found
        always = stuck()
        for _ in range(2):
            time.sleep(0.5)
            always &= stuck()
        self.assertEqual(always, set(), "processes left in D state")


class AttackDisplay(Attacks):
    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(fbrig.conf_display(personas=PERSONAS, routed=True))
        var, _ = fbrig.screen_info()
        cls.w, cls.h = var["xres"], var["yres"]
        cls.frames = {
            "work": fbrig.frame(cls.w, cls.h, (20, 140, 60), band=(200, 260)),
            "personal": fbrig.frame(cls.w, cls.h, (150, 30, 90), band=(500, 540), band_color=(0, 0, 0)),
        }
        for persona, data in cls.frames.items():
            fd = os.open(fbrig.fb_node(persona), os.O_RDWR)
            try:
                fbrig.write_all(fd, data)
            finally:
                os.close(fd)
        cls.n_dumps = 0

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    # --- a non-root user on the host ---------------------------------------------------------

    def test_host_user_gets_no_memfd(self):
        """`nobody` on the host can neither open a persona's fb0 nor get its memfd from the socket."""
        steps = []
        for persona in ("work", "personal"):
            sock = fbrig.socket_path(persona)
            steps += ["open", persona, fbrig.fb_node(persona), "r", "legacy", sock, "forge", persona,
                      "redeem", sock, persona, "m"]
        steps += ["open", "routed", "/dev/devns/fb0", "r"]
        lines = self.probe(*steps, user=as_user(65534))
        self.assert_no_memfd(lines)
        for persona in ("work", "personal", "routed"):
            self.assertIn("open %s errno %d" % (persona, EACCES), lines)
        for persona in ("work", "personal"):
            self.assert_private(fbrig.socket_path(persona))
            self.assert_private(fbrig.fb_node(persona))
        self.assert_untouched()

    # --- an app uid inside a container ---------------------------------------------------------

    def test_app_uid_in_container_gets_nothing(self):
        """Inside the persona's own container, a uid that is neither root nor in the video group can
        neither open /dev/fb0 nor get the memfd; the container's root can, through a ticket."""
        sock = fbrig.socket_path("appuid")
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "appuid", "--pid", str(c.pid))
            c.run("test", "-c", "/dev/fb0")
            c.run("test", "-S", sock)
            lines = self.probe("open", "rw", "/dev/fb0", "rw", "open", "r", "/dev/fb0", "r",
                               "open", "host", fbrig.fb_node("appuid"), "r",
                               "legacy", sock, "forge", "f", "redeem", sock, "f", "m",
                               user=as_user(APP_UID), container=c)
            self.assert_no_memfd(lines)
            for name in ("rw", "r"):
                self.assertIn("open %s errno %d" % (name, EACCES), lines)
            # The node's rule, not a blanket refusal: the container's root gets the memory.
            lines = self.probe("open", "a", "/dev/fb0", "rw", "ticket", "a", "t", "redeem", sock, "t", "m",
                               container=c)
            self.assertIn("redeem t memfd rw", lines)
        finally:
            c.stop()
        self.assert_untouched()

    # --- tickets ------------------------------------------------------------------------------

    def test_forged_replayed_expired_tickets_get_nothing(self):
        """Even where the socket lets a program in (root), nothing but a fresh ticket of an open fb0 file
        of this persona gets the memfd: no old one-byte request, no forged, replayed, expired ticket,
        none of a closed file or meant for another persona. A read-only file gets read-only memory."""
        node, sock = fbrig.fb_node("tickets"), fbrig.socket_path("tickets")
        before = self.daemon.output().count("tickets/fb0: refused")
        lines = self.probe(
            "open", "a", node, "rw",
            "legacy", sock,
            "forge", "forged", "redeem", sock, "forged", "m",
            "raw", sock, "00" * 64,
            "ticket", "a", "t1", "redeem", sock, "t1", "m", "redeem", sock, "t1", "m",
            "ticket", "a", "other", "redeem", fbrig.socket_path("personal"), "other", "m",
            "ticket", "a", "closed", "close", "a", "redeem", sock, "closed", "m",
            "open", "b", node, "rw", "ticket", "b", "old", "sleep", TICKET_LIFETIME + 1, "redeem", sock, "old", "m",
            "open", "r", node, "r", "ticket", "r", "ro", "redeem", sock, "ro", "m", "mapwrite",
            "open", "w", node, "w", "ticket", "w", "wo", "redeem", sock, "wo", "w",
            "raw", sock, "")
        self.assertEqual([line for line in lines if " memfd " in line or line.startswith("mapwrite")], [
            "legacy memfd none",
            "redeem forged memfd none",
            "raw memfd none",
            "redeem t1 memfd rw",
            "redeem t1 memfd none",
            "redeem other memfd none",
            "redeem closed memfd none",
            "redeem old memfd none",
            "redeem ro memfd ro",
            "mapwrite errno %d" % EACCES,
            "redeem wo memfd wo",
            "raw memfd none",
        ], "\n".join(lines))
        # The refusals are logged, once.
        self.assertEqual(self.daemon.output().count("tickets/fb0: refused") - before, 1, self.daemon.output())

        # Read-only memory stays read-only: an app of the video group in the persona's container, which may
        # open /dev/fb0, cannot reopen the memory it got for a read-only file for writing.
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "tickets", "--pid", str(c.pid))
            gid = self.assert_private(node).st_gid
            self.assertEqual(self.assert_private(sock).st_gid, gid, "the node and its socket have different groups")
            lines = self.probe("open", "r", "/dev/fb0", "r", "ticket", "r", "t", "redeem", sock, "t", "m",
                               "reopen-rw", "mapwrite", "wrote", "r", user=as_user(APP_UID, [gid]), container=c)
            # Nor can it say it wrote: a read-only file's DEVNS_FBIO_WROTE_AT is write()'s EBADF.
            self.assertEqual(lines[-4:], ["redeem t memfd ro", "reopen-rw errno %d" % EACCES,
                                          "mapwrite errno %d" % EACCES, "wrote r errno %d" % EBADF],
                             "\n".join(lines))
        finally:
            c.stop()
        self.assert_untouched()

    # --- limits -------------------------------------------------------------------------------

    def test_one_uid_cannot_take_every_slot(self):
        """In the persona's container, one app uid of the video group gets at most a quarter of the
        persona's mappings and open files; another uid still gets its own."""
        sock = fbrig.socket_path("limits")
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "limits", "--pid", str(c.pid))
            gid = self.assert_private(fbrig.fb_node("limits")).st_gid
            steps = ["open", "a", "/dev/fb0", "rw"]
            for i in range(MAPPINGS_PER_UID + 1):
                steps += ["ticket", "a", "t%d" % i, "redeem", sock, "t%d" % i, "m"]
            steps += ["held", "wait"]
            hoarder, lines = self.hold_probe(c, as_user(APP_UID, [gid]), steps)
            self.assertEqual(lines[-1], "held %d" % MAPPINGS_PER_UID, "\n".join(lines))
            self.assertEqual(lines[-2], "redeem t%d memfd none" % MAPPINGS_PER_UID)
            # Another uid of the persona still maps it.
            other = self.probe("open", "a", "/dev/fb0", "rw", "ticket", "a", "t", "redeem", sock, "t", "m",
                               user=as_user(APP_UID + 1, [gid]), container=c)
            self.assertIn("redeem t memfd rw", other)
            self.release(hoarder)

            steps = []
            for i in range(OPEN_PER_UID + 1):
                steps += ["open", "f%d" % i, "/dev/fb0", "r"]
            hoarder, lines = self.hold_probe(c, as_user(APP_UID, [gid]), steps + ["held", "wait"])
            self.assertEqual(lines[OPEN_PER_UID - 1], "open f%d ok" % (OPEN_PER_UID - 1), "\n".join(lines))
            self.assertEqual(lines[OPEN_PER_UID], "open f%d errno %d" % (OPEN_PER_UID, EMFILE))
            lines = self.probe("open", "a", "/dev/fb0", "r", user=as_user(APP_UID + 1, [gid]), container=c)
            self.assertEqual(lines, ["open a ok"])
            self.release(hoarder)
        finally:
            c.stop()
        self.assert_untouched()

    # --- re-attach --------------------------------------------------------------------------

    def test_reattach_revokes_the_old_container(self):
        """Once the persona is attached to a new container, the old container's open files answer ENODEV,
        its tickets are void, and what its program draws into its old mapping reaches neither the screen
        nor the persona's new memory; the new container starts from a fresh black frame and draws."""
        sock = fbrig.socket_path("reattach")
        routed = os.stat("/dev/devns/fb0").st_rdev
        rig.devnsctl("switch", "reattach")
        old = rig.Container(private_dev=True)
        new = rig.Container(private_dev=True)
        outputs = []
        try:
            rig.devnsctl("attach", "reattach", "--pid", str(old.pid))
            old.run("mknod", "/dev/routed-fb0", "c", str(os.major(routed)), str(os.minor(routed)))
            drawer = old.popen("env", "LD_PRELOAD=" + PRELOAD, FBDRAW, "/dev/fb0", "31", "--no-pan",
                               "--change-on-signal", "32", "0", str(self.h), "--hold", "120000", "--report",
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            drawn = rig.Output(drawer)
            outputs.append(drawn)
            self.assertTrue(drawn.wait_for("drawn"), drawn.text)
            self.assert_screen(fbrig.pattern_frame(self.w, self.h, 31), "the old container drew")

            holder = old.popen(*FBRIG, "open", "a", "/dev/fb0", "rw", "open", "routed", "/dev/routed-fb0", "rw",
                               "ticket", "a", "t", "blank", "a", "4", "wait",
                               "info", "a", "write", "a", "info", "routed", "redeem", sock, "t", "m",
                               "open", "again", "/dev/fb0", "r",
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONPATH=HERE))
            held = rig.Output(holder)
            outputs.append(held)
            self.assertTrue(held.wait_for("blank a ok"), held.text)
            self.assertIn("open routed ok", held.text)

            rig.devnsctl("attach", "reattach", "--pid", str(new.pid))
            black = bytes(self.w * self.h * 4)
            self.assert_screen(black, "after the re-attach")
            self.assertTrue(self.screenshot("reattach") == fbrig.to_rgb(black),
                            "the new container sees the old one's frame")
            holder.stdin.write("\n")
            holder.stdin.flush()
            self.assertTrue(held.wait_for("open again"), held.text)
            for line in ("info a errno %d" % ENODEV, "write a errno %d" % ENODEV, "info routed errno %d" % ENODEV,
                         "redeem t memfd none", "open again errno %d" % EACCES):
                self.assertIn(line, held.text)

            # The old program draws into its mapping: nothing of it is shown or kept.
            os.kill(child_of(drawer.pid), signal.SIGUSR1)
            self.assertTrue(drawn.wait_for("after change: "), drawn.text)
            self.assertIn("after change: errno %d" % ENODEV, drawn.text)
            time.sleep(0.5)
            self.assert_screen(black, "the old container drew after the re-attach", timeout=0)
            self.assertTrue(self.screenshot("reattach") == fbrig.to_rgb(black),
                            "the persona's new memory holds something")

            # The new container draws as on a fresh device (not blanked, not panned).
            p = new.run("env", "LD_PRELOAD=" + PRELOAD, FBDRAW, "/dev/fb0", "33", check=False)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assert_screen(fbrig.pattern_frame(self.w, self.h, 33), "the new container drew")
            self.assertTrue(self.screenshot("reattach") == fbrig.to_rgb(fbrig.pattern_frame(self.w, self.h, 33)))
        finally:
            # The containers first: the drawer inside holds its output open for its whole --hold.
            old.stop()
            new.stop()
            for out in outputs:
                out.proc.kill()
                out.finish()
                out.proc.stdout.close()
                if out.proc.stdin:
                    out.proc.stdin.close()
        self.assert_bus_answers()
        rig.devnsctl("switch", "work")
        self.assert_untouched()

    # --- ownership ---------------------------------------------------------------------------

    def test_node_and_socket_belong_to_the_container(self):
        """An unattached persona's host node and socket are root's, 0660. Attached, they belong to the
        container's root and video group (p->owner), still 0660."""
        for path in (fbrig.fb_node("owned"), fbrig.socket_path("owned")):
            st = self.assert_private(path)
            self.assertEqual((st.st_uid, st.st_gid), (0, 0), path)
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "owned", "--pid", str(c.pid))
            video = grp.getgrnam("video").gr_gid
            for path in (fbrig.fb_node("owned"), fbrig.socket_path("owned")):
                st = self.assert_private(path)
                self.assertEqual((st.st_uid, st.st_gid), (0, video), path)
        finally:
            c.stop()
        self.assert_untouched()

    # --- a lease on the memory ----------------------------------------------------------------

    def test_lease_on_the_memory_holds_nothing_up(self):
        """The container's root (no user namespace: host uid 0, like the memory's owner) takes leases on
        the memory it got for a read-only and for a read-write fb0 file, ignoring SIGIO so that it never
        gives them up. Another program of the persona then asks for the memory to write: devnsd must not
        wait for a lease to break (45 s, past its watchdog). It answers D-Bus within a second, the
        program gets its memory, and the other personas still draw and switch."""
        sock = fbrig.socket_path("lease")
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "lease", "--pid", str(c.pid))
            holder, lines = self.hold_probe(c, [], [
                "open", "r", "/dev/fb0", "r", "ticket", "r", "tr", "redeem", sock, "tr", "m", "lease", "r", "lease", "w",
                "open", "a", "/dev/fb0", "rw", "ticket", "a", "ta", "redeem", sock, "ta", "m", "lease", "r", "lease", "w",
                "held", "wait"])
            self.assertIn("redeem tr memfd ro", lines)
            self.assertIn("redeem ta memfd rw", lines)
            leases = [line for line in lines if line.startswith("lease ")]
            writer = c.popen(*FBRIG, "open", "w", "/dev/fb0", "w", "ticket", "w", "tw", "redeem", sock, "tw", "w",
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, PYTHONPATH=HERE))
            wrote = rig.Output(writer)
            try:
                self.assertTrue(wrote.wait_for("ticket tw"), wrote.text)
                # The request is on its way; devnsd reads it at once.
                time.sleep(1)
                self.assert_bus_answers()
                self.assertTrue(wrote.wait_for("redeem tw"), wrote.text)
                self.assertIn("redeem tw memfd wo", wrote.text)
            finally:
                writer.kill()
                wrote.finish()
                writer.stdout.close()
            # Each program has a description of its own, and devnsd keeps the memory open for writing:
            # no lease can be taken on it at all.
            self.assertEqual(leases, ["lease r errno 11", "lease w errno 11"] * 2, "\n".join(lines))
            self.release(holder)
        finally:
            c.stop()
        self.assert_no_process_in_d_state()
        # The other persona draws and is shown.
        fd = os.open(fbrig.fb_node("personal"), os.O_RDWR)
        try:
            fbrig.write_all(fd, self.frames["personal"])
        finally:
            os.close(fd)
        rig.devnsctl("switch", "personal")
        self.assert_screen(self.frames["personal"], "the other persona after the lease")
        rig.devnsctl("switch", "work")
        self.assert_untouched()


# card0's dumb buffers: each persona may hold CARD_BUDGET bytes (CardMemory=); the flood's buffers fill it exactly.
CARD_BUDGET = 32 << 20
FLOOD_SIDE = 1024
CARD_PERSONAS = ("work", "personal", "thief", "victim", "tickets", "flood", "race", "blocked", "reattach")
ENOMEM, EBUSY = errno.ENOMEM, errno.EBUSY
# What a caller racing its own ioctl arguments may get: never a hang, a revocation or another file's error.
RACE_ERRNOS = {errno.EIO, errno.EINVAL, errno.EFAULT, errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC}
# Blocked callers: files, and threads of each in read() and in WAIT_VBLANK; a file holds 16 at most.
BLOCK_FILES, BLOCK_EACH, WAITERS_PER_FILE = 2, 12, 16
CARD = "/dev/dri/card0"


def rgb(color):
    return ((color >> 16) & 0xff, (color >> 8) & 0xff, color & 0xff)


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def meminfo_kib(field):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class AttackCard(Attacks):
    """A persona's card0 (/dev/dri/card0 in its container) under attack: other personas' containers and
    host users reaching for it, forged map offsets and tickets, a flood of dumb buffers, ioctl arguments
    changing between CUSE rounds, callers blocked on it, a background persona drawing, and a container
    that keeps its card after its persona was attached to another one. After each, devnsd answers, no
    process is stuck in D state, and the other persona still draws on its card and switches."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        conf = fbrig.conf_display(personas=CARD_PERSONAS)
        cls.daemon = rig.Daemon(conf.replace("[Display]\n", "[Display]\nCardMemory=%d\n" % CARD_BUDGET, 1))
        var, _ = fbrig.screen_info()
        cls.w, cls.h = var["xres"], var["yres"]
        cls.frames = {"work": fbrig.frame(cls.w, cls.h, (20, 140, 60), band=(200, 260))}
        fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        try:
            fbrig.write_all(fd, cls.frames["work"])
        finally:
            os.close(fd)
        cls.personal, = rig.attached("personal", private_dev=True)
        cls.n_dumps = 0

    @classmethod
    def tearDownClass(cls):
        cls.personal.stop()
        cls.stop_daemon()

    # --- helpers -------------------------------------------------------------------------

    def container(self, persona):
        c = rig.Container(private_dev=True)
        self.addCleanup(c.stop)
        rig.devnsctl("attach", persona, "--pid", str(c.pid))
        return c

    def start(self, container, *cmd):
        """A program inside container, mapping through libdevns-fbmmap.so; its output collected."""
        p = container.popen("env", "LD_PRELOAD=" + PRELOAD, *map(str, cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
        out = rig.Output(p)

        def end():
            # nsenter forks the program into the container: it goes first.
            if p.poll() is None:
                try:
                    os.kill(child_of(p.pid), signal.SIGKILL)
                except (OSError, RuntimeError):
                    pass
                p.kill()
            out.finish(60)
            p.stdout.close()
            p.stdin.close()
        out.end = end
        self.addCleanup(end)
        return out

    def shows(self, color, what, timeout=20.0):
        type(self).n_dumps += 1
        name = "attack-card-%s-%02d" % (self.id().split(".")[-1], self.n_dumps)
        self.assertTrue(rig.eventually(lambda: fbrig.solid(fbrig.screendump(name), rgb(color)), timeout=timeout),
                        "%s: the screen (%s.png) does not show 0x%06x" % (what, name, color))

    def assert_other_persona_draws(self):
        """personal draws on its card in its container, is shown at a switch, and work's frame comes back."""
        color = 0x3060c0
        draw = self.start(self.personal, DRAW, CARD, "0x%06x" % color, "--hold", "600000")
        self.assertTrue(draw.wait_for(r"\nshown", 120), draw.text)
        rig.devnsctl("switch", "personal")
        self.shows(color, "the other persona after the attack")
        rig.devnsctl("switch", "work")
        draw.end()
        self.assert_screen(self.frames["work"], "the active persona after the attack")

    def assert_plain_client_draws(self, container):
        draw = self.start(container, DRAW, CARD, "0x405060")
        draw.finish(120)
        self.assertEqual(draw.proc.returncode, 0, draw.text)

    def assert_untouched(self, screen=True):
        self.assertTrue(self.daemon.alive(), self.daemon.output())
        self.assert_bus_answers()
        self.assert_no_process_in_d_state()
        self.assert_other_persona_draws()
        self.assertTrue(self.daemon.alive(), self.daemon.output())

    # --- other personas and host users ---------------------------------------------------------

    def test_other_container_gets_nothing_of_this_card(self):
        """The thief's container (its root, with mknod) cannot open the victim's card0, nor get the victim's
        buffer with its own card's tickets; a ticket of one card names nothing at another persona's socket;
        an app uid of the thief's own container cannot open its card0."""
        victim, lines = self.hold_probe(None, [], [
            "open", "v", fbrig.card_node("victim"), "rw", "dumb", "v", "V", 64, 64, "mapdumb", "v", "V",
            "cardticket", "v", "V", "t", "redeem", fbrig.socket_path("victim"), "t", "m", "fill", "ab", "peek",
            "held", "wait"])
        self.assertIn("peek abababab", lines)
        offset = int(next(line for line in lines if line.startswith("mapdumb V offset ")).split()[-1])
        thief = self.container("thief")
        st = os.stat(fbrig.card_node("victim"))
        thief.run("mknod", "/dev/victim-card0", "c", str(os.major(st.st_rdev)), str(os.minor(st.st_rdev)))
        lines = self.probe(
            "open", "victim", "/dev/victim-card0", "rw", "open", "victim-r", "/dev/victim-card0", "r",
            "open", "own", CARD, "rw",
            "cardticket", "own", str(offset), "before",
            "dumb", "own", "T", 64, 64, "mapdumb", "own", "T",
            "cardticket", "own", str(offset), "t1", "redeem", fbrig.socket_path("thief"), "t1", "m", "peek",
            "cardticket", "own", "T", "t2", "redeem", fbrig.socket_path("victim"), "t2", "m",
            container=thief)
        for line in ("open victim errno %d" % EACCES, "open victim-r errno %d" % EACCES, "open own ok",
                     "cardticket before errno %d" % errno.ENOENT, "redeem t2 errno %d" % errno.ENOENT):
            self.assertIn(line, lines, "\n".join(lines))
        self.assertNotIn("peek abababab", lines, "the thief got the victim's buffer:\n" + "\n".join(lines))
        # The app uid of the thief's own container.
        lines = self.probe("open", "app", CARD, "rw", user=as_user(APP_UID), container=thief)
        self.assertEqual(lines, ["open app errno %d" % EACCES])
        # Host root holding a ticket of the thief's card: the victim's socket knows nothing of it.
        lines = self.probe("open", "own", fbrig.card_node("thief"), "rw", "dumb", "own", "T", 64, 64,
                           "mapdumb", "own", "T", "cardticket", "own", "T", "t", "redeem", fbrig.socket_path("victim"),
                           "t", "m", "cardticket", "own", "T", "t", "redeem", fbrig.socket_path("thief"), "t", "m")
        self.assertEqual([line for line in lines if line.startswith("redeem")],
                         ["redeem t memfd none", "redeem t memfd rw"], "\n".join(lines))
        self.release(victim)
        self.assert_untouched()

    def test_host_user_gets_nothing(self):
        """`nobody` on the host, also with the video group that an attached persona's card0 has, opens no
        card0 and gets no buffer's memfd from any socket."""
        video = grp.getgrnam("video").gr_gid
        self.assertEqual(os.stat(fbrig.card_node("personal")).st_gid, video)
        steps = []
        for persona in ("work", "personal", "victim"):
            sock = fbrig.socket_path(persona)
            steps += ["open", persona, fbrig.card_node(persona), "rw", "open", persona + "-r",
                      fbrig.card_node(persona), "r", "forge", persona, "redeem", sock, persona, "m",
                      "raw", sock, "00" * 24]
        for user in (as_user(65534), as_user(65534, [video])):
            lines = self.probe(*steps, user=user)
            self.assert_no_memfd(lines)
            for persona in ("work", "personal", "victim"):
                self.assertIn("open %s errno %d" % (persona, EACCES), lines)
                self.assertIn("open %s-r errno %d" % (persona, EACCES), lines)
        for persona in ("work", "personal"):
            self.assert_private(fbrig.card_node(persona))
        self.assert_untouched()

    # --- offsets and tickets ------------------------------------------------------------------

    def test_forged_offsets_and_replayed_tickets_get_nothing(self):
        """The persona's container root asks tickets for offsets of no buffer, of another open file's
        buffer and of a destroyed buffer: none is given. A ticket is good once, and not after its buffer
        was destroyed or its file closed, nor when forged or expired."""
        sock = fbrig.socket_path("tickets")
        c = self.container("tickets")
        lines = self.probe(
            "open", "a", CARD, "rw", "open", "b", CARD, "rw",
            "dumb", "a", "A", 64, 64, "mapdumb", "a", "A",
            "dumb", "b", "B", 64, 64, "mapdumb", "b", "B",
            "dumb", "a", "D", 64, 64, "mapdumb", "a", "D", "destroy", "a", "D",
            "cardticket", "a", "0", "zero",
            "cardticket", "a", str(1 << 40), "none",
            "cardticket", "a", "B", "others",
            "cardticket", "a", "D", "destroyed",
            "cardticket", "a", "A", "once", "redeem", sock, "once", "m", "redeem", sock, "once", "m",
            "cardticket", "a", "A", "gone", "destroy", "a", "A", "redeem", sock, "gone", "m",
            "cardticket", "b", "B", "closed", "close", "b", "redeem", sock, "closed", "m",
            "forge", "forged", "redeem", sock, "forged", "m",
            "open", "e", CARD, "rw", "dumb", "e", "E", 64, 64, "mapdumb", "e", "E", "cardticket", "e", "E", "old",
            "sleep", TICKET_LIFETIME + 1, "redeem", sock, "old", "m",
            "open", "r", CARD, "r", "dumb", "r", "R", 64, 64, "mapdumb", "r", "R", "cardticket", "r", "R", "ro",
            "redeem", sock, "ro", "m", "mapwrite",
            container=c)
        got = [line for line in lines if line.startswith(("cardticket", "redeem", "mapwrite"))]
        self.assertEqual(got, [
            "cardticket zero errno %d" % errno.ENOENT,
            "cardticket none errno %d" % errno.ENOENT,
            "cardticket others errno %d" % errno.ENOENT,
            "cardticket destroyed errno %d" % errno.ENOENT,
            "cardticket once ok", "redeem once memfd rw", "redeem once memfd none",
            "cardticket gone ok", "redeem gone memfd none",
            "cardticket closed ok", "redeem closed memfd none",
            "redeem forged memfd none",
            "cardticket old ok", "redeem old memfd none",
            "cardticket ro ok", "redeem ro memfd ro", "mapwrite errno %d" % EACCES,
        ], "\n".join(lines))
        self.assert_untouched()

    # --- memory -----------------------------------------------------------------------------

    def test_buffer_flood_stays_within_the_budget(self):
        """The persona's container root creates dumb buffers, maps and fills each, until CREATE_DUMB says
        ENOMEM: exactly the budget's worth. devnsd and the machine hold no more than that budget meanwhile,
        the other persona still draws, and once the flooder is gone the persona gets it all again."""
        sock = fbrig.socket_path("flood")
        size = FLOOD_SIDE * FLOOD_SIDE * 4
        expect = "flood a %d size %d errno %d" % (CARD_BUDGET // size, size, ENOMEM)
        pid = self.daemon.proc.pid
        rss, shmem = status_kib(pid, "VmRSS"), meminfo_kib("Shmem")
        c = self.container("flood")
        steps = ["open", "a", CARD, "rw", "flood", "a", FLOOD_SIDE, FLOOD_SIDE, sock,
                 "open", "b", CARD, "rw", "dumb", "b", "small", 64, 64, "held", "wait"]
        flooder, lines = self.hold_probe(c, [], steps)
        self.assertIn(expect, lines, "\n".join(lines))
        self.assertIn("dumb small errno %d" % ENOMEM, lines, "another file of the persona went past the budget")
        slack = 24 << 10
        grew = status_kib(pid, "VmRSS") - rss
        if not os.environ.get("DEVNS_SANITIZE"):
            self.assertLess(grew, slack, "devnsd grew by %d KiB" % grew)
        grew = meminfo_kib("Shmem") - shmem
        self.assertLess(grew, (CARD_BUDGET >> 10) + slack, "shared memory grew by %d KiB" % grew)
        self.assert_untouched()
        self.release(flooder)
        # All of it comes back.
        flooder, lines = self.hold_probe(c, [], steps)
        self.assertIn(expect, lines, "\n".join(lines))
        self.release(flooder)
        self.assertTrue(rig.eventually(lambda: meminfo_kib("Shmem") - shmem < slack, timeout=30),
                        "the buffers' memory was not released: %d KiB" % (meminfo_kib("Shmem") - shmem))
        self.assert_untouched()

    # --- ioctls -----------------------------------------------------------------------------

    def test_racing_nested_counts_stall_nothing(self):
        """Threads of the persona's container call GETCONNECTOR, GETRESOURCES and ATOMIC while others change
        the nested counts and pointers of their arguments between CUSE rounds: they get errors (EIO for a
        request that never settles), devnsd keeps answering, the other persona draws meanwhile, and the
        card answers a plain client afterwards."""
        c = self.container("race")
        race = self.start(c, ATTACK, "race", CARD)
        self.assertTrue(race.wait_for(r"racing", 60), race.text)
        time.sleep(3)
        self.assertTrue(self.daemon.alive(), self.daemon.output())
        self.assert_bus_answers()
        self.assert_other_persona_draws()
        race.proc.stdin.write("\n")
        race.proc.stdin.flush()
        self.assertTrue(race.wait_for(r"\ndone", 120), race.text)
        counts = dict((int(e), int(n)) for e, n in re.findall(r"^errno (\d+) (\d+)$", race.text, re.M))
        calls, ok = map(int, re.search(r"^calls (\d+) ok (\d+)$", race.text, re.M).groups())
        self.assertGreater(calls, 100, race.text)
        self.assertLessEqual(set(counts), RACE_ERRNOS, race.text)
        self.assertGreater(counts.get(errno.EIO, 0) + counts.get(errno.EINVAL, 0), 0, race.text)
        race.finish(60)
        self.assert_plain_client_draws(c)
        self.assert_untouched()

    def test_blocked_callers_get_enodev_at_reattach(self):
        """Threads of a background persona's container block in read() and WAIT_VBLANK on two files, past
        what a file holds (EBUSY for the rest). Attached to a new container, every blocked caller gets
        ENODEV, and the new container's card works."""
        c = self.container("blocked")
        block = self.start(c, ATTACK, "block", CARD, BLOCK_FILES, BLOCK_EACH)
        busy = BLOCK_FILES * (2 * BLOCK_EACH - WAITERS_PER_FILE)
        self.assertTrue(block.wait_for(r"\nstarted", 60), block.text)
        self.assertTrue(rig.eventually(lambda: block.text.count("errno %d" % EBUSY) == busy, timeout=60),
                        block.text)
        self.assert_bus_answers()
        self.assert_no_process_in_d_state()
        self.assertEqual(re.findall(r"^(?:read|vblank) .*$", block.text, re.M).__len__(), busy, block.text)
        new = self.container("blocked")
        self.assertTrue(block.wait_for(r"\ndone", 60), block.text)
        blocked = BLOCK_FILES * WAITERS_PER_FILE
        self.assertEqual(block.text.count("errno %d" % ENODEV), blocked, block.text)
        self.assertEqual(len(re.findall(r"^(?:read|vblank) \d+ errno %d$" % ENODEV, block.text, re.M)), blocked)
        block.finish(60)
        self.assert_plain_client_draws(new)
        self.assert_untouched()

    # --- the screen ---------------------------------------------------------------------------

    def test_background_card_never_reaches_the_screen(self):
        """A background persona's SETCRTC, flips, DIRTYFB, gamma and a CRTC off and on again leave the
        screen on the active persona's frame; a switch then shows what it drew."""
        c = self.container("victim")
        self.assert_screen(self.frames["work"], "before")
        draw = self.start(c, ATTACK, "scribble", CARD, "ff0000", "00ff00", 10)
        self.assertTrue(draw.wait_for(r"\nflip 2 ", 120), draw.text)
        self.assert_screen(self.frames["work"], "while the background persona flips", timeout=0)
        self.assertTrue(draw.wait_for(r"\ndone", 120), draw.text)
        self.assertNotIn("errno", draw.text, draw.text)
        self.assert_screen(self.frames["work"], "after the background persona drew", timeout=0)
        # What it shows is its own frame, at a switch.
        rig.devnsctl("switch", "victim")
        self.shows(0x00ff00, "the background persona's card at a switch")
        rig.devnsctl("switch", "work")
        self.assert_screen(self.frames["work"], "back from the background persona")
        draw.proc.stdin.write("\n")
        draw.proc.stdin.flush()
        self.assertTrue(draw.wait_for(r"\nend", 60), draw.text)
        self.assertIn("refilled ok", draw.text)
        self.assert_screen(self.frames["work"], "after the background persona drew again", timeout=0)
        self.assert_untouched()

    # --- re-attach ----------------------------------------------------------------------------

    def test_reattach_revokes_the_card(self):
        """Once the persona is attached to a new container, the old container's open card0 answers ENODEV,
        its mapped buffers stay its own and are no longer shown, it cannot open card0 again, and the new
        container's card works."""
        rig.devnsctl("switch", "reattach")
        old = self.container("reattach")
        draw = self.start(old, ATTACK, "scribble", CARD, "ff0000", "00ff00", 0)
        self.assertTrue(draw.wait_for(r"\ndone", 120), draw.text)
        self.shows(0x00ff00, "the old container's card")
        new = self.container("reattach")
        self.shows(0, "after the re-attach")
        draw.proc.stdin.write("\n")
        draw.proc.stdin.flush()
        self.assertTrue(draw.wait_for(r"\nend", 60), draw.text)
        for line in ("refilled ok", "dirtyfb errno %d" % ENODEV, "flip errno %d" % ENODEV,
                     "getresources errno %d" % ENODEV, "read errno %d" % ENODEV):
            self.assertIn(line, draw.text)
        time.sleep(0.5)
        self.shows(0, "after the old container drew again", timeout=0)
        self.assertEqual(self.probe("open", "again", CARD, "rw", container=old), ["open again errno %d" % EACCES])
        fresh = self.start(new, DRAW, CARD, "0x123456", "--hold", "600000")
        self.assertTrue(fresh.wait_for(r"\nshown", 120), fresh.text)
        self.shows(0x123456, "the new container's card")
        fresh.end()
        rig.devnsctl("switch", "work")
        self.assert_untouched()


# Inside a container: tries to make a file and a directory in the socket's directory argv[1], to
# connect to its socket, and says how the directory is mounted there ("options ..." from mountinfo).
SHARE_PROBE = r"""
import os, socket, sys
d = sys.argv[1]
for name, call in (("create", lambda: os.close(os.open(d + "/junk", os.O_WRONLY | os.O_CREAT, 0o600))),
                   ("mkdir", lambda: os.mkdir(d + "/sub"))):
    try:
        call()
        print(name, "ok", flush=True)
    except OSError as err:
        print(name, "errno", err.errno, flush=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(d + "/fb0")
    print("connect ok", flush=True)
except OSError as err:
    print("connect errno", err.errno, flush=True)
with open("/proc/self/mountinfo") as f:
    for line in f:
        fields = line.split()
        if fields[4] == d:
            print("options", fields[5], flush=True)
"""


class AttackSocketShare(rig.PersonaTestCase):
    """The framebuffer socket's directory, bound into a container whose root is the host's root (no
    user namespace), and the group the socket and fb0 get from a container's /etc/group."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(fbrig.conf_display(personas=("work", "rofs", "planted")))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    def container(self):
        c = rig.Container(private_dev=True)
        self.addCleanup(c.stop)
        return c

    def test_socket_directory_is_read_only_in_the_container(self):
        sock_dir = os.path.dirname(fbrig.socket_path("rofs"))
        c = self.container()
        rig.devnsctl("attach", "rofs", "--pid", str(c.pid))
        out = c.run(sys.executable, "-c", SHARE_PROBE, sock_dir).stdout.splitlines()
        # Nothing can be made there: the host's /run is not the container's to fill.
        self.assertIn("create errno %d" % errno.EROFS, out, out)
        self.assertIn("mkdir errno %d" % errno.EROFS, out, out)
        self.assertEqual(sorted(os.listdir(sock_dir)), ["fb0"])
        # The socket still takes connections.
        self.assertIn("connect ok", out, out)
        options = [line.split()[1].split(",") for line in out if line.startswith("options ")]
        self.assertTrue(options, out)
        for flag in ("ro", "nosuid", "nodev", "noexec"):
            self.assertIn(flag, options[-1], out)
        self.assertTrue(rig.answers_within(1.0))
        self.assertTrue(self.daemon.alive(), self.daemon.output())

    def test_planted_group_names_no_host_group(self):
        """The container's root writes /etc/group naming its video group at the host's disk group
        (a privileged host gid): neither the socket nor fb0 gets that group on the host."""
        try:
            privileged = grp.getgrnam("disk").gr_gid
        except KeyError:
            privileged = grp.getgrnam("shadow").gr_gid
        c = self.container()
        c.run("sh", "-c", "printf 'root:x:0:\\nvideo:x:%d:\\n' > /run/group && mount --bind /run/group /etc/group"
              % privileged)
        self.assertIn("video:x:%d:" % privileged, c.run("cat", "/etc/group").stdout)
        rig.devnsctl("attach", "planted", "--pid", str(c.pid))
        for path in (fbrig.socket_path("planted"), fbrig.fb_node("planted")):
            st = os.stat(path)
            self.assertNotEqual(st.st_gid, privileged, "%s got the host's gid %d from the container's /etc/group"
                                % (path, privileged))
            # The container's root group stands in, and the log says why.
            self.assertEqual((st.st_uid, st.st_gid, st.st_mode & 0o777), (0, 0, 0o660), path)
        self.assertRegex(self.daemon.output(), r"persona planted: the container, which shares the host's ids, "
                                               r"names group 'video' at another gid")
        # A container whose /etc/group agrees with the host still gets the host's video group.
        rig.devnsctl("detach", "planted")
        honest = self.container()
        rig.devnsctl("attach", "planted", "--pid", str(honest.pid))
        self.assertEqual(os.stat(fbrig.socket_path("planted")).st_gid, grp.getgrnam("video").gr_gid)


def child_of(pid):
    """The one child of process pid (nsenter forks the command into the pid namespace)."""
    for _ in range(100):
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = f.read().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise RuntimeError("no child of %d" % pid)


if __name__ == "__main__":
    rig.main()
