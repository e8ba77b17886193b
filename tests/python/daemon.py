# daemon.py: a real pagedd for the Python tests, on a temporary socket, ready when started, always stopped.
# SPDX-License-Identifier: MIT
"""Starts pagedd as the C tests do (tests/tap/pagedd.c): --foreground, a temporary socket,
--ready-fd on a pipe read until READY (no sleeps), the backend a test class asks for (by
default the cpu one, whose host-memory semantics the tests check; None: what
$PAGED_TEST_BACKEND says, else cpu), and SIGTERM then SIGKILL at the end."""

import os
import unittest

from paged.daemon import Daemon

READY_S = 30
STOP_S = 20


class Pagedd(Daemon):
    """The build tree's pagedd for a test (paged.daemon.Daemon); use as a context manager."""

    def __init__(self, *args, backend=None):
        """Starts pagedd with extra options args on backend (None: $PAGED_TEST_BACKEND, else cpu);
        raises RuntimeError if it is not ready in time."""
        top = os.environ.get("top_builddir", ".")
        super().__init__(os.path.join(top, "daemon", "pagedd"),
                         backend or os.environ.get("PAGED_TEST_BACKEND") or "cpu", args, READY_S, STOP_S)

    def stop(self):
        """Stops the daemon with SIGTERM (SIGKILL after STOP_S) and removes its directory."""
        return self.close()


class DaemonTest(unittest.TestCase):
    """A test case whose class shares one daemon, started before its first test, stopped after
    its last: cls.daemon, of cls.backend."""

    backend = "cpu"

    @classmethod
    def setUpClass(cls):
        """Starts the daemon."""
        cls.daemon = Pagedd(backend=cls.backend)

    @classmethod
    def tearDownClass(cls):
        """Stops the daemon."""
        cls.daemon.stop()
