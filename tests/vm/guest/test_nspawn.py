#!/usr/bin/python3
"""Personas in systemd-nspawn machines, registered with systemd-machined,
with devnsd run from its unit (the guest boots systemd).

The "work" machine is the shipped example: conf/examples/work.nspawn,
installed by meson install and copied unchanged into /etc/systemd/nspawn/,
and the drop-in its comment gives for systemd-nspawn@work.service (the
machine's nodes allowed, `devnsctl attach work --machine work` after start),
started with `machinectl start work`. Its tree is made from the host's files:
busybox, and nodeprobe (a static program that opens nodes). Inside, the
keyboard's node gets what a uinput keyboard types and fb0 is the persona's
framebuffer; a process of the machine is refused personal's node.

Then a second machine, started with `systemd-nspawn --machine personal`, is
attached by `Machine=personal` in devnsd.conf when devnsd starts."""

import os
import re
import shutil
import subprocess
import time
import unittest

from evdev import ecodes as e

import devnsrig as rig
import fbrig
import systemdrig as sd

NODEPROBE = os.path.join(rig.BUILD, "tests", "vm", "nodeprobe")
MACHINES = "/var/lib/machines"
NSPAWN_SETTINGS = "/etc/systemd/nspawn"
UNITS = "/etc/systemd/system"
BUSYBOX = "/bin/busybox"
APPLETS = ("sh", "sleep", "ls", "cat", "mount", "test")
# The machine's init: waits, and ends on the signals nspawn stops it with
# (SIGTERM, SIGRTMIN+3 and SIGRTMIN+4 as glibc numbers them).
INIT = """#!/bin/sh
trap 'exit 0' TERM INT 37 38
while :; do sleep 1000000 & wait $!; done
"""


def make_tree(name):
    """A machine's tree from the host's files; nspawn wants an os-release and an init."""
    root = os.path.join(MACHINES, name)
    for d in ("bin", "sbin", "etc", "dev", "proc", "sys", "run", "tmp", "usr", "var"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for applet in APPLETS:
        os.symlink("busybox", os.path.join(root, "bin", applet))
    shutil.copy(NODEPROBE, os.path.join(root, "bin", "nodeprobe"))
    shutil.copy("/etc/os-release", os.path.join(root, "etc", "os-release"))
    sd.write_file(os.path.join(root, "etc", "group"), "root:x:0:\ninput:x:101:\nvideo:x:44:\n")
    sd.write_file(os.path.join(root, "sbin", "init"), INIT)
    os.chmod(os.path.join(root, "sbin", "init"), 0o755)
    return root


def example_drop_in(example, nodes, devnsctl):
    """The drop-in that work.nspawn's comment gives, for this machine's nodes and
    where devnsctl is installed."""
    with open(example) as f:
        lines = f.read().split("\n")
    start = [i for i, line in enumerate(lines) if line.endswith("systemd-nspawn@work.service.d/devns.conf")]
    if not start:
        raise AssertionError("work.nspawn no longer gives the drop-in")
    out = []
    for line in lines[start[0] + 1:]:
        if not line.startswith("#   "):
            break
        line = line[len("#   "):]
        if line.startswith("#"):
            continue
        if line.startswith("DeviceAllow=/dev/devns/work/"):
            if line.startswith("DeviceAllow=/dev/devns/work/fb0"):
                out += ["DeviceAllow=%s rw" % n for n in nodes]
            continue
        out.append(line.replace("/usr/bin/devnsctl", devnsctl))
    return "\n".join(out) + "\n"


def cgroup_procs(pid):
    with open("/proc/%d/cgroup" % pid) as f:
        path = f.read().strip().split("::", 1)[1]
    return "/sys/fs/cgroup%s/cgroup.procs" % path


def in_machine(leader, *argv, namespaces=("-a", "-r", "-w")):
    """argv run in the machine: in its cgroup (so that its device policy applies)
    and its namespaces (by default all of them, its root and working directory)."""
    return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', cgroup_procs(leader),
            "nsenter", "-t", str(leader), *namespaces, "--", *argv]


def probe(leader, *args, program="/bin/nodeprobe", **kw):
    p = subprocess.run(in_machine(leader, program, *args, **kw), capture_output=True, text=True, timeout=60)
    return p.stdout.strip() + p.stderr.strip()


