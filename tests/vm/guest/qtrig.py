"""Qt applications from Debian's qtbase5-examples in persona containers, as a
user runs them: platform linuxfb on the container's /dev/fb0 through
libdevns-fbmmap.so, input through the libinput plugin that linuxfb loads
(libinput's udev backend on seat0). Helpers to start them, drive them with
uinput devices and compare what they draw with what the screen shows."""

import glob
import mmap
import os
import signal
import subprocess
import tempfile
import time

import evdev
from evdev import ecodes as e

import devnsrig as rig
import fbrig

PRELOAD = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
# One application per persona, both with a menu bar and a text area that has
# the keyboard focus when they start: a plain text editor and a rich one.
APPS = {
    "work": "widgets/mainwindows/application/application",
    "personal": "widgets/richtext/textedit/textedit",
}
SWITCH_KEYS = "KEY_LEFTMETA+KEY_F1:work KEY_LEFTMETA+KEY_F2:personal"
HOTKEY = {"work": e.KEY_F1, "personal": e.KEY_F2}
# Differences between two pictures, in differing bytes of RGB: a blinking text
# cursor is at most a few dozen pixels; a typed word or an open menu is far more.
NOISE = 600
TYPED = 1000
MENU = 8000


def examples_dir():
    found = glob.glob("/usr/lib/*/qt5/examples")
    return found[0] if found else None


def app_path(persona):
    top = examples_dir()
    return os.path.join(top, APPS[persona]) if top else None


def have_qt():
    """Whether Debian's examples and Qt's linuxfb platform are installed."""
    path = app_path("work")
    return bool(path and os.access(path, os.X_OK) and os.access(app_path("personal"), os.X_OK)
                and glob.glob("/usr/lib/*/qt5/plugins/platforms/libqlinuxfb.so"))


# --- devices -----------------------------------------------------------------

def make_keyboard():
    """A full keyboard (letters, digits, modifiers, F keys), as Qt's xkbcommon keymap expects."""
    keys = [code for code in range(e.KEY_ESC, e.KEY_F12 + 1)] + [e.KEY_LEFTMETA]
    return evdev.UInput({e.EV_KEY: keys}, name="devns qt keyboard", vendor=0x1234, product=0x7777,
                        version=0x0101, bustype=e.BUS_USB)


def tap_key(kbd, code):
    rig.press(kbd, code, 1)
    rig.press(kbd, code, 0)
    time.sleep(0.03)


def type_text(kbd, text):
    """Types lowercase letters, digits and spaces."""
    for ch in text:
        tap_key(kbd, e.KEY_SPACE if ch == " " else e.ecodes["KEY_" + ch.upper()])


def hotkey(kbd, persona):
    """The SwitchKeys chord that brings persona to the front."""
    rig.press(kbd, e.KEY_LEFTMETA, 1)
    rig.press(kbd, HOTKEY[persona], 1)
    rig.press(kbd, HOTKEY[persona], 0)
    rig.press(kbd, e.KEY_LEFTMETA, 0)


def tap_screen(ts, width, height, x, y):
    """A one-finger tap at screen pixel (x, y) on rig.make_touchscreen()'s 1280x800 axes."""
    ax, ay = x * 1280 // width, y * 800 // height
    rig.touch(ts, 0, 11, ax, ay)
    time.sleep(0.1)
    rig.touch(ts, 0, -1)


def conf(devices, personas=tuple(APPS)):
    lines = ["[Daemon]", "SwitchKeys=" + SWITCH_KEYS, "",
             "[Display]", "Backend=drm", "Device=/dev/dri/card0", "",
             "[Input]", "Devices=" + " ".join(devices), ""]
    for p in personas:
        lines += ["[Persona %s]" % p] + (["Active=yes"] if p == "work" else []) + [""]
    return "\n".join(lines)


# --- pictures ------------------------------------------------------------------

def differing(a, b):
    """How many bytes differ between two pictures of one size (in C, not per pixel in Python)."""
    if len(a) != len(b):
        return max(len(a), len(b))
    x = int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
    return len(a) - x.to_bytes(len(a), "little").count(0)


def is_drawn(rgb):
    """Whether a frame has more than a few non-black bytes."""
    return len(rgb) - rgb.count(0) > len(rgb) // 20


