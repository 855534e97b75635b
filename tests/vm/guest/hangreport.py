"""Where a stuck VM test waits: its own Python threads, every guest process's
kernel wait, and devnsd's threads as gdb sees them.

report() prints it all to stderr. Each line that sums it up starts with
"devns-hang:", so that scripts/test can show those lines at the end of its
output. watch_file() makes the test file print the report and exit before
vm-run's timeout kills the guest with nothing said, after
DEVNS_HANG_SECONDS (tests/vm/meson.build sets it)."""

import faulthandler
import os
import re
import shutil
import subprocess
import sys
import threading
import unittest

# Set by the meson tests, under vm-run's 900 s there: the boot and the
# report itself fit in what is left. Unset (the bench, a test run by hand):
# no limit.
FILE_SECONDS = int(os.environ.get("DEVNS_HANG_SECONDS", "0") or 0)
TAG = "devns-hang:"
GDB_SECONDS = 90


def _say(line):
    print(TAG, line, file=sys.stderr, flush=True)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as err:
        return "(%s)" % err.strerror


def _test_and_line():
    """The test the main thread runs, and the line of a test file it is at."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    test, where = None, None
    while frame is not None:
        code = frame.f_code
        name = os.path.basename(code.co_filename)
        if where is None and name.startswith("test_"):
            where = "%s:%d (%s)" % (name, frame.f_lineno, code.co_name)
        this = frame.f_locals.get("self")
        if test is None and isinstance(this, unittest.TestCase):
            test = this.id()
        frame = frame.f_back
    return test or "(no test)", where or "(outside the test files)"


def _processes():
    """(pid, comm, state, wchan) of every process of the guest."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read("/proc/%s/stat" % entry)
        m = re.match(r"\d+ \((.*)\) (\S)", stat)
        if not m:
            continue
        found.append((int(entry), m.group(1), m.group(2), _read("/proc/%s/wchan" % entry)))
    return sorted(found)


def _devnsd_threads(pid):
    """Each thread of devnsd with its kernel stack."""
    for tid in sorted(os.listdir("/proc/%d/task" % pid), key=int):
        base = "/proc/%d/task/%s" % (pid, tid)
        print("  thread %s %s wchan %s\n%s" % (tid, _read(base + "/comm"), _read(base + "/wchan"),
                                              "\n".join("    " + l for l in _read(base + "/stack").splitlines())),
              file=sys.stderr)


def _gdb_frames(pid):
    """gdb's backtrace of every thread of pid; sums up where each thread is in devns's sources."""
    gdb = shutil.which("gdb")
    if not gdb:
        _say("devnsd %d: no gdb in the guest for its backtraces" % pid)
        return
    try:
        out = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                              "-ex", "thread apply all bt"],
                             capture_output=True, text=True, timeout=GDB_SECONDS).stdout
    except subprocess.TimeoutExpired:
        _say("devnsd %d: gdb took more than %d s" % (pid, GDB_SECONDS))
        return
    print(out, file=sys.stderr)
    thread = None
    for line in out.splitlines():
        m = re.match(r"Thread \S+ \(.*LWP (\d+)", line)
        if m:
            thread = m.group(1)
            continue
        m = re.match(r"#(\d+)\s+(?:0x\S+ in )?(\S+) .* at (\S*/src/\S+)", line)
        if thread and m:
            _say("devnsd %d thread %s: #%s %s at %s" % (pid, thread, m.group(1), m.group(2),
                                                        m.group(3).split("/src/")[-1]))
            thread = None


def report(why):
    """Prints where everything waits, and why it was asked."""
    test, where = _test_and_line()
    _say("%s: %s, at %s" % (why, test, where))
    print("--- Python threads of the test", file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    print("--- guest processes (pid comm state wchan)", file=sys.stderr)
    daemons = []
    for pid, comm, state, wchan in _processes():
        print("  %d %s %s %s" % (pid, comm, state, wchan), file=sys.stderr)
        if comm == "devnsd" or comm.startswith("devnsd"):
            daemons.append(pid)
        elif state == "D" or "fuse" in wchan or "request_wait" in wchan:
            _say("%d %s waits in the kernel at %s (%s)" % (pid, comm, wchan, state))
            print("\n".join("    " + l for l in _read("/proc/%d/stack" % pid).splitlines()), file=sys.stderr)
    for pid in daemons:
        print("--- devnsd %d" % pid, file=sys.stderr)
        _devnsd_threads(pid)
        _gdb_frames(pid)
    sys.stderr.flush()


def _file_stuck():
    report("the test file still runs after %d s" % FILE_SECONDS)
    os._exit(124)


def watch_file():
    """Reports and ends the test file once it has run for FILE_SECONDS (when set)."""
    if FILE_SECONDS <= 0:
        return None
    timer = threading.Timer(FILE_SECONDS, _file_stuck)
    timer.daemon = True
    timer.start()
    return timer
