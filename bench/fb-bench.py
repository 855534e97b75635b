#!/usr/bin/python3
"""Framebuffer benchmark: persona fb0 against the kernel's /dev/fb0 (bochs DRM
fbdev emulation), in one QEMU guest run. Writes its section of bench/RESULTS.md.

Usage: bench/fb-bench.py [--frames N] [--switches N] [--smp N] [--suite bookworm|trixie] [--no-write]
       bench/fb-bench.py --mapped ROUNDS [--profile] [--smp N] [--suite bookworm|trixie]
(run from the source tree after `ninja -C build`; needs the VM rig of tests/vm)."""

import argparse
import datetime
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
TOP = os.path.dirname(HERE)
BUILD = os.environ.get("DEVNS_BUILD", os.path.join(TOP, "build"))
BIN = os.environ.get("DEVNS_FB_BENCH") or os.path.join(BUILD, "bench-fb", "fb-bench")
SECTION = "## Framebuffer"
# The guest's kernel: vm-run's --suite (Debian 12's 6.1, Debian 13's 6.12).
SUITES = {"bookworm": "6.1", "trixie": "6.12"}


def compile_bench():
    os.makedirs(os.path.dirname(BIN), exist_ok=True)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libsystemd"], capture_output=True, text=True,
                           check=True).stdout.split()
    subprocess.run(["cc", "-std=c11", "-O2", "-D_GNU_SOURCE", "-I", os.path.join(TOP, "include"), "-o", BIN,
                    os.path.join(HERE, "fb-bench.c")] + flags, check=True)


def run(*args):
    out = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, check=True, env=os.environ).stdout
    return {k: float(v) for k, v in (line.split() for line in out.splitlines())}


