#!/usr/bin/python3
"""DRM/KMS personas, shown: two containers, each with its persona's card as /dev/dri/card0; mpv's
drm output plays lavfi's testsrc in work's, libdrm's modetest shows its bars in personal's;
devnsctl switches between them; the real screen (QEMU's screendump) is saved after each step next
to devnsctl screenshots of both personas."""

import os
import shutil
import subprocess
import time

import devnsrig as rig
import drmrig
import fbrig

OUT = os.environ.get("DEVNS_OUT") or "/tmp/devns-demo"


def capture(step, label, active):
    """Saves both personas' screenshots and the real screen; says what the screen shows."""
    name = "drm-%d-%s" % (step, label)
    shots = []
    for p in ("work", "personal"):
        path = os.path.join(OUT, "%s-screenshot-%s.png" % (name, p))
        rig.devnsctl("screenshot", p, path)
        shots.append(os.path.basename(path))
    line = "   devnsctl screenshots: %s" % ", ".join(shots)
    if "DEVNS_HOSTCTL" in os.environ:
        screen = fbrig.screendump(name + "-screen")
        testsrc = all(drmrig.share_of(screen, rgb) > 0.02 for rgb in ((0, 0, 255), (255, 255, 0), (0, 255, 0)))
        what = "modetest's bars" if drmrig.shows_bars(screen) else "mpv's testsrc" if testsrc else "something else"
        line += "\n   real screen %s-screen.png (%s active): %s" % (name, active, what)
    print(line, flush=True)


def main():
    if not shutil.which("mpv") or not shutil.which("modetest"):
        print("mpv or modetest is not installed: no DRM demo (scripts/install-deps.sh installs them).")
        return 0
    os.makedirs(OUT, exist_ok=True)
    bus = rig.Bus()
    daemon = rig.Daemon(fbrig.conf_display())
    procs = []
    try:
        work, personal = rig.attached("work", "personal", private_dev=True)
        var, _ = fbrig.screen_info("work")
        w, h = var["xres"], var["yres"]
        env = ["env", "LD_PRELOAD=" + drmrig.PRELOAD]
        print("Two containers attached to the personas, each with its card as /dev/dri/card0:")
        print("  work      mpv --vo=drm av://lavfi:testsrc")
        print("  personal  modetest -M devns -s 35@32:%dx%d" % (w, h))
        procs.append(work.popen(*env, "mpv", "--no-config", "--vo=drm", "--drm-device=" + drmrig.CARD, "--no-audio",
                                "--input-terminal=no", "--loop=inf", "av://lavfi:testsrc=size=320x240:rate=10",
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True))
        procs.append(personal.popen(*env, "modetest", "-M", "devns", "-s", "35@32:%dx%d" % (w, h),
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True))
        print("Starting them (slow under emulation)...", flush=True)
        time.sleep(15)
        print("1. work is active: its mpv is on the screen; personal's modetest draws in the background.")
        capture(1, "work", "work")
        rig.devnsctl("switch", "personal")
        print("2. devnsctl switch personal: modetest's bars, at once; mpv plays on unseen.")
        capture(2, "personal", "personal")
        rig.devnsctl("switch", "work")
        time.sleep(2)
        print("3. devnsctl switch work: mpv's latest frame.")
        capture(3, "work-again", "work")
        print("\nScreen captures and screenshots are in %s." % OUT)
        return 0
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, 15)
            except ProcessLookupError:
                pass
            p.wait(30)
        daemon.stop()
        bus.stop()


if __name__ == "__main__":
    raise SystemExit(main())
