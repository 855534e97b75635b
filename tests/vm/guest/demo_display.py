#!/usr/bin/python3
"""devnsd's framebuffer personas, shown: two personas draw moving content on
one display, devnsctl switches between them, and after each switch the real
screen (QEMU's screendump) is saved next to devnsctl screenshots of both."""

import os
import subprocess
import sys
import threading
import time

import devnsrig as rig
import fbrig

OUT = os.environ.get("DEVNS_OUT") or "/tmp/devns-demo"
FBDRAW = os.path.join(rig.BUILD, "tests", "vm", "fbdraw")
PRELOAD = os.path.join(rig.BUILD, "src", "libdevns-fbmmap.so")


class Painter(threading.Thread):
    """Draws a new frame every round while the lock is free."""

    def __init__(self, persona, draw, lock):
        super().__init__(daemon=True)
        self.persona, self.draw, self.lock = persona, draw, lock
        self.step = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            with self.lock:
                self.draw(self.step)
                self.step += 1
            time.sleep(0.05)


def main():
    os.makedirs(OUT, exist_ok=True)
    bus = rig.Bus()
    daemon = rig.Daemon(fbrig.conf_display())
    lock = threading.Lock()
    painters = []
    try:
        fd = os.open(fbrig.fb_node("work"), os.O_RDWR)
        var = fbrig.get_var(fd)
        w, h = var["xres"], var["yres"]
        print("devnsd drives /dev/dri/card0 (%dx%d); personas and their nodes:" % (w, h))
        print(rig.devnsctl("list").stdout.rstrip())

        def draw_work(step):
            fbrig.set_pos(fd, 0)
            fbrig.write_all(fd, fbrig.moving_frame(w, h, (160, 20, 20), step))

        def draw_personal(step):
            env = dict(os.environ, LD_PRELOAD=PRELOAD)
            subprocess.run([FBDRAW, fbrig.fb_node("personal"), str(step * 16)], env=env, check=True)

        print("\nwork writes frames with write(): red with a moving bar and block;")
        print("personal is a plain fbdev program that mmaps fb0 through libdevns-fbmmap.so: a shifting pattern.")
        painters = [Painter("work", draw_work, lock), Painter("personal", draw_personal, lock)]
        for p in painters:
            p.start()

        have_screen = "DEVNS_HOSTCTL" in os.environ
        for n, persona in enumerate(["work", "personal", "work", "personal"], 1):
            rig.devnsctl("switch", persona)
            time.sleep(1.5)
            with lock:
                shots = {}
                for name in ("work", "personal"):
                    path = os.path.join(OUT, "%d-screenshot-%s.png" % (n, name))
                    rig.devnsctl("screenshot", name, path)
                    shots[name] = fbrig.read_png_rgb(path)[2]
                line = "%d. switched to %-8s  devnsctl screenshots: %d-screenshot-work.png, %d-screenshot-personal.png" % (
                    n, persona, n, n)
                if have_screen:
                    sw, sh, screen = fbrig.screendump("%d-screen-%s" % (n, persona))
                    same = (sw, sh) == (w, h) and screen == shots[persona]
                    other = "personal" if persona == "work" else "work"
                    line += "\n   real screen (QEMU screendump) %d-screen-%s.png: %s" % (
                        n, persona, "shows %s's latest frame, pixel for pixel" % persona if same else
                        "DIFFERS from %s's frame" % persona)
                    if screen == shots[other]:
                        line += " (it shows %s's frame!)" % other
                print(line)
        print("\nAll pictures are in %s" % OUT)
    finally:
        for p in painters:
            p.stop.set()
        for p in painters:
            p.join(10)
        daemon.stop()
        bus.stop()


if __name__ == "__main__":
    sys.exit(main())
