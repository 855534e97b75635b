#!/usr/bin/python3
"""DRM/KMS personas, shown: two containers, each with its persona's card as /dev/dri/card0; mpv's
drm output plays lavfi's testsrc in work's, Xorg's modesetting driver runs in personal's, its root
painted by xsetroot; devnsctl switches between them; the real screen (QEMU's screendump) is saved
after each step next to devnsctl screenshots of both personas."""

import os
import shutil
import subprocess
import time

import devnsrig as rig
import drmrig
import fbrig
import qtrig

OUT = os.environ.get("DEVNS_OUT") or "/tmp/devns-demo"
# X's root in personal: painted while work is active, and again (ROOT_LATER) while personal is.
ROOT, ROOT_LATER = (0x30, 0x60, 0xc0), (0xc0, 0x60, 0x30)


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
        root = fbrig.solid(screen, ROOT) or fbrig.solid(screen, ROOT_LATER)
        what = "X's root" if root else "mpv's testsrc" if testsrc else "something else"
        line += "\n   real screen %s-screen.png (%s active): %s" % (name, active, what)
    print(line, flush=True)


def paint(x, rgb):
    return x.client("xsetroot", "-solid", "#%02x%02x%02x" % rgb).returncode == 0


def main():
    if not shutil.which("mpv") or not qtrig.have_xorg_modesetting():
        print("mpv or Xorg's modesetting driver is not installed: no DRM demo (scripts/install-deps.sh installs them).")
        return 0
    os.makedirs(OUT, exist_ok=True)
    bus = rig.Bus()
    daemon = rig.Daemon(fbrig.conf_display())
    procs, x = [], None
    try:
        work, personal = rig.attached("work", "personal", private_dev=True)
        env = ["env", "LD_PRELOAD=" + drmrig.PRELOAD]
        print("Two containers attached to the personas, each with its card as /dev/dri/card0:")
        print("  work      mpv --vo=drm av://lavfi:testsrc")
        print("  personal  Xorg (modesetting, no glamor), its root painted with xsetroot")
        procs.append(work.popen(*env, "mpv", "--no-config", "--vo=drm", "--drm-device=" + drmrig.CARD, "--no-audio",
                                "--input-terminal=no", "--loop=inf", "av://lavfi:testsrc=size=320x240:rate=10",
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True))
        x = qtrig.XServer(personal, conf=qtrig.XORG_MODESETTING, args=["-nocursor"])
        print("Starting them (slow under emulation)...", flush=True)
        if not rig.eventually(lambda: paint(x, ROOT), timeout=180, step=1):
            print("Xorg did not answer:\n" + x.log_text())
            return 1
        time.sleep(5)
        print("1. work is active: its mpv is on the screen; personal's X painted its root in the background.")
        capture(1, "work", "work")
        rig.devnsctl("switch", "personal")
        print("2. devnsctl switch personal: X's root, at once; mpv plays on unseen.")
        capture(2, "personal", "personal")
        paint(x, ROOT_LATER)
        time.sleep(2)
        print("3. xsetroot paints personal's root anew, on the screen.")
        capture(3, "personal-painted", "personal")
        rig.devnsctl("switch", "work")
        time.sleep(2)
        print("4. devnsctl switch work: mpv's latest frame.")
        capture(4, "work-again", "work")
        print("\nScreen captures and screenshots are in %s." % OUT)
        return 0
    finally:
        if x:
            x.stop()
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
