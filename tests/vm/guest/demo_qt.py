#!/usr/bin/python3
"""Real applications in two personas, shown: Debian's Qt examples run in two
containers on platform linuxfb and Qt's libinput plugin; a virtual keyboard
and touchscreen type and tap into the active one; devnsctl and the hotkey
switch; the real screen (QEMU's screendump) is saved after each step next to
devnsctl screenshots of both personas."""

import os
import sys
import time

from evdev import ecodes as e

import devnsrig as rig
import qtrig

OUT = os.environ.get("DEVNS_OUT") or "/tmp/devns-demo"


class Demo:
    def __init__(self, frames):
        self.frames = frames
        self.step = 0
        self.have_screen = "DEVNS_HOSTCTL" in os.environ

    def capture(self, active, label):
        """Saves every persona's frame and the real screen; says what the screen shows."""
        self.step += 1
        name = "qt-%d-%s" % (self.step, label)
        paths = [os.path.join(OUT, "%s-screenshot-%s.png" % (name, p)) for p in self.frames]
        for p, path in zip(self.frames, paths):
            rig.devnsctl("screenshot", p, path)
        line = "   devnsctl screenshots: %s" % ", ".join(os.path.basename(p) for p in paths)
        if self.have_screen:
            ok, near, far = qtrig.screen_shows(self.frames, active, name + "-screen", timeout=10)
            line += "\n   real screen %s-screen.png: %s" % (
                name, "shows %s's application" % active if ok else
                "DOES NOT show %s's application (%d bytes differ)" % (active, near))
        print(line, flush=True)

    def changes(self, before, what):
        time.sleep(2.0)
        now = self.shots()
        print("   %s changed work's frame by %d bytes, personal's by %d" % (
            what, qtrig.differing(now["work"], before["work"]),
            qtrig.differing(now["personal"], before["personal"])), flush=True)

    def shots(self):
        return {p: f.rgb() for p, f in self.frames.items()}


def main():
    if not qtrig.have_qt():
        print("qtbase5-examples is not installed: no Qt demo (scripts/install-deps.sh installs it).")
        return 0
    os.makedirs(OUT, exist_ok=True)
    kbd = qtrig.make_keyboard()
    ts = rig.make_touchscreen()
    bus = rig.Bus()
    personas = ("work", "personal") + (("kiosk",) if qtrig.have_xorg() else ())
    daemon = rig.Daemon(qtrig.conf([rig.event_node(kbd), rig.event_node(ts)], personas))
    containers, apps, frames, kiosk, xorg = {}, {}, {}, None, None
    try:
        containers = {"work": rig.Container(private_dev=True, netns=True),
                      "personal": rig.Container(private_dev=True, netns=True, userns=True)}
        for p, c in containers.items():
            rig.devnsctl("attach", p, "--pid", str(c.pid))
        if "kiosk" in personas:
            kiosk = rig.Container(private_dev=True, netns=True)
            rig.devnsctl("attach", "kiosk", "--pid", str(kiosk.pid))
            xorg = qtrig.XServer(kiosk)
        frames = qtrig.open_frames(personas)
        w, h = frames["work"].width, frames["work"].height
        print("Two containers attached to the personas; in each, a Qt example from Debian on platform")
        print("linuxfb (its /dev/fb0, mapped through libdevns-fbmmap.so) with Qt's libinput plugin:")
        for p in ("work", "personal"):
            print("  %-9s %s" % (p, qtrig.app_path(p)))
        print("Starting them (slow under emulation)...", flush=True)
        apps, took = qtrig.start_apps(containers, frames, ["devns qt keyboard", "devns test touchscreen"])
        print("Both drawn, each with the keyboard and touchscreen, after %.1f s.\n" % took)
        demo = Demo(frames)

        print("1. work is active:", flush=True)
        demo.capture("work", "work-active")

        print("2. Typing 'hello from work' on the virtual keyboard:", flush=True)
        before = demo.shots()
        qtrig.type_text(kbd, "hello from work")
        demo.changes(before, "typing")
        demo.capture("work", "work-typed")

        print("3. devnsctl switch personal:", flush=True)
        rig.devnsctl("switch", "personal")
        demo.capture("personal", "switched-to-personal")

        print("4. Typing 'hello from personal', then a tap on the touchscreen at the File menu:", flush=True)
        before = demo.shots()
        qtrig.type_text(kbd, "hello from personal")
        qtrig.tap_screen(ts, w, h, 20, 10)
        demo.changes(before, "typing and the tap")
        demo.capture("personal", "personal-menu")
        qtrig.tap_key(kbd, e.KEY_ESC)

        print("5. The hotkey Meta+F1 (SwitchKeys) brings work back:", flush=True)
        qtrig.hotkey(kbd, "work")
        demo.capture("work", "hotkey-to-work")

        if xorg:
            print("6. A third persona's container runs Xorg (drivers fbdev and libinput, no VT);", flush=True)
            xorg.wait_devices(["devns qt keyboard", "devns test touchscreen"])
            xorg.client("xsetroot", "-solid", "#3060c0")
            print("   its root is blue. devnsctl switch kiosk:", flush=True)
            rig.devnsctl("switch", "kiosk")
            demo.capture("kiosk", "xorg-in-kiosk")

        print("\nAll pictures are in %s" % OUT)
    finally:
        for app in apps.values():
            app.stop()
        for f in frames.values():
            f.close()
        for c in list(containers.values()) + ([kiosk] if kiosk else []):
            c.stop()
        daemon.stop()
        bus.stop()
        kbd.close()
        ts.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
