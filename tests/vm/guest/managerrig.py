"""Helpers for tests that run devnsd with a real container manager (LXC,
podman) in the VM: the system as those managers and devns's examples
expect it (cgroup2 at /sys/fs/cgroup, the system bus at its usual path,
devnsctl on PATH), a small root file system made from the host's packages
(busybox, and fbset with the libraries it needs), and the checks that a
container's programs make on its nodes, read back from their output."""

import os
import shutil
import subprocess
import tempfile
import time

from evdev import ecodes as e

import devnsrig as rig
import fbrig

SYSTEM_BUS = "/run/dbus/system_bus_socket"
EXAMPLES = os.path.join(rig.SOURCE, "conf", "examples")
BUSYBOX = "/bin/busybox"
FBSET = shutil.which("fbset") or "/bin/fbset"
FRAME_COLOR = (40, 160, 90)


def run(*argv, check=True, timeout=300, **kw):
    """Runs a command on the host (text output); raises when it fails and check is set."""
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def prepare_host():
    """cgroup2 (the VM's init mounts no cgroup file system), and devnsctl
    where a user has it, for the examples that run it by name."""
    if not os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        subprocess.run(["mount", "-t", "cgroup2", "cgroup2", "/sys/fs/cgroup"], check=True)
    link = "/usr/local/bin/devnsctl"
    if not os.path.lexists(link):
        os.symlink(rig.DEVNSCTL, link)


def system_bus():
    """A private bus, also reachable at the system bus's usual path (hooks
    and scripts run by a container manager need not inherit our environment)."""
    bus = rig.Bus()
    os.makedirs(os.path.dirname(SYSTEM_BUS), exist_ok=True)
    if os.path.lexists(SYSTEM_BUS):
        os.unlink(SYSTEM_BUS)
    os.symlink(bus.address[len("unix:path="):], SYSTEM_BUS)
    return bus


def conf(kbd_hw, active="work"):
    """The display and one keyboard, personas work and personal."""
    return "\n".join([
        "[Display]", "Backend=drm", "Device=/dev/dri/card0", "",
        "[Input]", "Devices=" + kbd_hw, "",
        "[Persona work]", "Active=yes" if active == "work" else "", "",
        "[Persona personal]", "Active=yes" if active == "personal" else "", "",
    ])


# --- a root file system from the host's files ---------------------------------------

def _copy(src, root):
    dst = root + src
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(os.path.realpath(src), dst)


def add_program(root, path):
    """Copies a dynamically linked program and the libraries ldd names into root."""
    _copy(path, root)
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        words = line.split()
        lib = words[2] if len(words) > 2 and words[1] == "=>" else words[0]
        if lib.startswith("/"):
            _copy(lib, root)


