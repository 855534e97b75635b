#!/usr/bin/python3
"""Guest side of the input latency benchmark (run by bench/run through vm-run).

Sets up six identical uinput keyboards and the six paths, runs
input-latency over all of them interleaved, then profiles the forwarders
(devnsd, interception-tools' interception | uinput, input-relay and
cuse-relay) with perf stat and strace while each alone carries events. Writes
DIR/input-latency.json and the raw samples and profiler outputs next to it.

Usage: input_latency_guest.py --bin PATH --relay PATH --cuse-relay PATH --out DIR
                              [--samples N] [--warmup N] [--gap-us N]
                              [--profile-samples N]
"""

import argparse
import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.environ["DEVNS_SOURCE_DIR"], "tests", "vm", "guest"))

import evdev  # noqa: E402
from evdev import ecodes as e  # noqa: E402

import devnsrig as rig  # noqa: E402
import forwarders  # noqa: E402

PATHS = ("direct", "devnsd", "interception", "relay", "cuse", "cuse-epoll")


def log(msg):
    print("bench: " + msg, flush=True)


def make_keyboard(tag):
    caps = {e.EV_KEY: [e.KEY_A, e.KEY_B, e.KEY_LEFTSHIFT, e.KEY_ENTER], e.EV_MSC: [e.MSC_SCAN]}
    return evdev.UInput(caps, name="devns bench keyboard " + tag, vendor=0x1234, product=0x5678,
                        version=0x0101, bustype=e.BUS_USB)


def event_nodes():
    return set(glob.glob("/dev/input/event*"))


def node_name(path):
    base = os.path.basename(path)
    try:
        with open("/sys/class/input/%s/device/name" % base) as f:
            return f.read().strip()
    except OSError:
        return "?"


def interception_binary():
    for name in ("intercept", "interception"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("interception-tools is not installed (neither intercept nor interception found)")


class Pipeline:
    """interception -g HW | uinput -d HW, and the mirror device it creates."""

    def __init__(self, hw):
        before = event_nodes()
        self.tool = interception_binary()
        self.intercept = subprocess.Popen([self.tool, "-g", hw], stdout=subprocess.PIPE)
        self.uinput = subprocess.Popen(["uinput", "-d", hw], stdin=self.intercept.stdout)
        self.intercept.stdout.close()
        self.mirror = None
        for _ in range(400):
            new = sorted(event_nodes() - before)
            if new:
                self.mirror = new[0]
                break
            if self.intercept.poll() is not None or self.uinput.poll() is not None:
                break
            time.sleep(0.05)
        if not self.mirror:
            self.stop()
            raise RuntimeError("the interception pipeline made no mirror device")

    def pids(self):
        return [self.intercept.pid, self.uinput.pid]

    def stop(self):
        for p in (self.intercept, self.uinput):
            if p.poll() is None:
                p.terminate()
        for p in (self.intercept, self.uinput):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def parse_stats(text):
    stats = {}
    for line in text.splitlines():
        if not line.startswith("path="):
            continue
        fields = dict(word.split("=", 1) for word in line.split())
        name = fields.pop("path")
        stats[name] = {k: (v if k == "mode" else int(float(v))) for k, v in fields.items()}
    return stats


def measure(args, specs, fds, mode, samples, warmup, raw, prefix=()):
    cmd = list(prefix) + [args.bin, "--mode", mode, "--samples", str(samples), "--warmup", str(warmup),
           "--gap-us", str(args.gap_us), "--raw", raw] + specs
    log("running " + " ".join(cmd))
    t = time.monotonic()
    p = subprocess.run(cmd, pass_fds=fds, stdout=subprocess.PIPE, universal_newlines=True)
    sys.stdout.write(p.stdout)
    if p.returncode != 0:
        raise RuntimeError("input-latency failed with status %d" % p.returncode)
    log("%s mode took %.1f s" % (mode, time.monotonic() - t))
    return parse_stats(p.stdout)


def perf_stat(pids, out):
    """perf stat on the forwarders for as long as the command after it runs."""
    return ["perf", "stat", "-x", ",", "-o", out, "-e", "task-clock,context-switches,cpu-migrations,page-faults",
            "-p", ",".join(str(p) for p in pids), "--"]


def perf_record(pids, out):
    return ["perf", "record", "-q", "-e", "cpu-clock", "-F", "5000", "-g", "-o", out,
            "-p", ",".join(str(p) for p in pids), "--"]


def perf_report(data, out):
    """Where the sampled CPU time went, by process, shared object and symbol (self time)."""
    with open(out, "w") as f:
        subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none",
                        "--sort", "comm,dso,sym", "--percent-limit", "0.5"], stdout=f, stderr=subprocess.STDOUT)
    rows = []
    with open(out) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0].endswith("%") and not line.startswith("#"):
                rows.append({"percent": float(parts[0].rstrip("%")), "comm": parts[1], "dso": parts[2],
                             "symbol": " ".join(parts[4:])})
    return rows


