#!/usr/bin/python3
"""DRM/KMS benchmark: a persona's card0 against the kernel's own card0 (bochs), in one QEMU guest
run. Writes its section of bench/RESULTS.md.

Each path runs the same client, tests/vm/drm-dumb-draw: two dumb buffers of the mode, each frame
drawn whole, then PAGE_FLIP and a wait for its event. The kernel's card is measured before devnsd
runs (devnsd is its master afterwards) and after devnsd stops, the two averaged.

Usage: bench/drm-bench.py [--flips N] [--runs N] [--no-write]
       bench/drm-bench.py --compositor [--seconds N] [--no-write]  (cage on a persona's card, 6.12 guest)
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
SECTION = "## DRM/KMS: page flips"
sys.path.insert(0, HERE)
from importlib import import_module  # noqa: E402

fbbench = import_module("fb-bench")


def draw(node, flips, env=None, hold_ms=0):
    """Runs drm-dumb-draw on node: microseconds per drawn and flipped frame."""
    draw_bin = os.path.join(BUILD, "tests", "vm", "drm-dumb-draw")
    args = [draw_bin, node, "0x204060", "--flips", str(flips), "--redraw"]
    if hold_ms:
        args += ["--hold", str(hold_ms)]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError("drm-dumb-draw on %s failed: %s%s" % (node, out.stdout, out.stderr))
    m = re.search(r"^flips (\d+) in (\d+) us$", out.stdout, re.M)
    return int(m.group(2)) / int(m.group(1))


def guest(flips, runs):
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig
    import fbrig

    res = {}
    native = [draw("/dev/dri/card0", flips) for _ in range(runs)]
    bus = rig.Bus()
    daemon = rig.Daemon(fbrig.conf_display(personas=["work", "personal"], active="work"))
    env = dict(os.environ, LD_PRELOAD=os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so"))
    try:
        pid = daemon.proc.pid
        idle_pss = rig.pss_kib(pid)
        active, cpu, frames = [], [], []
        for _ in range(runs):
            cpu0, shown0 = rig.cpu_ms(pid), fbbench.frames_shown(rig)
            active.append(draw("/dev/devns/work/card0", flips, env=env))
            cpu.append(rig.cpu_ms(pid) - cpu0)
            frames.append(fbbench.frames_shown(rig) - shown0)
        background, bg_cpu = [], []
        for _ in range(runs):
            cpu0 = rig.cpu_ms(pid)
            background.append(draw("/dev/devns/personal/card0", flips, env=env))
            bg_cpu.append(rig.cpu_ms(pid) - cpu0)
        # A client that shows a frame and then idles: devnsd's wakeups meanwhile.
        holder = subprocess.Popen([os.path.join(BUILD, "tests", "vm", "drm-dumb-draw"), "/dev/devns/work/card0",
                                   "0x102030", "--hold", "12000"], stdout=subprocess.PIPE, text=True, env=env)
        for line in holder.stdout:
            if line.strip() == "shown":
                break
        # Past what a change sets off (keeping the frame for a restart, a second later; the state's save).
        time.sleep(2.5)
        pss_shown = rig.pss_kib(pid)
        w0 = rig.sleeps(pid)
        time.sleep(5)
        res["idle_wakeups_per_s"] = (rig.sleeps(pid) - w0) / 5
        holder.wait(60)
    finally:
        daemon.stop()
        bus.stop()
    native += [draw("/dev/dri/card0", flips) for _ in range(runs)]
    res["native_us"] = sum(native) / len(native)
    res["devns_us"] = sum(active) / len(active)
    res["background_us"] = sum(background) / len(background)
    res["cpu_ms_per_frame"] = sum(cpu) / max(1, sum(frames))
    res["bg_cpu_ms_per_flip"] = sum(bg_cpu) / (flips * runs)
    res["frames_per_flip"] = sum(frames) / (flips * runs)
    res["pss_idle_kib"] = idle_pss
    res["pss_shown_kib"] = pss_shown
    for k, v in res.items():
        print("RESULT %s %s" % (k, v), flush=True)
    return 0


CAGE_SECTION = "## DRM/KMS: a wlroots compositor (cage) on the 6.12 guest"


def start_cage(container, client):
    """cage in container, on the persona's card0 (as nobody in the video group: cage refuses root),
    showing client; libseat's built-in seat server opens the card for it."""
    container.run("sh", "-c", "rm -rf /tmp/cage-xdg && mkdir -m 700 /tmp/cage-xdg && chown 65534:65534 /tmp/cage-xdg")
    return container.popen("env", "LD_PRELOAD=" + os.path.join(BUILD, "src", "libdevns-fbmmap.so"),
                           "LIBSEAT_BACKEND=builtin", "SEATD_VTBOUND=0", "WLR_RENDERER=pixman",
                           "WLR_LIBINPUT_NO_DEVICES=1", "XDG_RUNTIME_DIR=/tmp/cage-xdg",
                           "setpriv", "--reuid=65534", "--regid=65534", "--groups=44", "--",
                           "cage", "--", *client, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)


