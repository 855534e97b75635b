"""Helpers for tests that run inside the VM: uinput devices, a private
system bus, the built devnsd, and raw evdev ioctls on persona nodes."""

import contextlib
import ctypes
import fcntl
import glob
import os
import re
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import evdev
from evdev import ecodes as e

import hangreport

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", ".."))
import unittest_main  # noqa: E402  (tests/unittest_main.py)

# A test file's __main__: exits 1 on a failure, 77 (skipped) when any test skipped, 0 otherwise.
main = unittest_main.main

BUILD = os.environ["DEVNS_BUILD_DIR"]
SOURCE = os.environ["DEVNS_SOURCE_DIR"]
DEVNSD = os.path.join(BUILD, "src", "devnsd")
DEVNSCTL = os.path.join(BUILD, "src", "devnsctl")

# A test file that hangs says where, before vm-run's timeout ends the guest.
hangreport.watch_file()

EVENT = struct.Struct("llHHi")  # struct input_event on 64-bit


# --- ioctl numbers -----------------------------------------------------------

def _ioc(direction, nr, size, typ=ord("E")):
    return (direction << 30) | (size << 16) | (typ << 8) | nr


IOC_NONE, IOC_WRITE, IOC_READ = 0, 1, 2


def EVIOCGBIT(ev, size):
    return _ioc(IOC_READ, 0x20 + ev, size)


def EVIOCGKEY(size):
    return _ioc(IOC_READ, 0x18, size)


def EVIOCGLED(size):
    return _ioc(IOC_READ, 0x19, size)


def EVIOCGNAME(size):
    return _ioc(IOC_READ, 0x06, size)


def EVIOCGMTSLOTS(size):
    return _ioc(IOC_READ, 0x0A, size)


EVIOCGVERSION = _ioc(IOC_READ, 0x01, 4)
EVIOCGRAB = _ioc(IOC_WRITE, 0x90, 4)
EVIOCREVOKE = _ioc(IOC_WRITE, 0x91, 4)
EVIOCSCLOCKID = _ioc(IOC_WRITE, 0xA0, 4)


def ioctl_bytes(fd, request, size):
    """Runs a read ioctl into a buffer; returns (return value, bytes)."""
    buf = bytearray(size)
    r = fcntl.ioctl(fd, request, buf, True)
    return r, bytes(buf)


