#!/usr/bin/python3
"""How devnsd takes events from the hardware in batches: what one wakeup
reads reaches a waiting reader in one answer, event times arrive in the
reader's clock, and events the kernel dropped before devnsd read them
(SYN_DROPPED on its own handle) leave the persona's state right and reach
the active persona's readers as a SYN_DROPPED.

The file runs in a time namespace of its own, devnsd with it, whose
CLOCK_BOOTTIME is an hour ahead of CLOCK_MONOTONIC, as on a machine that
slept for an hour: an event time in the wrong one of the two clocks shows."""

import fcntl
import os
import signal
import struct
import sys
import threading
import time

from evdev import ecodes as e

import devnsrig as rig

# How far ahead of CLOCK_MONOTONIC this file's CLOCK_BOOTTIME runs, in seconds.
BOOTTIME_AHEAD = 3600


class InputBatches(rig.PersonaTestCase):
    @classmethod
    def setUpClass(cls):
        cls.kbd = rig.make_keyboard()
        cls.kbd_hw = rig.event_node(cls.kbd)
        cls.bus = rig.Bus()
        cls.daemon = rig.Daemon(rig.conf_for([cls.kbd_hw], active="work"))

    @classmethod
    def tearDownClass(cls):
        cls.stop_daemon()
        cls.kbd.close()

    def node(self, flags=os.O_RDWR | os.O_NONBLOCK):
        fd = rig.open_node(rig.persona_node("work", self.kbd_hw), flags)
        self.fds.append(fd)
        return fd

    def paused(self):
        """devnsd stopped for a with block: the kernel queues what comes meanwhile."""
        daemon = self.daemon

        class Paused:
            def __enter__(self):
                os.kill(daemon.proc.pid, signal.SIGSTOP)

            def __exit__(self, *exc):
                os.kill(daemon.proc.pid, signal.SIGCONT)
                return False

        return Paused()

    def read_past_drop(self, fd):
        """Reads fd up to the SYN_DROPPED devnsd passes on, then up to a marker sent after it.
        (A marker sent while devnsd's kernel queue is still full would fall in the packet the
        drop cuts off, which a reader discards.)"""
        drop = (e.EV_SYN, e.SYN_DROPPED, 0)
        events = rig.read_until(fd, lambda evs: drop in evs)
        return events + rig.read_to(fd, rig.send_marker(self.kbd))

    def test_waiting_reader_gets_the_whole_batch_at_once(self):
        fd = self.node(os.O_RDWR)
        got = []
        reader = threading.Thread(target=lambda: got.append(os.read(fd, rig.EVENT.size * 64)))
        reader.start()
        # The read has reached devnsd and waits there.
        time.sleep(1.0)
        with self.paused():
            for i in range(5):
                rig.press(self.kbd, e.KEY_B, 1)
                rig.press(self.kbd, e.KEY_B, 0)
        reader.join(20)
        self.assertFalse(reader.is_alive(), "the blocked read was never answered")
        data = got[0]
        events = [rig.EVENT.unpack_from(data, off)[2:] for off in range(0, len(data), rig.EVENT.size)]
        # Ten packets, each EV_KEY + SYN_REPORT (uinput adds no MSC_SCAN), in one answer.
        self.assertEqual(len(events), 20, events)
        self.assertEqual(events[:4], [(e.EV_KEY, e.KEY_B, 1), (e.EV_SYN, e.SYN_REPORT, 0),
                                      (e.EV_KEY, e.KEY_B, 0), (e.EV_SYN, e.SYN_REPORT, 0)])

    def event_time_in(self, clock, fd):
        """Presses A, reads it back on fd; (clock before, event time, clock after) in seconds."""
        before = time.clock_gettime(clock)
        rig.press(self.kbd, e.KEY_A, 1)
        events = []
        deadline = time.monotonic() + 20
        while not events and time.monotonic() < deadline:
            try:
                data = os.read(fd, rig.EVENT.size * 64)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            events = [rig.EVENT.unpack_from(data, off) for off in range(0, len(data), rig.EVENT.size)]
        after = time.clock_gettime(clock)
        rig.press(self.kbd, e.KEY_A, 0)
        self.assertTrue(events, "nothing came")
        sec, usec, typ, code, value = events[0]
        self.assertEqual((typ, code, value), (e.EV_KEY, e.KEY_A, 1))
        return before, sec + usec / 1e6, after

    def test_event_times_in_the_readers_clock(self):
        for clock, clock_id in (("realtime", None), ("monotonic", time.CLOCK_MONOTONIC),
                                ("boottime", time.CLOCK_BOOTTIME)):
            with self.subTest(clock=clock):
                fd = self.node()
                if clock_id is not None:
                    fcntl.ioctl(fd, rig.EVIOCSCLOCKID, struct.pack("i", clock_id))
                before, t, after = self.event_time_in(clock_id if clock_id is not None else time.CLOCK_REALTIME,
                                                      fd)
                # Microseconds are all an event carries.
                self.assertLessEqual(before - 1e-6, t, (clock, before, t, after))
                self.assertLessEqual(t, after + 1e-6, (clock, before, t, after))
        # The clocks do differ here, so that the boottime event above could not have been a monotonic one.
        self.assertGreater(time.clock_gettime(time.CLOCK_BOOTTIME) - time.clock_gettime(time.CLOCK_MONOTONIC),
                           BOOTTIME_AHEAD / 2)

    def test_state_is_right_after_the_kernel_dropped_events(self):
        fd = self.node()
        rig.press(self.kbd, e.KEY_A, 1)
        rig.read_until(fd, lambda evs: (e.EV_KEY, e.KEY_A, 1) in evs)
        self.assertIn(e.KEY_A, rig.key_state(fd))
        with self.paused():
            rig.press(self.kbd, e.KEY_A, 0)
            # Far more than the kernel keeps for devnsd's handle (64 events for a keyboard).
            for i in range(100):
                rig.press(self.kbd, e.KEY_B, 1)
                rig.press(self.kbd, e.KEY_B, 0)
            rig.press(self.kbd, e.KEY_C, 1)
        events = self.read_past_drop(fd)
        # Whatever the reader saw, it ends with A up and C down, as the hardware is.
        self.assertEqual(rig.key_state(fd) & {e.KEY_A, e.KEY_B, e.KEY_C}, {e.KEY_C})
        last = {}
        for typ, code, value in events:
            if typ == e.EV_KEY:
                last[code] = value
        self.assertEqual(last.get(e.KEY_A), 0, events)
        # 2 if the key repeated meanwhile.
        self.assertIn(last.get(e.KEY_C), (1, 2), events)
        rig.press(self.kbd, e.KEY_C, 0)
        rig.read_until(fd, lambda evs: (e.EV_KEY, e.KEY_C, 0) in evs)
        self.assertEqual(rig.key_state(fd) & {e.KEY_A, e.KEY_B, e.KEY_C}, set())

    def test_reader_learns_of_events_devnsd_lost(self):
        fd = self.node()
        background = rig.open_node(rig.persona_node("personal", self.kbd_hw))
        self.fds.append(background)
        with self.paused():
            # Nothing that changes a state: only the SYN_DROPPED can tell the reader.
            for i in range(100):
                self.kbd.write(e.EV_MSC, e.MSC_SCAN, i + 1)
                self.kbd.syn()
        events = self.read_past_drop(fd)
        drop = (e.EV_SYN, e.SYN_DROPPED, 0)
        self.assertIn(drop, events)
        # A packet of its own, readable at once, as the kernel gives it.
        self.assertEqual(events[events.index(drop) + 1], (e.EV_SYN, e.SYN_REPORT, 0), events)
        scans = [v for typ, code, v in events if (typ, code) == (e.EV_MSC, e.MSC_SCAN)]
        self.assertLess(len(scans), 100)
        # The marker reached work behind the batch: by then the batch reached personal too, or never will.
        self.assertEqual(rig.pending(background), [])
        # Events after it come as usual.
        rig.press(self.kbd, e.KEY_B, 1)
        rig.press(self.kbd, e.KEY_B, 0)
        after = rig.read_until(fd, lambda evs: (e.EV_KEY, e.KEY_B, 0) in evs)
        self.assertNotIn(drop, after)
        self.assertEqual(rig.key_state(fd) & {e.KEY_B}, set())


if __name__ == "__main__":
    if os.environ.get("DEVNS_BOOTTIME_AHEAD") != str(BOOTTIME_AHEAD):
        os.environ["DEVNS_BOOTTIME_AHEAD"] = str(BOOTTIME_AHEAD)
        os.execvp("unshare", ["unshare", "--fork", "--time", "--boottime", str(BOOTTIME_AHEAD),
                              sys.executable] + sys.argv)
    rig.main()
