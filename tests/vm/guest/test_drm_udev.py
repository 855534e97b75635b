#!/usr/bin/python3
"""A persona's DRM card, /dev/devns/PERSONA/card0, inside an attached
container: /dev/dri/card0 with the persona's number (a minor below 64, a
primary node for libdrm), a sysfs that leads from that number to the
display's real card (so /sys/dev/char/M:m/device/drm exists and its bus is
QEMU's PCI VGA), and a udev record and tag entries with seat,
master-of-seat and uaccess and the properties systemd-udevd gives a card.
libdrm's drmGetDevices2(), sd-device (udevadm) and the drm subsystem's
enumeration in the container all find it as the display's device."""

import os
import sys
import unittest

import devnsrig as rig
import fbrig

CARD = "/dev/dri/card0"
MASTER_TAGS = ("seat", "master-of-seat", "uaccess")

# drmGetDevices2() as a compositor calls it: each device's primary node and bus.
DRM_DEVICES = r"""
import ctypes
lib = ctypes.CDLL("libdrm.so.2")
class Device(ctypes.Structure):
    _fields_ = [("nodes", ctypes.POINTER(ctypes.c_char_p)), ("available_nodes", ctypes.c_int),
                ("bustype", ctypes.c_int)]
n = lib.drmGetDevices2(0, None, 0)
print("count", n)
if n > 0:
    devices = (ctypes.POINTER(Device) * n)()
    n = lib.drmGetDevices2(0, devices, n)
    for i in range(max(n, 0)):
        d = devices[i].contents
        if d.available_nodes & 1:
            print("primary", d.nodes[0].decode(), "bus", d.bustype)
    lib.drmFreeDevices(devices, n)
"""
DRM_BUS_PCI = 0


def card_node(persona):
    return "/dev/devns/%s/card0" % persona


class DrmCardInContainers(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(CARD):
            raise unittest.SkipTest("no DRM card in this guest")
        cls.host_card = os.path.realpath("/sys/dev/char/%d:%d" % (os.major(os.stat(CARD).st_rdev),
                                                                os.minor(os.stat(CARD).st_rdev)))
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(fbrig.conf_display(backend="drm"))
        assert rig.eventually(lambda: os.path.exists(card_node("work")), timeout=20), \
            "devnsd serves no card0 for work:\n" + cls.daemon.output()
        # A container as runtimes make them: its own /dev, /run and network namespace.
        cls.work = rig.Container(private_dev=True, netns=True)
        out = rig.devnsctl("attach", "work", "--pid", str(cls.work.pid)).stdout
        assert "nodes made" in out, out

    @classmethod
    def tearDownClass(cls):
        cls.work.stop()
        cls.stop_daemon()

    def number(self, persona="work"):
        rdev = os.stat(card_node(persona)).st_rdev
        return os.major(rdev), os.minor(rdev)

    def record(self, c, number):
        return c.run("cat", "/run/udev/data/c%d:%d" % number).stdout.splitlines()

    def check_presented(self, c, number):
        """Everything a client of the container looks at leads to the persona's card."""
        inside = c.run("stat", "-c", "%F %t:%T", CARD).stdout.split()
        self.assertEqual(inside[:2], ["character", "special"])
        self.assertEqual(inside[-1], "%x:%x" % number)
        sysdir = "/sys/dev/char/%d:%d" % number
        self.assertEqual(c.run("readlink", "-f", sysdir).stdout.strip(), self.host_card)
        self.assertEqual(c.run("cat", sysdir + "/dev").stdout.strip(), "%d:%d" % number)
        uevent = c.run("cat", sysdir + "/uevent").stdout.splitlines()
        for line in ("MAJOR=%d" % number[0], "MINOR=%d" % number[1], "DEVNAME=dri/card0", "DEVTYPE=drm_minor"):
            self.assertIn(line, uevent)
        # libdrm's drmNodeIsDRM() and its bus.
        c.run("test", "-d", sysdir + "/device/drm")
        self.assertEqual(os.path.basename(c.run("readlink", sysdir + "/device/subsystem").stdout.strip()), "pci")
        record = self.record(c, number)
        for tag in MASTER_TAGS:
            self.assertIn("G:" + tag, record)
            self.assertIn("Q:" + tag, record)
            c.run("test", "-f", "/run/udev/tags/%s/c%d:%d" % ((tag,) + number))
        id_path = "pci-" + os.path.basename(os.path.realpath("/sys/class/drm/card0/device"))
        tag = id_path.replace(":", "_").replace(".", "_")
        for line in ("E:ID_PATH=" + id_path, "E:ID_PATH_TAG=" + tag, "E:ID_FOR_SEAT=drm-" + tag):
            self.assertIn(line, record)

    def test_the_card_is_the_personas_node_and_the_displays_device(self):
        number = self.number()
        self.assertLess(number[1], 64, "a DRM primary node's minor")
        self.check_presented(self.work, number)
        # The host's sysfs is untouched.
        with open(self.host_card + "/dev") as f:
            self.assertEqual(f.read().strip(), "%d:%d" % (os.major(os.stat(CARD).st_rdev),
                                                          os.minor(os.stat(CARD).st_rdev)))

    def test_drm_get_devices_lists_it(self):
        out = self.work.run(sys.executable, "-c", DRM_DEVICES).stdout
        self.assertIn("primary %s bus %d" % (CARD, DRM_BUS_PCI), out.splitlines(), out)

    def test_sd_device_and_enumeration_find_it(self):
        number = self.number()
        p = self.work.run("udevadm", "info", "--query=all", CARD, check=False)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("P: " + self.host_card[len("/sys"):], p.stdout)
        self.assertIn("E: MAJOR=%d" % number[0], p.stdout)
        self.assertIn("E: MINOR=%d" % number[1], p.stdout)
        self.assertIn("E: DEVNAME=" + CARD, p.stdout)
        self.assertRegex(p.stdout, r"E: ID_FOR_SEAT=drm-pci-")
        self.assertRegex(p.stdout, r"E: (CURRENT_)?TAGS=\S*:master-of-seat:")
        # Enumerating the drm subsystem and the master-of-seat tag, as logind does at its start.
        for match in ("--subsystem-match=drm", "--tag-match=master-of-seat"):
            p = self.work.run("udevadm", "trigger", "--dry-run", "--verbose", match, check=False)
            self.assertIn(self.host_card, p.stdout.splitlines(), p.stdout + p.stderr)

    def test_a_restart_and_an_attach_again_keep_it(self):
        number = self.number()
        self.daemon.stop()
        self.daemon.start()
        self.assertTrue(rig.eventually(lambda: os.path.exists(card_node("work")), timeout=20), self.daemon.output())
        rig.devnsctl("attach", "work", "--pid", str(self.work.pid))
        self.assertEqual(self.number(), number)
        self.check_presented(self.work, number)
        # A fresh container of the same persona gets it too.
        c = rig.Container(private_dev=True, netns=True)
        try:
            rig.devnsctl("attach", "work", "--pid", str(c.pid))
            self.check_presented(c, number)
        finally:
            c.stop()
            rig.devnsctl("attach", "work", "--pid", str(self.work.pid))


if __name__ == "__main__":
    unittest.main()
