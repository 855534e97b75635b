#!/usr/bin/python3
"""Force feedback timings, run inside a test guest (see bench/README.md, "Force feedback"):
the median upload + erase round trip through a persona node and on the pad's own node, and
the time of a `devnsctl switch` that moves four effects each way. Prints, writes nothing."""

import os
import sys
import time

HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "vm", "guest"))

import devnsrig as rig  # noqa: E402
from test_ff import HW_EFFECTS, RumblePad, erase, rumble, upload  # noqa: E402

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 200


def round_trips(fd, count):
    """The median of count upload + erase pairs on fd, in ms."""
    times = []
    for _ in range(count):
        t = time.monotonic()
        erase(fd, upload(fd, rumble()))
        times.append(time.monotonic() - t)
    return sorted(times)[count // 2] * 1000


def main():
    pad = RumblePad()
    bus = rig.Bus()
    daemon = rig.Daemon(rig.conf_for([pad.path], active="work"))
    fds = []
    try:
        work = rig.open_node(rig.persona_node("work", pad.path))
        fds.append(work)
        persona = round_trips(work, ROUNDS)
        hw = rig.open_node(pad.path)
        try:
            direct = round_trips(hw, ROUNDS)
        finally:
            os.close(hw)
        switches = []
        for name in ("work", "personal"):
            fd = rig.open_node(rig.persona_node(name, pad.path))
            fds.append(fd)
            for _ in range(HW_EFFECTS):
                upload(fd, rumble())
        for target in ("personal", "work") * 5:
            t = time.monotonic()
            rig.devnsctl("switch", target)
            switches.append((time.monotonic() - t) * 1000)
        switch = sorted(switches)[len(switches) // 2]
        print("upload+erase median over %d: persona node %.2f ms, pad's own node %.2f ms (ratio %.1f)"
              % (ROUNDS, persona, direct, persona / direct))
        print("devnsctl switch moving %d+%d effects, median of %d: %.1f ms (devnsctl's start included)"
              % (HW_EFFECTS, HW_EFFECTS, len(switches), switch))
    finally:
        for fd in fds:
            os.close(fd)
        daemon.stop()
        bus.stop()
        pad.close()


if __name__ == "__main__":
    main()
