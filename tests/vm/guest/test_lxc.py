#!/usr/bin/python3
"""LXC with devns's shipped hook, set up as the example tells a user: a
container with LXC's common configuration (which denies every device but
a few), the hook as its start-host hook, and the device rules that
`lxc-devns-hook --devices` prints appended to its config. Its root is a
busybox tree made from the host's files, as LXC's busybox template makes
it (the template itself works offline, but its one `ln` per applet takes
about 100 s under emulation). Then lxc-start,
and inside (through lxc-attach, which joins the container's namespaces
and control group) busybox's dd reads the persona's /dev/input/eventN and
writes its /dev/fb0, and fbset reads the framebuffer's geometry; another
persona's node is refused."""

import os
import re
import subprocess
import tempfile
import unittest

from evdev import ecodes as e

import devnsrig as rig
import fbrig
import managerrig as mr

NAME = "work"  # the container, bound to the persona of the same name
LXC_PATH = "/var/lib/lxc"
HOOK = os.path.join(mr.EXAMPLES, "lxc-devns-hook")
# The container, as lxc-create writes a config, with what the VM needs: no
# network, and no AppArmor profile (the VM has no AppArmor parser).
CONFIG = """lxc.include = /usr/share/lxc/config/common.conf
lxc.rootfs.path = dir:{rootfs}
lxc.uts.name = {name}
lxc.init.cmd = /bin/sleep 1000000
lxc.net.0.type = empty
lxc.apparmor.profile = unconfined
lxc.mount.entry = /usr usr none ro,bind 0 0
"""


def lxc(*argv, check=True, **kw):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=120, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def inside(*argv):
    """argv for a command in the container."""
    return ["lxc-attach", "-n", NAME, "--clear-env", "--"] + list(argv)


class Lxc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mr.prepare_host()
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.event = os.path.basename(cls.kbd_hw)
        cls.bus = mr.system_bus()
        cls.daemon = rig.Daemon(mr.conf(cls.kbd_hw))
        cls.log = tempfile.mkdtemp(prefix="lxc-log-") + "/work.log"
        try:
            cls.create()
            lxc("lxc-start", "-n", NAME, "-l", "DEBUG", "-o", cls.log)
            lxc("lxc-wait", "-n", NAME, "-s", "RUNNING", "-t", "60")
        except Exception:
            print(open(cls.log).read() if os.path.exists(cls.log) else "no LXC log")
            cls.daemon.stop()
            cls.bus.stop()
            raise

    @classmethod
    def create(cls):
        """The container as the hook's comment and the README tell a user to make it."""
        cls.rootfs = os.path.join(LXC_PATH, NAME, "rootfs")
        mr.busybox_tree(cls.rootfs)
        config = os.path.join(LXC_PATH, NAME, "config")
        rules = lxc("sh", HOOK, "--devices", "work").stdout
        with open(config, "w") as f:
            f.write(CONFIG.format(rootfs=cls.rootfs, name=NAME))
            f.write("lxc.hook.start-host = %s work\n" % HOOK)
            f.write(rules)
            f.write("lxc.cgroup2.devices.allow = c %d:%d rw\n" % mr.node_numbers("personal", "fb0"))

    @classmethod
    def tearDownClass(cls):
        lxc("lxc-stop", "-n", NAME, "-k", check=False)
        code = cls.daemon.stop()
        cls.bus.stop()
        cls.kbd.close()
        if code != 0:
            raise AssertionError("devnsd exited with %s:\n%s" % (code, cls.daemon.output()))

    def setUp(self):
        rig.devnsctl("switch", "work")

    def tearDown(self):
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())

    def test_hook_attached_and_populated(self):
        # The hook bound the persona to the container's init.
        init = lxc("lxc-info", "-n", NAME, "-p", "-H").stdout.strip()
        self.assertIn("persona work bound to the pid namespace of process %s\n" % init, self.daemon.output())
        ls = lxc(*inside("ls", "-l", "/dev/input/" + self.event, "/dev/fb0")).stdout
        for persona_node, name in ((self.event, "/dev/input/" + self.event), ("fb0", "/dev/fb0")):
            major, minor = mr.node_numbers("work", persona_node)
            self.assertRegex(ls, r"(?m)^c.* %d, +%d .*%s$" % (major, minor, re.escape(name)))

    def test_libinput_udev_backend_lists_the_persona_keyboard(self):
        # The container has the host's /usr (libinput) bound in; the hook made its /sys a slave.
        self.assertNotIn("keeps its /sys as it is", self.daemon.output())
        out = lxc(*inside("libinput", "list-devices")).stdout
        self.assertRegex(out, r"Device: +devns test keyboard\nKernel: +/dev/input/%s\n" % self.event)

    def test_input_reaches_the_container_while_work_is_active(self):
        dd = ["dd", "if=/dev/input/" + self.event, "bs=%d" % rig.EVENT.size, "count=4"]
        code, events, err = mr.read_while_tapping(inside(*dd), self.kbd, e.KEY_A, 60)
        self.assertEqual(code, 0, err)
        self.assertIn((e.EV_KEY, e.KEY_A, 1), events)

        rig.devnsctl("switch", "personal")
        code, events, err = mr.read_while_tapping(inside("timeout", "5", *dd), self.kbd, e.KEY_B, 15)
        self.assertNotIn((e.EV_KEY, e.KEY_B, 1), events, err)

    def test_framebuffer_geometry_and_pixels(self):
        var, frame = mr.frame_for("/dev/devns/work/fb0")
        fbset = lxc(*inside("fbset", "-fb", "/dev/fb0", "-s")).stdout
        self.assertIn("geometry %d %d %d %d %d" % (var["xres"], var["yres"], var["xres_virtual"],
                                                   var["yres_virtual"], var["bits_per_pixel"]), fbset)
        with open(os.path.join(self.rootfs, "frame"), "wb") as f:
            f.write(frame)
        lxc(*inside("dd", "if=/frame", "of=/dev/fb0", "bs=65536"))
        w, h, rgb = mr.screenshot_rgb("work", tempfile.mktemp(suffix=".png"))
        self.assertEqual((w, h), (var["xres"], var["yres"]))
        self.assertEqual(rgb, fbrig.to_rgb(frame))

    def test_other_persona_is_refused(self):
        # Not in the container's /dev at all.
        p = lxc(*inside("ls", "/dev/devns/personal"), check=False)
        self.assertEqual(mr.open_error(p.stderr), "ENOENT", p.stderr)
        # Made by the container's root with personal's numbers: LXC's device
        # rules refuse the event node; the rule that wrongly allows personal's
        # fb0 (as one for the whole major would) leaves it to devnsd, which
        # refuses it too.
        for name, refusal in ((self.event, "EPERM"), ("fb0", "EACCES")):
            major, minor = mr.node_numbers("personal", name)
            lxc(*inside("mknod", "/tmp/" + name, "c", str(major), str(minor)))
            p = lxc(*inside("dd", "if=/tmp/" + name, "of=/dev/null", "count=0"), check=False)
            self.assertEqual(mr.open_error(p.stderr), refusal, p.stderr)
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona personal")


if __name__ == "__main__":
    unittest.main(verbosity=2)
