#!/usr/bin/python3
"""Weston on a persona's card0, in a systemd-nspawn machine that boots systemd, as a full OS
persona runs: Weston 10's DRM backend with the pixman renderer, launched through the machine's
systemd-logind, and weston-simple-shm as its client, checked on the real screen (QEMU's
screendump).

The machine's tree is the guest's own root under an overlay (a tmpfs on top),
booted into a lean target of its own (basic.target, the system bus and systemd-logind). The
machine's systemd makes its tree shared in peer groups of its own, where devnsd lays its sysfs
view at `devnsctl attach --machine`; logind is restarted to enumerate the seat with the card.
Inside, logind finds seat0 with the persona's card (its udev record tagged seat and
master-of-seat) and no VTs (the machine has no /dev/tty0): a unit with PAMName= and
XDG_SEAT=seat0 gets a wayland session on seat0 without a VT, and Weston's logind launcher takes
card0 and the persona's keyboard through TakeDevice: logind opens them, makes the card's file the
master (SET_MASTER) and passes the fds to Weston, which needs an input device to start
(require-input). Weston maps its dumb buffers through libdevns-fbmmap.so (LD_PRELOAD, as
installed by meson install).

devnsd runs the phone's whole configuration (phonerig: the display, every input device, the
capslock LEDs, a backlight, routed nodes and hotkeys), and the machine may use all of work's
nodes. Weston's desktop (its background colour, no panel) with simple-shm's window shows while
work is active, stays off the screen while personal is (personal's fb0 frame shows then), and
comes back at the hotkey back, pressed on the keyboard Weston holds. Then a session switch on the machine's seat: logind drops master on the
card and revokes the keyboard's file (EVIOCREVOKE) as Weston's session goes to the background,
sets master again as it comes back; Weston takes the keyboard anew and draws again."""

import glob
import os
import stat
import time
import unittest

import devnsrig as rig
import drmrig
import fbrig
import phonerig
import systemdrig as sd
from test_drm_clients import share

MACHINE = "work"
ROOT = "/var/lib/machines/" + MACHINE
LAYER = "/run/devns-weston"
UNITS = "/etc/systemd/system"
TARGET = "devns-weston.target"
WESTON_UNIT = "devns-weston.service"
CLIENT_UNIT = "devns-weston-client.service"
SOCKET = "wayland-devns"
WESTON_LOG = "/tmp/weston.log"
BACKGROUND = (0x30, 0x60, 0xc0)
PERSONAL = (200, 120, 40)

# What the machine boots into: no gettys, no services of the guest's, logind and the bus.
TARGET_TEXT = """[Unit]
Description=Weston machine
Requires=basic.target
Wants=dbus.socket systemd-logind.service
After=basic.target
AllowIsolate=yes
"""

# A session for a service: no authentication, pam_systemd registers it with logind.
PAM = """auth     required pam_permit.so
account  required pam_permit.so
session  required pam_systemd.so
"""

WESTON_INI = """[core]
require-input=true
idle-time=0

[shell]
background-color=0xff%02x%02x%02x
panel-position=none
locking=false
animation=none
startup-animation=none
""" % BACKGROUND

WESTON_SERVICE = """[Unit]
Description=Weston on the persona's card0, a logind session on seat0
After=systemd-logind.service dbus.socket

[Service]
User=root
PAMName=devns-weston
Environment=XDG_SEAT=seat0 XDG_SESSION_TYPE=wayland XDG_SESSION_CLASS=user
Environment=LD_PRELOAD=%s
ExecStart=/usr/bin/weston --backend=drm-backend.so --use-pixman --seat=seat0 --socket=%s --log=%s --config=/etc/devns-weston.ini
StandardOutput=journal
StandardError=journal
"""

# A second session on seat0, for logind to switch to: it has no devices of its own.
OTHER_SESSION_SERVICE = """[Unit]
Description=Another session on seat0
After=systemd-logind.service dbus.socket

[Service]
User=root
PAMName=devns-weston
Environment=XDG_SEAT=seat0 XDG_SESSION_TYPE=wayland XDG_SESSION_CLASS=user
ExecStart=/bin/sleep infinity
"""
OTHER_UNIT = "devns-other-session.service"

