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
attached by `Machine=personal` in devnsd.conf when devnsd starts.

Last, `Machine=work` in devnsd.conf, and the work machine started after
devnsd with no ExecStartPost=: devnsd attaches it when systemd-machined
announces it, and again when it starts anew. A host user posing as
systemd-machined (MachineNew signals sent to devnsd, calls answered with a
leader in the user's own namespaces) gets nothing bound."""

import os
import re
import shutil
import subprocess
import sys
import unittest

from evdev import ecodes as e

import devnsrig as rig
import fbrig
import systemdrig as sd

HERE = os.path.dirname(os.path.abspath(__file__))
NODEPROBE = os.path.join(rig.BUILD, "tests", "vm", "nodeprobe")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
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

    def start_machine(self, name):
        """systemd-nspawn --machine name, as a unit of its own with the persona's nodes allowed; returns its leader."""
        if not os.path.exists(os.path.join(MACHINES, name)):
            make_tree(name)
        sd.run("systemctl", "reset-failed", "machine-%s.service" % name, check=False)
        nodes = ["/dev/devns/%s/%s" % (name, self.kbd_name), "/dev/devns/%s/fb0" % name, "/dev/null"]
        allow = [arg for n in nodes for arg in ("-p", "DeviceAllow=%s rw" % n)]
        sd.run("systemd-run", "--unit=machine-" + name, "-p", "DevicePolicy=closed", *allow,
               "systemd-nspawn", "--quiet", "--keep-unit", "--boot", "--machine=" + name,
               "--directory=" + os.path.join(MACHINES, name))
        self.assertTrue(sd.eventually(lambda: sd.run("machinectl", "show", name, check=False).returncode == 0, 60),
                        sd.journal("machine-%s.service" % name))
        return self.leader(name)

    def test_3_machine_that_starts_later_is_attached(self):
        for machine in ("work", "personal"):
            sd.run("machinectl", "terminate", machine, check=False)
        self.assertTrue(sd.eventually(lambda: "work" not in sd.run("machinectl", "list").stdout, 60))
        sd.write_file(self.inst.conf, self.conf.replace("[Persona work]\n", "[Persona work]\nMachine=work\n"))
        sd.run("systemctl", "restart", sd.UNIT)

        # A host user poses as systemd-machined: its own user, pid and mount namespaces (a /dev of its
        # own) for a leader, MachineNew signals for "work" sent to devnsd, and its answers to any call.
        holder = subprocess.Popen(NOBODY + ["unshare", "-Urpm", "--fork", "--kill-child", "sh", "-c",
                                            "mount -t tmpfs tmpfs /dev && exec sleep 1000"])
        try:
            self.assertTrue(sd.eventually(lambda: sd.run("pgrep", "-P", str(holder.pid), "-x", "sleep",
                                                         check=False).returncode == 0, 20))
            fake = int(sd.run("pgrep", "-P", str(holder.pid), "-x", "sleep").stdout.split()[0])
            env = dict(os.environ, PYTHONPATH=HERE, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/run/dbus/system_bus_socket")
            forged = subprocess.run(NOBODY + [sys.executable, os.path.join(HERE, "forge_machine.py"), "work",
                                              str(fake), "1000", "5"], env=env, capture_output=True, text=True,
                                    timeout=120)
            print(forged.stdout + forged.stderr)
            self.assertIn("sent 1000", forged.stdout, forged.stderr)
            answered = re.search(r"answered in ([0-9.]+)", forged.stdout)
            self.assertTrue(answered and float(answered.group(1)) < 1.0,
                            "devnsd did not answer within a second of the forged signals")
            self.assertFalse(os.path.exists("/proc/%d/root/dev/fb0" % fake),
                             "the forged machine got work's nodes:\n" + sd.journal())
            self.assertNotIn("pid namespace of process %d" % fake, sd.journal())
        finally:
            holder.kill()
            holder.wait()

        node = "/dev/input/" + self.kbd_name
        for start in ("first", "again"):
            leader = self.start_machine("work")
            self.assertTrue(sd.eventually(lambda: os.path.exists("/proc/%d/root/dev/fb0" % leader), 30),
                            "Machine=work did not attach the machine started %s:\n%s" % (start, sd.journal()))
            self.assertTrue(self.same_node(leader, node, "/dev/devns/work/" + self.kbd_name))
            self.ctl("switch", "work")
            out = self.keys_reach(leader, node)
            self.assertIn("key %d 1\nkey %d 0" % (e.KEY_A, e.KEY_A), out, start)
            sd.run("machinectl", "terminate", "work")
            self.assertTrue(sd.eventually(lambda: sd.run("machinectl", "show", "work", check=False).returncode != 0,
                                          60))


if __name__ == "__main__":
    rig.main()