def traced(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1]) != 0
    except OSError:
        pass
    return False


class Strace:
    """strace attached to running processes for the duration of a with block."""

    def __init__(self, pids, out, count):
        self.pids = pids
        self.argv = ["strace", "-f", "-o", out] + (["-c", "-S", "calls"] if count else ["-ttt", "-T"])
        for p in pids:
            self.argv += ["-p", str(p)]

    def __enter__(self):
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not all(traced(p) for p in self.pids):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("strace did not attach")
            time.sleep(0.05)
        time.sleep(0.2)
        return self

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return False


def read_perf_stat(path):
    values = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) >= 3 and parts[2] and not line.startswith("#"):
                    try:
                        values[parts[2]] = float(parts[0])
                    except ValueError:
                        values[parts[2]] = None
    except OSError:
        pass
    return values


def read_strace_count(path):
    """Rows of strace -c: {syscall: (calls, errors, seconds)}."""
    rows = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 5 or not parts[0][0].isdigit() or parts[-1] == "total":
                    continue
                seconds, calls = float(parts[1]), int(parts[3])
                errors = int(parts[4]) if len(parts) == 6 else 0
                rows[parts[-1]] = (calls, errors, seconds)
    except OSError:
        pass
    return rows


def tool_version(pkg):
    p = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, universal_newlines=True)
    return p.stdout.strip() or "?"


def guest_facts():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return {
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "mem_mib": mem_kib // 1024,
        "clocksource": open("/sys/devices/system/clocksource/clocksource0/current_clocksource").read().strip(),
        "libfuse3": tool_version("libfuse3-3"),
        "libevdev": tool_version("libevdev2"),
        "interception_tools": tool_version("interception-tools"),
    }


