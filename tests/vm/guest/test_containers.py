#!/usr/bin/python3
"""Personas as containers on a real kernel: pid-namespace identity, access
control, /dev population, routed nodes, switch authorization, RequestActive
and the switch hotkey, through devnsctl, D-Bus and real client programs."""

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

from evdev import ecodes as e

import devnsrig as rig

HERE = os.path.dirname(os.path.abspath(__file__))
PROBE = [sys.executable, os.path.join(HERE, "nsprobe.py")]
ENDPOINT_CLIENT = [sys.executable, os.path.join(HERE, "endpoint_client.py")]
ENDPOINT = "/run/devnsd/persona/endpoint"
HOSTCTL = os.environ.get("DEVNS_HOSTCTL")
SWITCH_GID = 4242
I8042 = "/dev/input/event0"


def probe(container, path, seconds=0.0, action=None):
    """Opens path inside the container; returns (open result, events seen)."""
    p = container.popen(*PROBE, path, str(seconds), stdout=subprocess.PIPE, text=True)
    first = p.stdout.readline().strip()
    if action and first == "open ok":
        time.sleep(0.3)
        action()
    out = p.communicate(timeout=60)[0]
    events = [tuple(int(x) for x in line.split()[1:]) for line in out.splitlines() if line.startswith("ev ")]
    return first, events