def guest(frames, switches):
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig
    import fbrig

    res = {}
    # The kernel's own path while nothing else is DRM master: before devnsd runs and after, averaged.
    native = {"write": [], "mmap": [], "flip": [], "flip_drawn": []}

    def measure_native():
        native["write"].append(run("write", "/dev/fb0", frames)["write_us"])
        native["mmap"].append(run("mmap", "/dev/fb0", frames)["mmap_us"])
        native["flip"].append(native_flip(frames))
        native["flip_drawn"].append(native_flip(frames, redraw=True))

    measure_native()
    res["native_getvar"] = run("ioctl", "/dev/fb0", 200)["getvar_us"]

    bus = rig.Bus()
    personas = ["p%02d" % i for i in range(32)]
    devns = {"write": [], "write_preload": [], "mmap": []}

    def measure_devns(node):
        devns["write"].append(run("write", node, frames)["write_us"])
        os.environ["LD_PRELOAD"] = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
        try:
            devns["write_preload"].append(run("write", node, frames)["write_us"])
            devns["mmap"].append(run("mmap", node, frames)["mmap_us"])
        finally:
            del os.environ["LD_PRELOAD"]

    for count in (2, 32):
        daemon = rig.Daemon(fbrig.conf_display(personas=personas[:count], active="p00", track=True))
        try:
            idle = rig.pss_kib(daemon.proc.pid)
            m = re.search(r"(\d+) buffers", daemon.output())
            res["buffers_%d" % count] = float(m.group(1)) if m else 0.0
            if count == 2:
                node = fbrig.fb_node("p00")
                res["frame_bytes"] = run("write", node, 1)["frame_bytes"]
                calls = run("ioctl", node, 200)
                res["devns_getvar"], res["devns_tell"] = calls["getvar_us"], calls["tell_us"]
                measure_devns(node)
                res["switch_static_2"] = run("switch", switches, "static", "p00", "p01")["switch_us"]
                res["ping_2"] = run("ping", switches)["ping_us"]
                # The same round trip right after a background persona wrote a whole frame (untimed), as
                # a switch with a new frame comes right after one.
                rig.devnsctl("switch", "p00")
                res["ping_drawn_2"] = run("ping", switches, "p01")["ping_us"]
            res["switch_%d" % count] = run("switch", switches, "redraw", "p00", "p01")["switch_us"]
            if count == 32:
                res["ping_32"] = run("ping", switches)["ping_us"]
                # Unchanged frames, with another persona drawing a whole frame before each switch: what
                # the work before a switch costs it here, with nothing more to show.
                res["switch_busy_32"] = run("switch", switches, "busy", "p00", "p01", "p09")["switch_us"]
                # Every switch to the persona shown three switches before: the least recent of the three
                # frames the spares keep; then four before, which no spare keeps any more.
                res["switch_round4_32"] = run("switch", switches, "redraw", "p00", "p01", "p02", "p03")["switch_us"]
                res["switch_round5_32"] = run("switch", switches, "redraw", "p00", "p01", "p02", "p03",
                                              "p04")["switch_us"]
                res["switch_round4_static_32"] = run("switch", switches, "static", "p00", "p01", "p02",
                                                     "p03")["switch_us"]
                m = re.search(r"buffers of (\d+) KiB in all, (\d+) spares", daemon.output())
                res["video_memory_kib"] = float(m.group(1)) if m else 0.0
                res["spares"] = float(m.group(2)) if m else 0.0
            for name in personas[:count]:
                fd = os.open(fbrig.fb_node(name), os.O_RDWR)
                fbrig.write_all(fd, bytes([1]) * int(res["frame_bytes"]))
                os.close(fd)
            res["pss_idle_%d" % count] = idle
            res["pss_drawn_%d" % count] = rig.pss_kib(daemon.proc.pid)
            if count == 2:
                # A mapped frame, unchanged and with 40 rows changed every 16 ms: devnsd's CPU time and
                # the frames the display shows, over 3 s.
                for rows in (0, 40):
                    env = dict(os.environ, LD_PRELOAD=os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so"))
                    held = hold_mapped(rig, daemon, node, rows, 3.0, env)
                    for k in ("drawn_per_s", "cpu_ms_per_s", "frames_per_s", "wakeups_per_s"):
                        res["mapped_%d_%s" % (rows, k)] = held[k]
                # Again at the end, so that the host's drift weighs on both paths alike.
                measure_devns(node)
        finally:
            daemon.stop()
    # The same rounds of four with one spare, as devnsd kept before SpareFrames=: two of the three
    # personas shown before are copied back.
    daemon = rig.Daemon(fbrig.conf_display(personas=personas[:4], active="p00", track=True).replace(
        "[Display]", "[Display]\nSpareFrames=1", 1))
    try:
        res["switch_round4_static_1spare"] = run("switch", switches, "static", "p00", "p01", "p02",
                                                 "p03")["switch_us"]
        res["switch_round4_1spare"] = run("switch", switches, "redraw", "p00", "p01", "p02", "p03")["switch_us"]
    finally:
        daemon.stop()
    bus.stop()
    measure_native()
    for path, figures in (("native", native), ("devns", devns)):
        for kind, values in figures.items():
            for i, v in enumerate(values):
                res["%s_%s_%d" % (path, kind, i + 1)] = v
            res["%s_%s" % (path, kind)] = sum(values) / len(values)
            res["%s_%s_spread" % (path, kind)] = (max(values) - min(values)) / res["%s_%s" % (path, kind)]
    for k, v in sorted(res.items()):
        print("RESULT %s %s" % (k, v))


def main_thread_cpu_ms(pid):
    """CPU time so far of a process's main thread (its event loop), in ms."""
    with open("/proc/%d/task/%d/stat" % (pid, pid)) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def hold_mapped(rig, daemon, node, rows, seconds, env=None, profile=None):
    """`fb-bench hold` with rows changed every 16 ms, after a second of drawing measured for seconds:
    devnsd's CPU (all, its loop, its other threads) and wakeups a second, frames shown and drawn a
    second. With profile, a path: `perf record` of devnsd over the same seconds, afterwards."""
    holder = subprocess.Popen([BIN, "hold", node, str(int(1000 * (seconds + 2 + (seconds if profile else 0)))),
                               str(rows)], stdout=subprocess.PIPE, text=True, env=env)
    time.sleep(1.0)
    # The frame counter is asked over D-Bus outside the window that counts wakeups and CPU.
    shown0, ts0 = frames_shown_at(rig)
    pid = daemon.proc.pid
    wake0, cpu0, loop0, t0 = rig.sleeps(pid), rig.cpu_ms(pid), main_thread_cpu_ms(pid), time.monotonic()
    time.sleep(seconds)
    wake1, cpu1, loop1, t1 = rig.sleeps(pid), rig.cpu_ms(pid), main_thread_cpu_ms(pid), time.monotonic()
    shown1, ts1 = frames_shown_at(rig)
    if profile:
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-g", "-o", profile, "-p", str(pid),
                        "--", "sleep", str(seconds)], check=True)
    out = holder.communicate()[0]
    m = re.search(r"drawn_per_s ([\d.]+)", out)
    return {
        "drawn_per_s": float(m.group(1)) if m else 0.0,
        "cpu_ms_per_s": (cpu1 - cpu0) / (t1 - t0),
        "loop_ms_per_s": (loop1 - loop0) / (t1 - t0),
        # The process's time counts threads that ended meanwhile too.
        "threads_ms_per_s": max(0.0, (cpu1 - cpu0) - (loop1 - loop0)) / (t1 - t0),
        "frames_per_s": (shown1 - shown0) / (ts1 - ts0),
        "wakeups_per_s": (wake1 - wake0) / (t1 - t0),
    }


