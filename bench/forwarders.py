"""The leanest forwarders, bench/input-relay.c and bench/cuse-relay.c: built on
the host by the benchmarks that use them, started and stopped in the guest.
Nothing here imports what only the guest has."""

import os
import subprocess
import time

HERE = os.path.dirname(os.path.realpath(__file__))


def _run(cmd):
    subprocess.run(cmd, check=True)


def build(cc, outdir, run=_run):
    """Compiles both into outdir with run (which raises on failure); returns (input-relay, cuse-relay)."""
    relay = os.path.join(outdir, "input-relay")
    cuse = os.path.join(outdir, "cuse-relay")
    fuse = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], stdout=subprocess.PIPE,
                          universal_newlines=True, check=True).stdout.split()
    run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", relay, os.path.join(HERE, "input-relay.c")])
    run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", cuse,
         os.path.join(HERE, "cuse-relay.c")] + fuse)
    return relay, cuse


def stop_process(p):
    if p.poll() is None:
        p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class Forwarder:
    """A forwarder's process, started once it printed "ready" and its output node exists."""

    def __init__(self, argv, node, pass_fds=()):
        self.node = node
        self.proc = subprocess.Popen(argv, pass_fds=pass_fds, stdout=subprocess.PIPE, universal_newlines=True)
        ok = self.proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while ok and not os.path.exists(node) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not ok or not os.path.exists(node):
            self.stop()
            raise RuntimeError("%s did not start" % os.path.basename(argv[0]))

    def pids(self):
        return [self.proc.pid]

    def stop(self):
        stop_process(self.proc)


def input_relay(binary, source, out_fd, out_node):
    """input-relay SOURCE OUT_FD: one blocking read() of source, one write() into the uinput device
    behind out_fd, whose node is out_node."""
    return Forwarder([binary, source, str(out_fd)], out_node, pass_fds=[out_fd])


def cuse_relay(binary, source, name, epoll=False):
    """cuse-relay SOURCE NAME: one blocking read() of source, answered to the read parked on
    /dev/NAME; with epoll, one thread waiting in epoll_wait() on both."""
    return Forwarder([binary] + (["--epoll"] if epoll else []) + [source, name], "/dev/" + name)
