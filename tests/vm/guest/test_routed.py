#!/usr/bin/python3
"""Routed nodes (/dev/devns/eventN) whose persona's handles are revoked
while they stay open: devnsd must answer them ENODEV, survive every later
revocation and removal, and serve new opens."""

import errno
import os
import subprocess
import sys

from evdev import ecodes as e

import devnsrig as rig


class RoutedHandles(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.routed = "/dev/devns/" + os.path.basename(cls.kbd_hw)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw], active="work", daemon={"Routed": "yes"}))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def tap(self, code=e.KEY_A):
        rig.press(self.kbd, code, 1)
        rig.press(self.kbd, code, 0)

    def assert_enodev(self, fd):
        with self.assertRaises(OSError) as cm:
            os.read(fd, 24 * 16)
        self.assertEqual(cm.exception.errno, errno.ENODEV)

    def revoke_work(self):
        """Attaches work to a fresh container and detaches it: every handle on its nodes is revoked."""
        c = rig.Container()
        try:
            rig.devnsctl("attach", "work", "--pid", str(c.pid))
            rig.devnsctl("detach", "work")
        finally:
            c.stop()

    def test_revoked_routed_handle_then_more_revocations(self):
        # A host process's routed handle reaches the active persona's node.
        fd = rig.open_node(self.routed)
        self.tap()
        self.assertIn((e.EV_KEY, e.KEY_A, 1), rig.read_to(fd, rig.send_marker(self.kbd)))
        self.revoke_work()
        self.assert_enodev(fd)
        # The ended handle stays open, listed on the routed node: the next
        # revocations and a removal walk past it.
        self.revoke_work()
        self.revoke_work()
        rig.devnsctl("create", "gone")
        rig.devnsctl("remove", "gone")
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
        self.assert_enodev(fd)
        os.close(fd)
        # Closed after all that, and the node still serves.
        fd = rig.open_node(self.routed)
        self.fds.append(fd)
        self.tap(e.KEY_B)
        codes = [ev[1] for ev in rig.read_to(fd, rig.send_marker(self.kbd)) if ev[0] == e.EV_KEY]
        self.assertIn(e.KEY_B, codes)

    def test_other_personas_routed_handles_outlive_a_revocation(self):
        """A routed handle a container of personal holds still gets personal's input once personal
        is active, after work's handles were all revoked twice."""
        c = rig.Container()
        p = None
        try:
            rig.devnsctl("attach", "personal", "--pid", str(c.pid))
            p = c.popen(sys.executable, "-c", rig.READ_KEYS, self.routed, stdout=subprocess.PIPE, text=True)
            out = rig.Output(p)
            self.assertTrue(out.wait_for(r"(?m)^open$", 60), out.text)
            self.revoke_work()
            self.revoke_work()
            rig.devnsctl("switch", "personal")
            self.tap(e.KEY_C)
            self.assertTrue(out.wait_for(r"(?m)^key %d 0$" % e.KEY_C, 60), out.text)
            self.assertIn("key %d 1\n" % e.KEY_C, out.text)
            self.assertNotIn("errno", out.text)
        finally:
            # The reader runs under nsenter, in the container: ending the container ends it and
            # closes its end of the pipe, before the pipe is read to its end and closed here.
            c.stop()
            if p:
                p.kill()
                out.finish()
                p.stdout.close()
            rig.devnsctl("switch", "work")
            rig.devnsctl("detach", "personal", check=False)

    def test_revoked_routed_handle_closed_at_once(self):
        fd = rig.open_node(self.routed)
        self.revoke_work()
        os.close(fd)
        self.revoke_work()
        self.assertTrue(self.daemon.alive(), "devnsd died:\n" + self.daemon.output())
        self.assertRegex(rig.devnsctl("list").stdout, r"work")


if __name__ == "__main__":
    rig.main()