def profile(args, res, specs_by_name, fds_by_name, devnsd_pid, pipeline, relay, cuse, cuse_epoll):
    """Each forwarding path alone under perf stat, perf record, strace -c, then a short trace."""
    n = args.profile_samples
    targets = {"devnsd": [devnsd_pid], "interception": pipeline.pids(), "relay": relay.pids(),
               "cuse": cuse.pids(), "cuse-epoll": cuse_epoll.pids()}
    for name, pids in targets.items():
        spec, fds = [specs_by_name[name]], [fds_by_name[name]]
        entry = {"samples": n, "events_per_sample": 2}
        raw = os.path.join(args.out, "raw-profile-%s.txt" % name)
        out = os.path.join(args.out, "perf-stat-%s.txt" % name)
        try:
            measure(args, spec, fds, "blocked", n, 0, raw, prefix=perf_stat(pids, out))
            entry["perf_stat"] = read_perf_stat(out)
        except (RuntimeError, OSError) as err:
            entry["perf_stat_error"] = str(err)
        out = os.path.join(args.out, "perf-%s.data" % name)
        try:
            measure(args, spec, fds, "blocked", n, 0, raw, prefix=perf_record(pids, out))
            entry["perf_report"] = perf_report(out, os.path.join(args.out, "perf-report-%s.txt" % name))
        except (RuntimeError, OSError) as err:
            entry["perf_record_error"] = str(err)
        out = os.path.join(args.out, "strace-c-%s.txt" % name)
        try:
            with Strace(pids, out, count=True):
                entry["under_strace"] = measure(args, spec, fds, "blocked", n, 0, raw)[name]
            entry["strace_c"] = read_strace_count(out)
        except (RuntimeError, OSError) as err:
            entry["strace_error"] = str(err)
        try:
            with Strace(pids, os.path.join(args.out, "strace-trace-%s.txt" % name), count=False):
                measure(args, spec, fds, "blocked", 4, 0, raw)
        except (RuntimeError, OSError) as err:
            entry["trace_error"] = str(err)
        res["profile"][name] = entry


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--relay", required=True)
    ap.add_argument("--cuse-relay", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--gap-us", type=int, default=1000)
    ap.add_argument("--inline-samples", type=int, default=1000)
    ap.add_argument("--epoll-samples", type=int, default=1000)
    ap.add_argument("--profile-samples", type=int, default=500)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    res = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "guest": guest_facts(),
           "params": {"samples": args.samples, "warmup": args.warmup, "gap_us": args.gap_us,
                      "inline_samples": args.inline_samples, "epoll_samples": args.epoll_samples,
                      "profile_samples": args.profile_samples},
           "profile": {}}
    cost = subprocess.run([args.bin, "--syscall-cost"], stdout=subprocess.PIPE, universal_newlines=True,
                          check=True).stdout.split()
    res["guest"]["syscall_cost_ns"] = {k: int(v) for k, v in (w.split("=") for w in cost[1:])}
    kbds = {name: make_keyboard(name) for name in PATHS}
    hw = {name: rig.event_node(kbd) for name, kbd in kbds.items()}
    bus = rig.Bus()
    daemon = None
    pipeline = None
    relay_out = make_keyboard("relay out")
    relay = None
    cuse = None
    cuse_epoll = None
    try:
        daemon = rig.Daemon(rig.conf_for([hw["devnsd"]], personas=("work", "personal"), active="work"))
        pipeline = Pipeline(hw["interception"])
        relay = forwarders.input_relay(args.relay, hw["relay"], relay_out.fd, rig.event_node(relay_out))
        cuse = forwarders.cuse_relay(args.cuse_relay, hw["cuse"], "devns-bench-relay")
        cuse_epoll = forwarders.cuse_relay(args.cuse_relay, hw["cuse-epoll"], "devns-bench-relay-epoll", epoll=True)
        nodes = {
            "direct": hw["direct"],
            "devnsd": rig.persona_node("work", hw["devnsd"]),
            "interception": pipeline.mirror,
            "relay": relay.node,
            "cuse": cuse.node,
            "cuse-epoll": cuse_epoll.node,
        }
        served = ("devnsd", "cuse", "cuse-epoll")  # CUSE nodes: no name in /sys/class/input
        res["nodes"] = {name: {"uinput_node": hw[name], "read_from": nodes[name],
                               "read_from_name": name if name in served else node_name(nodes[name])}
                        for name in PATHS}
        res["interception_command"] = "%s -g %s | uinput -d %s" % (
            os.path.basename(pipeline.tool), hw["interception"], hw["interception"])
        for name in PATHS:
            log("%-12s write %s -> read %s" % (name, hw[name], nodes[name]))
        fds_by_name = {name: kbds[name].fd for name in PATHS}
        specs_by_name = {name: "%s:%d:%s" % (name, kbds[name].fd, nodes[name]) for name in PATHS}
        specs = [specs_by_name[n] for n in PATHS]
        fds = list(fds_by_name.values())

        res["blocked"] = measure(args, specs, fds, "blocked", args.samples, args.warmup,
                                 os.path.join(args.out, "raw-blocked.txt"))
        if args.epoll_samples > 0:
            res["epoll"] = measure(args, specs, fds, "epoll", args.epoll_samples, args.warmup // 3,
                                   os.path.join(args.out, "raw-epoll.txt"))
        if args.inline_samples > 0:
            res["inline"] = measure(args, specs, fds, "inline", args.inline_samples, args.warmup // 3,
                                    os.path.join(args.out, "raw-inline.txt"))
        if args.profile_samples > 0:
            profile(args, res, specs_by_name, fds_by_name, daemon.proc.pid, pipeline, relay, cuse, cuse_epoll)
        if not daemon.alive():
            raise RuntimeError("devnsd died during the benchmark:\n" + daemon.output())
    finally:
        for fwd in (cuse_epoll, cuse, relay):
            if fwd:
                fwd.stop()
        relay_out.close()
        if pipeline:
            pipeline.stop()
        if daemon:
            daemon.stop()
        bus.stop()
        for kbd in kbds.values():
            kbd.close()
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with open(os.path.join(args.out, "input-latency.json"), "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    log("results in " + os.path.join(args.out, "input-latency.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
