#!/usr/bin/python3
"""podman with devns's shipped command line (conf/examples/podman-run.sh,
run unchanged), on an image imported from a local root file system tarball
(busybox and fbset from the host's packages; no registry), without a
network, with the host's /usr bound in for libinput. Inside (podman exec, which joins the container's namespaces and
control group) busybox's dd reads the persona's /dev/input/eventN and
writes its /dev/fb0, and fbset reads the framebuffer's geometry; another
persona's node is refused. libinput's udev backend lists the persona's
keyboard."""

import os
import re
import subprocess
import tempfile
import unittest

from evdev import ecodes as e

import devnsrig as rig
import fbrig
import managerrig as mr

PERSONA = "personal"  # the container's name too, as the script names it
OTHER = "work"
IMAGE = "localhost/devns-busybox"
SCRIPT = os.path.join(mr.EXAMPLES, "podman-run.sh")
# What the VM needs of podman's configuration, in the guest's own /etc: no
# systemd (control groups through the file system, events to a file), a
# storage driver that works on the overlay root, no AppArmor parser.
CONTAINERS_CONF = """[containers]
apparmor_profile = "unconfined"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "crun"
"""
STORAGE_CONF = """[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
"""


def run(*argv, check=True, **kw):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=300, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def inside(*argv):
    return ["podman", "exec", PERSONA] + list(argv)


def configure_podman():
    os.makedirs("/etc/containers", exist_ok=True)
    for name, text in (("containers.conf", CONTAINERS_CONF), ("storage.conf", STORAGE_CONF)):
        with open(os.path.join("/etc/containers", name), "w") as f:
            f.write(text)


class Podman(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        mr.prepare_host()
        configure_podman()
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.event = os.path.basename(cls.kbd_hw)
        cls.bus = mr.system_bus()
        cls.daemon = rig.Daemon(mr.conf(cls.kbd_hw, active=PERSONA))
        try:
            tree = tempfile.mkdtemp(prefix="rootfs-")
            mr.busybox_tree(tree)
            tarball = tree + ".tar"
            run("tar", "-C", tree, "-cf", tarball, ".")
            run("podman", "import", tarball, IMAGE)
            # The other persona's fb0 handed in by mistake (podman makes the node and allows it).
            # The host's /usr, for libinput.
            cls.started = run("sh", SCRIPT, PERSONA, IMAGE, "--network", "none",
                              "--device", "/dev/devns/%s/fb0:/dev/fb-%s" % (OTHER, OTHER),
                              "--volume", "/usr:/usr:ro")
        except Exception:
            cls.daemon.stop()
            cls.bus.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        run("podman", "rm", "-f", "-t", "0", PERSONA, check=False)
        code = cls.daemon.stop()
        cls.bus.stop()
        cls.kbd.close()
        if code != 0:
            raise AssertionError("devnsd exited with %s:\n%s" % (code, cls.daemon.output()))

    def setUp(self):
        rig.devnsctl("switch", PERSONA)

    def tearDown(self):
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())

    def test_script_attached_and_populated(self):
        self.assertIn("%s: attached" % PERSONA, self.started.stdout)
        init = run("podman", "inspect", "-f", "{{.State.Pid}}", PERSONA).stdout.strip()
        self.assertIn("persona %s bound to the pid namespace of process %s\n" % (PERSONA, init),
                      self.daemon.output())
        ls = run(*inside("ls", "-l", "/dev/input/" + self.event, "/dev/fb0")).stdout
        for persona_node, name in ((self.event, "/dev/input/" + self.event), ("fb0", "/dev/fb0")):
            major, minor = mr.node_numbers(PERSONA, persona_node)
            self.assertRegex(ls, r"(?m)^c.* %d, +%d .*%s$" % (major, minor, re.escape(name)))

    def test_libinput_udev_backend_lists_the_persona_keyboard(self):
        self.assertNotIn("keeps its /sys as it is", self.daemon.output())
        out = run(*inside("libinput", "list-devices")).stdout
        self.assertRegex(out, r"Device: +devns test keyboard\nKernel: +/dev/input/%s\n" % self.event)

    def test_input_reaches_the_container_while_its_persona_is_active(self):
        dd = ["dd", "if=/dev/input/" + self.event, "bs=%d" % rig.EVENT.size, "count=4"]
        code, events, err = mr.read_while_tapping(inside(*dd), self.kbd, e.KEY_A, 60)
        self.assertEqual(code, 0, err)
        self.assertIn((e.EV_KEY, e.KEY_A, 1), events)

        rig.devnsctl("switch", OTHER)
        code, events, err = mr.read_while_tapping(inside("timeout", "5", *dd), self.kbd, e.KEY_B, 15)
        self.assertNotIn((e.EV_KEY, e.KEY_B, 1), events, err)

    def test_framebuffer_geometry_and_pixels(self):
        var, frame = mr.frame_for("/dev/devns/%s/fb0" % PERSONA)
        fbset = run(*inside("fbset", "-fb", "/dev/fb0", "-s")).stdout
        self.assertIn("geometry %d %d %d %d %d" % (var["xres"], var["yres"], var["xres_virtual"],
                                                   var["yres_virtual"], var["bits_per_pixel"]), fbset)
        p = subprocess.run(["podman", "exec", "-i", PERSONA, "sh", "-c", "cat > /dev/fb0"], input=frame,
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        w, h, rgb = mr.screenshot_rgb(PERSONA, tempfile.mktemp(suffix=".png"))
        self.assertEqual((w, h), (var["xres"], var["yres"]))
        self.assertEqual(rgb, fbrig.to_rgb(frame))

    def test_other_persona_is_refused(self):
        p = run(*inside("ls", "/dev/devns/" + OTHER), check=False)
        self.assertEqual(mr.open_error(p.stderr), "ENOENT", p.stderr)
        # The container's root cannot make the other's node (podman grants no CAP_MKNOD) ...
        major, minor = mr.node_numbers(OTHER, self.event)
        p = run(*inside("mknod", "/tmp/" + self.event, "c", str(major), str(minor)), check=False)
        self.assertIn("Operation not permitted", p.stderr)
        # ... and one handed in with --device, allowed by podman's device rules, devnsd refuses.
        p = run(*inside("dd", "if=/dev/fb-" + OTHER, "of=/dev/null", "count=0"), check=False)
        self.assertEqual(mr.open_error(p.stderr), "EACCES", p.stderr)
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona " + OTHER)


if __name__ == "__main__":
    unittest.main(verbosity=2)