def floor_mapped(seconds=3.0):
    """The floor of presenting a mapped frame's 80 changed rows every 16 ms: a program on the kernel's
    own card0 that copies 80 rows into its back buffer, flips and waits for the flip's event, then sleeps
    16 ms (tests/vm/drm-dumb-draw --flips N --redraw --rows 80 --interval 16). Its CPU ms a second (the
    commit of each flip runs in a kernel worker, counted neither here nor in devnsd's figure) and frames a
    second."""
    flips = int(seconds * 1000 / 17)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = dumb_draw(r"^flips (\d+) in (\d+) us$", "--flips", str(flips), "--redraw", "--rows", "80", "--interval", "16")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = int(m.group(2)) / 1e6
    cpu_ms = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    return cpu_ms / wall, int(m.group(1)) / wall


def guest_mapped(rounds, profile):
    """Rounds of a mapped frame with 40 rows changed every 16 ms: tracked as the library chooses
    (asynchronously where the kernel can), through write faults (DEVNS_FB_TRACK=faults), and scanned
    every refresh (TrackWrites=no), one after the other in each round, each with a devnsd of its own (the
    choice between tracking and scanning every refresh is the display's, and would carry over); then
    the idle frame once each way."""
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig
    import fbrig

    preload = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
    ways = {"chosen": (True, {}), "faults": (True, {"DEVNS_FB_TRACK": "faults"}), "scanned": (False, {})}

    def hold(way, rows, profile=None):
        track, extra = ways[way]
        daemon = rig.Daemon(fbrig.conf_display(personas=["p00", "p01"], active="p00", track=track))
        try:
            env = dict(os.environ, LD_PRELOAD=preload, **extra)
            res = hold_mapped(rig, daemon, fbrig.fb_node("p00"), rows, 3.0, env, profile)
            m = re.search(r"Tracking writes to mapped framebuffers with (\S+)", daemon.output())
            res["async"] = 1.0 if m and m.group(1) == "PAGEMAP_SCAN" else 0.0
        finally:
            daemon.stop()
        return res

    floors = [floor_mapped()]
    bus = rig.Bus()
    try:
        for rnd in range(1, rounds + 1):
            for way in ways:
                res = hold(way, 40)
                if way == "chosen" and rnd == 1:
                    print("RESULT async %s" % res["async"])
                for k, v in res.items():
                    print("RESULT mapped_%s_%d_%s %s" % (way, rnd, k, v))
        for way in ways:
            res = hold(way, 0)
            print("RESULT idle_%s_cpu_ms_per_s %s" % (way, res["cpu_ms_per_s"]))
            print("RESULT idle_%s_wakeups_per_s %s" % (way, res["wakeups_per_s"]))
        if profile:
            hold("chosen", 40, profile="/tmp/fb-mapped.data")
            for sort in (["--no-children", "--sort", "pid,dso,sym", "--percent-limit", "1"],
                         ["--children", "--sort", "sym", "--percent-limit", "4"]):
                out = subprocess.run(["perf", "report", "-i", "/tmp/fb-mapped.data", "--stdio", "-g", "none", *sort],
                                     capture_output=True, text=True).stdout
                for line in out.splitlines():
                    print("PROFILE " + line)
    finally:
        bus.stop()
    floors.append(floor_mapped())
    for i, (cpu, fps) in enumerate(floors):
        print("RESULT floor_%d_cpu_ms_per_s %s" % (i + 1, cpu))
        print("RESULT floor_%d_frames_per_s %s" % (i + 1, fps))


