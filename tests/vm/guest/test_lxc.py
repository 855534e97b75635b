#!/usr/bin/python3
"""LXC with devns's shipped hook, set up as the example tells a user: a
container with LXC's common configuration (which denies every device but
a few), the hook as its start-host hook, and the device rules that
`lxc-devns-hook --devices` prints appended to its config. Its root is a
busybox tree made from the host's files, as LXC's busybox template makes
it (the template itself works offline, but its one `ln` per applet takes
about 100 s under emulation). Then lxc-start, and inside (lxc-attach,
which joins the container's namespaces and control group) busybox's dd
reads the persona's /dev/input/eventN and writes its /dev/fb0, fbset
reads the framebuffer's geometry, libinput's udev backend (the host's
/usr is bound in) lists the persona's keyboard, and the other persona's
nodes are refused."""

import os
import tempfile
import unittest

import devnsrig as rig
import managerrig as mr

NAME = "work"  # the container, bound to the persona of the same name
LXC_PATH = "/var/lib/lxc"
HOOK = os.path.join(mr.EXAMPLES, "lxc-devns-hook")
# The container, as lxc-create writes a config, with what the VM needs: no
# network, no AppArmor profile (the VM has no AppArmor parser), and the
# host's /usr bound in (libinput).
CONFIG = """lxc.include = /usr/share/lxc/config/common.conf
lxc.rootfs.path = dir:{rootfs}
lxc.uts.name = {name}
lxc.init.cmd = /bin/sleep 1000000
lxc.net.0.type = empty
lxc.apparmor.profile = unconfined
lxc.mount.entry = /usr usr none ro,bind 0 0
"""


class Lxc(mr.ManagerChecks, unittest.TestCase):
    persona, other = NAME, "personal"

    @classmethod
    def setUpClass(cls):
        cls.start_daemon()
        cls.log = os.path.join(tempfile.mkdtemp(prefix="lxc-log-"), "work.log")
        try:
            cls.create()
            mr.run("lxc-start", "-n", NAME, "-l", "DEBUG", "-o", cls.log)
            mr.run("lxc-wait", "-n", NAME, "-s", "RUNNING", "-t", "60")
        except Exception:
            print(open(cls.log).read() if os.path.exists(cls.log) else "no LXC log")
            cls.stop_daemon()
            raise

    @classmethod
    def create(cls):
        """The container as the hook's comment and the README tell a user to make it."""
        rootfs = os.path.join(LXC_PATH, NAME, "rootfs")
        mr.busybox_tree(rootfs)
        rules = mr.run("sh", HOOK, "--devices", NAME).stdout
        with open(os.path.join(LXC_PATH, NAME, "config"), "w") as f:
            f.write(CONFIG.format(rootfs=rootfs, name=NAME))
            f.write("lxc.hook.start-host = %s %s\n" % (HOOK, NAME))
            f.write(rules)
            # A rule that wrongly allows the other persona's fb0, as one for the whole major would.
            f.write("lxc.cgroup2.devices.allow = c %d:%d rw\n" % mr.node_numbers(cls.other, "fb0"))

    @classmethod
    def tearDownClass(cls):
        mr.run("lxc-stop", "-n", NAME, "-k", check=False)
        cls.stop_daemon()

    @staticmethod
    def inside(*argv, stdin=False):
        return ["lxc-attach", "-n", NAME, "--clear-env", "--"] + list(argv)

    @staticmethod
    def init_pid():
        return int(mr.run("lxc-info", "-n", NAME, "-p", "-H").stdout)

    def test_no_start_when_the_hook_cannot_attach(self):
        # A container whose hook names a persona devnsd does not have never runs.
        os.makedirs(os.path.join(LXC_PATH, "stray"), exist_ok=True)
        with open(os.path.join(LXC_PATH, "stray", "config"), "w") as f:
            f.write(CONFIG.format(rootfs=os.path.join(LXC_PATH, NAME, "rootfs"), name="stray"))
            f.write("lxc.hook.start-host = %s guest\n" % HOOK)
        log = os.path.join(os.path.dirname(self.log), "stray.log")
        p = mr.run("lxc-start", "-n", "stray", "-l", "INFO", "-o", log, check=False)
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(log) as f:
            self.assertIn("Failed to run lxc.hook.start-host", f.read())
        self.assertIn("STOPPED", mr.run("lxc-info", "-n", "stray", "-s").stdout)

    def test_other_persona_is_refused(self):
        # Not in the container's /dev at all.
        p = mr.run(*self.inside("ls", "/dev/devns/" + self.other), check=False)
        self.assertEqual(mr.open_error(p.stderr), "ENOENT", p.stderr)
        # Made by the container's root with the other's numbers: LXC's device
        # rules refuse the event node; the fb0 that a rule wrongly allows,
        # devnsd refuses.
        for name, refusal in ((self.event, "EPERM"), ("fb0", "EACCES")):
            major, minor = mr.node_numbers(self.other, name)
            mr.run(*self.inside("mknod", "/tmp/" + name, "c", str(major), str(minor)))
            self.assertEqual(self.refused("/tmp/" + name), refusal)
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona " + self.other)


if __name__ == "__main__":
    rig.main()
