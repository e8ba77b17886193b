# test_errors.py: every paged.Error subclass, the daemon's refusals as exceptions, a daemon that goes away.
# SPDX-License-Identifier: MIT
"""Each error code has its class; each refusal that a client can provoke raises its class
with the code, the field at fault and libpaged's message; a lost daemon ends calls cleanly."""

import os
import signal
import threading
import unittest

import numpy as np

import paged
from paged import _paged
from daemon import DaemonTest, Pagedd


class ErrorClassTest(unittest.TestCase):
    """The table of classes, without a daemon."""

    def test_every_code_has_a_class(self):
        """codes -1 to -30 map to distinct Error subclasses named ...Error, each documented"""
        classes = [paged.error_class(code) for code in range(-1, -31, -1)]
        self.assertEqual(len(set(classes)), 30)
        for code, cls in zip(range(-1, -31, -1), classes):
            self.assertTrue(issubclass(cls, paged.Error), cls)
            self.assertTrue(cls.__name__.endswith("Error"), cls)
            self.assertIs(getattr(paged, cls.__name__), cls)
            self.assertIn("paged_error %d" % code, cls.__doc__)
            self.assertNotEqual(_paged.strerror(code), _paged.strerror(0))
        self.assertIs(paged.error_class(-1000), paged.Error)
        self.assertTrue(issubclass(paged.ClosedError, ValueError))

    def test_no_daemon(self):
        """a socket nobody listens on is NotConnectedError naming the path"""
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "paged-no-daemon-%d.sock" % os.getpid())
        with self.assertRaises(paged.NotConnectedError) as e:
            paged.connect(path)
        self.assertEqual(e.exception.code, -29)
        self.assertIn(path, str(e.exception))


