"""unittest.main() for the project's Python test files, with meson's exit
statuses: 1 when a test failed or raised, 77 (SKIP) when none did but one
was skipped (a skipTest() in a test, in setUp or in setUpClass), 0 when
every test ran and passed. A file whose tests all skip must not look like
a pass. At the end it prints how long the slowest tests took (setUpClass
counted in the first test of its class), to see where a group's time goes."""

import sys
import time
import unittest

EXIT_SKIP = 77
SLOWEST = 5


class TimedResult(unittest.TextTestResult):
    """Remembers when each test ended; a test's time runs from the end of the one before."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.last_end = time.monotonic()
        self.times = []

    def stopTest(self, test):
        super().stopTest(test)
        now = time.monotonic()
        self.times.append((now - self.last_end, test.id()))
        self.last_end = now


def main(verbosity=2):
    runner = unittest.TextTestRunner(verbosity=verbosity, resultclass=TimedResult)
    prog = unittest.main(verbosity=verbosity, exit=False, testRunner=runner)
    result = prog.result
    if getattr(result, "times", None):
        print("slowest tests:", file=sys.stderr)
        for took, name in sorted(result.times, reverse=True)[:SLOWEST]:
            print("  %6.1f s  %s" % (took, name), file=sys.stderr)
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        print("%d test(s) skipped: exiting %d" % (len(result.skipped), EXIT_SKIP), file=sys.stderr)
        sys.exit(EXIT_SKIP)
    if result.testsRun == 0:
        print("no tests ran: exiting %d" % EXIT_SKIP, file=sys.stderr)
        sys.exit(EXIT_SKIP)
    sys.exit(0)