def busybox_tree(root):
    """A minimal tree: busybox with a link per applet in /bin, fbset, and
    the directories a container manager mounts on."""
    for d in ("bin", "usr/lib", "usr/lib64", "dev", "proc", "sys", "run", "tmp", "etc", "root"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    for d in ("lib", "lib64"):  # as on Debian, so that the host's /usr can be bound in
        os.symlink("usr/" + d, os.path.join(root, d))
    shutil.copy2(BUSYBOX, root + "/bin/busybox")
    applets = subprocess.run([BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox" and not os.path.lexists(os.path.join(root, "bin", applet)):
            os.symlink("busybox", os.path.join(root, "bin", applet))
    add_program(root, FBSET)
    with open(root + "/etc/passwd", "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(root + "/etc/group", "w") as f:
        f.write("root:x:0:\ninput:x:101:\nvideo:x:44:\n")


# --- what a container's programs report ------------------------------------------

def events_of(data):
    """(type, code, value) of each whole struct input_event in data."""
    n = len(data) // rig.EVENT.size
    return [rig.EVENT.unpack_from(data, i * rig.EVENT.size)[2:] for i in range(n)]


def read_while_tapping(argv, kbd, code, seconds):
    """Runs argv (a reader of the container's node, such as dd) while
    pressing and releasing key `code` on the uinput keyboard every 0.3 s,
    until it exits or `seconds` pass; returns (exit status, events read)."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + seconds
    while p.poll() is None and time.monotonic() < deadline:
        rig.press(kbd, code, 1)
        rig.press(kbd, code, 0)
        time.sleep(0.3)
    if p.poll() is None:
        p.kill()
    out, err = p.communicate(timeout=30)
    return p.returncode, events_of(out), err.decode(errors="replace")


def open_error(text):
    """The errno name a busybox tool's "can't open" message ends with, or None."""
    for name, message in (("EACCES", "Permission denied"), ("EPERM", "Operation not permitted"),
                          ("ENOENT", "No such file or directory"), ("ENXIO", "No such device or address")):
        if message in text:
            return name
    return None


def frame_for(persona_fb):
    """A test frame the size of the persona's framebuffer (read on the host's node)."""
    fd = os.open(persona_fb, os.O_RDWR)
    try:
        var = fbrig.get_var(fd)
    finally:
        os.close(fd)
    w, h = var["xres"], var["yres"]
    return var, fbrig.frame(w, h, FRAME_COLOR, band=(h // 3, h // 3 + 60))


def screenshot_rgb(persona, path):
    """What devnsctl screenshot saves of the persona: (width, height, RGB bytes)."""
    rig.devnsctl("screenshot", persona, path)
    return fbrig.read_png_rgb(path)


def node_numbers(persona, name):
    st = os.stat("/dev/devns/%s/%s" % (persona, name))
    return os.major(st.st_rdev), os.minor(st.st_rdev)


class ManagerChecks:
    """The checks every container manager's test makes, mixed into a
    unittest.TestCase whose setUpClass has started devnsd (cls.daemon,
    cls.bus, from start_daemon()), a uinput keyboard (cls.kbd, cls.event)
    and a container bound to cls.persona (cls.other is the other persona);
    inside(*argv) is the argv that runs a command in the container, and
    init_pid() the container's init as the host sees it."""

    persona = other = None

    @classmethod
    def start_daemon(cls):
        prepare_host()
        cls.kbd = rig.make_keyboard()
        cls.event = os.path.basename(rig.event_node(cls.kbd))
        cls.bus = system_bus()
        cls.daemon = rig.Daemon(conf("/dev/input/" + cls.event, active=cls.persona))

    @classmethod
    def stop_daemon(cls):
        code = cls.daemon.stop()
        cls.bus.stop()
        cls.kbd.close()
        if code != 0:
            raise AssertionError("devnsd exited with %s:\n%s" % (code, cls.daemon.output()))

    def setUp(self):
        rig.devnsctl("switch", self.persona)

    def tearDown(self):
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())

    def test_attached_and_populated(self):
        self.assertIn("persona %s bound to the pid namespace of process %d\n" % (self.persona, self.init_pid()),
                      self.daemon.output())
        ls = run(*self.inside("ls", "-l", "/dev/input/" + self.event, "/dev/fb0")).stdout
        for persona_node, name in ((self.event, "/dev/input/" + self.event), ("fb0", "/dev/fb0")):
            major, minor = node_numbers(self.persona, persona_node)
            self.assertRegex(ls, r"(?m)^c.* %d, +%d .*%s$" % (major, minor, name))

    def test_libinput_udev_backend_lists_the_persona_keyboard(self):
        out = run(*self.inside("libinput", "list-devices")).stdout
        self.assertRegex(out, r"Device: +devns test keyboard\nKernel: +/dev/input/%s\n" % self.event,
                         self.daemon.output())

    def test_input_reaches_the_container_while_its_persona_is_active(self):
        dd = ["dd", "if=/dev/input/" + self.event, "bs=%d" % rig.EVENT.size, "count=4"]
        code, events, err = read_while_tapping(self.inside(*dd), self.kbd, e.KEY_A, 60)
        self.assertEqual(code, 0, err)
        self.assertIn((e.EV_KEY, e.KEY_A, 1), events)

        rig.devnsctl("switch", self.other)
        code, events, err = read_while_tapping(self.inside("timeout", "5", *dd), self.kbd, e.KEY_B, 15)
        self.assertNotIn((e.EV_KEY, e.KEY_B, 1), events, err)

    def test_framebuffer_geometry_and_pixels(self):
        var, frame = frame_for("/dev/devns/%s/fb0" % self.persona)
        fbset = run(*self.inside("fbset", "-fb", "/dev/fb0", "-s")).stdout
        self.assertIn("geometry %d %d %d %d %d" % (var["xres"], var["yres"], var["xres_virtual"],
                                                   var["yres_virtual"], var["bits_per_pixel"]), fbset)
        p = subprocess.run(self.inside("sh", "-c", "cat > /dev/fb0", stdin=True), input=frame,
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        w, h, rgb = screenshot_rgb(self.persona, os.path.join(tempfile.mkdtemp(), "shot.png"))
        self.assertEqual((w, h), (var["xres"], var["yres"]))
        want = fbrig.to_rgb(frame)
        differ = sum(1 for i in range(0, len(want), 3) if rgb[i:i + 3] != want[i:i + 3])
        self.assertEqual(differ, 0, "%d pixels of the screenshot differ from the frame written" % differ)

    def refused(self, path):
        """The errno name of the container's failed open of path."""
        p = run(*self.inside("dd", "if=" + path, "of=/dev/null", "count=0"), check=False)
        self.assertNotEqual(p.returncode, 0, "%s opened" % path)
        return open_error(p.stderr)