class Frame:
    """A persona's frame as a plain fbdev program sees it: its fb0 opened read-only and mapped,
    through the ticket and socket that libdevns-fbmmap.so uses. rgb() reads what the persona's
    programs have drawn by now, at the cost of a copy, where devnsctl screenshot costs a
    program start and a PNG (seconds under emulation)."""

    def __init__(self, persona):
        self.fd = os.open(fbrig.fb_node(persona), os.O_RDONLY | os.O_CLOEXEC)
        var, fix = fbrig.get_var(self.fd), fbrig.get_fix(self.fd)
        self.width, self.height, self.stride = var["xres"], var["yres"], fix["line_length"]
        self.offset = var["yoffset"] * self.stride
        ticket = fbrig.get_ticket(self.fd)
        request = fbrig.REQUEST.pack(fbrig.REQUEST_MAGIC, fbrig.INTENT_MAP, ticket)
        self.sock, memfd = fbrig.redeem(fbrig.socket_path(persona), request)
        if memfd is None:
            raise RuntimeError("no memory for %s's fb0" % persona)
        try:
            self.map = mmap.mmap(memfd, fix["smem_len"], mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(memfd)

    def rgb(self):
        row = self.width * 4
        data = self.map[self.offset:self.offset + self.stride * self.height]
        if self.stride != row:
            data = b"".join(data[y * self.stride:y * self.stride + row] for y in range(self.height))
        return fbrig.to_rgb(data)

    def close(self):
        self.map.close()
        self.sock.close()
        os.close(self.fd)


def open_frames(personas=tuple(APPS)):
    return {p: Frame(p) for p in personas}


# --- the applications --------------------------------------------------------------

class QtApp:
    """One example application started inside a container, its output collected."""

    def __init__(self, container, persona, width, height):
        self.container, self.persona = container, persona
        self.home = tempfile.mkdtemp(prefix="qt-%s-" % persona)
        owner = container.host_id(0)
        os.chown(self.home, owner, owner)
        env = [
            "PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=" + self.home, "XDG_RUNTIME_DIR=" + self.home,
            # The container's fb0; no VT to switch to graphics mode in a container.
            "QT_QPA_PLATFORM=linuxfb:fb=/dev/fb0:nographicsmodeswitch",
            "LD_PRELOAD=" + PRELOAD,
            # A touchscreen and a keyboard only: no pointer to draw.
            "QT_QPA_FB_HIDECURSOR=1",
            # Shows libinput's own log: which devices the plugin found through udev.
            "QT_LOGGING_RULES=qt.qpa.input=true",
        ]
        argv = ["env", "-i"] + env + [app_path(persona), "-qwindowgeometry", "%dx%d+0+0" % (width, height)]
        self.started = time.monotonic()
        self.proc = container.popen(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.out = rig.Output(self.proc)

    def has_devices(self, names, timeout):
        """Waits until libinput in the application reports each device (by name) added."""
        return all(self.out.wait_for(r"libinput:.*%s" % name, timeout) for name in names)

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            text = self.out.finish(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            text = self.out.finish(20)
        self.proc.stdout.close()
        return text


def wait_drawn(frame, timeout):
    """Waits until a frame is drawn and stays the same for a moment; returns whether it did."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        now = frame.rgb()
        if is_drawn(now) and last is not None and differing(now, last) <= NOISE:
            return True
        last = now
        time.sleep(0.5)
    return False


def start_apps(containers, frames, device_names, timeout=180):
    """Starts both applications at once, full screen; returns ({persona: QtApp}, seconds until
    both were drawn and had their devices). Raises RuntimeError with their output if they did
    not come up."""
    apps = {p: QtApp(c, p, frames[p].width, frames[p].height) for p, c in containers.items()}
    for p, app in apps.items():
        ok = app.has_devices(device_names, max(1, timeout - (time.monotonic() - app.started)))
        if ok:
            ok = wait_drawn(frames[p], max(1, timeout - (time.monotonic() - app.started)))
        if not ok:
            text = {q: a.stop() for q, a in apps.items()}
            raise RuntimeError("the Qt application of %s did not come up:\n%s" % (
                p, "\n".join("--- %s\n%s" % kv for kv in text.items())))
    return apps, time.monotonic() - min(a.started for a in apps.values())


def screen_shows(frames, persona, name, timeout=30.0):
    """Takes screendumps (saved as NAME.png) until the real screen is the persona's frame, within
    a blinking cursor, and far from every other persona's. Returns (ok, bytes differing from the
    persona's frame, from the nearest other one's)."""
    deadline = time.monotonic() + timeout
    while True:
        _, _, screen = fbrig.screendump(name)
        near = differing(screen, frames[persona].rgb())
        far = min(differing(screen, f.rgb()) for p, f in frames.items() if p != persona)
        if near <= NOISE and far > MENU:
            return True, near, far
        if time.monotonic() > deadline:
            return False, near, far
        time.sleep(0.3)


# --- Xorg ------------------------------------------------------------------------------

XORG_CONF = """Section "ServerFlags"
    Option "AutoAddGPU" "false"
EndSection
Section "Device"
    Identifier "persona fb0"
    Driver "fbdev"
    Option "fbdev" "/dev/fb0"
EndSection
Section "Screen"
    Identifier "persona screen"
    Device "persona fb0"
EndSection
"""


# Xorg on the container's card0 (/dev/dri/card0): the modesetting driver on that node, with no GPU
# acceleration (glamor needs EGL), drawing into a shadow framebuffer that it copies into its dumb buffer.
XORG_MODESETTING = """Section "ServerFlags"
    Option "AutoAddGPU" "false"
EndSection
Section "Device"
    Identifier "persona card0"
    Driver "modesetting"
    Option "kmsdev" "/dev/dri/card0"
    Option "AccelMethod" "none"
    Option "ShadowFB" "on"
EndSection
Section "Screen"
    Identifier "persona screen"
    Device "persona card0"
    DefaultDepth 24
EndSection
"""


def have_xorg_modesetting():
    return (os.access("/usr/lib/xorg/Xorg", os.X_OK) and os.path.exists("/usr/lib/xorg/modules/drivers/modesetting_drv.so")
            and os.access("/usr/bin/xsetroot", os.X_OK))


def have_xorg():
    return (os.access("/usr/lib/xorg/Xorg", os.X_OK) and os.path.exists("/usr/lib/xorg/modules/drivers/fbdev_drv.so")
            and os.path.exists("/usr/lib/xorg/modules/input/libinput_drv.so")
            and all(os.access("/usr/bin/" + tool, os.X_OK) for tool in ("xinput", "xsetroot")))


class XServer:
    """Xorg started inside a container on the persona's fb0 (driver fbdev, mapped through
    libdevns-fbmmap.so), with no VT, its input devices added through udev (driver libinput);
    or with another configuration (conf) and more arguments (args)."""

    def __init__(self, container, display=":7", conf=XORG_CONF, args=()):
        self.container, self.display = container, display
        self.dir = tempfile.mkdtemp(prefix="xorg-")
        self.conf = os.path.join(self.dir, "xorg.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.log = os.path.join(self.dir, "Xorg.log")
        argv = ["env", "LD_PRELOAD=" + PRELOAD, "Xorg", display, "-config", self.conf, "-logfile", self.log,
                "-novtswitch", "-sharevts", "-nolisten", "tcp", "-noreset"] + list(args)
        self.started = time.monotonic()
        # Xorg makes a session of its own: the container's end stops it.
        self.proc = container.popen(*argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)

    def stop(self, timeout=60):
        """Ends the server (SIGTERM, then SIGKILL) and waits until it is gone; returns its log.
        Xorg makes a session of its own: its pid, as the container sees it, is in its lock file."""
        lock = "/tmp/.X%s-lock" % self.display.lstrip(":")
        try:
            with open(lock) as f:
                pid = f.read().strip()
        except OSError:
            pid = None
        if pid:
            self.container.run("kill", "-TERM", pid, check=False)
            if not rig.eventually(lambda: not os.path.exists(lock), timeout=timeout, step=0.5):
                self.container.run("kill", "-KILL", pid, check=False)
                rig.eventually(lambda: self.container.run("kill", "-0", pid, check=False).returncode != 0,
                               timeout=timeout, step=0.5)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(30)
        return self.log_text()

    def client(self, *cmd):
        return self.container.run("env", "DISPLAY=" + self.display, "timeout", "30", *cmd, check=False)

    def client_popen(self, *cmd):
        return self.container.popen("env", "DISPLAY=" + self.display, *cmd, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)

    def wait_devices(self, names, timeout=180):
        """Waits until the server answers and lists each device; returns its `xinput list`."""
        deadline = self.started + timeout
        text = ""
        while time.monotonic() < deadline:
            p = self.client("xinput", "list", "--name-only")
            text = p.stdout + p.stderr
            if p.returncode == 0 and all(n in p.stdout.splitlines() for n in names):
                return text
            time.sleep(1)
        raise RuntimeError("Xorg did not come up with %s: %s\n%s" % (names, text, self.log_text()))

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError as err:
            return str(err)
