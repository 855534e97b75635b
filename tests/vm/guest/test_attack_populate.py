#!/usr/bin/python3
"""Attach against hostile containers: each attack is a container whose root
planted something for devnsd to trip over while it makes the persona's
nodes (an NSS module of its own, symlinks out of its tree, a FIFO, the
host's own /dev/input). After each: nothing outside the container
changed, none of its code ran in devnsd, and devnsd answers D-Bus at once."""

import ctypes
import errno
import mmap
import os
import re
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

import devnsrig as rig
import fbrig

PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nsprobe.py")
FUSE_HANG = os.path.join(rig.BUILD, "tests", "vm", "fuse-hang")
FUSE_STALL = os.path.join(rig.BUILD, "tests", "vm", "fuse-stall")
TRACK = struct.Struct("=IIQQQ")  # struct devns_fb_track
TRACK_MAGIC = 0x64667477
REPLY = struct.Struct("=Ii")  # struct devns_fb_track_reply
# What devnsd keeps waiting to be closed of one persona's (FD_CLOSER_PER_OWNER).
CLOSER_PER_PERSONA = 4

# An NSS module: if any process loads it, it leaves a note in its /run.
EVIL_NSS = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
    FILE *f = fopen("/run/nss-ran", "w");
    if (f) { fprintf(f, "pid %d uid %d\n", (int)getpid(), (int)geteuid()); fclose(f); }
}
"""
HESIOD = "/usr/lib/x86_64-linux-gnu/libnss_hesiod.so.2"


class Hostile(rig.Container):
    """A container (own pid and mount namespaces, own tmpfs /dev and /run)
    whose root ran `plant` (shell) inside before devnsd looks at it. The
    plant script also sees the host's /dev at /mnt/hostdev."""

    def __init__(self, plant, propagation="private"):
        script = ("mkdir -p /mnt/hostdev && mount --bind /dev /mnt/hostdev && "
                  "mount -t tmpfs tmpfs /dev && mount -t tmpfs tmpfs /run && "
                  "(%s) && touch /run/planted && exec sleep 100000") % plant
        self.proc = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "--mount-proc",
                                      "--propagation", propagation, "sh", "-c", script])
        self.userns = False
        self.pid = self._wait_for_init()

    def path(self, p):
        return "/proc/%d/root%s" % (self.pid, p)


def listing(path):
    """Names, types and device numbers below path, to compare before and after."""
    out = {}
    for dirpath, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            out[full] = (stat.S_IFMT(st.st_mode), st.st_rdev, st.st_size, st.st_mtime_ns)
    return out