class Nspawn(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print("boot:", sd.boot_time())
        cls.inst = sd.install()
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.kbd_name = os.path.basename(cls.kbd_hw)
        cls.conf = "\n".join([
            "[Display]", "Backend=drm", "Device=/dev/dri/card0", "",
            "[Input]", "Devices=" + cls.kbd_hw, "",
            "[Persona work]", "Active=yes", "",
            "[Persona personal]", "",
        ])
        sd.write_file(cls.inst.conf, cls.conf)
        sd.run("systemctl", "start", sd.UNIT)

    @classmethod
    def tearDownClass(cls):
        sd.run("machinectl", "terminate", "work", check=False)
        sd.run("machinectl", "terminate", "personal", check=False)
        sd.run("systemctl", "stop", sd.UNIT, check=False)
        cls.kbd.close()

    def ctl(self, *args):
        return sd.run(self.inst.devnsctl, *args)

    def leader(self, machine):
        return int(sd.run("machinectl", "show", machine, "-p", "Leader", "--value").stdout.strip())

    def same_node(self, leader, inside, host):
        return os.stat("/proc/%d/root%s" % (leader, inside)).st_rdev == os.stat(host).st_rdev

    def keys_reach(self, leader, node):
        """A uinput key press reaches nodeprobe reading node inside the machine."""
        p = subprocess.Popen(in_machine(leader, "/bin/nodeprobe", "event", node, "2"), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        out = rig.Output(p)
        if not out.wait_for(r"(?m)^ready$", 30):
            p.kill()
            return "nodeprobe never got ready: " + out.finish()
        rig.press(self.kbd, e.KEY_A, 1)
        rig.press(self.kbd, e.KEY_A, 0)
        return out.finish(40)

    def test_1_machinectl_start_with_the_example(self):
        make_tree("work")
        os.makedirs(NSPAWN_SETTINGS, exist_ok=True)
        example = os.path.join(self.inst.examples, "work.nspawn")
        shutil.copy(example, os.path.join(NSPAWN_SETTINGS, "work.nspawn"))
        nodes = ["/dev/devns/work/" + self.kbd_name, "/dev/devns/work/fb0"]
        unit = "systemd-nspawn@work.service"
        drop_in = example_drop_in(example, nodes, self.inst.devnsctl)
        print("drop-in from work.nspawn:\n" + drop_in)
        sd.write_file(os.path.join(UNITS, unit + ".d", "devns.conf"), drop_in)
        # The rig's kernel has no veth driver: the machine shares the guest's
        # network. And personal's fb0 is allowed too, so that devnsd, not the
        # device controller, is what refuses it below.
        exec_start = sd.run("systemctl", "cat", "systemd-nspawn@.service").stdout
        line = re.search(r"^ExecStart=(.*)$", exec_start, re.M).group(1).replace(" --network-veth", "")
        sd.write_file(os.path.join(UNITS, unit + ".d", "zz-rig.conf"),
                      "[Service]\nExecStart=\nExecStart=%s\nDeviceAllow=/dev/devns/personal/fb0 rw\n" % line)
        sd.run("systemctl", "daemon-reload")
        sd.run("machinectl", "start", "work", timeout=180)
        try:
            leader = self.leader("work")
        except RuntimeError:
            print(sd.journal(unit))
            raise
        self.assertIn("work", sd.run("machinectl", "list").stdout)
        print(sd.journal(unit))

        # ExecStartPost=devnsctl attach work --machine work made the nodes inside.
        node = "/dev/input/" + self.kbd_name
        self.assertTrue(self.same_node(leader, node, nodes[0]), "no persona keyboard at %s in the machine" % node)
        self.assertTrue(self.same_node(leader, "/dev/fb0", nodes[1]), "no persona fb0 in the machine")
        out = self.keys_reach(leader, node)
        self.assertIn("key %d 1\nkey %d 0" % (e.KEY_A, e.KEY_A), out)
        fd = os.open(fbrig.fb_node("work"), os.O_RDONLY)
        var = fbrig.get_var(fd)
        os.close(fd)
        self.assertEqual(probe(leader, "fb", "/dev/fb0"),
                         "fb %d %d %d" % (var["xres"], var["yres"], var["bits_per_pixel"]))
        # A process of the machine (its pid namespace, its cgroup) opening the
        # other persona's node: devnsd refuses it and says so.
        refused = probe(leader, "open", "/dev/devns/personal/fb0", program=NODEPROBE, namespaces=("-p",))
        self.assertEqual(refused, "refused 13")
        self.assertIn("access to persona personal's nodes", sd.journal())

    def test_2_machine_in_the_configuration(self):
        sd.run("machinectl", "terminate", "work", check=False)
        root = make_tree("personal")
        nodes = ["/dev/devns/personal/" + self.kbd_name, "/dev/devns/personal/fb0"]
        allow = [arg for n in nodes + ["/dev/null"] for arg in ("-p", "DeviceAllow=%s rw" % n)]
        sd.run("systemd-run", "--unit=machine-personal", "-p", "DevicePolicy=closed", *allow,
               "systemd-nspawn", "--quiet", "--keep-unit", "--boot", "--machine=personal", "--directory=" + root)
        self.assertTrue(sd.eventually(lambda: sd.run("machinectl", "show", "personal", check=False).returncode == 0,
                                      60), sd.journal("machine-personal.service"))
        leader = self.leader("personal")
        self.assertFalse(os.path.exists("/proc/%d/root/dev/fb0" % leader))
        sd.write_file(self.inst.conf, self.conf + "Machine=personal\n")
        # A clean stop forgets attachments: what attaches now is the configuration.
        sd.run("systemctl", "restart", sd.UNIT)
        node = "/dev/input/" + self.kbd_name
        self.assertTrue(sd.eventually(lambda: os.path.exists("/proc/%d/root/dev/fb0" % leader), 20),
                        "Machine=personal did not attach:\n" + sd.journal())
        self.assertTrue(self.same_node(leader, node, nodes[0]))
        self.ctl("switch", "personal")
        out = self.keys_reach(leader, node)
        self.assertIn("key %d 1\nkey %d 0" % (e.KEY_A, e.KEY_A), out)

if __name__ == "__main__":
    unittest.main(verbosity=2)
