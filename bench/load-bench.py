#!/usr/bin/python3
"""Input load benchmark: a flood of input through devnsd to 32 personas that
take turns being active, against the kernel delivering the same flood to a
direct reader, in one QEMU guest run; then the same flood through the leanest
userspace forwarders (bench/input-relay.c through uinput, bench/cuse-relay.c
through CUSE), the floor of any broker. Writes the "## Input under load"
section of bench/RESULTS.md.

Usage: bench/load-bench.py [--rates N,M] [--seconds N] [--switch-ms N] [--personas N] [--devnsd-nice N]
                           [--smp N] [--no-floors] [--no-write]
(run from the source tree after `ninja -C build`; needs the VM rig of tests/vm)."""

import argparse
import datetime
import os
import subprocess
import sys
import threading
import time

import forwarders
from importlib import import_module

fbbench = import_module("fb-bench")

HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.dirname(HERE)
BUILD = os.environ.get("DEVNS_BUILD", os.path.join(TOP, "build"))
BIN = os.environ.get("DEVNS_LOAD_BENCH") or os.path.join(BUILD, "bench-load", "load-bench")
# Where forwarders.build() puts them beside BIN.
RELAY = os.path.join(os.path.dirname(BIN), "input-relay")
CUSE_RELAY = os.path.join(os.path.dirname(BIN), "cuse-relay")
SECTION = "## Input under load"


def compile_bench():
    os.makedirs(os.path.dirname(BIN), exist_ok=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libsystemd"], capture_output=True, text=True,
                           check=True).stdout.split()
    subprocess.run(["cc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-pthread", "-o", BIN, os.path.join(HERE, "load-bench.c")] + flags,
                   check=True)
    forwarders.build("cc", os.path.dirname(BIN))


