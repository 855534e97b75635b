#!/usr/bin/python3
"""devnsd's main job, shown: one keyboard, two personas, a switch."""

import os
import sys
import time

from evdev import ecodes as e

import devnsrig as rig


def show(label, events):
    keys = ["%s %s" % (e.KEY.get(code, code), {0: "up", 1: "down", 2: "repeat"}[value])
            for typ, code, value in events if typ == e.EV_KEY]
    drops = sum(1 for ev in events if ev[:2] == (e.EV_SYN, e.SYN_DROPPED))
    extra = " (+ SYN_DROPPED: resync)" if drops else ""
    print("  %-9s receives: %s%s" % (label, ", ".join(keys) if keys else "nothing", extra))


def main():
    kbd = rig.make_keyboard()
    hw = rig.event_node(kbd)
    bus = rig.Bus()
    daemon = rig.Daemon(rig.conf_for([hw], active="work"))
    try:
        print("devnsd owns %s (%s); personas:" % (hw, kbd.name))
        print(rig.devnsctl("list").stdout.rstrip())
        work = rig.open_node(rig.persona_node("work", hw))
        personal = rig.open_node(rig.persona_node("personal", hw))

        print("\n1. 'work' is active. Typing A:")
        rig.press(kbd, e.KEY_A, 1)
        rig.press(kbd, e.KEY_A, 0)
        time.sleep(0.3)
        show("work", rig.read_events(work, 0.5))
        show("personal", rig.read_events(personal, 0.5))

        print("\n2. Holding B, then `devnsctl switch personal`:")
        rig.press(kbd, e.KEY_B, 1)
        time.sleep(0.3)
        show("work", rig.read_events(work, 0.5))
        rig.devnsctl("switch", "personal")
        time.sleep(0.3)
        show("work", rig.read_events(work, 0.5))
        show("personal", rig.read_events(personal, 0.5))

        print("\n3. 'personal' is active. Releasing B, typing C:")
        rig.press(kbd, e.KEY_B, 0)
        rig.press(kbd, e.KEY_C, 1)
        rig.press(kbd, e.KEY_C, 0)
        time.sleep(0.3)
        show("work", rig.read_events(work, 0.5))
        show("personal", rig.read_events(personal, 0.5))

        print("\n" + rig.devnsctl("status").stdout.rstrip())
        os.close(work)
        os.close(personal)
    finally:
        daemon.stop()
        bus.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
