# daemon.py: a real pagedd for the Python tests, on a temporary socket, ready when started, always stopped.
# SPDX-License-Identifier: MIT
"""Starts pagedd as the C tests do (tests/tap/pagedd.c): --foreground, a temporary socket,
--ready-fd on a pipe read until READY (no sleeps), the backend a test class asks for (by
default the cpu one, whose host-memory semantics the tests check; None: what
$PAGED_TEST_BACKEND says, else cpu), and SIGTERM then SIGKILL at the end."""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

READY_S = 30
STOP_S = 20


class Pagedd:
    """A pagedd process of the test run; use as a context manager."""

    def __init__(self, *args, backend=None):
        """Starts pagedd with extra options args on backend (None: $PAGED_TEST_BACKEND, else cpu);
        raises RuntimeError if it is not ready in time."""
        top = os.environ.get("top_builddir", ".")
        self.dir = tempfile.mkdtemp(prefix="paged-pytest")
        self.socket = os.path.join(self.dir, "pagedd.sock")
        self.log = os.path.join(self.dir, "pagedd.log")
        backend = backend or os.environ.get("PAGED_TEST_BACKEND") or "cpu"
        rfd, wfd = os.pipe()
        argv = [os.path.join(top, "daemon", "pagedd"), "--foreground", "--ready-fd=%d" % wfd,
                "--socket", self.socket, "--backend=" + backend, "--config", "/dev/null", *args]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=log, pass_fds=(wfd,))
        os.close(wfd)
        try:
            self._await_ready(rfd)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(rfd)

    def _await_ready(self, fd):
        """Reads fd until the daemon says READY; raises RuntimeError when it ends or times out."""
        deadline = time.monotonic() + READY_S
        got = b""
        while b"\n" not in got and len(got) < 16:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError("pagedd was not ready within %d s: %s" % (READY_S, self.log_text()))
            chunk = os.read(fd, 16 - len(got))
            if not chunk:
                break
            got += chunk
        if not got.startswith(b"READY"):
            raise RuntimeError("pagedd stopped before it was ready: " + self.log_text())

    def log_text(self):
        """Returns the daemon's log so far."""
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self, signo=signal.SIGKILL):
        """Sends signo to the daemon and reaps it; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signo)
        try:
            return self.proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def stop(self):
        """Stops the daemon with SIGTERM (SIGKILL after STOP_S) and removes its directory."""
        status = self.kill(signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)
        return status

    def __enter__(self):
        """Returns the daemon."""
        return self

    def __exit__(self, *exc):
        """Stops the daemon."""
        self.stop()
        return False


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