def report_mapped(r, rounds, suite):
    kernel = SUITES.get(suite, suite)
    lines = ["Run of %s UTC, devns %s, `bench/fb-bench.py --mapped %d --suite %s`, the %s guest; devnsd "
             "tracks %s where the library may choose." % (
                 datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"), git_describe(), rounds,
                 suite, kernel, "with PAGEMAP_SCAN" if r.get("async") else "through write faults"), "",
             "| round | tracking | devnsd CPU ms/s | its loop | its other threads | ms per frame shown | wakeups/s | "
             "frames shown/s | drawn/s | shown per drawn |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for rnd in range(1, rounds + 1):
        for way, name in (("chosen", "the library's choice"), ("faults", "write faults"),
                          ("scanned", "scanned every refresh")):
            k = "mapped_%s_%d_" % (way, rnd)
            drawn = r[k + "drawn_per_s"]
            shown = r[k + "frames_per_s"]
            lines.append("| %d | %s | %.0f | %.0f | %.0f | %.2f | %.1f | %.1f | %.1f | %.2f |" % (
                rnd, name, r[k + "cpu_ms_per_s"], r[k + "loop_ms_per_s"], r[k + "threads_ms_per_s"],
                r[k + "cpu_ms_per_s"] / shown if shown else 0, r[k + "wakeups_per_s"], shown, drawn,
                shown / drawn if drawn else 0))
        faults = r["mapped_faults_%d_cpu_ms_per_s" % rnd]
        if faults:
            ratios.append(r["mapped_chosen_%d_cpu_ms_per_s" % rnd] / faults)
    # Per frame shown: the floor draws fewer frames a second (its 16 ms sleep comes after its flip's wait).
    floor = sum(r["floor_%d_cpu_ms_per_s" % i] / r["floor_%d_frames_per_s" % i] for i in (1, 2)) / 2

    def per_frame(way, k):
        shown = r["mapped_%s_%d_frames_per_s" % (way, k)]
        return r["mapped_%s_%d_cpu_ms_per_s" % (way, k)] / shown / floor if shown else 0

    lines += ["", "The floor (the kernel's card0, 80 rows copied into the back buffer, a flip and its event, then "
              "16 ms of sleep; before devnsd and after): %.0f and %.0f ms/s of CPU at %.1f and %.1f frames a second, "
              "%.2f ms a frame. devnsd's CPU per frame shown against the floor's, as the library chooses: %s; "
              "through write faults: %s; scanned every refresh: %s." % (
                  r["floor_1_cpu_ms_per_s"], r["floor_2_cpu_ms_per_s"], r["floor_1_frames_per_s"],
                  r["floor_2_frames_per_s"], floor,
                  ", ".join("%.2f×" % per_frame("chosen", k) for k in range(1, rounds + 1)),
                  ", ".join("%.2f×" % per_frame("faults", k) for k in range(1, rounds + 1)),
                  ", ".join("%.2f×" % per_frame("scanned", k) for k in range(1, rounds + 1)))]
    lines += ["", "devnsd's CPU, the library's choice against write faults in the same round: %s. Idle frame, "
              "as the library chooses, through write faults and scanned every refresh: %.0f, %.0f and %.0f ms/s, "
              "%.1f, %.1f and %.1f wakeups/s." % (
                  ", ".join("%.2f×" % x for x in ratios), r["idle_chosen_cpu_ms_per_s"], r["idle_faults_cpu_ms_per_s"],
                  r["idle_scanned_cpu_ms_per_s"], r["idle_chosen_wakeups_per_s"], r["idle_faults_wakeups_per_s"],
                  r["idle_scanned_wakeups_per_s"])]
    return "\n".join(lines) + "\n"


def dumb_draw(pattern, *args):
    """tests/vm/drm-dumb-draw on the kernel's own card0 with args: the match of pattern (a multi-line
    regex) in its output. Raises when it fails or prints no such line."""
    out = subprocess.run([os.path.join(BUILD, "tests", "vm", "drm-dumb-draw"), "/dev/dri/card0", "0x204060", *args],
                         capture_output=True, text=True, timeout=600)
    m = re.search(pattern, out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError("drm-dumb-draw on the kernel's card0 failed: %s%s" % (out.stdout, out.stderr))
    return m


def native_flip(flips, redraw=False):
    """The kernel's own switch to a frame drawn beforehand: PAGE_FLIP of a ready dumb buffer on its
    card0, then the wait for the flip's event (tests/vm/drm-dumb-draw, µs per flip). With redraw,
    each buffer is drawn whole just before its flip (untimed), as the rows with a new frame do."""
    m = dumb_draw(r"^waited for flips (\d+) in (\d+) us$", "--flips", str(flips), *(["--redraw"] if redraw else []))
    return int(m.group(2)) / int(m.group(1))


def frames_shown_at(rig):
    """The display's frame counter, and the time in the middle of asking for it."""
    before = time.monotonic()
    shown = frames_shown(rig)
    return shown, (before + time.monotonic()) / 2


def frames_shown(rig):
    for line in rig.devnsctl("status").stdout.splitlines():
        if line.startswith("Frames shown:"):
            return int(line.split(":")[1])
    return 0


def git_describe():
    rev = subprocess.run(["git", "-C", TOP, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    # The results file itself does not count: earlier runs rewrite it.
    dirty = subprocess.run(["git", "-C", TOP, "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":!bench/RESULTS.md"], capture_output=True, text=True).stdout
    return rev.strip() + (" (with uncommitted changes)" if dirty.strip() else "")


def report(r, frames, switches, suite="bookworm"):
    mib = r["frame_bytes"] / 2**20
    frame_kib = r["frame_bytes"] / 1024
    per_idle = (r["pss_idle_32"] - r["pss_idle_2"]) / 30
    per_drawn = (r["pss_drawn_32"] - r["pss_drawn_2"]) / 30
    # A switch between two frames drawn beforehand is, natively, a page flip; devns' switch is asked
    # for over D-Bus, so its yardstick is the kernel's flip plus one D-Bus round trip in the same run.
    # With a new frame, the kernel's flip comes right after its buffer was drawn, as devns' switch comes
    # right after the persona wrote its frame, and so does the round trip.
    def switch_row(name, key, target, drawn=False):
        base = r["native_flip_drawn"] + r["ping_drawn_2"] if drawn else r["native_flip"] + r["ping_2"]
        return (name, "%.2f ms" % (base / 1e3), "%.1f ms" % (r[key] / 1e3), r[key] / base, target,
                False if target != "-" else None)

    rows = [
        ("full-frame write() throughput (the floor: CUSE's round trips)", "%.0f MiB/s" % (mib / r["native_write"] * 1e6),
         "%.0f MiB/s" % (mib / r["devns_write"] * 1e6), r["native_write"] / r["devns_write"], "-", None),
        ("the same with libdevns-fbmmap.so preloaded", "%.0f MiB/s" % (mib / r["native_write"] * 1e6),
         "%.0f MiB/s" % (mib / r["devns_write_preload"] * 1e6), r["native_write"] / r["devns_write_preload"],
         "-", None),
        ("mmap full frame + FBIOPAN_DISPLAY (the floor: a round trip per pan)", "%.1f frames/s" % (1e6 / r["native_mmap"]),
         "%.1f frames/s" % (1e6 / r["devns_mmap"]), r["native_mmap"] / r["devns_mmap"], "-", None),
        switch_row("SwitchTo → new frame on screen", "switch_2", "≤ 1.5×", drawn=True),
        switch_row("SwitchTo back to an unchanged frame", "switch_static_2", "≤ 1.5×"),
        switch_row("SwitchTo any of the 3 most recent personas (going round 4), with a new frame",
                   "switch_round4_32", "≤ 1.5×", drawn=True),
        switch_row("SwitchTo any of the 3 most recent personas (going round 4), unchanged frames",
                   "switch_round4_static_32", "≤ 1.5×"),
        switch_row("the same with one spare (`SpareFrames=1`), unchanged frames (informative)",
                   "switch_round4_static_1spare", "-"),
        switch_row("the same with one spare, with a new frame (informative)", "switch_round4_1spare", "-",
                   drawn=True),
        switch_row("SwitchTo back to an unchanged frame right after another persona wrote one (informative)",
                   "switch_busy_32", "-", drawn=True),
        switch_row("SwitchTo the persona shown 4 switches before (going round 5), with a new frame (informative)",
                   "switch_round5_32", "-", drawn=True),
        ("switch with 32 personas vs with 2", "%.1f ms (2)" % (r["switch_2"] / 1e3),
         "%.1f ms (32)" % (r["switch_32"] / 1e3), r["switch_32"] / r["switch_2"], "within 10%", None),
    ]
    def met(ratio, target, higher_better):
        if higher_better is None:
            return "**yes**" if abs(ratio - 1) <= 0.10 else "**no**"
        limit = float(re.search(r"[\d.]+", target).group())
        ok = ratio >= limit if higher_better else ratio <= limit
        return "**yes**" if ok else "**no**"
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        section_name(suite), "",
        "Run of %s, devns %s, written by `bench/fb-bench.py` (rerun: `ninja -C build && bench/fb-bench.py%s`)." % (
            now, git_describe(), "" if suite == "bookworm" else " --suite " + suite),
        "",
        "One QEMU guest (Debian's %s kernel, TCG, `-smp %d`, `-vga std`, bochs DRM driver, XRGB8888 frames of %.0f KiB, devnsd with "
        "%d display buffers). The kernel's `/dev/fb0` (bochs' DRM fbdev emulation) is measured before "
        "devnsd becomes DRM master and again after it exits, devns' write and mmap figures at the start "
        "and at the end of the 2-persona run; the table shows the means (spread between the two: kernel "
        "write %.0f%%, mmap %.0f%%; devns write %.0f%%, mmap %.0f%%). Between them, devnsd with "
        "`Backend=drm` and 2 personas, then with 32. %d frames per throughput figure, the median of %d "
        "switches per latency figure (`bench/fb-bench.c`: `lseek()` to 0 (devns' position ioctl where "
        "the node cannot seek) and `write()` of a whole frame drawn beforehand, only these two timed; "
        "`memset()` of the mapped frame then `FBIOPAN_DISPLAY`; `SwitchTo` over D-Bus, timed until the "
        "answer, which devnsd sends once the page flip showing the new persona's frame completed). For "
        "the switch figures the persona switched to first draws a new whole frame with `write()` "
        "(untimed), so each switch shows a frame the screen has not shown. The switches alternate between "
        "two personas, except in the rows that go round four and five. The display's buffers take "
        "%.1f MiB of video memory (%d spares, the default `SpareFrames=3`)." % (
            SUITES.get(suite, suite), r.get("smp", 2), frame_kib, r.get("buffers_2", 0), 100 * r["native_write_spread"], 100 * r["native_mmap_spread"],
            100 * r["devns_write_spread"], 100 * r["devns_mmap_spread"], frames, switches,
            r.get("video_memory_kib", 0) / 1024, r.get("spares", 0)),
        "",
        "**Absolute times are meaningless** under TCG; compare paths of the same run.",
        "",
        "| measurement | kernel | devns persona fb0 | ratio (devns vs kernel) | target | met? |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, native, devns, ratio, target, better in rows:
        if target == "-":
            lines.append("| %s | %s | %s | %.2f× | %s | %s |" % (name, native, devns, ratio, target, "-"))
        elif name.startswith("switch with"):
            lines.append("| %s | %s | %s | %.2f | %s | %s |" % (name, native, devns, ratio, target,
                                                               met(ratio, target, None)))
        elif better:
            lines.append("| %s | %s | %s | %.2f× | %s | %s |" % (name, native, devns, ratio, target,
                                                                met(ratio, target, True)))
        else:
            lines.append("| %s | %s | %s | %.2f× | %s | %s |" % (name, native, devns, ratio, target,
                                                                met(ratio, target, False)))
    lines += [
        "",
        "How to read these:",
        "",
        "- **write()**: CUSE hands devnsd a write in pieces of at most 128 KiB (32 round trips per frame "
        "here), and each round trip costs far more under TCG than the copy it carries; the gap is the "
        "transport's, not the copy's. With libdevns-fbmmap.so preloaded a large `write()` copies the data "
        "into the library's mapping of the persona's memfd with one `process_vm_readv()` and costs three "
        "round trips (`lseek()`, `DEVNS_FBIO_TELL`, `DEVNS_FBIO_WROTE_AT`); that copy is itself slower here "
        "than the kernel's copy into its shadow buffer (see \"Framebuffer: copy costs\").",
        "- **mmap + pan**: devnsd answers FBIOPAN_DISPLAY at once and copies the frame to the display in "
        "steps meanwhile; frames drawn faster than the display takes them are merged (the kernel's "
        "fbdev emulation merges them too, in its deferred I/O). The screen shows the latest frame one "
        "copy (about one native full-frame write) after the pan. Under libdevns-fbmmap.so the pan passes "
        "its offsets by value (`DEVNS_FBIO_PAN_AT`): one CUSE round trip instead of two.",
        "- **round trips**: one CUSE round trip (`DEVNS_FBIO_TELL`) took %.0f µs in this run, and "
        "FBIOGET_VSCREENINFO, two round trips on devns' node, %.0f µs against %.1f µs on the kernel's "
        "`/dev/fb0`: each request wakes devnsd, and its answer wakes the caller again. "
        "Every path of devns that needs a round trip per frame pays this, whatever devnsd does." % (
            r.get("devns_tell", 0), r.get("devns_getvar", 0), r.get("native_getvar", 0)),
        "- **switch**: the answer to SwitchTo comes once the flip showing the new frame completed. "
        "devnsd keeps the frames shown before the last three switches in display buffers of their own "
        "(the spares) and copies what those personas write meanwhile into them as well, so switching to "
        "any of them costs one D-Bus round trip through dbus-daemon plus the flip. A switch to a persona "
        "no spare keeps copies its whole frame first (the row going round five). Natively, a switch "
        "between two frames drawn beforehand is a page flip: the kernel figure of the switch rows is "
        "the kernel's own PAGE_FLIP of a ready dumb buffer on its card0 until its event (%.2f ms, "
        "`drm-dumb-draw --flips`, measured with /dev/fb0; in the rows with a new frame, and after another "
        "persona wrote one, the flip of a buffer drawn whole just before it, the drawing untimed: "
        "%.2f ms) plus one D-Bus round trip to devnsd through "
        "dbus-daemon with a method that does nothing (`org.freedesktop.DBus.Peer.Ping`: %.2f ms with 2 "
        "personas, %.2f ms with 32; in the rows with a new frame, and after another persona wrote one, the "
        "same call right after a persona wrote a whole frame, the writing untimed: %.2f ms). The old yardsticks (a native full-frame write(), and the write and "
        "pan ratios above) are the floors of the transport and are shown for information. Under TCG a switch's time moves with what the guest did just before it: "
        "right after another persona wrote a whole frame (not shown, nothing more to flip) a switch to an "
        "unchanged frame costs about as much as one to a new frame, so the rows with a new frame measure "
        "the guest's state after a 4000 KiB write as much as the switch. The rows with one spare run "
        "devnsd with `SpareFrames=1`, as it was before the spares." % (
            r["native_flip"] / 1e3, r["native_flip_drawn"] / 1e3, r["ping_2"] / 1e3, r["ping_32"] / 1e3,
            r["ping_drawn_2"] / 1e3),
        "",
        "A mapped frame that nothing pans (`fb-bench hold`, 3 s with 2 personas): unchanged, devnsd spends "
        "%.0f ms of CPU a second, wakes %.1f times a second and the display shows %.1f frames a second; with "
        "40 rows changed every 16 ms, %.0f ms a second, %.1f wakeups and %.1f frames a second, of %.1f the "
        "program drew a second (a 16 ms sleep after each drawing): %.2f shown per frame drawn. devnsd runs "
        "with `TrackWrites=yes` (the default, see devnsd.conf(5)): the library "
        "hands devnsd a userfaultfd for the mapping: devnsd write-protects it and sleeps until a write "
        "faults, then hashes each row of the frame (XXH64) at the next refresh and presents only the rows "
        "whose hash changed; a program that cannot make one is hashed every refresh (absolute times, TCG)." % (
            r["mapped_0_cpu_ms_per_s"], r["mapped_0_wakeups_per_s"], r["mapped_0_frames_per_s"],
            r["mapped_40_cpu_ms_per_s"], r["mapped_40_wakeups_per_s"], r["mapped_40_frames_per_s"],
            r.get("mapped_40_drawn_per_s", 0), r["mapped_40_frames_per_s"] / max(r.get("mapped_40_drawn_per_s", 0), 1)),
        "",
        "Memory per extra persona (devnsd's Pss, 32 personas minus 2, divided by 30): "
        "%.0f KiB before any drawing, %.0f KiB once every persona wrote a full frame "
        "(target: one frame plus 64 KiB = %.0f KiB: **%s**). The shadow memfd is sized for two frames "
        "(double-buffered `yres_virtual`) but only pages a persona touches are allocated." % (
            per_idle, per_drawn, frame_kib + 64, "yes" if per_drawn <= frame_kib + 64 else "no"),
        "",
        "Raw figures (µs per operation, KiB): " + ", ".join(
            "%s=%s" % (k, ("%.1f" % v) if isinstance(v, float) else v) for k, v in sorted(r.items())),
        "",
    ]
    return "\n".join(lines)


def section_name(suite):
    """The 6.1 guest's run is "Framebuffer"; another kernel's has a section of its own."""
    return SECTION if suite == "bookworm" else "%s: the %s guest" % (SECTION, SUITES.get(suite, suite))


def write_section(text, suite):
    path = os.path.join(HERE, "RESULTS.md")
    name = section_name(suite)
    with open(path) as f:
        content = f.read()
    start = content.find(name + "\n")
    if start < 0:
        content = content.rstrip("\n") + "\n\n" + text
    else:
        end = content.find("\n## ", start + len(name))
        content = content[:start] + text + ("\n" + content[end + 1:] if end >= 0 else "")
    with open(path, "w") as f:
        f.write(content)


def in_guest(vm_args, script, script_args):
    """Runs script --guest script_args in a guest (vm-run's vm_args): its RESULT lines as a dict,
    or {} after printing its output when it failed. Its PROFILE lines go to stderr."""
    cmd = [os.path.join(TOP, "tests", "vm", "vm-run"), *vm_args, "--share", BUILD, "--share", TOP,
           "--env", "DEVNS_BUILD_DIR=" + BUILD, "--env", "DEVNS_SOURCE_DIR=" + TOP,
           "--", "/usr/bin/python3", script, "--guest", *script_args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    res = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            _, k, v = line.split()
            res[k] = float(v)
        elif line.startswith("PROFILE "):
            sys.stderr.write(line[len("PROFILE "):] + "\n")
    if out.returncode != 0 or not res:
        sys.stderr.write(out.stdout + out.stderr)
        return {}
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--switches", type=int, default=40)
    ap.add_argument("--smp", type=int, default=2, help="the guest's virtual CPUs")
    ap.add_argument("--suite", default="bookworm", choices=sorted(SUITES),
                    help="the guest's kernel: bookworm (6.1, the default) or trixie (6.12)")
    ap.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    ap.add_argument("--mapped", type=int, metavar="ROUNDS",
                    help="only a mapped frame with 40 rows changing, tracked as the library chooses, through write "
                    "faults and scanned every refresh, ROUNDS times each; prints a table, writes nothing")
    ap.add_argument("--profile", action="store_true", help="with --mapped: a perf profile of devnsd tracking as the library chooses, on stderr")
    ap.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mapped is not None and args.mapped < 1:
        ap.error("--mapped needs at least one round")
    if args.profile and args.mapped is None:
        ap.error("--profile goes with --mapped")
    if args.guest:
        if args.mapped is not None:
            return guest_mapped(args.mapped, args.profile)
        return guest(args.frames, args.switches)
    compile_bench()
    if args.mapped is not None:
        res = in_guest(["--timeout", "900", "--suite", args.suite, "--smp", str(args.smp),
                        "--env", "DEVNS_FB_BENCH=" + BIN], os.path.realpath(__file__),
                       ["--mapped", str(args.mapped)] + (["--profile"] if args.profile else []))
        if not res:
            return 1
        print(report_mapped(res, args.mapped, args.suite))
        return 0
    res = in_guest(["--timeout", "1200", "--suite", args.suite, "--smp", str(args.smp), "--env", "DEVNS_FB_BENCH=" + BIN],
                   os.path.realpath(__file__), ["--frames", str(args.frames), "--switches", str(args.switches)])
    if not res:
        return 1
    res["smp"] = args.smp
    text = report(res, args.frames, args.switches, args.suite)
    if not args.no_write:
        write_section(text, args.suite)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