def key_state(fd):
    _, buf = ioctl_bytes(fd, EVIOCGKEY(96), 96)
    return {code for code in range(96 * 8) if buf[code // 8] >> (code % 8) & 1}


def led_state(fd):
    _, buf = ioctl_bytes(fd, EVIOCGLED(8), 8)
    return {code for code in range(16) if buf[code // 8] >> (code % 8) & 1}


# --- events on raw fds ---------------------------------------------------------

def read_events(fd, timeout=None, until=None):
    """Reads events until `until(events)` is true or nothing comes for `timeout` s (by default a
    second without `until`; with it, MARKER_TIMEOUT: waiting for what must come is no latency bound)."""
    if timeout is None:
        timeout = MARKER_TIMEOUT if until else 1.0
    events = []
    while True:
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            return events
        data = os.read(fd, EVENT.size * 64)
        for off in range(0, len(data), EVENT.size):
            _, _, typ, code, value = EVENT.unpack_from(data, off)
            events.append((typ, code, value))
        if until and until(events):
            return events


# Markers: an event sent through a uinput device after the events under test
# arrives behind them, on every handle that gets that device's events. Once a
# handle has read the marker, devnsd has dealt with everything sent before
# it, for every persona: an event that did not reach a handle by then never
# will (pending() then tells what a handle holds, without waiting).
MARKER_TIMEOUT = 60
_marker_values = iter(range(0x7E0000, 0x7FFFFF))


def send_marker(ui):
    """Writes a marker (EV_MSC MSC_SCAN with a value not used before) through uinput
    device ui, which must have MSC_SCAN; returns the event, for read_to()."""
    value = next(_marker_values)
    ui.write(e.EV_MSC, e.MSC_SCAN, value)
    ui.syn()
    return (e.EV_MSC, e.MSC_SCAN, value)


def read_until(fd, done, timeout=MARKER_TIMEOUT, what="expected events"):
    """Reads fd until done(events) is true; a failure after timeout s (no latency bound)."""
    deadline = time.monotonic() + timeout
    events = []
    while not done(events):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise AssertionError("%s not read within %d s; read: %r" % (what, timeout, events))
        try:
            data = os.read(fd, EVENT.size * 64)
        except BlockingIOError:
            continue
        for off in range(0, len(data), EVENT.size):
            _, _, typ, code, value = EVENT.unpack_from(data, off)
            events.append((typ, code, value))
    return events


def read_to(fd, marker, timeout=MARKER_TIMEOUT):
    """Reads fd until the marker arrives; returns the events before it. A marker that
    has not come after timeout s is a failure (the time-out is no latency bound)."""
    events = read_until(fd, lambda events: marker in events, timeout, "marker %r" % (marker,))
    return events[:events.index(marker)]


def pending(fd):
    """The events fd holds now, read without waiting (devnsd answers each read from the
    handle's queue at once)."""
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    if not flags & os.O_NONBLOCK:
        fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    events = []
    try:
        while True:
            try:
                data = os.read(fd, EVENT.size * 64)
            except BlockingIOError:
                return events
            if not data:
                return events
            for off in range(0, len(data), EVENT.size):
                _, _, typ, code, value = EVENT.unpack_from(data, off)
                events.append((typ, code, value))
    finally:
        if not flags & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, flags)


def write_event(fd, typ, code, value):
    os.write(fd, EVENT.pack(0, 0, typ, code, value))


def open_node(path, flags=os.O_RDWR | os.O_NONBLOCK):
    return os.open(path, flags | os.O_CLOEXEC)


# --- uinput devices ------------------------------------------------------------

KEYBOARD_KEYS = [e.KEY_ESC, e.KEY_A, e.KEY_B, e.KEY_C, e.KEY_LEFTSHIFT, e.KEY_CAPSLOCK,
                 e.KEY_LEFTMETA, e.KEY_F1, e.KEY_F2, e.KEY_SPACE, e.KEY_ENTER]


def make_keyboard():
    caps = {
        e.EV_KEY: KEYBOARD_KEYS,
        e.EV_LED: [e.LED_NUML, e.LED_CAPSL, e.LED_SCROLLL],
        e.EV_MSC: [e.MSC_SCAN],
    }
    dev = evdev.UInput(caps, name="devns test keyboard", vendor=0x1234, product=0x5678,
                       version=0x0101, bustype=e.BUS_USB)
    return dev


def make_touchscreen():
    def axis(lo, hi, res=0):
        return evdev.AbsInfo(value=0, min=lo, max=hi, fuzz=0, flat=0, resolution=res)

    caps = {
        e.EV_KEY: [e.BTN_TOUCH],
        e.EV_ABS: [
            (e.ABS_X, axis(0, 1279, 10)),
            (e.ABS_Y, axis(0, 799, 10)),
            (e.ABS_MT_SLOT, axis(0, 9)),
            (e.ABS_MT_TRACKING_ID, axis(0, 65535)),
            (e.ABS_MT_POSITION_X, axis(0, 1279, 10)),
            (e.ABS_MT_POSITION_Y, axis(0, 799, 10)),
        ],
    }
    return evdev.UInput(caps, name="devns test touchscreen", vendor=0x2222, product=0x3333,
                        bustype=e.BUS_VIRTUAL, input_props=[e.INPUT_PROP_DIRECT])


def find_capslock():
    """The capslock LED class device of a keyboard (/sys/class/leds/inputN::capslock), and that
    keyboard's /dev/input/eventN, the one the kernel found first (the lowest N); the test is
    skipped when there is none."""
    leds = glob.glob("/sys/class/leds/input*::capslock")
    for led in sorted(leds, key=lambda led: int(re.match(r"input(\d+)::", os.path.basename(led)).group(1))):
        events = glob.glob(os.path.join(os.path.realpath(os.path.join(led, "device")), "event*"))
        if events:
            return led, "/dev/input/" + os.path.basename(events[0])
    raise unittest.SkipTest("no keyboard with a capslock LED")


def event_node(uinput_dev):
    """The /dev/input/eventN the kernel made for a uinput device."""
    for _ in range(100):
        path = uinput_dev.device.path if uinput_dev.device else None
        if path and os.path.exists(path):
            return path
        time.sleep(0.05)
    raise RuntimeError("no event node for " + uinput_dev.name)


def press(ui, code, value=1):
    ui.write(e.EV_KEY, code, value)
    ui.syn()


def touch(ui, slot, tracking_id, x=100, y=100):
    ui.write(e.EV_ABS, e.ABS_MT_SLOT, slot)
    ui.write(e.EV_ABS, e.ABS_MT_TRACKING_ID, tracking_id)
    if tracking_id >= 0:
        ui.write(e.EV_ABS, e.ABS_MT_POSITION_X, x)
        ui.write(e.EV_ABS, e.ABS_MT_POSITION_Y, y)
        ui.write(e.EV_ABS, e.ABS_X, x)
        ui.write(e.EV_ABS, e.ABS_Y, y)
    ui.write(e.EV_KEY, e.BTN_TOUCH, 1 if tracking_id >= 0 else 0)
    ui.syn()


# --- a private system bus and the daemon ----------------------------------------

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="org.freedesktop.DBus"/>
    <allow eavesdrop="true"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
  </policy>
  <include>{policy}</include>
</busconfig>
"""


class Bus:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="devns-bus-")
        os.chmod(self.dir, 0o755)  # unprivileged callers connect too
        sock = os.path.join(self.dir, "system_bus_socket")
        conf = os.path.join(self.dir, "bus.conf")
        with open(conf, "w") as f:
            f.write(BUS_CONFIG.format(socket=sock, policy=os.path.join(SOURCE, "conf", "org.devns1.conf")))
        self.proc = subprocess.Popen(["dbus-daemon", "--config-file=" + conf, "--nofork", "--nopidfile"])
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("dbus-daemon did not start")
        self.address = "unix:path=" + sock
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = self.address

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class Daemon:
    """The built devnsd, started with a configuration, waited for until READY=1."""

    def __init__(self, conf_text, timeout=60):
        self.dir = tempfile.mkdtemp(prefix="devnsd-")
        self.conf = os.path.join(self.dir, "devnsd.conf")
        with open(self.conf, "w") as f:
            f.write(conf_text)
        self.start(timeout)

    def start(self, timeout=60):
        notify = os.path.join(self.dir, "notify")
        if os.path.exists(notify):
            os.unlink(notify)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(notify)
        env = dict(os.environ, NOTIFY_SOCKET=notify)
        self.log = open(os.path.join(self.dir, "log"), "a+")
        self.proc = subprocess.Popen([DEVNSD, "--config", self.conf], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                exited = self.proc.poll() is not None
                if exited or left <= 0:
                    if not exited:
                        self.proc.kill()
                        self.proc.wait()
                    raise RuntimeError("devnsd did not become ready:\n" + self.output())
                # A devnsd that exits sends nothing: look at it again at least every 100 ms.
                sock.settimeout(min(left, 0.1))
                try:
                    msg = sock.recv(4096).decode()
                except socket.timeout:
                    continue
                if "READY=1" in msg.split("\n"):
                    break
        finally:
            sock.close()

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def alive(self):
        return self.proc.poll() is None

    @contextlib.contextmanager
    def held_still(self):
        """devnsd stopped (SIGSTOP) for the block, every thread of it: what is sent to it meanwhile waits
        unread in its sockets, and is still there when it goes on."""
        def stopped():
            for task in os.listdir("/proc/%d/task" % self.proc.pid):
                try:
                    with open("/proc/%d/task/%s/stat" % (self.proc.pid, task)) as f:
                        if f.read().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
                            return False
                except FileNotFoundError:
                    pass
            return True
        self.proc.send_signal(signal.SIGSTOP)
        try:
            if not eventually(stopped, timeout=10, step=0.02):
                raise AssertionError("devnsd did not stop on SIGSTOP")
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def devnsctl(*args, check=True):
    p = subprocess.run([DEVNSCTL, *args], capture_output=True, text=True, timeout=30)
    if check and p.returncode != 0:
        raise RuntimeError("devnsctl %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def conf_for(devices, personas=("work", "personal"), active=None, daemon=None, persona_keys=None):
    lines = []
    if daemon:
        lines += ["[Daemon]"] + ["%s=%s" % kv for kv in daemon.items()] + [""]
    lines += ["[Input]", "Devices=" + " ".join(devices), ""]
    for name in personas:
        lines.append("[Persona %s]" % name)
        if name == active:
            lines.append("Active=yes")
        for kv in (persona_keys or {}).get(name, {}).items():
            lines.append("%s=%s" % kv)
        lines.append("")
    return "\n".join(lines)


def persona_node(persona, hw_path):
    return "/dev/devns/%s/%s" % (persona, os.path.basename(hw_path))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pss_kib(pid):
    """A process's proportional share of the memory it maps, in KiB."""
    with open("/proc/%d/smaps_rollup" % pid) as f:
        return int(re.search(r"^Pss:\s+(\d+)", f.read(), re.M).group(1))


def cpu_ms(pid):
    """User and system CPU time of a process so far, in ms."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def sleeps(pid):
    """How often a process's main thread went to sleep so far (its voluntary context switches): for devnsd,
    how often its loop waited and was woken."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split(":")[1])
    return 0


# --- containers --------------------------------------------------------------

USERNS_BASE = 100000  # host uid and gid of a user-namespaced container's root
USERNS_SIZE = 65536
PR_SET_SECUREBITS = 28
SECBIT_NO_SETUID_FIXUP = 1 << 2
_libc = ctypes.CDLL(None, use_errno=True)


class Container:
    """A container's init (sleep) in new pid and mount namespaces, made with
    unshare; self.pid is that init as the host sees it.

    userns: also a user namespace mapping the container's uids and gids 0-65535
    to the host's 100000-165535 (newuidmap, /etc/subuid), as in unprivileged
    LXC, podman or nspawn containers. Its root is host uid 100000 and holds
    capabilities only over the container's own namespaces. host_id() maps a
    container id to the host's.

    netns: its own network namespace (where udev's netlink events reach it).

    private_dev: its own empty /dev and /run (tmpfs), as real containers have.
    With a user namespace, which namespace mounts them matters. By default the
    container's root mounts them from inside its user namespace, as real
    unprivileged runtimes do: the kernel then marks those tmpfs SB_I_NODEV,
    and no device node on them can be opened, whoever made it (device nodes
    have to be bind-mounted in from a filesystem of the host's); host root's
    own mknod there even fails with EOVERFLOW, its uid 0 having no id on that
    filesystem (make_node() makes nodes owned by the container's root). With
    dev_from_host, host root mounts them, entering only the container's mount
    namespace: the tmpfs belong to the host's user namespace and nodes made on
    them open (subject to their modes). Without a user namespace both are the
    same.

    run() and popen() run a command inside (its pid, mount and user
    namespaces, its root and working directory) as the container's root, or
    with uid= as that container uid (setpriv; gid= defaults to the uid,
    groups= to none), which also gives a container without a user namespace an
    unprivileged app uid."""

    netns = False

    def __init__(self, private_dev=False, userns=False, dev_from_host=False, netns=False):
        self.userns = userns
        self.netns = netns
        argv = ["unshare", "--pid", "--mount", "--fork", "--mount-proc"] + (["--net"] if netns else [])
        if userns:
            ids = "%d,0,%d" % (USERNS_BASE, USERNS_SIZE)
            argv += ["--map-users=" + ids, "--map-groups=" + ids, "--setuid=0", "--setgid=0"]
        self.proc = subprocess.Popen(argv + ["sleep", "100000"])
        self.pid = self._wait_for_init()
        if private_dev:
            setup = ["sh", "-c", "mount -t tmpfs tmpfs /dev && mount -t tmpfs tmpfs /run"]
            if dev_from_host:
                setup = self._nsenter(user=False) + setup
            else:
                setup = self.command(*setup)
            subprocess.run(setup, check=True, timeout=60)

    def _wait_for_init(self):
        """unshare's child once it runs sleep (unshare may fork a helper for newuidmap first)."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("container did not start: unshare exited with %d" % self.proc.returncode)
            try:
                with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                    kids = [int(pid) for pid in f.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                # ESRCH while the task execs or its helper exits: look again.
                kids = []
            for pid in kids:
                try:
                    with open("/proc/%d/comm" % pid) as f:
                        if f.read().strip() == "sleep":
                            return pid
                except (FileNotFoundError, ProcessLookupError):
                    pass
            time.sleep(0.05)
        raise RuntimeError("container did not start")

    def _nsenter(self, user):
        ns = ["--pid", "--mount"] + (["--user"] if user else []) + (["--net"] if self.netns else [])
        return ["nsenter", "-t", str(self.pid)] + ns + ["--root", "--wd", "--"]

    def host_id(self, container_id):
        """The host uid (or gid) of a container uid (or gid)."""
        return container_id + (USERNS_BASE if self.userns else 0)

    def make_node(self, path, rdev, mode=0o666):
        """Host root makes a character device node at path inside the container
        (through /proc/PID/root), owned by the container's root, as a runtime
        that populates a container's /dev does. Raises OSError."""
        target = "/proc/%d/root%s" % (self.pid, path)
        owner = self.host_id(0)
        pid = os.fork()
        if pid == 0:
            # Keeps CAP_MKNOD while the filesystem ids change.
            _libc.prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0)
            _libc.setfsgid(owner)
            _libc.setfsuid(owner)
            try:
                os.mknod(target, stat.S_IFCHR | mode, rdev)
                os.chmod(target, mode)
                os._exit(0)
            except OSError as err:
                os._exit(err.errno)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code:
            raise OSError(code, os.strerror(code), path)

    def command(self, *cmd, uid=None, gid=None, groups=()):
        """The argv that runs cmd inside, as run() does."""
        argv = self._nsenter(user=self.userns)
        if uid is not None:
            argv += ["setpriv", "--reuid=%d" % uid, "--regid=%d" % (uid if gid is None else gid)]
            argv += ["--groups=" + ",".join(str(g) for g in groups)] if groups else ["--clear-groups"]
        return argv + list(cmd)

    def run(self, *cmd, check=True, env=None, uid=None, gid=None, groups=(), **kw):
        """Runs a command inside (see the class); returns the CompletedProcess."""
        full = self.command(*cmd, uid=uid, gid=gid, groups=groups)
        p = subprocess.run(full, capture_output=True, text=True, timeout=60, env=env or os.environ, **kw)
        if check and p.returncode != 0:
            raise RuntimeError("%s failed (%d): %s%s" % (cmd, p.returncode, p.stdout, p.stderr))
        return p

    def popen(self, *cmd, uid=None, gid=None, groups=(), **kw):
        return subprocess.Popen(self.command(*cmd, uid=uid, gid=gid, groups=groups), **kw)

    def stop(self):
        """Kills the container's init, and with it every process of its pid namespace."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.kill()
        self.proc.wait()


# A reader to run in a container (python3 -c READ_KEYS NODE [SECONDS]): opens NODE
# (blocking), prints "open", then "key CODE VALUE" for each key event it reads,
# and "errno N" once a read fails; with SECONDS, it ends by itself after them.
READ_KEYS = r"""
import os, signal, struct, sys
if len(sys.argv) > 2:
    signal.alarm(int(sys.argv[2]))
EV = struct.Struct("llHHi")
fd = os.open(sys.argv[1], os.O_RDONLY)
print("open", flush=True)
while True:
    try:
        data = os.read(fd, EV.size * 64)
    except OSError as err:
        print("errno %d" % err.errno, flush=True)
        break
    for off in range(0, len(data), EV.size):
        typ, code, value = EV.unpack_from(data, off)[2:]
        if typ == 1:
            print("key %d %d" % (code, value), flush=True)
"""


def attached(*personas, **container_args):
    """A new Container (container_args as Container's) for each persona, attached to it."""
    containers = []
    for name in personas:
        c = Container(**container_args)
        containers.append(c)
        devnsctl("attach", name, "--pid", str(c.pid))
    return containers


def poll(check, timeout=15.0, step=0.05):
    """Polls check() until it returns something true; returns the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def answers_within(seconds):
    """devnsd answers `devnsctl list` within seconds: the time of the call less that of
    `devnsctl --version` just before it (starting a program under emulation on a busy
    machine can take a second by itself), the best of three."""
    took = []
    for _ in range(3):
        start = time.monotonic()
        subprocess.run([DEVNSCTL, "--version"], capture_output=True, timeout=30)
        middle = time.monotonic()
        p = subprocess.run([DEVNSCTL, "list"], capture_output=True, text=True, timeout=30)
        took.append((time.monotonic() - middle) - (middle - start))
        if p.returncode == 0 and took[-1] < seconds:
            return True
    print("devnsctl list took, beyond starting devnsctl:", took)
    return False


class Output:
    """Collects a process's output as it comes, so a test can wait for a line."""

    def __init__(self, proc):
        import threading
        self.proc = proc
        self.text = ""
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self):
        for line in self.proc.stdout:
            with self.cond:
                self.text += line
                self.cond.notify_all()

    def wait_for(self, pattern, timeout=30):
        """Waits until the output matches the regex; returns whether it did."""
        import re
        deadline = time.monotonic() + timeout
        with self.cond:
            while not re.search(pattern, self.text):
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.thread.is_alive()):
                    return False
                self.cond.wait(min(left, 0.5))
        return True

    def finish(self, timeout=20):
        self.proc.wait(timeout)
        self.thread.join(timeout)
        return self.text


def write_file(path, text):
    """Writes text to path: a sysfs attribute, a configuration, a state file."""
    with open(path, "w") as f:
        f.write(text)


def eventually(check, timeout=10.0, step=0.1):
    """Polls check() until it is true; returns whether it became true in time."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def collect(f, out):
    """Appends each line of f to out, without its line end, as it comes (a reader thread's loop)."""
    for line in f:
        out.append(line.rstrip("\n"))


# A test still running after this long fails where it waits, instead of the whole run waiting for vm-run's timeout.
STUCK_SECONDS = 420


class Stuck(Exception):
    pass


def _on_stuck(signum, frame):
    raise Stuck("still running after %d s" % STUCK_SECONDS)


class PersonaTestCase(__import__("unittest").TestCase):
    """Tests against one devnsd that setUpClass starts (cls.bus, cls.daemon):
    each test starts with "work" active, and ends with the fds it listed in
    self.fds closed and devnsd still alive. A test stuck for STUCK_SECONDS
    is interrupted (SIGUSR2 to the main thread) and fails with Stuck."""

    def setUp(self):
        import threading
        signal.signal(signal.SIGUSR2, _on_stuck)
        self._stuck = threading.Timer(STUCK_SECONDS, self._interrupt_stuck, (threading.main_thread().ident,))
        self._stuck.daemon = True
        self._stuck.start()
        devnsctl("switch", "work")
        self.fds = []

    def _interrupt_stuck(self, main):
        """Says where the test and devnsd wait and what devnsd logged, then interrupts the test."""
        print("%s still running after %d s; devnsd's log:\n%s" % (self.id(), STUCK_SECONDS, self.daemon.output()),
              file=sys.stderr, flush=True)
        hangreport.report("a test still runs after %d s" % STUCK_SECONDS)
        signal.pthread_kill(main, signal.SIGUSR2)

    def tearDown(self):
        self._stuck.cancel()
        for fd in self.fds:
            os.close(fd)
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())

    @classmethod
    def stop_daemon(cls):
        """Stops devnsd and the bus; devnsd must exit cleanly."""
        code = cls.daemon.stop()
        cls.bus.stop()
        if code != 0:
            raise AssertionError("devnsd exited with %s:\n%s" % (code, cls.daemon.output()))