def proc_stat(pid):
    """CPU time in ms and the resident set in KiB of a process so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    rss = None
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return cpu, rss


def make_device(tag):
    """A touchscreen with ten slots and MSC_SCAN: the kernel gives its readers 512-event buffers."""
    import evdev
    from evdev import ecodes as e

    def axis(lo, hi):
        return evdev.AbsInfo(value=0, min=lo, max=hi, fuzz=0, flat=0, resolution=0)

    caps = {
        e.EV_KEY: [e.BTN_TOUCH],
        e.EV_MSC: [e.MSC_SCAN],
        e.EV_ABS: [(e.ABS_X, axis(0, 1279)), (e.ABS_Y, axis(0, 799)), (e.ABS_MT_SLOT, axis(0, 9)),
                   (e.ABS_MT_TRACKING_ID, axis(0, 65535)), (e.ABS_MT_POSITION_X, axis(0, 1279)),
                   (e.ABS_MT_POSITION_Y, axis(0, 799))],
    }
    return evdev.UInput(caps, name="devns load bench " + tag, vendor=0x4444, product=0x5555,
                        bustype=e.BUS_VIRTUAL, input_props=[e.INPUT_PROP_DIRECT])


def guest(args):
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig

    res = {}
    bus = rig.Bus()
    try:
        for rate in args.rates:
            for k, v in flood(rig, args, rate).items():
                res["r%d_%s" % (rate, k)] = v
            for kind in FLOORS if args.floors else ():
                for k, v in flood_relay(args, rate, kind).items():
                    res["r%d_%s_%s" % (rate, kind, k)] = v
    finally:
        bus.stop()
    for k, v in sorted(res.items()):
        print("RESULT %s %s" % (k, v))
    return 0


def flood(rig, args, rate):
    """One run at one rate, with a devnsd of its own."""
    devs = {name: make_device(name) for name in ("devns", "direct")}
    hw = {name: rig.event_node(dev) for name, dev in devs.items()}
    personas = ["p%02d" % i for i in range(args.personas)]
    daemon = rig.Daemon(rig.conf_for([hw["devns"]], personas=personas, active=personas[0]))
    res = {}
    try:
        pid = daemon.proc.pid
        if args.devnsd_nice:
            # Its event loop's thread, as a unit's Nice= would set it.
            os.setpriority(os.PRIO_PROCESS, pid, args.devnsd_nice)
        nodes = ["%s:%s" % (p, rig.persona_node(p, hw["devns"])) for p in personas]
        cmd = [BIN, "--rate", str(rate), "--seconds", str(args.seconds), "--switch-ms", str(args.switch_ms),
               "--devns-uinput", str(devs["devns"].fd), "--direct-uinput", str(devs["direct"].fd),
               "--direct", hw["direct"], "--stalled", rig.persona_node(personas[-1], hw["devns"])]
        # The spinners take the second persona's node, in the background except while the switches show it.
        cmd += ["--spin=" + rig.persona_node(personas[1], hw["devns"])] * args.spinners + nodes
        samples = []
        done = threading.Event()

        def sample():
            while not done.is_set():
                samples.append((time.monotonic(),) + proc_stat(pid))
                time.sleep(0.1)

        cpu0, rss0 = proc_stat(pid)
        sampler = threading.Thread(target=sample)
        sampler.start()
        t0 = time.monotonic()
        out = subprocess.run(cmd, pass_fds=[d.fd for d in devs.values()], capture_output=True, text=True)
        t1 = time.monotonic()
        done.set()
        sampler.join()
        cpu1, rss1 = proc_stat(pid)
        sys.stdout.write(out.stderr)
        if out.returncode != 0:
            raise RuntimeError("load-bench failed (%d): %s" % (out.returncode, out.stderr))
        for line in out.stdout.splitlines():
            k, v = line.split()
            res[k] = float(v)
        rss = [s[2] for s in samples]
        # The resident set over the run: at the start, the peak, and its trend over the second half.
        res["devnsd_rss_start_kib"] = rss0
        res["devnsd_rss_peak_kib"] = max(rss + [rss1])
        res["devnsd_rss_end_kib"] = rss1
        half = rss[len(rss) // 2:]
        res["devnsd_rss_second_half_growth_kib"] = (half[-1] - half[0]) if half else 0
        res["devnsd_cpu_ms"] = cpu1 - cpu0
        res["wall_s"] = t1 - t0
        res["devnsd_alive"] = 1.0 if daemon.alive() else 0.0
        # After the flood devnsd answers at once.
        t = time.monotonic()
        rig.devnsctl("list")
        res["devnsctl_after_s"] = time.monotonic() - t
    finally:
        daemon.stop()
        for dev in devs.values():
            dev.close()
    return res


# The floors: the same flood through the leanest forwarders, to one reader, no switching.
#   floor      input-relay: one blocking read(), one write() into a second uinput device
#   cusefloor  cuse-relay: one blocking read(), one reply to the read parked on its CUSE node
#   cuseloop   cuse-relay --epoll: the same, with one thread waiting on both in epoll_wait()
FLOORS = ("floor", "cusefloor", "cuseloop")
FLOOR_NAMES = {
    "floor": "`input-relay` (through uinput)",
    "cusefloor": "`cuse-relay` (a thread drains the device)",
    "cuseloop": "`cuse-relay --epoll` (one loop, as devnsd)",
}


def flood_relay(args, rate, kind):
    """The flood through one of the FLOORS: what one hop through userspace costs."""
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig

    devs = {name: make_device(name) for name in ("source", "direct", "out")}
    hw = {name: rig.event_node(dev) for name, dev in devs.items()}
    relay = None
    res = {}
    try:
        if kind == "floor":
            relay = forwarders.input_relay(RELAY, hw["source"], devs["out"].fd, hw["out"])
        else:
            relay = forwarders.cuse_relay(CUSE_RELAY, hw["source"], "devns-bench-relay", epoll=kind == "cuseloop")
        node = relay.node
        cmd = [BIN, "--rate", str(rate), "--seconds", str(args.seconds), "--switch-ms", "0",
               "--devns-uinput", str(devs["source"].fd), "--direct-uinput", str(devs["direct"].fd),
               "--direct", hw["direct"], "--stalled", node, "relay:" + node]
        cpu0, _ = proc_stat(relay.proc.pid)
        out = subprocess.run(cmd, pass_fds=[devs["source"].fd, devs["direct"].fd], capture_output=True, text=True)
        cpu1, _ = proc_stat(relay.proc.pid)
        sys.stdout.write(out.stderr)
        if out.returncode != 0:
            raise RuntimeError("load-bench (%s) failed (%d): %s" % (kind, out.returncode, out.stderr))
        for line in out.stdout.splitlines():
            k, v = line.split()
            res[k.replace("devns_", "relay_")] = float(v)
        res["relay_cpu_ms"] = cpu1 - cpu0
    finally:
        if relay:
            relay.stop()
        for dev in devs.values():
            dev.close()
    return res


def floor_row(r, rate, kind):
    """A floor's row at one rate: path, then its reader's figures against the direct reader of the same run."""
    g = lambda k: r["r%d_%s_%s" % (rate, kind, k)]  # noqa: E731
    events = g("written") * 2
    pct = lambda k: "%d (%.1f%%)" % (g(k), 100 * g(k) / g("written"))  # noqa: E731
    return (FLOOR_NAMES[kind], pct("relay_lost"), pct("direct_lost"),
            "%d / %d" % (g("relay_dropped"), g("direct_dropped")),
            "%.0f / %.0f µs (%.2f×)" % (g("relay_p50_us"), g("direct_p50_us"),
                                       g("relay_p50_us") / max(g("direct_p50_us"), 1)),
            "%.0f / %.0f µs (%.2f×)" % (g("relay_p99_us"), g("direct_p99_us"),
                                       g("relay_p99_us") / max(g("direct_p99_us"), 1)),
            "%.2f ms" % (g("relay_cpu_ms") * 1000 / events))


def git_describe():
    rev = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "-C", TOP, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!bench/RESULTS.md"], capture_output=True, text=True).stdout
    return rev.strip() + (" (with uncommitted changes)" if dirty.strip() else "")


def rows_for(r, rate, args):
    """Table rows for the run at one rate: (measurement, devns, kernel, target, met)."""
    g = lambda k: r["r%d_%s" % (rate, k)]  # noqa: E731
    events = g("written") * 2
    per_k = lambda ms: ms * 1000 / events  # noqa: E731  CPU ms per 1000 events
    devns_cpu = g("devnsd_cpu_ms") + g("devns_reader_cpu_ms")
    yes = lambda ok: "**yes**" if ok else "**no**"  # noqa: E731
    target = rate == max(args.rates)
    return [
        ("events written, achieved rate", "%d, %.0f /s" % (events, g("events_per_s")), "the same",
         "%d /s" % rate, yes(g("events_per_s") >= 0.95 * rate)),
        ("packets lost (read by nobody)", "%d (%.1f%%)" % (g("devns_lost"), 100 * g("devns_lost") / g("written")),
         "%d (%.1f%%)" % (g("direct_lost"), 100 * g("direct_lost") / g("written")), "0", yes(g("devns_lost") == 0)),
        ("packets read twice", "%d" % g("devns_duplicated"), "%d" % g("direct_duplicated"), "0",
         yes(g("devns_duplicated") == 0)),
        ("SYN_DROPPED seen by the readers", "%d" % g("devns_dropped"), "%d" % g("direct_dropped"), "-", "-"),
        ("latency p50", "%.0f µs (%.2f×)" % (g("devns_p50_us"), g("devns_p50_us") / max(g("direct_p50_us"), 1)),
         "%.0f µs" % g("direct_p50_us"), "-", "-"),
        ("latency p99", "%.0f µs (%.2f×)" % (g("devns_p99_us"), g("devns_p99_us") / max(g("direct_p99_us"), 1)),
         "%.0f µs" % g("direct_p99_us"), "≤ 2.5×" if target else "-",
         yes(g("devns_p99_us") <= 2.5 * g("direct_p99_us")) if target else "-"),
        ("CPU per 1,000 events: devnsd and the persona readers, against the direct reader",
         "%.2f ms (%.1f×)" % (per_k(devns_cpu), devns_cpu / max(g("direct_reader_cpu_ms"), 0.001)),
         "%.2f ms" % per_k(g("direct_reader_cpu_ms")), "-", "-"),
        ("CPU per 1,000 events: devnsd alone", "%.2f ms" % per_k(g("devnsd_cpu_ms")), "", "-", "-"),
        ("devnsd resident set: start, peak, end", "%d, %d, %d KiB" % (
            g("devnsd_rss_start_kib"), g("devnsd_rss_peak_kib"), g("devnsd_rss_end_kib")), "", "flat",
         yes(g("devnsd_rss_second_half_growth_kib") <= 64)),
        ("switches (failed)", "%d (%d)" % (g("switches"), g("switch_failures")), "",
         "one every %d ms" % args.switch_ms if args.switch_ms else "none", "-"),
        ("`SwitchTo` answered in: mean, slowest", "%.1f ms, %.1f ms" % (
            g("switch_avg_us") / 1000, g("switch_max_us") / 1000) if g("switches") else "-", "", "-", "-"),
        ("devnsd answers `devnsctl list` after the flood", "in %.2f s" % g("devnsctl_after_s"), "", "-", "-"),
    ] + ([("hostile reads of the second persona's node answered", "%d (%.0f /s)" % (
        g("spin_reads"), g("spin_reads") / max(g("wall_s"), 0.001)), "", "-", "-")] if g("spinners") else [])


def report(r, args):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        SECTION, "",
        "Run of %s, devns %s, written by `bench/load-bench.py` (rerun: `ninja -C build && bench/load-bench.py`)." % (
            now, git_describe()),
        "",
        "One QEMU guest (TCG, `-smp %d`%s). Two identical uinput touchscreens (ten slots, so the kernel gives each "
        "reader a 512-event buffer): devnsd owns one and serves it to %d personas, the other is read "
        "directly from its own `/dev/input/eventN`. Every millisecond `bench/load-bench.c` writes the "
        "same packets (`EV_MSC MSC_SCAN` carrying a sequence number, then `SYN_REPORT`) to both "
        "devices in one `write()` each, for %d s at each rate below (`SYN_REPORT` counted as an event); "
        "a late writer catches up without sleeping. Each persona node has a reader thread that waits in "
        "`poll()` with no timeout, as programs do, and reads 512 events at a time as fast as it can; one "
        "more file on the last persona's node is opened and never read. %s Each packet goes to the persona active when devnsd forwards it: the readers together "
        "must see every sequence number once. Latency runs from the tick's `write()` to the `read()` that "
        "returned the packet. Each rate gets a devnsd of its own.%s" % (
            args.smp, ", devnsd's event loop at nice %d" % args.devnsd_nice if args.devnsd_nice else "",
            args.personas, args.seconds,
            "`SwitchTo` over D-Bus every %d ms goes round all personas, so every reader is the active one in "
            "turn." % args.switch_ms if args.switch_ms else "No switches: the first persona stays active.",
            " Meanwhile %d hostile threads read the second persona's node non-blocking in a loop, each read "
            "a request devnsd answers (EAGAIN while that persona is in the background)." % args.spinners
            if args.spinners else ""),
        "",
        "**Absolute times are meaningless** under TCG; compare paths of the same run. The writer's own CPU "
        "(the kernel's input core runs in its `write()`, for both devices alike) is in neither column. "
        "\"Flat\" means devnsd's resident set grew by at most 64 KiB over the second half of the run.",
    ]
    for rate in args.rates:
        lines += ["", "### %d events a second" % rate, "",
                  "| measurement | devns (persona readers) | kernel (direct reader) | target | met? |",
                  "|---|---:|---:|---|---|"]
        lines += ["| %s | %s | %s | %s | %s |" % row for row in rows_for(r, rate, args)]
        if all("r%d_%s_written" % (rate, kind) in r for kind in FLOORS):
            lines += ["", "The floors at %d events a second: the same flood, with no personas and no switching, "
                      "to one reader through the leanest forwarders, each in a run of its own with a direct "
                      "reader of its own: `bench/input-relay.c` (a blocking `read()` of up to 512 events, then "
                      "one `write()` into a second uinput touchscreen, whose node the reader reads) and "
                      "`bench/cuse-relay.c` (the same `read()`, answered to the read request parked on its "
                      "CUSE node, as devnsd answers; with `--epoll` one thread waits on the device and the "
                      "CUSE channel together). What one hop through userspace costs before any broker's "
                      "work. Each cell: the forwarder's reader / the direct reader." % rate, "",
                      "| forwarder | packets lost by its reader | by the direct reader | SYN_DROPPED "
                      "| latency p50 | latency p99 | forwarder's CPU per 1,000 events |",
                      "|---|---:|---:|---:|---:|---:|---:|"]
            lines += ["| %s | %s | %s | %s | %s | %s | %s |" % floor_row(r, rate, kind) for kind in FLOORS]
    lines += [
        "",
        "Raw figures: " + ", ".join("%s=%s" % (k, ("%.1f" % v) if isinstance(v, float) else v)
                                    for k, v in sorted(r.items())),
        "",
    ]
    return "\n".join(lines)


def write_section(text):
    path = os.path.join(HERE, "RESULTS.md")
    with open(path) as f:
        content = f.read()
    start = content.find(SECTION + "\n")
    if start < 0:
        content = content.rstrip("\n") + "\n\n" + text
    else:
        end = content.find("\n## ", start + len(SECTION))
        content = content[:start] + text + ("\n" + content[end + 1:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(content)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="100000,10000", help="events a second, comma-separated")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--switch-ms", type=int, default=100)
    ap.add_argument("--personas", type=int, default=32)
    ap.add_argument("--devnsd-nice", type=int, default=0, help="nice value of devnsd's event loop")
    ap.add_argument("--smp", type=int, default=2, help="the guest's virtual CPUs")
    ap.add_argument("--spinners", type=int, default=0,
                    help="hostile threads reading the second persona's node non-blocking in a loop")
    ap.add_argument("--no-floors", dest="floors", action="store_false",
                    help="skip the runs through input-relay and cuse-relay")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.rates = [int(x) for x in args.rates.split(",")]
    if min(args.rates) < 2000:
        # The writer sends rate / 2 events a millisecond on each of its two devices.
        ap.error("--rates: at least 2000 events a second")
    if args.guest:
        return guest(args)
    compile_bench()
    res = fbbench.in_guest(
        ["--timeout", "600", "--smp", str(args.smp), "--env", "DEVNS_LOAD_BENCH=" + BIN], os.path.realpath(__file__),
        ["--rates", ",".join(map(str, args.rates)), "--seconds", str(args.seconds), "--switch-ms", str(args.switch_ms),
         "--personas", str(args.personas), "--devnsd-nice", str(args.devnsd_nice), "--spinners", str(args.spinners)]
        + ([] if args.floors else ["--no-floors"]))
    if not res:
        return 1
    text = report(res, args)
    if not args.no_write:
        write_section(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
