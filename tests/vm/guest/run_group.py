"""Runs several VM test files one after another in one guest, each from a
clean state, so that a group of files pays for one boot.

Usage: run_group.py FILE[:TEST,...]...

A FILE may name some of its tests after a colon (Class or Class.test_name,
comma-separated): only those run.

Before the first file it notes what the guest has: its processes, mounts,
modules and the entries of its scratch directories. After each file it
puts the guest back: every process that was not there before is killed, every mount it
made is taken down (deepest first), what it left in /tmp, /var/tmp, /run and
/dev/shm is removed, the modules it loaded are unloaded, and the display
(/dev/dri/card0 and /dev/fb0 of the bochs driver) is brought back if the
file unbound, removed or renamed it. A file that cannot be put back after
ends the group: the files after it would not start clean.

Each file's output comes as it runs, after a '### FILE' line; a summary
follows. Exit status: 1 when a file failed or the guest could not be put
back, else 77 when a file skipped tests (tests/unittest_main.py), else 0."""

import os
import signal
import subprocess
import sys
import time

EXIT_SKIP = 77
SCRATCH = ("/tmp", "/var/tmp", "/run", "/dev/shm")
DISPLAY_NODES = ("/dev/dri/card0", "/dev/fb0")
DISPLAY_MODULE = "bochs"
DISPLAY_DRIVER = "bochs-drm"
KILL_WAIT_SECS = 30
DISPLAY_WAIT_SECS = 30


class NotClean(Exception):
    """The guest could not be put back as it was before a file."""


def log(msg):
    print(f"run_group: {msg}", flush=True)


# --- processes -------------------------------------------------------------

def processes():
    """(pid, start time) of every process but kernel threads."""
    found = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        ppid, flags, start = int(fields[1]), int(fields[6]), int(fields[19])
        if flags & 0x00200000 or int(name) == 2 or ppid == 2:  # PF_KTHREAD
            continue
        found.add((int(name), start))
    return found


def state_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2]
    except OSError:
        return None


def kill_leftovers(before):
    """Kills every process that was not there before (the guest's init, the
    output relay, this runner and, under systemd, the services stay)."""
    deadline = time.monotonic() + KILL_WAIT_SECS
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            pass
        alive = [pid for pid, _ in processes() - before if state_of(pid) not in (None, "Z")]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if time.monotonic() >= deadline:
            stuck = ", ".join(f"{pid} ({comm(pid)}, state {state_of(pid)})" for pid in alive)
            raise NotClean(f"processes still alive {KILL_WAIT_SECS} s after SIGKILL: {stuck}")
        time.sleep(0.05)


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


# --- mounts ----------------------------------------------------------------

def mounts():
    """(mount id, mount point) of this mount namespace, in mount order."""
    result = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            result.append((int(fields[0]), point))
    return result


def unmount_new(before_ids):
    # Newest first: a mount made on top of another goes before it.
    for _ in range(3):
        new = [(mid, point) for mid, point in mounts() if mid not in before_ids]
        if not new:
            return
        for mid, point in reversed(new):
            subprocess.run(["umount", "-l", point], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    left = [point for mid, point in mounts() if mid not in before_ids]
    if left:
        raise NotClean(f"mounts left that cannot be taken down: {', '.join(left[:8])}")


# --- scratch directories ---------------------------------------------------

def scratch_entries():
    entries = set()
    for top in SCRATCH:
        try:
            for name in os.listdir(top):
                entries.add(os.path.join(top, name))
        except OSError:
            pass
    return entries


def remove_new_entries(before, protected):
    for path in sorted(scratch_entries() - before):
        if any(p == path or p.startswith(path + "/") for p in protected):
            continue
        subprocess.run(["rm", "-rf", "--one-file-system", path], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    left = sorted(p for p in scratch_entries() - before
                  if not any(q == p or q.startswith(p + "/") for q in protected))
    if left:
        raise NotClean(f"cannot remove {', '.join(left[:8])}")


# --- modules and the display ------------------------------------------------

def modules():
    with open("/proc/modules") as f:
        return {line.split()[0] for line in f}


def unload_new_modules(before):
    new = modules() - before
    for _ in range(3):
        for name in sorted(new):
            subprocess.run(["modprobe", "-r", name], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        new = modules() - before
        if not new:
            return
    raise NotClean(f"modules that cannot be unloaded: {', '.join(sorted(new))}")


def display_driver(node):
    name = os.path.basename(node)
    cls = "drm" if name.startswith("card") else "graphics"
    try:
        return os.path.basename(os.readlink(f"/sys/class/{cls}/{name}/device/driver"))
    except OSError:
        return None


def display_ok():
    return all(os.path.exists(n) and display_driver(n) == DISPLAY_DRIVER for n in DISPLAY_NODES)


def load_missing_modules(before):
    for name in sorted(before - modules()):
        subprocess.run(["modprobe", name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if before - modules():
        raise NotClean(f"modules that cannot be loaded again: {', '.join(sorted(before - modules()))}")


def restore_display(before_modules):
    if display_ok():
        return
    log("the display is not as it was: loading its driver again")
    with open("/sys/bus/pci/rescan", "w") as f:
        f.write("1")
    if DISPLAY_MODULE in modules():
        subprocess.run(["modprobe", "-r", DISPLAY_MODULE], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    load_missing_modules(before_modules)
    deadline = time.monotonic() + DISPLAY_WAIT_SECS
    while not display_ok():
        if time.monotonic() >= deadline:
            found = {n: display_driver(n) for n in DISPLAY_NODES}
            raise NotClean(f"the display did not come back: {found}")
        time.sleep(0.1)


# --- the group ---------------------------------------------------------------

class Snapshot:
    def __init__(self):
        self.processes = processes()
        self.mount_ids = {mid for mid, _ in mounts()}
        self.mount_points = [point for _, point in mounts()]
        self.scratch = scratch_entries()
        self.modules = modules()

    def restore(self):
        kill_leftovers(self.processes)
        unmount_new(self.mount_ids)
        remove_new_entries(self.scratch, self.mount_points)
        unload_new_modules(self.modules)
        load_missing_modules(self.modules)
        restore_display(self.modules)


def main(files):
    if not files:
        print("usage: run_group.py FILE...", file=sys.stderr)
        return 2
    snapshot = Snapshot()
    results = []
    not_run = []
    clean = True
    for i, path in enumerate(files):
        print(f"### {path}", flush=True)
        start = time.monotonic()
        script, _, tests = path.partition(":")
        argv = [sys.executable, script] + [t for t in tests.split(",") if t]
        status = subprocess.run(argv, stdin=subprocess.DEVNULL).returncode
        results.append((path, status, time.monotonic() - start))
        try:
            snapshot.restore()
        except NotClean as e:
            log(f"after {path}: {e}; the files after it are not run")
            clean = False
            not_run = files[i + 1:]
            break
    print("### summary", flush=True)
    for path, status, took in results:
        word = "ok" if status == 0 else "skipped" if status == EXIT_SKIP else f"FAILED ({status})"
        print(f"  {os.path.basename(path):36} {word:12} {took:6.0f} s", flush=True)
    for path in not_run:
        print(f"  {os.path.basename(path):36} not run (the guest could not be put back)", flush=True)
    if not clean or any(status not in (0, EXIT_SKIP) for _, status, _ in results):
        return 1
    if any(status == EXIT_SKIP for _, status, _ in results):
        return EXIT_SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
