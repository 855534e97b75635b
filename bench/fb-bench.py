#!/usr/bin/python3
"""Framebuffer benchmark: persona fb0 against the kernel's /dev/fb0 (bochs DRM
fbdev emulation), in one QEMU guest run. Writes its section of bench/RESULTS.md.

Usage: bench/fb-bench.py [--frames N] [--switches N] [--smp N] [--suite bookworm|trixie] [--no-write]
(run from the source tree after `ninja -C build`; needs the VM rig of tests/vm)."""

import argparse
import datetime
import os
import re
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
                    os.environ["LD_PRELOAD"] = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")
                    try:
                        holder = subprocess.Popen([BIN, "hold", node, "5000", str(rows)], stdout=subprocess.PIPE, text=True)
                    finally:
                        del os.environ["LD_PRELOAD"]
                    time.sleep(1.0)
                    # The frame counter is asked over D-Bus outside the window that counts wakeups and CPU.
                    shown0, ts0 = frames_shown_at(rig)
                    wake0, cpu0, t0 = rig.sleeps(daemon.proc.pid), rig.cpu_ms(daemon.proc.pid), time.monotonic()
                    time.sleep(3.0)
                    wake1, cpu1, t1 = rig.sleeps(daemon.proc.pid), rig.cpu_ms(daemon.proc.pid), time.monotonic()
                    shown1, ts1 = frames_shown_at(rig)
                    out = holder.communicate()[0]
                    m = re.search(r"drawn_per_s ([\d.]+)", out)
                    res["mapped_%d_drawn_per_s" % rows] = float(m.group(1)) if m else 0.0
                    res["mapped_%d_cpu_ms_per_s" % rows] = (cpu1 - cpu0) / (t1 - t0)
                    res["mapped_%d_frames_per_s" % rows] = (shown1 - shown0) / (ts1 - ts0)
                    res["mapped_%d_wakeups_per_s" % rows] = (wake1 - wake0) / (t1 - t0)
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


def native_flip(flips, redraw=False):
    """The kernel's own switch to a frame drawn beforehand: PAGE_FLIP of a ready dumb buffer on its
    card0, then the wait for the flip's event (tests/vm/drm-dumb-draw, µs per flip). With redraw,
    each buffer is drawn whole just before its flip (untimed), as the rows with a new frame do."""
    out = subprocess.run([os.path.join(BUILD, "tests", "vm", "drm-dumb-draw"), "/dev/dri/card0", "0x204060",
                          "--flips", str(flips)] + (["--redraw"] if redraw else []),
                         capture_output=True, text=True, timeout=600)
    m = re.search(r"^waited for flips (\d+) in (\d+) us$", out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError("drm-dumb-draw on the kernel's card0 failed: %s%s" % (out.stdout, out.stderr))
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
    # right after the persona wrote its frame.
    def switch_row(name, key, target, drawn=False):
        base = (r["native_flip_drawn"] if drawn else r["native_flip"]) + r["ping_2"]
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
        "personas, %.2f ms with 32). The old yardsticks (a native full-frame write(), and the write and "
        "pan ratios above) are the floors of the transport and are shown for information. Under TCG a switch's time moves with what the guest did just before it: "
        "right after another persona wrote a whole frame (not shown, nothing more to flip) a switch to an "
        "unchanged frame costs about as much as one to a new frame, so the rows with a new frame measure "
        "the guest's state after a 4000 KiB write as much as the switch. The rows with one spare run "
        "devnsd with `SpareFrames=1`, as it was before the spares." % (
            r["native_flip"] / 1e3, r["native_flip_drawn"] / 1e3, r["ping_2"] / 1e3, r["ping_32"] / 1e3),
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
    or {} after printing its output when it failed."""
    cmd = [os.path.join(TOP, "tests", "vm", "vm-run"), *vm_args, "--share", BUILD, "--share", TOP,
           "--env", "DEVNS_BUILD_DIR=" + BUILD, "--env", "DEVNS_SOURCE_DIR=" + TOP,
           "--", "/usr/bin/python3", script, "--guest", *script_args]
    out = subprocess.run(cmd, capture_output=True, text=True)
    res = {}
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            _, k, v = line.split()
            res[k] = float(v)
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
    ap.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.guest:
        return guest(args.frames, args.switches)
    compile_bench()
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
