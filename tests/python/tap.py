# tap.py: runs the paged package's unittest modules and prints TAP, one line per test.
# SPDX-License-Identifier: MIT
"""Usage: tap.py MODULE... (test_*.py files). Prints "1..N" and one "ok"/"not ok" line per
test, its message the test's name and the first line of its docstring (what it checked); a
failure's traceback follows as comment lines."""

import importlib.util
import os
import sys
import unittest


class TapResult(unittest.TestResult):
    """A unittest result that prints each outcome as a TAP line."""

    def __init__(self):
        """Starts with no results."""
        super().__init__()
        self.n = 0

    def _line(self, ok, test, directive=""):
        """Prints the next TAP line for test."""
        self.n += 1
        doc = " ".join((test._testMethodDoc or "").split())
        name = test.id().rsplit(".", 2)[-2:]
        print("%s %d - %s%s%s" % ("ok" if ok else "not ok", self.n, ".".join(name),
                                  ": " + doc if doc else "", directive), flush=True)

    def _diag(self, err, test):
        """Prints a failure's traceback as TAP comments."""
        for line in self._exc_info_to_string(err, test).splitlines():
            print("# " + line, flush=True)

    def addSuccess(self, test):
        """Prints an ok line."""
        super().addSuccess(test)
        self._line(True, test)

    def addFailure(self, test, err):
        """Prints a not ok line and the traceback."""
        super().addFailure(test, err)
        self._line(False, test)
        self._diag(err, test)

    def addError(self, test, err):
        """Prints a not ok line and the traceback of the error."""
        super().addError(test, err)
        self._line(False, test)
        self._diag(err, test)

    def addSkip(self, test, reason):
        """Prints a skipped line with its reason."""
        super().addSkip(test, reason)
        self._line(True, test, " # SKIP " + reason)


def load(path):
    """Imports the test module at path; returns it."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(paths):
    """Runs the tests of the modules at paths; returns 0 when all passed, else 1."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    for path in paths:
        suite.addTests(loader.loadTestsFromModule(load(path)))
    print("1..%d" % suite.countTestCases(), flush=True)
    result = TapResult()
    suite.run(result)
    # A class whose setUpClass failed runs none of its tests: say so, and pad the plan.
    while result.n < suite.countTestCases():
        result.n += 1
        print("not ok %d - not run (a setUpClass or setUpModule failed)" % result.n, flush=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