class RefusalTest(DaemonTest):
    """Refusals of one daemon, on a pool of 2 layers, 2 KV heads, D 64, B 16 and 8 blocks."""

    def setUp(self):
        """Connects (64 KiB of arena) and creates the pool and a 20-token sequence."""
        self.c = paged.connect(self.daemon.socket, name="errors", host_arena_size=1 << 16)
        self.addCleanup(self.c.close)
        self.p = self.c.create_pool("py-err", num_layers=2, num_kv_heads=2, head_dim=64, block_size=16, dtype="f32",
                                    num_blocks=8)
        self.addCleanup(lambda: self.c.destroy_pool("py-err"))
        self.s = self.p.sequence()
        slots = self.s.extend(20)
        kv = np.random.default_rng(3).standard_normal((2, 2, 20, 2, 64), dtype=np.float32)
        self.p.append(paged.ALL_LAYERS, kv[0], kv[1], slots)
        self.q = np.ones((1, 4, 64), dtype=np.float32)

    def raises(self, cls, field, text, call):
        """Checks that call raises cls with its code, field and a message holding text."""
        with self.assertRaises(cls) as e:
            call()
        self.assertEqual(e.exception.code, [c for c in range(-1, -30, -1) if paged.error_class(c) is cls][0])
        self.assertEqual(e.exception.field, field)
        self.assertIn(text, e.exception.message)
        self.assertEqual(str(e.exception), e.exception.message)

    def test_request_refusals(self):
        """LayerError, BlockError, NotHeldError, HeadsError, SeqLenError, InvalidArgumentError,
        ReadOnlyError and NoSpaceError carry their fields"""
        bt, n, q = [self.s.blocks], [len(self.s)], self.q
        self.raises(paged.LayerError, "layer", "decode: layer", lambda: self.p.decode(2, q, bt, n))
        self.raises(paged.BlockError, "block_tables", "decode: block_tables[1]",
                    lambda: self.p.decode(0, q, [[bt[0][0], 99]], n))
        other = self.p.alloc(1)
        self.p.free(other)
        self.raises(paged.NotHeldError, "block_tables", "block_tables[0]",
                    lambda: self.p.decode(0, q, [other], [1]))
        self.raises(paged.HeadsError, "num_q_heads", "num_q_heads",
                    lambda: self.p.decode(0, np.ones((1, 3, 64), np.float32), bt, n))
        self.raises(paged.SeqLenError, "seq_lens", "seq_lens[0]", lambda: self.p.decode(0, q, bt, [33]))
        self.raises(paged.InvalidArgumentError, "window", "window", lambda: self.p.decode(0, q, bt, n, window=-1))
        self.raises(paged.NoSpaceError, None, "", lambda: self.p.alloc(9))
        with self.p.sequence() as t:
            slots = t.extend(tokens=list(range(16)))
            t.publish()
            kv = np.ones((1, 2, 64), np.float32)
            self.raises(paged.ReadOnlyError, "slots", "slots[0]", lambda: self.p.append(0, kv, kv, slots[:1]))
        self.c.nop()

    def test_control_refusals(self):
        """NotFoundError, ExistsError and GeometryError name the pool or the field in the message"""
        self.raises(paged.NotFoundError, None, "nope", lambda: self.c.attach_pool("nope"))
        self.raises(paged.ExistsError, None, "py-err", lambda: self.c.create_pool(
            "py-err", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, dtype="f32", num_blocks=1))
        self.raises(paged.GeometryError, None, "head_dim", lambda: self.c.create_pool(
            "py-geo", num_layers=1, num_kv_heads=1, head_dim=100, block_size=16, dtype="f32", num_blocks=1))

    def test_arena_exhausted(self):
        """a 64 KiB arena refuses a larger array and a larger query with NoMemoryError; freed
        arrays make room again"""
        self.raises(paged.NoMemoryError, None, "no room", lambda: self.c.empty(1 << 16, dtype="int32"))
        big = np.ones((40, 4, 64), np.float32)
        self.raises(paged.NoMemoryError, "q", "q: the arena", lambda: self.p.decode(
            0, big, [self.s.blocks] * 40, [20] * 40))
        size = self.c.arena_size
        arrays = []
        with self.assertRaises(paged.NoMemoryError):
            for _ in range(size // 16384 + 1):
                arrays.append(self.c.empty(4096, dtype="int32"))
        self.assertEqual(len(arrays), size // 16384)
        self.assertEqual(sorted(a.offset for a in arrays), [i * 16384 for i in range(len(arrays))])
        count = len(arrays)
        del arrays
        again = [self.c.empty(4096, dtype="int32") for _ in range(count)]
        self.assertEqual(len(again), count)
        del again
        out = np.from_dlpack(self.p.decode(0, self.q, [self.s.blocks], [20]))
        self.assertTrue(np.isfinite(out).all())


class DaemonGoneTest(unittest.TestCase):
    """A client whose daemon is killed."""

    def test_daemon_killed(self):
        """after the daemon is killed, requests raise DisconnectedError (or ShutdownError) and
        the interpreter goes on; the client then closes"""
        d = Pagedd(backend="cpu")
        try:
            c = paged.connect(d.socket, name="orphan")
            p = c.create_pool("py-gone", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, dtype="f32",
                              num_blocks=2)
            c.nop()
            d.kill()
            with self.assertRaises((paged.DisconnectedError, paged.ShutdownError)):
                c.nop()
            with self.assertRaises((paged.DisconnectedError, paged.ShutdownError)):
                p.alloc(1)
            c.close()
            self.assertTrue(c.closed)
        finally:
            d.stop()

    def test_daemon_killed_mid_wait(self):
        """a decode waiting on a stopped daemon ends with DisconnectedError once the daemon is
        killed (whether the kill comes before or during its wait), within 20 s, with no crash"""
        d = Pagedd(backend="cpu")
        try:
            c = paged.connect(d.socket, name="waiter")
            p = c.create_pool("py-wait", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, dtype="f32",
                              num_blocks=2)
            s = p.sequence()
            slots = s.extend(4)
            kv = np.ones((4, 1, 64), np.float32)
            p.append(0, kv, kv, slots)
            outcome = []

            def decode():
                """Decodes once, noting the exception it ends with."""
                try:
                    p.decode(0, np.ones((1, 1, 64), np.float32), [s.blocks], [4])
                    outcome.append(None)
                except paged.Error as e:
                    outcome.append(e)

            d.proc.send_signal(signal.SIGSTOP)
            t = threading.Thread(target=decode)
            t.start()
            d.kill()
            t.join(20)
            self.assertFalse(t.is_alive(), "the decode still waits 20 s after the daemon was killed")
            self.assertEqual(len(outcome), 1)
            self.assertIsInstance(outcome[0], (paged.DisconnectedError, paged.ShutdownError))
            c.close()
        finally:
            d.stop()
