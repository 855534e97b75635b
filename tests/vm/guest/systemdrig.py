"""Helpers for tests in the guest that boots systemd (vm-run --init systemd):
devns installed with `meson install` from the build directory, devnsd run
by systemctl as devnsd.service, devnsctl and the system bus as installed."""

import os
import re
import shutil
import subprocess
import time

import devnsrig as rig

UNIT = "devnsd.service"
RUNTIME_UNITS = "/run/systemd/system"


def run(*cmd, check=True, timeout=120, **kw):
    """Runs a command; its CompletedProcess (text), raising with its output on failure."""
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    return p


def boot_time():
    """What systemd-analyze says of this boot (kernel and userspace until basic.target)."""
    return run("systemd-analyze", "time", check=False).stdout.strip()


class Installed:
    """Where `meson install` put devns, read back from what systemd and PATH see."""

    def __init__(self):
        self.unit_file = show("FragmentPath")
        exec_start = show("ExecStart")
        m = re.search(r"argv\[\]=(\S+) --config (\S+)", exec_start)
        if not m:
            raise RuntimeError("unexpected ExecStart of %s: %s" % (UNIT, exec_start))
        self.devnsd, self.conf = m.group(1), m.group(2)
        self.devnsctl = shutil.which("devnsctl")
        prefix = os.path.dirname(os.path.dirname(self.devnsd))
        self.examples = os.path.join(prefix, "share", "devns", "examples")


def install():
    """meson install into the guest's root (its overlay), then makes systemd and
    the bus read what it installed: the unit, the D-Bus policy and activation file."""
    run("meson", "install", "-C", rig.BUILD, "--no-rebuild", "--quiet", timeout=300)
    run("systemctl", "daemon-reload")
    run("busctl", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ReloadConfig")
    return Installed()


def show(prop, unit=UNIT):
    return run("systemctl", "show", "-P", prop, unit).stdout.strip()


def main_pid(unit=UNIT):
    return int(show("MainPID", unit) or 0)


def active(unit=UNIT):
    return show("ActiveState", unit) == "active"


def drop_in(unit, name, text):
    """A runtime drop-in for unit (under /run/systemd/system), then daemon-reload."""
    d = os.path.join(RUNTIME_UNITS, unit + ".d")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name + ".conf"), "w") as f:
        f.write(text)
    run("systemctl", "daemon-reload")


def journal(unit=UNIT):
    return run("journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit, check=False).stdout


def eventually(check, timeout, step=0.2):
    """Polls check() until it is true; returns whether it became true in time."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def new_main_pid(old, timeout, unit=UNIT):
    """Waits until the unit is active again with another main process; that pid, or 0."""
    found = []

    def restarted():
        pid = main_pid(unit)
        if pid not in (0, old) and active(unit):
            found.append(pid)
            return True
        return False

    return found[0] if eventually(restarted, timeout) else 0


def write_file(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rig.write_file(path, text)


def exposure():
    """systemd-analyze security's verdict on the running unit: (score, level, whole output)."""
    out = run("systemd-analyze", "security", "--no-pager", UNIT).stdout
    m = re.search(r"Overall exposure level for %s: ([0-9.]+) (\S+)" % re.escape(UNIT), out)
    if not m:
        raise RuntimeError("no exposure level in:\n" + out)
    return float(m.group(1)), m.group(2), out


def personas(devnsctl):
    """The personas devnsctl lists, and the active one."""
    out = run(devnsctl, "list").stdout.split("\n")
    names = {line[2:].split()[0] for line in out if len(line) > 2 and line[2:].strip()}
    current = [line[2:].split()[0] for line in out if line.startswith("*")]
    return names, current[0] if current else None
