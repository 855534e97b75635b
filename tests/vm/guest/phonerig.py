"""The configuration a phone has, for every test that runs in it: the display, a keyboard and a
touchscreen (uinput) beside the i8042 keyboard, the keyboards' capslock LEDs, a backlight (a
sysfs-like directory of its own), routed nodes and a switch hotkey per persona; and containers
made as a container manager makes them, each with its own /dev and /run, the persona's LED and
backlight views bound at /sys/class, and routed nodes bound in its /dev."""

import os
import subprocess
import tempfile

from evdev import ecodes as e

import devnsrig as rig

PERSONAS = ("work", "personal")
BL_MAX = 1000
# How the display is driven: on the kernel's DRM card, or on its framebuffer.
DRM = ("Backend=drm", "Device=/dev/dri/card0")
FBDEV = ("Backend=fbdev", "Device=/dev/fb0")
HOTKEYS = {"work": "KEY_F1", "personal": "KEY_F2"}
# Where a phone container finds the routed card (its own /dev/dri/card0 is its persona's card).
ROUTED_CARD = "/dev/dri/card1"


class Hardware:
    """The phone's devices besides the display: kbd and touch (uinput, their nodes kbd_hw and
    touch_hw), a capslock LED (led) and a backlight (bl_dir). close() unplugs the uinput ones."""

    def __init__(self):
        self.kbd = self.touch = None
        try:
            self.kbd = rig.make_keyboard()
            self.touch = rig.make_touchscreen()
            self.kbd_hw = rig.event_node(self.kbd)
            self.touch_hw = rig.event_node(self.touch)
            self.led = rig.find_capslock()[0]
            self.bl_dir = os.path.join(tempfile.mkdtemp(prefix="phone-sys-"), "panel0")
            os.mkdir(self.bl_dir)
            for name, value in (("max_brightness", BL_MAX), ("brightness", 500), ("actual_brightness", 500),
                                ("bl_power", 0)):
                rig.write_file(os.path.join(self.bl_dir, name), "%d\n" % value)
        except BaseException:
            self.close()
            raise

    def conf(self, display):
        """devnsd's configuration: every class, the display as display says (DRM or FBDEV), work
        and personal, work active."""
        keys = " ".join("KEY_LEFTMETA+%s:%s" % (HOTKEYS[p], p) for p in PERSONAS)
        lines = ["[Daemon]", "Routed=yes", "SwitchKeys=" + keys, "",
                 "[Display]", *display, "",
                 # Every input device, those that come later included.
                 "[Input]", "Devices=/dev/input/event*", "",
                 # The capslock LEDs of every keyboard, those plugged in later included.
                 "[Leds]", "Devices=/sys/class/leds/input*::capslock", "",
                 "[Backlight]", "Devices=" + self.bl_dir, ""]
        for i, p in enumerate(PERSONAS):
            lines += ["[Persona %s]" % p] + (["Active=yes"] if i == 0 else []) + [""]
        return "\n".join(lines)

    def hotkey(self, persona):
        """Presses the persona's switch hotkey on the keyboard (devnsd switches on its own time)."""
        key = e.ecodes[HOTKEYS[persona]]
        for code, value in ((e.KEY_LEFTMETA, 1), (key, 1), (key, 0), (e.KEY_LEFTMETA, 0)):
            rig.press(self.kbd, code, value)

    def close(self):
        for dev in (self.kbd, self.touch):
            if dev:
                dev.close()


def containers(hw, personas=PERSONAS):
    """The phone's containers, one per persona, each given hw's keyboard as a routed node and the
    routed card, then attached: ({persona: Container}, {persona: attach's CompletedProcess}). What
    was made is stopped again when making or attaching one fails."""
    made, outs = {}, {}
    try:
        for p in personas:
            made[p] = Container(p, [os.path.basename(hw.kbd_hw)], card=True)
        for p, c in made.items():
            outs[p] = c.attach()
    except BaseException:
        for c in made.values():
            c.stop()
        raise
    return made, outs


class Container(rig.Container):
    """A container as a manager makes it: its own /dev and /run, the persona's views bound at
    /sys/class/leds and /sys/class/backlight, the routed input nodes given (routed, their names
    in /dev/devns) in its /dev as /dev/input/routedN and, with card, the routed card as
    ROUTED_CARD, all from the host's side before the container's pid namespace starts. attach()
    gives it to its persona."""

    def __init__(self, persona, routed=(), card=False):
        self.userns = False
        self.persona = persona
        views = "/run/devns/%s/sys/class" % persona
        setup = ("mount --bind %s/leds /sys/class/leds && mount --bind %s/backlight /sys/class/backlight && "
                 "mkdir -p /mnt/host-devns && mount --bind /dev/devns /mnt/host-devns && "
                 "mount -t tmpfs tmpfs /dev && mount -t tmpfs tmpfs /run && mkdir /dev/input && ") % (views, views)
        for i, node in enumerate(routed):
            setup += ("touch /dev/input/routed%d && mount --bind /mnt/host-devns/%s /dev/input/routed%d && "
                      % (i, node, i))
        if card:
            setup += "mkdir /dev/dri && touch %s && mount --bind /mnt/host-devns/card0 %s && " % (
                ROUTED_CARD, ROUTED_CARD)
        self.proc = subprocess.Popen(
            ["unshare", "--mount", "sh", "-c",
             setup + "exec unshare --pid --fork --mount-proc sleep 100000"])
        self.pid = self._wait_for_init()

    def attach(self):
        """devnsctl attach: its output (a CompletedProcess)."""
        return subprocess.run([rig.DEVNSCTL, "attach", self.persona, "--pid", str(self.pid)],
                              capture_output=True, text=True, timeout=30)