class PopulateAttacks(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.name = os.path.basename(cls.kbd_hw)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw], personas=("work", "personal", "evil"),
                                             active="work", daemon={"Routed": "yes"}))
        cls.victim = tempfile.mkdtemp(prefix="host-victim-")
        # An NSS module of the container's, compiled here.
        cls.evil_so = os.path.join(cls.victim, "..", "evil-nss.so")
        src = cls.evil_so + ".c"
        with open(src, "w") as f:
            f.write(EVIL_NSS)
        subprocess.run(["cc", "-shared", "-fPIC", "-o", cls.evil_so, src], check=True)
        cls.nsswitch = cls.evil_so + ".nsswitch"
        with open(cls.nsswitch, "w") as f:
            f.write("passwd: hesiod\ngroup: hesiod\nshadow: hesiod\n")

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def setUp(self):
        super().setUp()
        self.host_before = listing(self.victim)
        self.host_dev_before = listing("/dev/input")
        self.containers = []

    def tearDown(self):
        for c in self.containers:
            c.stop()
        self.assertEqual(listing(self.victim), self.host_before, "a host directory changed")
        self.assertEqual(listing("/dev/input"), self.host_dev_before, "the host's /dev/input changed")
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        super().tearDown()

    def hostile(self, plant, propagation="private"):
        c = Hostile(plant, propagation)
        self.containers.append(c)
        return c

    def attach(self, c, persona="evil", timeout=20):
        start = time.monotonic()
        p = subprocess.run([rig.DEVNSCTL, "attach", persona, "--pid", str(c.pid)],
                           capture_output=True, text=True, timeout=timeout)
        return p, time.monotonic() - start

    # --- the attacks ------------------------------------------------------------

    def test_container_nss_module_never_runs(self):
        c = self.hostile("mount --bind %s %s && mount --bind %s /etc/nsswitch.conf"
                         % (self.evil_so, HESIOD, self.nsswitch))
        # The container's own lookups do load it: the module works.
        c.run("getent", "group", "input", check=False)
        self.assertTrue(os.path.exists(c.path("/run/nss-ran")), "the planted NSS module is not loadable")
        os.unlink(c.path("/run/nss-ran"))
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertFalse(os.path.exists(c.path("/run/nss-ran")),
                         "the container's NSS module ran in devnsd: " +
                         (open(c.path("/run/nss-ran")).read() if os.path.exists(c.path("/run/nss-ran")) else ""))
        # The nodes are there all the same.
        self.assertTrue(stat.S_ISCHR(os.stat(c.path("/dev/input/" + self.name)).st_mode))

    def test_symlinked_dev_input_is_not_followed(self):
        c = self.hostile("ln -s %s /dev/input" % self.victim)
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(self.daemon.output(), r"hold something else \(first /dev/input/%s\)" % self.name)
        # The alias below /dev/devns/ was still made.
        self.assertTrue(stat.S_ISCHR(os.stat(c.path("/dev/devns/evil/" + self.name)).st_mode))

    def test_symlinked_udev_database_is_not_followed(self):
        c = self.hostile("mkdir -p /run/udev && ln -s %s /run/udev/data && "
                         "ln -s %s/control /run/udev/control" % (self.victim, self.victim))
        c2 = self.hostile("mkdir -p /run/udev/data && ln -s %s/control /run/udev/control" % self.victim)
        for box in (c, c2):
            p, _ = self.attach(box)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(stat.S_ISCHR(os.stat(box.path("/dev/input/" + self.name)).st_mode))
            self.assertTrue(os.path.islink(box.path("/run/udev/control")))
        # Where the database is the container's own, the record is written there.
        host = os.stat(rig.persona_node("evil", self.kbd_hw))
        record = c2.path("/run/udev/data/c%d:%d" % (os.major(host.st_rdev), os.minor(host.st_rdev)))
        with open(record) as f:
            self.assertIn("E:ID_INPUT=1", f.read())

    def test_fifo_as_etc_group_stalls_nothing(self):
        c = self.hostile("mkfifo /run/fifo && mount --bind /run/fifo /etc/group")
        self.assertTrue(stat.S_ISFIFO(os.stat(c.path("/etc/group")).st_mode))
        # While attach runs, another client is answered at once.
        attach = subprocess.Popen([rig.DEVNSCTL, "attach", "evil", "--pid", str(c.pid)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertTrue(rig.answers_within(1.0), "devnsd stalled while attaching")
        out, err = attach.communicate(timeout=20)
        self.assertEqual(attach.returncode, 0, err)
        self.assertTrue(stat.S_ISCHR(os.stat(c.path("/dev/input/" + self.name)).st_mode))
        # Without a readable /etc/group, the node takes the container's root group and says so.
        self.assertRegex(self.daemon.output(), r"persona evil: the container has no group 'input'")

    def test_host_dev_input_bound_into_container_is_left_alone(self):
        c = self.hostile("mkdir /dev/input && mount --bind /mnt/hostdev/input /dev/input")
        self.assertTrue(os.path.exists(c.path("/dev/input/" + self.name)))
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(self.daemon.output(), r"hold something else \(first /dev/input/%s\)" % self.name)
        # The host's node is still the hardware's.
        self.assertEqual(os.stat(self.kbd_hw).st_rdev, os.stat(c.path("/dev/input/" + self.name)).st_rdev)

    def test_container_files_are_never_replaced(self):
        c = self.hostile("mkdir /dev/input && echo mine > /dev/input/%s" % self.name)
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        mine = c.path("/dev/input/" + self.name)
        self.assertTrue(stat.S_ISREG(os.lstat(mine).st_mode), "the container's file was replaced")
        with open(mine) as f:
            self.assertEqual(f.read(), "mine\n")

    def test_reattach_to_the_same_container_keeps_its_nodes(self):
        c = self.hostile("true")
        first, _ = self.attach(c)
        again, _ = self.attach(c)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(first.stdout, again.stdout)
        node = c.path("/dev/input/" + self.name)
        self.assertEqual(os.stat(node).st_rdev, os.stat(rig.persona_node("evil", self.kbd_hw)).st_rdev)

    def test_user_namespaced_container_root_opens_its_nodes(self):
        c = rig.Container(private_dev=True, userns=True)
        self.containers.append(c)
        self.assertEqual(c.run("cat", "/proc/self/uid_map").stdout.split(), ["0", "100000", "65536"])
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        node = "/dev/input/" + self.name
        # The container's root and its input group own the node, through the user namespace.
        inside = c.run("stat", "-c", "%u %G %a", node).stdout.split()
        self.assertEqual(inside, ["0", "input", "660"])
        self.assertEqual(os.stat("/proc/%d/root%s" % (c.pid, node)).st_uid, 100000)
        self.assertEqual(c.run(sys.executable, PROBE, node, "0").stdout.strip(), "open ok")
        # An app's uid in the container is not in the group: the kernel refuses it.
        app = c.run(sys.executable, PROBE, node, "0", uid=10050)
        self.assertEqual(app.stdout.strip(), "open errno %d" % errno.EACCES)

    def test_sysfs_shared_with_the_host_is_left_alone(self):
        """A container whose /sys passes mounts on to the host's: devnsd lays no view there, which
        would reach the host's /sys."""
        with open("/proc/self/mountinfo") as f:
            self.assertNotRegex(f.read(), r"(?m)^\S+ \S+ \S+ \S+ / [^-]*shared:", "the guest's / passes mounts on")
        subprocess.run(["mount", "--make-rshared", "/sys"], check=True)
        self.addCleanup(subprocess.run, ["mount", "--make-rprivate", "/sys"], check=True)
        with open("/proc/self/mountinfo") as f:
            host_before = sorted(line.split()[4] for line in f)
        c = self.hostile("true", propagation="unchanged")
        with open("/proc/%d/mountinfo" % c.pid) as f:
            self.assertRegex(f.read(), r"(?m)^\S+ \S+ \S+ \S+ /sys \S+ shared:", "the container's /sys is not shared")
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open("/proc/self/mountinfo") as f:
            self.assertEqual(sorted(line.split()[4] for line in f), host_before, "a mount reached the host")
        with open(c.path("/sys/class/input/%s/dev" % self.name)) as f:
            self.assertEqual(f.read().strip(), "13:%d" % (64 + int(self.name[5:])))
        self.assertIn("/sys passes mounts on", self.daemon.output())

    def test_sysfs_the_container_shares_itself_gets_the_view(self):
        """A container that made its own /sys shared (a machine booting systemd does so for its
        services' namespaces) passes mounts on within itself only: it gets its sysfs view, and the
        host's /sys does not."""
        with open("/proc/self/mountinfo") as f:
            host_before = sorted(line.split()[4] for line in f)
        c = self.hostile("mount --make-rshared /sys")
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        node = os.stat(rig.persona_node("evil", self.kbd_hw)).st_rdev
        with open(c.path("/sys/class/input/%s/dev" % self.name)) as f:
            self.assertEqual(f.read().strip(), "%d:%d" % (os.major(node), os.minor(node)), self.daemon.output())
        with open("/proc/self/mountinfo") as f:
            self.assertEqual(sorted(line.split()[4] for line in f), host_before, "a mount reached the host")
        with open("/sys/class/input/%s/dev" % self.name) as f:
            self.assertEqual(f.read().strip(), "13:%d" % (64 + int(self.name[5:])))

    def test_host_users_never_open_persona_nodes(self):
        c = self.hostile("true")
        p, _ = self.attach(c)
        self.assertEqual(p.returncode, 0, p.stderr)
        # The node's group is the container's input group, which is a host group too: still refused,
        # and so is anyone when the node's mode would let everyone in.
        host_node = rig.persona_node("evil", self.kbd_hw)
        gid = os.stat(host_node).st_gid
        routed = "/dev/devns/" + self.name
        for node in (host_node, routed):
            os.chmod(node, 0o666)
        for node in (host_node, routed):
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--groups=%d" % gid,
                                  sys.executable, PROBE, node, "0"], capture_output=True, text=True).stdout
            self.assertEqual(out.strip(), "open errno %d" % errno.EACCES, node)


