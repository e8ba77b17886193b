# daemon.py: starts a pagedd for a program (a demo, a benchmark, a test) on a private socket, ready when started.
# SPDX-License-Identifier: MIT
"""A :class:`Daemon` runs pagedd in the foreground on a socket in a new temporary directory,
waits for its READY line on a ``--ready-fd`` pipe (no sleeps), and stops it with SIGTERM
(SIGKILL after a grace period) when it is closed."""

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time


class Daemon:
    """A pagedd process; a context manager. ``socket`` is its socket's path, ``log`` its stderr."""

    def __init__(self, pagedd="pagedd", backend="cpu", args=(), ready_s=30.0, stop_s=20.0):
        """Starts the program pagedd (a path or a name on the PATH) with --backend=backend and
        args; raises RuntimeError with its log when it is not ready within ready_s seconds."""
        self.dir = tempfile.mkdtemp(prefix="paged-model")
        self.socket = os.path.join(self.dir, "pagedd.sock")
        self.log = os.path.join(self.dir, "pagedd.log")
        self.stop_s = stop_s
        rfd, wfd = os.pipe()
        argv = [pagedd, "--foreground", "--ready-fd=%d" % wfd, "--socket", self.socket,
                "--backend=" + backend, "--config", "/dev/null", *args]
        try:
            with open(self.log, "wb") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=log, pass_fds=(wfd,))
        except OSError:
            os.close(rfd)
            os.close(wfd)
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        os.close(wfd)
        try:
            self._await_ready(rfd, ready_s)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(rfd)

    def _await_ready(self, fd, ready_s):
        """Reads fd until the daemon writes READY; raises RuntimeError when it stops or time runs out."""
        deadline = time.monotonic() + ready_s
        got = b""
        while b"\n" not in got and len(got) < 16:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError("pagedd was not ready within %g s: %s" % (ready_s, self.log_text()))
            chunk = os.read(fd, 16 - len(got))
            if not chunk:
                break
            got += chunk
        if not got.startswith(b"READY"):
            raise RuntimeError("pagedd stopped before it was ready: " + self.log_text())

    def log_text(self):
        """Returns the daemon's log so far ("" when it cannot be read)."""
        try:
            with open(self.log, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def kill(self, signo=signal.SIGKILL):
        """Sends signo to the daemon (unless it already ended) and reaps it, with SIGKILL after
        stop_s; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signo)
        try:
            return self.proc.wait(self.stop_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def close(self):
        """Stops the daemon (SIGTERM, then SIGKILL after stop_s) and removes its directory;
        returns its exit status."""
        status = self.kill(signal.SIGTERM)
        shutil.rmtree(self.dir, ignore_errors=True)
        return status

    def __enter__(self):
        """Returns the daemon."""
        return self

    def __exit__(self, *exc):
        """Stops the daemon."""
        self.close()
        return False
