#!/usr/bin/python3
"""podman with devns's shipped command line (conf/examples/podman-run.sh,
run unchanged), on an image imported from a local root file system
tarball (busybox and fbset from the host's packages; no registry), without
a network, with the host's /usr bound in for libinput. Inside (podman exec,
which joins the container's namespaces and control group) busybox's dd
reads the persona's /dev/input/eventN and writes its /dev/fb0, fbset reads
the framebuffer's geometry, libinput's udev backend lists the persona's
keyboard, and the other persona's nodes are refused."""

import os
import tempfile
import unittest

import devnsrig as rig
import managerrig as mr

PERSONA = "personal"  # the container's name too, as the script names it
IMAGE = "localhost/devns-busybox"
SCRIPT = os.path.join(mr.EXAMPLES, "podman-run.sh")
# What the VM needs of podman's configuration, in the guest's own /etc: no
# systemd (control groups through the file system, events to a file), a
# storage driver that works on the overlay root, no AppArmor parser.
CONF = {
    "containers.conf": """[containers]
apparmor_profile = "unconfined"

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "crun"
""",
    "storage.conf": """[storage]
driver = "vfs"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
""",
}


class Podman(mr.ManagerChecks, unittest.TestCase):
    persona, other = PERSONA, "work"

    @classmethod
    def setUpClass(cls):
        os.makedirs("/etc/containers", exist_ok=True)
        for name, text in CONF.items():
            with open(os.path.join("/etc/containers", name), "w") as f:
                f.write(text)
        cls.start_daemon()
        try:
            tree = tempfile.mkdtemp(prefix="rootfs-")
            mr.busybox_tree(tree)
            mr.run("tar", "-C", tree, "-cf", tree + ".tar", ".")
            mr.run("podman", "import", tree + ".tar", IMAGE)
            # The other persona's fb0 handed in by mistake (podman makes the
            # node and allows it), and the host's /usr for libinput.
            cls.started = mr.run("sh", SCRIPT, PERSONA, IMAGE, "--network", "none",
                                 "--device", "/dev/devns/%s/fb0:/dev/fb-%s" % (cls.other, cls.other),
                                 "--volume", "/usr:/usr:ro")
        except Exception:
            cls.stop_daemon()
            raise

    @classmethod
    def tearDownClass(cls):
        mr.run("podman", "rm", "-f", "-t", "0", PERSONA, check=False)
        cls.stop_daemon()

    @staticmethod
    def inside(*argv, stdin=False):
        return ["podman", "exec"] + (["-i"] if stdin else []) + [PERSONA] + list(argv)

    @staticmethod
    def init_pid():
        return int(mr.run("podman", "inspect", "-f", "{{.State.Pid}}", PERSONA).stdout)

    def test_script_says_attached(self):
        self.assertIn("%s: attached" % PERSONA, self.started.stdout)

    def test_other_persona_is_refused(self):
        p = mr.run(*self.inside("ls", "/dev/devns/" + self.other), check=False)
        self.assertEqual(mr.open_error(p.stderr), "ENOENT", p.stderr)
        # The container's root cannot make the other's node (podman grants no CAP_MKNOD) ...
        major, minor = mr.node_numbers(self.other, self.event)
        p = mr.run(*self.inside("mknod", "/tmp/" + self.event, "c", str(major), str(minor)), check=False)
        self.assertIn("Operation not permitted", p.stderr)
        # ... and devnsd refuses the one handed in with --device, which podman's rules allow.
        self.assertEqual(self.refused("/dev/fb-" + self.other), "EACCES")
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona " + self.other)


if __name__ == "__main__":
    rig.main()
