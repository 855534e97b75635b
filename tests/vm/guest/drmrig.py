"""Persona cards in attached containers, as the DRM tests use them: a devnsd on the display
with two personas, work and personal, each attached to a container of its own whose
/dev/dri/card0 is the persona's card; fb0 frames of known colours, what each persona shows
while no program drives its card; clients started inside with libdevns-fbmmap.so preloaded,
and what the real screen shows."""

import os
import signal
import subprocess

import devnsrig as rig
import fbrig
import phonerig

BUILD = rig.BUILD
PRELOAD = os.path.join(BUILD, "src", "libdevns-fbmmap.so")
DRAW = os.path.join(BUILD, "tests", "vm", "drm-dumb-draw")
PRIME = os.path.join(BUILD, "tests", "vm", "drm-prime")
CARD = "/dev/dri/card0"

# modetest's SMPTE pattern (libdrm tests/util/pattern.c): the top two thirds are seven bars at 75%.
SMPTE_BARS = [(192, 192, 192), (192, 192, 0), (0, 192, 192), (0, 192, 0), (192, 0, 192), (192, 0, 0), (0, 0, 192)]
# The colours of the personas' fb0 frames (with a white band across rows 10 to 40).
FB0_COLORS = {"work": (40, 120, 200), "personal": (200, 120, 40)}


def pixel_at(shot, x, y):
    w, h, rgb = shot
    i = (y * w + x) * 3
    return tuple(rgb[i:i + 3])


def shows_bars(shot):
    """Whether the screenshot shows modetest's seven bars across its top."""
    w, h, _ = shot
    return all(pixel_at(shot, w * (2 * i + 1) // 14, h // 4) == bar for i, bar in enumerate(SMPTE_BARS))


def share_of(shot, rgb):
    """The share of the screenshot's pixels that are rgb, from 0 to 1."""
    w, h, data = shot
    pixel = bytes(rgb)
    return sum(1 for i in range(0, len(data), 3) if data[i:i + 3] == pixel) / max(1, w * h)


def changing(shoot, looks_right, timeout):
    """Whether two screenshots (shoot()) that look_right and differ come within timeout: frames coming."""
    first = []

    def check():
        shot = shoot()
        if not looks_right(shot):
            first.clear()
            return False
        if first and shot[2] != first[0]:
            return True
        first[:] = [shot[2]]
        return False
    return rig.eventually(check, timeout=timeout, step=0.5)


def keep(name, text):
    """Saves a client's output or log as NAME in the run's output directory, when there is one."""
    if os.environ.get("DEVNS_OUT"):
        with open(os.path.join(os.environ["DEVNS_OUT"], name), "w") as f:
            f.write(text)


class CardTestCase(rig.PersonaTestCase):
    """devnsd on the display (work active), work's and personal's containers attached, and each
    persona's fb0 frame (self.fb0[persona], XRGB8888) drawn anew before each test. Clients that
    start() started are stopped after each test. routed: devnsd also serves the routed nodes, and
    the containers share the host's /dev (where those are) in mount namespaces of their own.
    phone: devnsd runs the phone's whole configuration (phonerig: input, LEDs, backlight, routed
    nodes and hotkeys beside the display, self.hw its devices) and the containers are made as
    a container manager makes them (phonerig.Container); switch() then switches by the hotkey."""

    routed = False
    phone = False

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = cls.hw = cls.work = cls.personal = None
        try:
            if cls.phone:
                cls.hw = phonerig.Hardware()
                cls.daemon = rig.Daemon(cls.hw.conf(phonerig.DRM))
                made, outs = phonerig.containers(cls.hw)
                cls.work, cls.personal = made["work"], made["personal"]
                for p, out in outs.items():
                    if out.returncode != 0:
                        raise AssertionError("attach %s: %s" % (p, out.stderr))
            else:
                cls.daemon = rig.Daemon(fbrig.conf_display(routed=cls.routed))
                cls.work, cls.personal = rig.attached("work", "personal", private_dev=not cls.routed)
            var, _ = fbrig.screen_info("work")
        except BaseException:
            cls.tearDownClass()
            raise
        cls.w, cls.h = var["xres"], var["yres"]

    @classmethod
    def tearDownClass(cls):
        try:
            for c in (cls.work, cls.personal):
                if c:
                    c.stop()
            if cls.daemon:
                cls.stop_daemon()
            else:
                cls.bus.stop()
        finally:
            if cls.hw:
                cls.hw.close()

    def switch(self, persona):
        """To persona: in the phone's configuration by its hotkey, which devnsd takes on its own
        time (what follows waits for the screen), else by devnsctl, which answers once shown."""
        if self.phone:
            self.hw.hotkey(persona)
        else:
            rig.devnsctl("switch", persona)

    def setUp(self):
        super().setUp()
        self.procs = []
        self.fb0 = {}
        for p, color in FB0_COLORS.items():
            self.fb0[p] = fbrig.frame(self.w, self.h, color, band=(10, 40))
            fd = os.open(fbrig.fb_node(p), os.O_RDWR)
            try:
                fbrig.write_all(fd, self.fb0[p])
            finally:
                os.close(fd)

    def tearDown(self):
        for p in self.procs:
            # The client, nsenter, which forked it into the container, and whatever the client
            # forked (a compositor's seat server) are one group, which may outlive its leader.
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(30)
            # What stayed when its leader went (a server that ignores SIGTERM).
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        super().tearDown()

    def start(self, container, *cmd, env=()):
        """A client inside container, with libdevns-fbmmap.so and the env entries ("NAME=VALUE")
        given; its output (stdout and stderr) collected."""
        p = container.popen("env", "LD_PRELOAD=" + PRELOAD, *env, *cmd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.procs.append(p)
        return rig.Output(p)

    def start_host(self, *cmd):
        """A client on the host (outside every container), as start() does."""
        p = subprocess.Popen(["env", "LD_PRELOAD=" + PRELOAD, *cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.procs.append(p)
        return rig.Output(p)

    def screen(self, name):
        return fbrig.screendump(name)

    def wait_screen(self, name, check, timeout=20.0):
        return rig.eventually(lambda: check(self.screen(name)), timeout=timeout)

    def assert_fb0_shown(self, persona, name, timeout=10.0):
        """The screen shows exactly the persona's fb0 frame: nothing of a card's."""
        ok, diff = fbrig.screen_shows(name, self.w, self.h, self.fb0[persona], timeout=timeout)
        self.assertTrue(ok, "the screen (%s.png) is not %s's fb0 frame (%s pixels differ)" % (name, persona, diff))