def stop(proc):
    try:
        os.killpg(proc.pid, 15)
        proc.wait(30)
    except ProcessLookupError:
        pass
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass


def guest_compositor(seconds):
    """cage idle (no client window: it draws its background once) and cage showing weston-simple-shm
    (a new frame each of its frame callbacks): devnsd's wakeups, CPU and the frames the display shows."""
    sys.path.insert(0, os.path.join(TOP, "tests", "vm", "guest"))
    import devnsrig as rig
    import fbrig

    if not os.path.exists("/dev/udmabuf"):
        raise RuntimeError("cage needs PRIME, which needs udmabuf: run with --suite trixie")
    res = {}
    bus = rig.Bus()
    daemon = rig.Daemon(fbrig.conf_display())
    containers = rig.attached("work", "personal", private_dev=True)
    work = containers[0]
    try:
        pid = daemon.proc.pid
        for name, client in (("idle", ["sleep", "3600"]), ("shm", ["weston-simple-shm"])):
            cage = start_cage(work, client)
            try:
                # Past cage's start (5 to 10 s under TCG) and what a change sets off (the frame kept for a
                # restart, a second later).
                time.sleep(25)
                if cage.poll() is not None:
                    raise RuntimeError("cage stopped (%s)" % name)
                # The frame count is asked for over D-Bus, which wakes devnsd: outside the window.
                f0 = fbbench.frames_shown(rig)
                w0, c0 = rig.sleeps(pid), rig.cpu_ms(pid)
                time.sleep(seconds)
                w1, c1 = rig.sleeps(pid), rig.cpu_ms(pid)
                res[name + "_wakeups_per_s"] = (w1 - w0) / seconds
                res[name + "_cpu_ms_per_s"] = (c1 - c0) / seconds
                res[name + "_frames_per_s"] = (fbbench.frames_shown(rig) - f0) / seconds
                res[name + "_pss_kib"] = rig.pss_kib(pid)
            finally:
                stop(cage)
    finally:
        for c in containers:
            c.stop()
        daemon.stop()
        bus.stop()
    for k, v in res.items():
        print("RESULT %s %s" % (k, v), flush=True)
    return 0


def report_compositor(r, seconds):
    per_frame = r["shm_cpu_ms_per_s"] / r["shm_frames_per_s"] if r["shm_frames_per_s"] else 0.0
    lines = [
        CAGE_SECTION,
        "",
        "Run of %s, devns %s, written by `bench/drm-bench.py --compositor --seconds %d`." % (
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), fbbench.git_describe(),
            seconds),
        "",
        "cage 0.1.4 (wlroots 0.15, pixman renderer) in the active persona's container, on its card0: its",
        "dumb buffers are shared with its DRM backend as dma-bufs (PRIME through udmabuf, so the 6.12 guest",
        "only). Idle: cage with no window (`cage -- sleep 3600`), which draws its background once. Drawing:",
        "`cage -- weston-simple-shm`, a new frame at each frame callback. Figures over %d s, 25 s after" % seconds,
        "cage starts.",
        "",
        "| figure | idle | drawing |",
        "|---|---:|---:|",
        "| devnsd's wakeups a second | %.1f | %.1f |" % (r["idle_wakeups_per_s"], r["shm_wakeups_per_s"]),
        "| devnsd's CPU, ms a second | %.1f | %.1f |" % (r["idle_cpu_ms_per_s"], r["shm_cpu_ms_per_s"]),
        "| frames the display shows a second | %.1f | %.1f |" % (r["idle_frames_per_s"], r["shm_frames_per_s"]),
        "| devnsd's PSS | %d KiB | %d KiB |" % (r["idle_pss_kib"], r["shm_pss_kib"]),
        "",
        "Target (an idle compositor costs nothing): 0 wakeups a second idle: %s. devnsd's CPU per frame shown"
        % ("met" if r["idle_wakeups_per_s"] < 0.5 else "not met"),
        "while drawing: %.2f ms." % per_frame,
        "",
    ]
    return "\n".join(lines)


