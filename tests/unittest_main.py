"""unittest.main() for the project's Python test files, with meson's exit
statuses: 1 when a test failed or raised, 77 (SKIP) when none did but one
was skipped (a skipTest() in a test, in setUp or in setUpClass), 0 when
every test ran and passed. A file whose tests all skip must not look like
a pass."""

import sys
import unittest

EXIT_SKIP = 77


def main(verbosity=2):
    prog = unittest.main(verbosity=verbosity, exit=False)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.skipped:
        print("%d test(s) skipped: exiting %d" % (len(result.skipped), EXIT_SKIP), file=sys.stderr)
        sys.exit(EXIT_SKIP)
    if result.testsRun == 0:
        print("no tests ran: exiting %d" % EXIT_SKIP, file=sys.stderr)
        sys.exit(EXIT_SKIP)
    sys.exit(0)
