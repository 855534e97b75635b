#!/usr/bin/python3
"""devnsd's configuration checks, through the real binary: bad files stop it
with status 2 and one line naming FILE:LINE, the key and the reason."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import unittest_main  # noqa: E402  (tests/unittest_main.py: exits 77 when a test skipped)

DEVNSD = sys.argv.pop(1) if len(sys.argv) > 1 else "devnsd"


def run(text, *extra):
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write(text)
    try:
        p = subprocess.run([DEVNSD, "--config", f.name, *extra], capture_output=True, text=True, timeout=30)
        return p, f.name
    finally:
        os.unlink(f.name)


class Config(unittest.TestCase):
    def bad(self, text, line, *words):
        p, path = run(text)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertIn("%s:%d:" % (path, line), p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def test_example_is_valid(self):
        p, _ = run("[Input]\nDevices=/dev/input/event1 /dev/input/event2   # globs allowed\n"
                   "[Persona work]\nActive=yes\n[Persona personal]\n", "--test")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("2 personas, work starts active", p.stdout)

    def test_first_persona_starts_active(self):
        p, _ = run("[Persona a]\n[Persona b]\n", "--test")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("a starts active", p.stdout)

    def test_unknown_section(self):
        self.bad("[Persona a]\n\n[Inptu]\nDevices=/x\n", 3, "[Inptu]", "unknown section")

    def test_unknown_key(self):
        self.bad("[Persona a]\nActiv=yes\n", 2, "Activ", "unknown key")

    def test_bad_boolean(self):
        self.bad("[Persona a]\nActive=maybe\n", 2, "Active=maybe", "boolean")

    def test_duplicate_persona(self):
        self.bad("[Persona a]\n[Persona b]\n[Persona a]\n", 3, "duplicate")

    def test_no_persona(self):
        p, path = run("[Input]\nDevices=/dev/input/event0\n")
        self.assertEqual(p.returncode, 2)
        self.assertIn(path, p.stderr)
        self.assertIn("persona", p.stderr)

    def test_two_active(self):
        self.bad("[Persona a]\nActive=yes\n[Persona b]\nActive=yes\n", 4, "Active=yes")

    def test_bad_name(self):
        self.bad("[Persona ../etc]\n", 1, "invalid persona name")

    def test_relative_device(self):
        self.bad("[Input]\nDevices=event1\n[Persona a]\n", 2, "Devices", "absolute")

    def test_syntax(self):
        self.bad("[Persona a]\nthis is not a key\n", 2, "syntax")

    def test_long_line(self):
        self.bad("[Persona a]\n# " + "x" * 400 + "\n", 2, "too long")

    def test_request_active_users(self):
        p, _ = run("[Persona a]\nAllowRequestActive=yes\nRequestActiveUsers=0 1001 10000-19999\n", "--test")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.bad("[Persona a]\nRequestActiveUsers=root\n", 2, "RequestActiveUsers=root", "uid")
        self.bad("[Persona a]\n\nRequestActiveUsers=0 9-1\n", 3, "RequestActiveUsers=9-1", "FIRST-LAST")
        self.bad("[Persona a]\nRequestActiveUsers=" + " ".join(map(str, range(17))) + "\n", 2, "at most 16")

    def test_unreadable(self):
        p = subprocess.run([DEVNSD, "--config", "/nonexistent/devnsd.conf"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent/devnsd.conf", p.stderr)

    def test_usage(self):
        p = subprocess.run([DEVNSD, "--bogus"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        p = subprocess.run([DEVNSD, "--help"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0)
        self.assertIn("--config", p.stdout)


if __name__ == "__main__":
    unittest_main.main()