class Containers(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        subprocess.run(["groupadd", "-g", str(SWITCH_GID), "devnsswitch"], check=True)
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.name = os.path.basename(cls.kbd_hw)
        cls.bus = rig.Bus()
        conf = rig.conf_for(
            [cls.kbd_hw, I8042], active="work",
            daemon={"Routed": "yes", "SwitchGroup": "devnsswitch",
                    "SwitchKeys": "KEY_LEFTMETA+KEY_F1:work KEY_LEFTMETA+KEY_F2:personal"},
            persona_keys={"work": {"AllowRequestActive": "yes"},
                          "personal": {"AllowRequestActive": "no", "DeviceMap": "event0:/dev/input/keyboard"}})
        cls.daemon = rig.Daemon(conf)
        cls.work, cls.personal = rig.attached("work", "personal")

    @classmethod
    def tearDownClass(cls):
        for c in (cls.work, cls.personal):
            c.stop()
        cls.stop_daemon()
        cls.kbd.close()

    def node(self, persona):
        return rig.persona_node(persona, self.kbd_hw)

    def tap(self, code=e.KEY_A):
        rig.press(self.kbd, code, 1)
        rig.press(self.kbd, code, 0)

    # --- identity and access ---------------------------------------------------

    def test_each_container_opens_only_its_own_nodes(self):
        self.assertEqual(probe(self.work, self.node("work"))[0], "open ok")
        self.assertEqual(probe(self.personal, self.node("personal"))[0], "open ok")
        self.assertEqual(probe(self.work, self.node("personal"))[0], "open errno %d" % errno.EACCES)
        self.assertEqual(probe(self.personal, self.node("work"))[0], "open errno %d" % errno.EACCES)
        # The host may open anything.
        os.close(os.open(self.node("personal"), os.O_RDONLY))
        # A refusal is logged with the persona and the pid.
        self.assertRegex(self.daemon.output(), r"refused pid \d+ access to persona personal")

    def test_unattached_container_gets_nothing(self):
        stranger = rig.Container()
        try:
            for persona in ("work", "personal"):
                self.assertEqual(probe(stranger, self.node(persona))[0], "open errno %d" % errno.EACCES)
            self.assertEqual(probe(stranger, "/dev/devns/" + self.name)[0], "open errno %d" % errno.EACCES)
        finally:
            stranger.stop()

    def test_nested_namespace_inside_a_persona(self):
        p = self.work.run("unshare", "--pid", "--fork", "--mount-proc", *PROBE, self.node("work"), "0")
        self.assertEqual(p.stdout.strip(), "open ok")
        p = self.work.run("unshare", "--pid", "--fork", "--mount-proc", *PROBE, self.node("personal"), "0")
        self.assertEqual(p.stdout.strip(), "open errno %d" % errno.EACCES)

    def test_routed_node_gives_each_container_its_persona(self):
        routed = "/dev/devns/" + self.name
        res, work_events = probe(self.work, routed, 1.5, self.tap)
        self.assertEqual(res, "open ok")
        self.assertIn((e.EV_KEY, e.KEY_A, 1), work_events)
        res, personal_events = probe(self.personal, routed, 1.5, self.tap)
        self.assertEqual(res, "open ok")
        self.assertNotIn((e.EV_KEY, e.KEY_A, 1), personal_events)

        rig.devnsctl("switch", "personal")
        _, personal_events = probe(self.personal, routed, 1.5, self.tap)
        self.assertIn((e.EV_KEY, e.KEY_A, 1), personal_events)

    # --- /dev population -----------------------------------------------------

    def test_attach_populates_a_private_dev(self):
        c = rig.Container(private_dev=True)
        try:
            out = rig.devnsctl("attach", "personal", "--pid", str(c.pid)).stdout
            self.assertIn("nodes made", out)
            host = os.stat(self.node("personal"))
            inside = c.run("stat", "-c", "%F %t:%T %a", "/dev/input/" + self.name).stdout.split()
            self.assertEqual(inside[:2], ["character", "special"])
            self.assertEqual(inside[-2], "%x:%x" % (os.major(host.st_rdev), os.minor(host.st_rdev)))
            self.assertEqual(inside[-1], "660")
            # DeviceMap=event0:/dev/input/keyboard puts the i8042 node there.
            c.run("test", "-c", "/dev/input/keyboard")
            udev = c.run("cat", "/run/udev/data/c%d:%d" % (os.major(host.st_rdev), os.minor(host.st_rdev))).stdout
            self.assertIn("E:ID_INPUT=1", udev)
            self.assertIn("E:ID_INPUT_KEYBOARD=1", udev)
            c.run("test", "-e", "/run/udev/control")
            self.assertEqual(probe(c, "/dev/input/" + self.name)[0], "open ok")

            # libinput inside the container takes the node and sees the active persona's keys.
            rig.devnsctl("switch", "personal")
            li = c.popen("libinput", "debug-events", "--show-keycodes", "--device", "/dev/input/" + self.name,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            out = rig.Output(li)
            self.assertTrue(out.wait_for(r"DEVICE_ADDED"), out.text)
            self.tap(e.KEY_B)
            seen = out.wait_for(r"KEYBOARD_KEY.*KEY_B \(48\) pressed")
            os.killpg(li.pid, signal.SIGTERM)
            self.assertTrue(seen, out.finish())
        finally:
            c.stop()
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))

    def test_device_numbers_survive_a_restart(self):
        before = {p: os.stat(self.node(p)).st_rdev for p in ("work", "personal")}
        self.daemon.stop()
        self.daemon.start()
        rig.devnsctl("attach", "work", "--pid", str(self.work.pid))
        rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))
        after = {p: os.stat(self.node(p)).st_rdev for p in ("work", "personal")}
        self.assertEqual(before, after)

    # --- switching policy -------------------------------------------------------

    def test_switch_needs_root_or_switch_group(self):
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        p = subprocess.run(nobody + [rig.DEVNSCTL, "switch", "personal"], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("needs root or membership of group devnsswitch", p.stderr)
        self.assertIn("Active persona: work", rig.devnsctl("status").stdout)
        # The error is D-Bus's AccessDenied.
        p = subprocess.run(nobody + ["busctl", "--system", "call", "org.devns1", "/org/devns1",
                                     "org.devns1.Manager", "SwitchTo", "s", "personal"],
                           capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Access denied", p.stderr + p.stdout)

        member = ["setpriv", "--reuid=65534", "--regid=65534", "--groups=%d" % SWITCH_GID]
        p = subprocess.run(member + [rig.DEVNSCTL, "switch", "personal"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Active persona: personal", rig.devnsctl("status").stdout)

        p = subprocess.run(member + [rig.DEVNSCTL, "create", "intruder"], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)

    def test_request_active_follows_the_policy(self):
        mon = subprocess.Popen(["dbus-monitor", "--system", "type='signal',member='PersonaActivationRequested'"],
                               stdout=subprocess.PIPE, text=True)
        lines = []
        reader = threading.Thread(target=rig.collect, args=(mon.stdout, lines), daemon=True)
        reader.start()
        # dbus-monitor gives its name up once it is a monitor: from then on it sees every signal.
        deadline = time.monotonic() + 30
        while not any("member=NameLost" in line for line in lines):
            self.assertTrue(reader.is_alive(), "dbus-monitor ended: " + "\n".join(lines))
            self.assertLess(time.monotonic(), deadline, "dbus-monitor is no monitor after 30 s: " + "\n".join(lines))
            time.sleep(0.05)
        env = dict(os.environ)
        # devnsctl asks through the persona's endpoint, which a container with a /dev and /run of its own
        # gets. (Over a bus that gives no ProcessFD, devnsd refuses RequestActive and names the endpoint.)
        work, personal = rig.Container(private_dev=True), rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "work", "--pid", str(work.pid))
            rig.devnsctl("attach", "personal", "--pid", str(personal.pid))
            p = personal.run(rig.DEVNSCTL, "request-active", check=False, env=env)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("refused", p.stderr)
            self.assertIn("Active persona: work", rig.devnsctl("status").stdout)

            rig.devnsctl("switch", "personal")
            work.run(rig.DEVNSCTL, "request-active", env=env)
            self.assertIn("Active persona: work", rig.devnsctl("status").stdout)
        finally:
            work.stop()
            personal.stop()
            rig.devnsctl("attach", "work", "--pid", str(self.work.pid))
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))

        p = subprocess.run([rig.DEVNSCTL, "request-active"], capture_output=True, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("not in any persona", p.stderr)
        time.sleep(0.5)
        mon.terminate()
        mon.wait(timeout=30)
        reader.join(30)
        mon.stdout.close()
        out = "\n".join(lines)
        self.assertRegex(out, r'string "personal"\s+boolean false')
        self.assertRegex(out, r'string "work"\s+boolean true')

    def test_hotkey_switches_and_no_persona_sees_it(self):
        if not HOSTCTL:
            self.skipTest("no host control channel")
        fds = {p: rig.open_node(rig.persona_node(p, I8042)) for p in ("work", "personal")}
        try:
            for fd in fds.values():
                rig.pending(fd)

            def active_is(persona):
                return rig.eventually(lambda: "Active persona: " + persona in rig.devnsctl("status").stdout, 60)

            subprocess.run([HOSTCTL, "sendkey", "meta_l", "f2"], check=True, timeout=30)
            self.assertTrue(active_is("personal"), rig.devnsctl("status").stdout)
            subprocess.run([HOSTCTL, "sendkey", "meta_l", "f1"], check=True, timeout=30)
            self.assertTrue(active_is("work"), rig.devnsctl("status").stdout)
            # An ordinary key still gets through; it comes behind the chords, so once work has
            # it, whatever of the chords reached a persona is there to read.
            subprocess.run([HOSTCTL, "sendkey", "a"], check=True, timeout=30)
            seen = {"work": rig.read_until(fds["work"], lambda evs: (e.EV_KEY, e.KEY_A, 1) in evs)}
            seen["personal"] = rig.pending(fds["personal"])
            for persona, events in seen.items():
                keys = {code for t, code, v in events if t == e.EV_KEY and v == 1}
                self.assertFalse(keys & {e.KEY_LEFTMETA, e.KEY_F1, e.KEY_F2},
                                 "%s saw the chord: %s" % (persona, events))
            self.assertIn((e.EV_KEY, e.KEY_A, 1), seen["work"])
        finally:
            for fd in fds.values():
                os.close(fd)

    # --- runtime personas --------------------------------------------------------

    def test_create_and_remove_personas(self):
        rig.devnsctl("create", "guest")
        self.assertTrue(stat.S_ISCHR(os.stat(rig.persona_node("guest", self.kbd_hw)).st_mode))
        # devnsctl create returns once every node of the new persona is in /dev, for each one made.
        made = ["quick%d" % i for i in range(4)]
        for name in made:
            rig.devnsctl("create", name)
            for hw in (self.kbd_hw, I8042):
                self.assertTrue(os.path.exists(rig.persona_node(name, hw)),
                                "%s is not there when devnsctl create returns" % rig.persona_node(name, hw))
        for name in made:
            rig.devnsctl("remove", name)
        self.assertRegex(rig.devnsctl("list").stdout, r"(?m)^  guest\s+/dev/devns/guest/")
        bad = rig.devnsctl("create", "guest", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("exists", bad.stderr)
        bad = rig.devnsctl("create", "../x", check=False)
        self.assertIn("Invalid persona name", bad.stderr)
        fd = rig.open_node(rig.persona_node("guest", self.kbd_hw))
        rig.devnsctl("remove", "guest")
        for _ in range(50):
            if not os.path.exists(rig.persona_node("guest", self.kbd_hw)):
                break
            time.sleep(0.1)
        self.assertFalse(os.path.exists(rig.persona_node("guest", self.kbd_hw)))
        with self.assertRaises(OSError):
            os.read(fd, 24)
        os.close(fd)
        bad = rig.devnsctl("remove", "work", check=False)
        self.assertIn("is active", bad.stderr)

    def test_removed_personas_handle_says_the_device_is_gone(self):
        """A handle on a removed persona's node answers ENODEV (reads, and POLLERR|POLLHUP to a poll) for as
        long as it stays open, as the kernel's evdev answers for an unplugged device, also once the node
        has left /dev; never CUSE's ENOTCONN. A persona made again under that name gets its node back."""
        import select
        rig.devnsctl("create", "leaving")
        node = rig.persona_node("leaving", self.kbd_hw)
        fd = rig.open_node(node)
        try:
            rig.devnsctl("remove", "leaving")
            self.assertTrue(rig.eventually(lambda: not os.path.exists(node), 30), node + " is still there")
            time.sleep(3)
            for _ in range(2):
                with self.assertRaises(OSError) as cm:
                    os.read(fd, 24)
                self.assertEqual(cm.exception.errno, errno.ENODEV)
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            self.assertEqual(poller.poll(5000), [(fd, select.POLLERR | select.POLLHUP)])
            # The name and number are free again while the old handle is still open.
            rig.devnsctl("create", "leaving")
            self.assertTrue(rig.eventually(lambda: os.path.exists(node), 30), node + " did not come back")
            new = rig.open_node(node)
            os.close(new)
            with self.assertRaises(OSError):
                os.read(fd, 24)
        finally:
            os.close(fd)
            rig.devnsctl("remove", "leaving", check=False)

    # --- user namespaces -----------------------------------------------------------

    def test_user_namespaced_container(self):
        c = rig.Container(userns=True, private_dev=True)
        try:
            self.assertEqual(c.run("id", "-u").stdout.strip(), "0")
            self.assertEqual(c.run("cat", "/proc/self/uid_map").stdout.split(), ["0", "100000", "65536"])
            self.assertEqual(c.run("id", "-u", uid=1000).stdout.strip(), "1000")
            c.run("touch", "/run/by-root")
            c.run("touch", "/run/by-app", uid=1000)
            owners = [os.stat("/proc/%d/root/run/%s" % (c.pid, name)).st_uid for name in ("by-root", "by-app")]
            self.assertEqual(owners, [100000, 101000])
        finally:
            c.stop()
        self.assertEqual(self.work.run("id", "-u", uid=1000).stdout.strip(), "1000")

    def test_user_namespace_dev_holds_no_usable_node(self):
        # Nodes on a /dev the container mounts itself do not open; on one the host mounts they do.
        for from_host in (False, True):
            c = rig.Container(userns=True, private_dev=True, dev_from_host=from_host)
            try:
                c.make_node("/dev/null", os.makedev(1, 3))
                p = c.run("sh", "-c", "echo x >/dev/null", check=False)
                self.assertEqual(p.returncode == 0, from_host, p.stderr)
            finally:
                c.stop()

    # --- the persona's endpoint -------------------------------------------------

    def endpoint_ask(self, container, *args, uid=None):
        p = container.run(*ENDPOINT_CLIENT, *args, uid=uid)
        return json.loads(p.stdout)

    def test_endpoint_speaks_for_its_persona_with_no_bus(self):
        work = rig.Container(userns=True, private_dev=True)
        personal = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "work", "--pid", str(work.pid))
            rig.devnsctl("attach", "personal", "--pid", str(personal.pid))
            for c in (work, personal):
                c.run("test", "-S", ENDPOINT)
                # No system bus in there: what devnsctl does, it does through the endpoint.
                c.run("test", "!", "-e", "/run/dbus/system_bus_socket")
                # Nothing of another persona's: only this persona's directory is bound.
                self.assertEqual(c.run("ls", "/run/devnsd").stdout.split(), ["persona"])
            rig.devnsctl("switch", "personal")
            out = work.run(rig.DEVNSCTL, "status").stdout
            self.assertIn("Persona: work", out)
            self.assertIn("Active: no", out)
            work.run(rig.DEVNSCTL, "request-active")
            self.assertIn("Active persona: work", rig.devnsctl("status").stdout)
            self.assertEqual(self.endpoint_ask(work, "ask", "status")["flags"] & 1, 1)
            # A container uid that RequestActiveUsers= does not name is refused, by its number in the container.
            p = work.run(rig.DEVNSCTL, "request-active", uid=1000, check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("RequestActiveUsers", p.stderr)
            # AllowRequestActive=no holds for the endpoint as for the bus.
            p = personal.run(rig.DEVNSCTL, "request-active", check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("refused by the persona's policy", p.stderr)
            self.assertIn("Persona: personal", personal.run(rig.DEVNSCTL, "status").stdout)
            self.assertIn("Active persona: work", rig.devnsctl("status").stdout)
            # The host's directory of endpoints is root's alone.
            nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            p = subprocess.run(nobody + ["ls", "/run/devnsd/endpoints"], capture_output=True, text=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("Permission denied", p.stderr)
        finally:
            for c in (work, personal):
                c.stop()
            rig.devnsctl("attach", "work", "--pid", str(self.work.pid))
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))
            rig.devnsctl("switch", "work")

    def test_endpoint_of_a_container_left_behind_is_gone(self):
        old, new = rig.Container(private_dev=True), rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "personal", "--pid", str(old.pid))
            held = old.popen(*ENDPOINT_CLIENT, "hold", stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            self.assertEqual(json.loads(held.stdout.readline()), {"ready": True})
            rig.devnsctl("attach", "personal", "--pid", str(new.pid))
            # The old container's connection and socket speak for nobody now; the new one's does.
            held.stdin.write("\n")
            held.stdin.flush()
            self.assertIn(json.loads(held.communicate(timeout=60)[0]), ({"reply": 0}, {"error": errno.EPIPE},
                                                                        {"error": errno.ECONNRESET}))
            old.run("test", "!", "-e", ENDPOINT)
            p = old.run(rig.DEVNSCTL, "request-active", check=False)
            self.assertNotEqual(p.returncode, 0)
            self.assertEqual(self.endpoint_ask(new, "ask", "status")["persona"], "personal")
            # Detached: the container keeps an empty directory.
            rig.devnsctl("detach", "personal")
            new.run("test", "!", "-e", ENDPOINT)
        finally:
            for c in (old, new):
                c.stop()
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))

    def test_endpoint_bad_clients_get_errors_and_devnsd_answers(self):
        c = rig.Container(private_dev=True)
        try:
            rig.devnsctl("attach", "personal", "--pid", str(c.pid))
            out = self.endpoint_ask(c, "garbage")
            self.assertEqual(out["short"][0], -errno.EBADMSG, out)
            self.assertEqual(out["long"][:2], [-errno.EBADMSG, 5], out)
            self.assertEqual(out["magic"][0], -errno.EPROTO, out)
            self.assertEqual(out["version"][0], -errno.EPROTONOSUPPORT, out)
            self.assertEqual(out["op"][0], -errno.EOPNOTSUPP, out)
            self.assertEqual(out["flags"][0], -errno.EOPNOTSUPP, out)
            out = self.endpoint_ask(c, "flood")
            self.assertGreater(out["sent"], 0, out)
            self.assertLessEqual(out["replies"], out["sent"], out)
            self.assertTrue(rig.answers_within(1.0))
            # One uid holds a quarter of the persona's connections at most.
            self.assertEqual(self.endpoint_ask(c, "connections")["answered"], 4)
            self.assertTrue(rig.answers_within(1.0))
            self.assertEqual(self.endpoint_ask(c, "ask", "status")["status"], 0)
        finally:
            c.stop()
            rig.devnsctl("attach", "personal", "--pid", str(self.personal.pid))


if __name__ == "__main__":
    rig.main()