def wait_for(check, timeout=60.0):
    return rig.poll(check, timeout, 0.1)


def children_in_d_state(pid):
    """devnsd's descendants (its helpers, and the process that forks them) that wait in the kernel
    uninterruptibly: [(pid, wchan)]."""
    parents, states = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(name)], states[int(name)] = int(fields[1]), fields[0]
    stuck = []
    for child, state in states.items():
        ancestor = parents.get(child)
        while ancestor and ancestor != pid:
            ancestor = parents.get(ancestor)
        if ancestor == pid and state == "D":
            try:
                with open("/proc/%d/wchan" % child) as f:
                    stuck.append((child, f.read()))
            except OSError:
                stuck.append((child, "?"))
    return stuck


def node_changes():
    """devnsctl status's count of node changes in flight, and of helpers stopped and not yet ended."""
    out = rig.devnsctl("status").stdout
    m = re.search(r"^Node changes in flight: (\d+)(?:, helpers stopped and not yet ended: (\d+))?$", out, re.M)
    assert m, "devnsctl status does not count node changes:\n" + out
    return int(m.group(1)), int(m.group(2) or 0)


class UntrustedMounts(rig.PersonaTestCase):
    """A container's root mounts a FUSE file system that answers nothing from outside the container
    (tests/vm/fuse-hang) where populate works: over /run/udev, /etc,
    /dev/input or /sys/dev. Whatever looks in there waits for good, and
    once killed waits on in state D. devnsd's helper never looks into such
    a mount: it says so, answers, leaves no helper behind, and the other
    persona's container follows its devices as before."""

    PLACES = ("/run/udev", "/etc", "/dev/input", "/sys/dev")

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for(["/dev/input/event*"], personas=("work", "evil"), active="work"))
        cls.work = rig.Container(private_dev=True)
        rig.devnsctl("attach", "work", "--pid", str(cls.work.pid))

    @classmethod
    def tearDownClass(cls):
        cls.work.stop()
        cls.stop_daemon()

    def setUp(self):
        super().setUp()
        self.containers = []
        self.keyboards = []

    def tearDown(self):
        stuck = children_in_d_state(self.daemon.proc.pid)
        # Stopping the container ends its FUSE server, which lets any helper it held go.
        for c in self.containers:
            c.stop()
        for k in self.keyboards:
            k.close()
        self.assertEqual(stuck, [], "devnsd's helpers wait in state D")
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        super().tearDown()

    def fuse_over(self, place):
        # The container's /dev is its own tmpfs: it makes its /dev/fuse, as a runtime that allows FUSE does.
        c = Hostile("mknod -m 666 /dev/fuse c 10 229 && mkdir -p %s && %s %s" % (place, FUSE_HANG, place))
        self.containers.append(c)
        with open("/proc/%d/mountinfo" % c.pid) as f:
            self.assertRegex(f.read(), r" %s [^\n]* - fuse " % re.escape(place), "fuse-hang did not mount")
        return c

    def plug(self):
        kbd = rig.make_keyboard()
        self.keyboards.append(kbd)
        return os.path.basename(rig.event_node(kbd))

    def assert_work_follows(self, name):
        """The work persona's container gets a plugged device's node, a working one."""
        inside = "/proc/%d/root/dev/input/%s" % (self.work.pid, name)
        want = os.stat("/dev/devns/work/" + name).st_rdev

        def bound():
            # The helper makes the place first, then binds the node over it.
            try:
                st = os.stat(inside)
            except FileNotFoundError:
                return False
            return stat.S_ISCHR(st.st_mode) and st.st_rdev == want
        self.assertTrue(wait_for(bound), inside + " is not work's node:\n" + self.daemon.output())
        self.assertEqual(self.work.run(sys.executable, PROBE, "/dev/input/" + name, "0").stdout.strip(), "open ok")

    def assert_no_helper_stuck(self):
        stuck = wait_for(lambda: not children_in_d_state(self.daemon.proc.pid), timeout=30)
        self.assertTrue(stuck, "devnsd's helpers wait in state D: %s" % children_in_d_state(self.daemon.proc.pid))

    def test_fuse_mounts_hold_no_helper(self):
        for place in self.PLACES:
            with self.subTest(place=place):
                c = self.fuse_over(place)
                p = subprocess.run([rig.DEVNSCTL, "attach", "evil", "--pid", str(c.pid)],
                                   capture_output=True, text=True, timeout=120)
                self.assertNotIn("no answer in time", p.stderr)
                self.assertTrue(rig.answers_within(5.0), "devnsd does not answer while attaching")
                self.assertRegex(self.daemon.output(),
                                 r"persona evil: process %d's container has a fuse mount at %s" % (c.pid, place))
                self.assert_no_helper_stuck()
                # A device comes: the evil container's helper looks at the mount again and refuses it.
                self.assert_work_follows(self.plug())
                self.assert_no_helper_stuck()
                self.assertNotIn("no answer in time", self.daemon.output())

    def test_one_persona_cannot_fill_the_job_table(self):
        c = self.fuse_over("/dev/input")
        subprocess.run([rig.DEVNSCTL, "attach", "evil", "--pid", str(c.pid)], capture_output=True, timeout=120)
        # Devices come and go: each is a node change for both personas.
        names = [self.plug() for _ in range(8)]
        for name in names:
            self.assert_work_follows(name)
        # Every change is done or refused: none stays in the table, no helper is left behind.
        self.assertTrue(wait_for(lambda: node_changes() == (0, 0), timeout=60),
                        "node changes stay in flight: %s\n%s" % (node_changes(), self.daemon.output()))
        self.assert_no_helper_stuck()
        self.assertNotIn("no answer in time", self.daemon.output())