def report(r, flips, runs):
    ratio = r["native_us"] / r["devns_us"]
    lines = [
        SECTION,
        "",
        "Run of %s, devns %s, written by `bench/drm-bench.py --flips %d --runs %d`." % (
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), fbbench.git_describe(),
            flips, runs),
        "",
        "One client, tests/vm/drm-dumb-draw: two dumb buffers of the mode, each frame drawn whole, then",
        "PAGE_FLIP and a wait for its event. The kernel's bochs card0 is measured before devnsd runs and after",
        "it stops; devns's card0 is the active persona's (shown on the real display) and a background",
        "persona's (virtual vblank), mapped through libdevns-fbmmap.so. Absolute times are TCG's: the ratio",
        "in the same run is what counts.",
        "",
        "| path | µs per frame | frames per second |",
        "|---|---:|---:|",
        "| kernel card0 (bochs) | %.0f | %.1f |" % (r["native_us"], 1e6 / r["native_us"]),
        "| devns card0, active persona | %.0f | %.1f |" % (r["devns_us"], 1e6 / r["devns_us"]),
        "| devns card0, background persona | %.0f | %.1f |" % (r["background_us"], 1e6 / r["background_us"]),
        "",
        "| figure | value | target | met? |",
        "|---|---:|---|---|",
        "| flip throughput, devns / kernel | %.2f× | ≥ 0.8× | %s |" % (ratio, "yes" if ratio >= 0.8 else "no"),
        "| devnsd's wakeups a second, a client showing a frame and idle | %.1f | 0 | %s |" % (
            r["idle_wakeups_per_s"], "yes" if r["idle_wakeups_per_s"] < 0.5 else "no"),
        "| devnsd's CPU per presented frame (active) | %.2f ms | | |" % r["cpu_ms_per_frame"],
        "| devnsd's CPU per flip (background: no copy) | %.2f ms | | |" % r["bg_cpu_ms_per_flip"],
        "| display flips per client flip (active) | %.2f | | |" % r["frames_per_flip"],
        "| devnsd's PSS, idle / a client's frame shown | %d / %d KiB | | |" % (r["pss_idle_kib"],
                                                                          r["pss_shown_kib"]),
        "",
        "Where the time goes: on the kernel's card the client draws straight into the emulated VGA memory",
        "and a flip only moves the scanout (bochs has no vblank interrupt, its flips complete at once); on",
        "devns's card the client draws into a memfd and devnsd copies each frame into the display's buffer",
        "in that VGA memory, which the kernel's client does not make (under TCG QEMU tracks the VGA",
        "memory's dirty pages; the copy is most of devnsd's CPU per presented frame). A background persona's flip",
        "costs no copy, only its CUSE round trips and its virtual vblank. The ratio stays below 0.8× here",
        "for that copy; devnsd's PSS grows by the frames it keeps mapped (the client's two buffers).",
        "",
    ]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flips", type=int, default=60)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compositor", action="store_true",
                    help="measure cage on a persona's card instead (on the 6.12 guest, which has udmabuf)")
    ap.add_argument("--seconds", type=int, default=10, help="--compositor: how long each figure is measured")
    ap.add_argument("--no-write", action="store_true", help="print the section, leave RESULTS.md as it is")
    ap.add_argument("--guest", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.guest:
        return guest_compositor(args.seconds) if args.compositor else guest(args.flips, args.runs)
    if args.compositor:
        res = fbbench.in_guest(["--suite", "trixie", "--timeout", "1200"], os.path.realpath(__file__),
                               ["--compositor", "--seconds", str(args.seconds)])
        if not res:
            return 1
        text = report_compositor(res, args.seconds)
        if not args.no_write:
            fbbench.SECTION = CAGE_SECTION
            fbbench.write_section(text, "bookworm")
        print(text)
        return 0
    res = fbbench.in_guest(["--timeout", "1800"], os.path.realpath(__file__),
                           ["--flips", str(args.flips), "--runs", str(args.runs)])
    if not res:
        return 1
    text = report(res, args.flips, args.runs)
    if not args.no_write:
        fbbench.SECTION = SECTION
        fbbench.write_section(text, "bookworm")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
