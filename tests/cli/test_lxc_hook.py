#!/usr/bin/python3
"""conf/examples/lxc-devns-hook --devices: one LXC device rule per node of
the persona, for its own major:minor, never a whole major."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import unittest_main  # noqa: E402  (tests/unittest_main.py: exits 77 when a test skipped)

HOOK = sys.argv.pop(1) if len(sys.argv) > 1 else "lxc-devns-hook"


def hook(dev_dir, *args):
    env = dict(os.environ, DEVNS_DEV_DIR=dev_dir)
    return subprocess.run(["sh", HOOK, *args], capture_output=True, text=True, env=env, timeout=30)


class LxcHook(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.dev = self.dir.name

    def make_nodes(self):
        """Two personas' nodes, and a persona without any, under self.dev."""
        for persona, nodes in (("work", {"event1": 3, "fb0": 12}), ("personal", {"event1": 4, "fb0": 13})):
            os.mkdir(os.path.join(self.dev, persona))
            for name, minor in nodes.items():
                try:
                    os.mknod(os.path.join(self.dev, persona, name), 0o600 | 0o020000, os.makedev(511, minor))
                except PermissionError:
                    self.skipTest("mknod needs root")
        os.mkdir(os.path.join(self.dev, "empty"))

    def tearDown(self):
        self.dir.cleanup()

    def test_one_rule_per_own_node(self):
        self.make_nodes()
        p = hook(self.dev, "--devices", "work")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines(), ["lxc.cgroup2.devices.allow = c 511:3 rw",
                                                 "lxc.cgroup2.devices.allow = c 511:12 rw"])
        self.assertNotIn("*", p.stdout)

    def test_bad_or_empty_persona(self):
        self.make_nodes()
        for name in ("../work", "", "-x", "a b"):
            p = hook(self.dev, "--devices", name)
            self.assertNotEqual(p.returncode, 0, name)
            self.assertEqual(p.stdout, "")
        p = hook(self.dev, "--devices", "empty")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no nodes", p.stderr)

    def test_attach_needs_lxc_pid(self):
        env = {k: v for k, v in os.environ.items() if k != "LXC_PID"}
        p = subprocess.run(["sh", HOOK, "work"], capture_output=True, text=True, env=env, timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("LXC_PID", p.stderr)


if __name__ == "__main__":
    unittest_main.main()