class HeldDescriptors(rig.PersonaTestCase):
    """A client of one persona's framebuffer socket hands devnsd, in track
    messages, descriptors whose close() waits for good: a file on a FUSE
    mount whose server never answers a flush from a process named devnsd
    (tests/vm/fuse-stall), as many as devnsd keeps waiting to be closed.
    Another persona's container is attached meanwhile: the helper that makes
    its nodes holds none of those descriptors, so it ends, the attach
    succeeds, nothing waits in state D and devnsd answers at once."""

    @classmethod
    def setUpClass(cls):
        cls.bus = rig.Bus()
        # Input devices too: one plugged later is a node change, a helper of its own.
        cls.daemon = rig.Daemon("[Input]\nDevices=/dev/input/event*\n\n" +
                                fbrig.conf_display(personas=("work", "personal")))
        cls.fix = fbrig.screen_info()[1]

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()

    def stall_server(self):
        mnt = tempfile.mkdtemp(prefix="stallfs-")
        server = subprocess.Popen([FUSE_STALL, "devnsd", mnt, "-f"], stdout=subprocess.DEVNULL)

        def end():
            # The server's end aborts every flush that waits.
            server.kill()
            server.wait()
            subprocess.run(["umount", "-l", mnt], check=False)
        self.addCleanup(end)
        self.assertTrue(wait_for(lambda: os.path.exists(os.path.join(mnt, "file")), timeout=10), "fuse-stall did not mount")
        return os.path.join(mnt, "file")

    def send_held(self, persona, path, count=1, status=-errno.EBADF):
        """One mapping of persona's fb0 and its track message, with count descriptors of path in place of its
        userfaultfds; the answer's status."""
        node = os.open(fbrig.fb_node(persona), os.O_RDWR)
        self.addCleanup(os.close, node)
        sock, memfd = fbrig.redeem(fbrig.socket_path(persona),
                                   fbrig.REQUEST.pack(fbrig.REQUEST_MAGIC, fbrig.INTENT_MAP, fbrig.get_ticket(node)))
        self.addCleanup(sock.close)
        self.assertIsNotNone(memfd, "no memfd for a mapping")
        m = mmap.mmap(memfd, self.fix["smem_len"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(memfd)
        self.addCleanup(m.close)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        fd = os.open(path, os.O_RDONLY)
        try:
            sock.sendmsg([TRACK.pack(TRACK_MAGIC, 0, addr, self.fix["smem_len"], 0)],
                         [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % count, *[fd] * count))])
            sock.settimeout(10)
            reply = REPLY.unpack(sock.recv(REPLY.size))
        finally:
            os.close(fd)
        self.assertEqual(reply, (TRACK_MAGIC, status))

    def held_by_devnsd(self, path):
        """How many of devnsd's descriptors are path."""
        n = 0
        for fd in os.listdir("/proc/%d/fd" % self.daemon.proc.pid):
            try:
                n += os.readlink("/proc/%d/fd/%s" % (self.daemon.proc.pid, fd)) == path
            except OSError:
                pass  # closed meanwhile
        return n

    def test_a_close_that_waits_holds_up_no_other_persona(self):
        """work's descriptors wait to be closed behind one whose flush never ends; personal's are closed
        meanwhile, and its share of the closer is free again each time."""
        path = self.stall_server()
        # Three taken and three references of the count's: one waits in its flush, five in devnsd's table.
        self.send_held("work", path, 3)
        self.assertTrue(wait_for(lambda: self.held_by_devnsd(path) == 5, timeout=30),
                        "devnsd holds %d of work's descriptors, not 5" % self.held_by_devnsd(path))
        fd, plain = tempfile.mkstemp(prefix="plain-")
        os.close(fd)
        self.addCleanup(os.unlink, plain)
        for _ in range(3):
            self.send_held("personal", plain, 3)
            self.assertTrue(wait_for(lambda: self.held_by_devnsd(plain) == 0, timeout=30),
                            "personal's descriptors are not closed while work's wait")
        self.assertEqual(self.held_by_devnsd(path), 5, "work's descriptors were closed with the flush waiting")
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        # The server's end lets work's go too: the next test finds work's share free.
        self.doCleanups()
        self.assertTrue(wait_for(lambda: self.held_by_devnsd(path) == 0, timeout=30),
                        "work's descriptors stay open after the flush ended")

    def test_descriptors_waiting_to_close_hold_no_helper(self):
        path = self.stall_server()
        # The persona's share of the closer, and never more. A message takes three descriptors at most: one
        # with a fourth is refused whole, and none is taken (counting them took a reference of three, which
        # the closer closes). Once work's share of 8 is full, its socket takes no new connection: a ticket
        # brought meanwhile gets no answer.
        self.send_held("work", path, 4, -errno.EINVAL)
        self.send_held("work", path, 3)
        node = os.open(fbrig.fb_node("work"), os.O_RDWR)
        self.addCleanup(os.close, node)
        sock, memfd = fbrig.redeem(fbrig.socket_path("work"),
                                   fbrig.REQUEST.pack(fbrig.REQUEST_MAGIC, fbrig.INTENT_MAP, fbrig.get_ticket(node)),
                                   timeout=3.0)
        self.addCleanup(sock.close)
        self.assertIsNone(memfd, "work's socket took a connection with its closer's share full")

        # The closer closes one at a time: one waits in its flush, the others in devnsd's file table (the
        # three references of each count, and the three taken).
        ok = wait_for(lambda: self.held_by_devnsd(path) == 8, timeout=30)
        held = self.held_by_devnsd(path)
        self.assertTrue(ok, "devnsd holds %d of the descriptors sent (and one in its flush), not 8" % held)
        c = rig.Container(private_dev=True)
        self.addCleanup(c.stop)
        p = subprocess.run([rig.DEVNSCTL, "attach", "personal", "--pid", str(c.pid)],
                           capture_output=True, text=True, timeout=120)
        stuck = children_in_d_state(self.daemon.proc.pid)
        print("attach: exit %d %s" % (p.returncode, p.stderr.strip()), flush=True)
        self.assertEqual(stuck, [], "devnsd's processes wait in state D")
        self.assertEqual(p.returncode, 0, "the attach failed: " + p.stderr)
        self.assertTrue(rig.answers_within(1.0), "devnsd does not answer D-Bus within a second")
        # The other persona's node is in its container, and opens.
        self.assertEqual(c.run(sys.executable, PROBE, "/dev/fb0", "0").stdout.strip(), "open ok")
        # A keyboard comes: its node change reaches the container, through a helper of its own.
        kbd = rig.make_keyboard()
        self.addCleanup(kbd.close)
        name = os.path.basename(rig.event_node(kbd))
        inside = "/proc/%d/root/dev/input/%s" % (c.pid, name)

        def bound():
            try:
                return os.stat(inside).st_rdev == os.stat("/dev/devns/personal/" + name).st_rdev
            except FileNotFoundError:
                return False
        self.assertTrue(wait_for(bound, timeout=60), inside + " is not personal's node:\n" + self.daemon.output())
        self.assertEqual(c.run(sys.executable, PROBE, "/dev/input/" + name, "0").stdout.strip(), "open ok")
        self.assertEqual(children_in_d_state(self.daemon.proc.pid), [], "devnsd's processes wait in state D")
        self.assertNotIn("no answer in time", self.daemon.output())
        # Attached again (a re-attach runs a helper too), and the screen's persona still maps its frame.
        p = subprocess.run([rig.DEVNSCTL, "attach", "personal", "--pid", str(c.pid)],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, "the second attach failed: " + p.stderr)
        self.assertEqual(children_in_d_state(self.daemon.proc.pid), [], "devnsd's processes wait in state D")
        node = os.open(fbrig.fb_node("personal"), os.O_RDWR)
        self.addCleanup(os.close, node)
        sock, memfd = fbrig.redeem(fbrig.socket_path("personal"),
                                   fbrig.REQUEST.pack(fbrig.REQUEST_MAGIC, fbrig.INTENT_MAP, fbrig.get_ticket(node)))
        self.addCleanup(sock.close)
        self.assertIsNotNone(memfd, "personal gets no memfd for a mapping")
        os.close(memfd)

    def zygote_of(self, pid):
        """The child of devnsd (pid) that forks its helpers, or None."""
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            for child in f.read().split():
                try:
                    with open("/proc/%s/comm" % child) as c:
                        if c.read().strip() == "devnsd-zygote":
                            return int(child)
                except OSError:
                    pass
        return None

    def test_zz_zygote_and_devnsd_end_together(self):
        """The process that forks the helpers is killed: devnsd says so and exits with a failure (systemd
        restarts it with its state). devnsd killed: that process ends too."""
        zygote = self.zygote_of(self.daemon.proc.pid)
        self.assertIsNotNone(zygote, "devnsd has no devnsd-zygote child")
        os.kill(zygote, 9)
        self.assertNotEqual(self.daemon.proc.wait(timeout=30), 0, "devnsd exited with success")
        self.assertIn("the process that starts populate helpers (devnsd-zygote) ended", self.daemon.output())
        self.daemon.start()
        zygote = self.zygote_of(self.daemon.proc.pid)
        self.assertIsNotNone(zygote, "the new devnsd has no devnsd-zygote child")
        self.daemon.proc.kill()
        self.daemon.proc.wait()
        self.assertTrue(wait_for(lambda: not os.path.exists("/proc/%d" % zygote), timeout=10),
                        "devnsd-zygote outlives devnsd")
        self.daemon.start()


if __name__ == "__main__":
    rig.main()