CLIENT_SERVICE = """[Unit]
Description=weston-simple-shm on the persona's Weston

[Service]
User=root
Environment=XDG_RUNTIME_DIR=/run/user/0 WAYLAND_DISPLAY=%s
ExecStart=/usr/bin/weston-simple-shm
"""


def have_weston():
    return os.access("/usr/bin/weston", os.X_OK) and os.access("/usr/bin/weston-simple-shm", os.X_OK)


class Weston(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        print("boot:", sd.boot_time())
        # The phone's devices, before anything that tearDownClass would have to undo.
        cls.hw = phonerig.Hardware()
        cls.inst = sd.install()
        prefix = os.path.dirname(os.path.dirname(cls.inst.devnsd))
        cls.preload = (glob.glob(prefix + "/lib/*/libdevns-fbmmap.so") + glob.glob(prefix + "/lib/libdevns-fbmmap.so"))[0]
        # The machine's files, in the guest's root; then the machine's tree: that root under an
        # overlay the guest mounts (a superblock of the host's, which devnsd steps onto; an overlay
        # that nspawn mounted inside, as --volatile=overlay does, it would not).
        sd.write_file(os.path.join(UNITS, TARGET), TARGET_TEXT)
        sd.write_file(os.path.join(UNITS, WESTON_UNIT), WESTON_SERVICE % (cls.preload, SOCKET, WESTON_LOG))
        sd.write_file(os.path.join(UNITS, CLIENT_UNIT), CLIENT_SERVICE % SOCKET)
        sd.write_file(os.path.join(UNITS, OTHER_UNIT), OTHER_SESSION_SERVICE)
        sd.write_file("/etc/pam.d/devns-weston", PAM)
        sd.write_file("/etc/devns-weston.ini", WESTON_INI)
        os.makedirs(ROOT, exist_ok=True)
        os.makedirs(LAYER, exist_ok=True)
        sd.run("mount", "-t", "tmpfs", "tmpfs", LAYER)
        for d in ("upper", "work"):
            os.makedirs(os.path.join(LAYER, d))
        sd.run("mount", "-t", "overlay", "overlay", "-o",
               "lowerdir=/,upperdir=%s/upper,workdir=%s/work" % (LAYER, LAYER), ROOT)

        # The phone's whole configuration: input, LEDs, backlight, routed nodes and hotkeys beside the display.
        conf = cls.hw.conf(phonerig.DRM)
        sd.write_file(cls.inst.conf, conf)
        sd.run("systemctl", "start", sd.UNIT)
        var, _ = fbrig.screen_info("personal")
        cls.w, cls.h = var["xres"], var["yres"]
        cls.personal_frame = fbrig.frame(cls.w, cls.h, PERSONAL, band=(10, 40))
        fd = os.open(fbrig.fb_node("personal"), os.O_RDWR)
        try:
            fbrig.write_all(fd, cls.personal_frame)
        finally:
            os.close(fd)

        # The persona's nodes (its card, fb0 and input devices) and /dev/null.
        nodes = sorted(n for n in glob.glob("/dev/devns/work/*") if stat.S_ISCHR(os.stat(n).st_mode))
        nodes.append("/dev/null")
        allow = [arg for n in nodes + ["char-pts"] for arg in ("-p", "DeviceAllow=%s rw" % n)]
        sd.run("systemd-run", "--unit=machine-" + MACHINE, "-p", "DevicePolicy=closed", *allow,
               "systemd-nspawn", "--quiet", "--keep-unit", "--boot", "--machine=" + MACHINE,
               "--directory=" + ROOT, "--console=passive",
               "--", "systemd.unit=" + TARGET)
        ok = sd.eventually(lambda: sd.run("machinectl", "show", MACHINE, check=False).returncode == 0, 120)
        if not ok:
            raise AssertionError("the machine did not start:\n" + sd.journal("machine-work.service"))
        cls.leader = int(sd.run("machinectl", "show", MACHINE, "-p", "Leader", "--value").stdout.strip())

    @classmethod
    def tearDownClass(cls):
        sd.run("machinectl", "terminate", MACHINE, check=False)
        sd.eventually(lambda: sd.run("machinectl", "show", MACHINE, check=False).returncode != 0, 60)
        sd.run("umount", ROOT, check=False)
        sd.run("umount", LAYER, check=False)
        sd.run("systemctl", "stop", sd.UNIT, check=False)
        cls.hw.close()

    def inside(self, *argv, check=False, timeout=120):
        """argv run in the machine's namespaces."""
        return sd.run("nsenter", "-t", str(self.leader), "-a", "--", *argv, check=check, timeout=timeout)

    def machine_journal(self, unit=None):
        args = ["journalctl", "--no-pager", "-o", "short-monotonic"] + (["-u", unit] if unit else [])
        return self.inside(*args).stdout

    def weston_log(self):
        try:
            with open("/proc/%d/root%s" % (self.leader, WESTON_LOG)) as f:
                return f.read()
        except OSError as err:
            return "(no weston log: %s)" % err

    def diagnosis(self):
        text = "--- weston log:\n" + self.weston_log()
        text += "\n--- machine journal:\n" + self.machine_journal()[-20000:]
        text += "\n--- devnsd:\n" + sd.journal()[-6000:]
        return text

    def desktop(self, name, timeout):
        """Weston's background with something else on it (simple-shm's window), drawn anew: two
        screenshots that differ."""
        return drmrig.changing(lambda: fbrig.screendump(name), lambda shot: 0.5 < share(shot, BACKGROUND) < 0.995,
                               timeout)

    @unittest.skipUnless(have_weston(), "weston is not installed")
    def test_weston_through_logind(self):
        self.assertTrue(sd.eventually(lambda: self.inside("systemctl", "is-active", "systemd-logind.service")
                                      .stdout.strip() == "active", 180), self.diagnosis())
        # The machine's systemd made its whole tree shared (so that mounts reach its services'
        # namespaces), in peer groups of its own: devnsd lays its sysfs view there, which logind
        # needs to take the persona's nodes for a card, not CUSE devices.
        with open("/proc/%d/mountinfo" % self.leader) as f:
            self.assertRegex(f.read(), r"(?m)^\S+ \S+ \S+ \S+ /sys \S+ shared:", "the machine's /sys is not shared")
        sd.run(self.inst.devnsctl, "attach", "work", "--machine", MACHINE)
        self.assertNotIn("passes mounts on", sd.journal())
        print(sd.journal()[-3000:])
        card = "/proc/%d/root/dev/dri/card0" % self.leader
        self.assertTrue(os.path.exists(card), "devnsctl attach made no card0:\n" + sd.journal())
        self.assertEqual(os.stat(card).st_rdev, os.stat("/dev/devns/work/card0").st_rdev)
        self.inside("systemctl", "restart", "systemd-logind.service", check=True)
        # logind: seat0 with the persona's card, and no VTs.
        seat = self.inside("loginctl", "seat-status", "seat0", "--no-pager", "--full")
        print(seat.stdout + seat.stderr)
        self.assertIn("drm:card0", seat.stdout, self.diagnosis())
        self.assertEqual(self.inside("loginctl", "show-seat", "seat0", "-p", "CanTTY", "--value").stdout.strip(), "no")
        self.assertEqual(self.inside("loginctl", "show-seat", "seat0", "-p", "CanGraphical",
                                     "--value").stdout.strip(), "yes")

        self.inside("systemctl", "start", WESTON_UNIT, check=True)
        ready = lambda: os.path.exists("/proc/%d/root/run/user/0/%s" % (self.leader, SOCKET))
        self.assertTrue(sd.eventually(ready, 180), "Weston did not start:\n" + self.diagnosis())
        sessions = self.inside("loginctl", "list-sessions", "--no-legend").stdout
        print(sessions)
        sid = sessions.split()[0]
        show = self.inside("loginctl", "show-session", sid).stdout
        for prop in ("Seat=seat0", "Type=wayland", "Class=user", "Active=yes", "VTNr=0"):
            self.assertIn(prop, show.split("\n"), show)
        self.assertIn("logind", self.weston_log())
        # The persona's keyboard, taken through logind.
        self.assertIn("devns test keyboard", self.weston_log(), self.diagnosis())

        self.inside("systemctl", "start", CLIENT_UNIT, check=True)
        self.assertTrue(self.desktop("weston", 240), "the screen (weston.png) does not show Weston's desktop with "
                        "simple-shm's window (%.3f of it is the background):\n%s" % (
                            share(fbrig.screendump("weston"), BACKGROUND), self.diagnosis()))

        sd.run(self.inst.devnsctl, "switch", "personal")
        ok, diff = fbrig.screen_shows("weston-background", self.w, self.h, self.personal_frame, timeout=20)
        self.assertTrue(ok, "the screen (weston-background.png) is not personal's fb0 (%s pixels differ)" % diff)
        time.sleep(3)
        for unit in (WESTON_UNIT, CLIENT_UNIT):
            self.assertEqual(self.inside("systemctl", "is-active", unit).stdout.strip(), "active",
                             "%s ended in the background:\n%s" % (unit, self.diagnosis()))
        ok, diff = fbrig.screen_shows("weston-background-later", self.w, self.h, self.personal_frame, timeout=20)
        self.assertTrue(ok, "Weston reached the screen in the background (%s pixels differ)" % diff)

        # Back by the hotkey, on the keyboard Weston holds.
        self.hw.hotkey("work")
        self.assertTrue(self.desktop("weston-back", 60), "the hotkey back does not show Weston's desktop:\n" +
                        self.diagnosis())

        # A session switch on the persona's seat: logind drops DRM master on the card it passed Weston and
        # revokes the keyboard's file (EVIOCREVOKE), Weston pauses; back to Weston's session, logind sets
        # master again, Weston takes the keyboard anew and draws again.
        self.inside("systemctl", "start", OTHER_UNIT, check=True)
        other = sd.eventually(lambda: len(self.sessions()) == 2, 60)
        self.assertTrue(other, "no second session:\n" + self.diagnosis())
        other_id = [i for i in self.sessions() if i != sid][0]
        keyboards = self.weston_log().count("devns test keyboard")
        self.inside("loginctl", "activate", other_id, check=True)
        paused = lambda: "deactivating session" in self.weston_log()
        self.assertTrue(sd.eventually(paused, 60), "Weston was not paused:\n" + self.diagnosis())
        self.assertEqual(self.session_active(sid), "no")
        self.inside("loginctl", "activate", sid, check=True)
        resumed = lambda: "activating session" in self.weston_log().split("deactivating session")[-1]
        self.assertTrue(sd.eventually(resumed, 60), "Weston did not resume:\n" + self.diagnosis())
        again = lambda: self.weston_log().count("devns test keyboard") > keyboards
        self.assertTrue(sd.eventually(again, 60), "Weston did not take the keyboard again:\n" + self.diagnosis())
        self.assertTrue(self.desktop("weston-session-back", 60), "Weston's desktop is not back after the session "
                        "switch:\n" + self.diagnosis())
        self.assertNotRegex(self.machine_journal("systemd-logind.service"), r"(?i)revoc|drop.*master.*fail|"
                            r"failed to (drop|set|revoke)", self.diagnosis())
        print(self.weston_log())

    def sessions(self):
        out = self.inside("loginctl", "list-sessions", "--no-legend").stdout
        return [line.split()[0] for line in out.splitlines() if line.strip()]

    def session_active(self, sid):
        return self.inside("loginctl", "show-session", sid, "-p", "Active", "--value").stdout.strip()


if __name__ == "__main__":
    rig.main()
