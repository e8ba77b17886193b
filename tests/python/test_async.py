# test_async.py: requests submitted with wait=False, their Request handles waited on in any order.
# SPDX-License-Identifier: MIT
"""Several decodes in flight on one client, each output compared with numpy's attention;
handles waited out of order, polled with done(), timed out against a stopped daemon; errors
raised from wait() naming the field; a client closed and a daemon killed with requests in
flight; handles that outlive their input arrays."""

import gc
import signal
import threading
import unittest

import numpy as np

import paged
from daemon import DaemonTest, Pagedd
from reference import attention

L, H, D, B, HQ = 2, 2, 64, 16, 4
RTOL, ATOL = 1e-5, 2e-5


class AsyncTest(DaemonTest):
    """Asynchronous requests on one daemon and an f32 pool, on a client with an 8-entry ring."""

    def setUp(self):
        """Connects (8 submission entries, so that many requests fill the ring) and creates the pool."""
        self.c = paged.connect(self.daemon.socket, name="async", sq_entries=8)
        self.addCleanup(self.c.close)
        self.p = self.c.create_pool("py-async", num_layers=L, num_kv_heads=H, head_dim=D, block_size=B,
                                    dtype="f32", num_blocks=64)
        self.addCleanup(lambda: self.c.destroy_pool("py-async"))
        self.rng = np.random.default_rng(28)

    def filled(self, n):
        """Makes a sequence of n tokens with random keys and values, appended asynchronously per
        layer; returns it and its K and V [L, n, H, D]."""
        s = self.p.sequence()
        slots = np.array(s.extend(n), dtype=np.int32)
        k = self.rng.standard_normal((L, n, H, D), dtype=np.float32)
        v = self.rng.standard_normal((L, n, H, D), dtype=np.float32)
        handles = [self.p.append(layer, k[layer], v[layer], slots, wait=False) for layer in range(L)]
        for h in handles:
            self.assertIsInstance(h, paged.Request)
            self.assertIsNone(h.result())
        return s, k, v

    def submit(self, seqs, layer):
        """Submits one decode of random queries over seqs; returns the handle and the queries."""
        width = max(len(s.blocks) for s, _, _ in seqs)
        tables = np.array([s.blocks + [0] * (width - len(s.blocks)) for s, _, _ in seqs], dtype=np.int32)
        lens = np.array([len(s) for s, _, _ in seqs], dtype=np.int32)
        q = self.rng.standard_normal((len(seqs), HQ, D), dtype=np.float32)
        return self.p.decode(layer, q, tables, lens, wait=False), q

    def check(self, out, q, seqs, layer, what):
        """Compares a decode's output with numpy's attention over each sequence."""
        got = np.from_dlpack(out) if isinstance(out, paged.ArenaArray) else out
        for i, (_, k, v) in enumerate(seqs):
            ref = attention(q[i:i + 1], k[layer], v[layer])
            np.testing.assert_allclose(got[i:i + 1], ref, rtol=RTOL, atol=ATOL,
                                       err_msg="%s: sequence %d" % (what, i))

    def test_many_in_flight_out_of_order(self):
        """twenty decodes in flight at once (more than the ring holds) complete in any order; waited
        last first, each matches numpy, and done() is true after"""
        seqs = [self.filled(n) for n in (3, 16, 33)]
        sent = [(self.submit(seqs, i % L), i % L) for i in range(20)]
        tags = {h.tag for (h, _), _ in sent}
        self.assertEqual(len(tags), 20)
        for i, ((h, q), layer) in reversed(list(enumerate(sent))):
            h.wait()
            self.assertTrue(h.done())
            out = h.result()
            self.assertIsInstance(out, paged.ArenaArray)
            self.check(out, q, seqs, layer, "request %d" % i)
            self.assertIs(h.result(), out)

    def test_done_polls(self):
        """done() reaps without blocking: polled in a bounded loop the handle completes, and
        completions reaped for other handles are kept for them"""
        seqs = [self.filled(20)]
        (a, qa), (b, qb) = self.submit(seqs, 0), self.submit(seqs, 1)
        for _ in range(1 << 22):
            if b.done():
                break
        else:
            self.fail("the request did not complete")
        self.check(b.result(), qb, seqs, 1, "polled")
        self.check(a.result(), qa, seqs, 0, "kept for its handle")
        self.assertTrue(a.done())

    def test_sync_call_keeps_others(self):
        """a synchronous decode and nop while requests are in flight leave those requests'
        completions to their handles"""
        seqs = [self.filled(9), self.filled(40)]
        h, q = self.submit(seqs, 1)
        out = self.p.decode(0, np.ones((2, HQ, D), np.float32), [s.blocks + [0] * (3 - len(s.blocks))
                                                                   for s, _, _ in seqs], [9, 40])
        self.check(out, np.ones((2, HQ, D), np.float32), seqs, 0, "synchronous")
        self.c.nop()
        self.check(h.result(), q, seqs, 1, "asynchronous")

    def test_prefill_in_flight(self):
        """two prefills in flight give what the synchronous prefill gives, and numpy's attention"""
        seqs = [self.filled(12), self.filled(30)]
        tables = [s.blocks + [0] * (2 - len(s.blocks)) for s, _, _ in seqs]
        indptr, lens = [0, 3, 7], [12, 30]
        q = self.rng.standard_normal((7, HQ, D), dtype=np.float32)
        handles = [self.p.prefill(layer, q, indptr, tables, lens, wait=False) for layer in range(L)]
        for layer in reversed(range(L)):
            got = np.from_dlpack(handles[layer].result())
            want = np.from_dlpack(self.p.prefill(layer, q, indptr, tables, lens))
            np.testing.assert_array_equal(got, want)
            for i, (_, k, v) in enumerate(seqs):
                lo, hi = indptr[i], indptr[i + 1]
                ref = attention(q[lo:hi], k[layer], v[layer], positions=list(range(lens[i] - (hi - lo), lens[i])))
                np.testing.assert_allclose(got[lo:hi], ref, rtol=RTOL, atol=ATOL)

    def test_dropped_handles(self):
        """handles dropped before completing are reaped by a later wait on another and freed,
        their outputs' arena memory given back"""
        seqs = [self.filled(8)]
        for _ in range(3):
            for _ in range(6):
                self.submit(seqs, 0)
            gc.collect()
            h, q = self.submit(seqs, 1)
            self.check(h.result(), q, seqs, 1, "after dropped handles")
            del h
        self.c.nop()
        size = self.c.arena_size
        big = self.c.empty(size // 2 // 4, dtype="int32")
        self.assertEqual(big.nbytes, size // 2 // 4 * 4)

    def test_errors_from_wait(self):
        """a refused decode raises its error from wait() and result(), naming the field; a good
        one in flight beside it still completes"""
        seqs = [self.filled(20)]
        bad = self.p.decode(0, np.ones((1, HQ, D), np.float32), [seqs[0][0].blocks], [33], wait=False)
        good, q = self.submit(seqs, 0)
        layer = self.p.decode(L, np.ones((1, HQ, D), np.float32), [seqs[0][0].blocks], [20], wait=False)
        for call in (bad.wait, bad.result):
            with self.assertRaises(paged.SeqLenError) as e:
                call()
            self.assertEqual(e.exception.field, "seq_lens")
            self.assertIn("seq_lens[0]", e.exception.message)
        with self.assertRaises(paged.LayerError) as e:
            layer.wait()
        self.assertEqual(e.exception.field, "layer")
        self.assertTrue(bad.done())
        self.check(good.result(), q, seqs, 0, "beside the errors")

    def test_handles_outlive_inputs(self):
        """inputs deleted after submission (numpy queries, lists, an arena query, a numpy out)
        stay alive for the request; the out array comes back from result() filled"""
        seqs = [self.filled(25)]
        q = self.rng.standard_normal((1, HQ, D), dtype=np.float32)
        keep = q.copy()
        out = np.zeros((1, HQ, D), np.float32)
        h = self.p.decode(1, q, [list(seqs[0][0].blocks)], [25], out=out, wait=False)
        aq = self.c.empty((1, HQ, D), dtype="f32")
        np.asarray(aq)[...] = keep
        h2 = self.p.decode(0, aq, [list(seqs[0][0].blocks)], [25], wait=False)
        del q, out, aq
        gc.collect()
        got = h.result()
        self.assertIsInstance(got, np.ndarray)
        self.check(got, keep, seqs, 1, "numpy out")
        self.check(h2.result(), keep, seqs, 0, "arena query")

    def test_close_with_requests_in_flight(self):
        """closing the client with requests in flight makes their wait() and result() raise
        ClosedError; done() is then true, and nothing crashes"""
        seqs = [self.filled(10)]
        c = paged.connect(self.daemon.socket, name="closing")
        p = c.attach_pool("py-async")
        q = np.ones((1, HQ, D), np.float32)
        handles = [p.decode(0, q, [seqs[0][0].blocks], [10], wait=False) for _ in range(5)]
        c.close()
        for h in handles:
            self.assertTrue(h.done())
            with self.assertRaises(paged.ClosedError):
                h.wait()
            with self.assertRaises(paged.ClosedError):
                h.result(timeout=0)
        with self.assertRaises(paged.ClosedError):
            p.decode(0, q, [seqs[0][0].blocks], [10], wait=False)

    def test_bad_timeout(self):
        """a negative timeout is a ValueError; wait=False with a wrong argument raises at once"""
        seqs = [self.filled(5)]
        h, _ = self.submit(seqs, 0)
        with self.assertRaises(ValueError):
            h.wait(timeout=-1)
        h.wait(timeout=30)
        with self.assertRaises(TypeError):
            self.p.decode(0, np.ones((1, HQ, D), np.float64), [seqs[0][0].blocks], [5], wait=False)


class StoppedDaemonTest(unittest.TestCase):
    """Requests in flight on a daemon that is stopped, then continued or killed."""

    def setUp(self):
        """Starts a daemon of its own, connects, and appends 12 tokens to a sequence."""
        self.d = Pagedd(backend="cpu")
        self.addCleanup(self.d.stop)
        self.c = paged.connect(self.d.socket, name="stopped")
        self.addCleanup(self.c.close)
        self.p = self.c.create_pool("py-stop", num_layers=1, num_kv_heads=1, head_dim=D, block_size=B,
                                    dtype="f32", num_blocks=4)
        self.s = self.p.sequence()
        rng = np.random.default_rng(7)
        self.k = rng.standard_normal((12, 1, D), dtype=np.float32)
        self.v = rng.standard_normal((12, 1, D), dtype=np.float32)
        self.p.append(0, self.k, self.v, self.s.extend(12))
        self.q = rng.standard_normal((1, 2, D), dtype=np.float32)

    def test_timeout_then_complete(self):
        """against a stopped daemon done() is false and wait(timeout) raises TimedOutError (also a
        TimeoutError); once continued the same handle completes with the right output"""
        self.d.proc.send_signal(signal.SIGSTOP)
        try:
            h = self.p.decode(0, self.q, [self.s.blocks], [12], wait=False)
            self.assertFalse(h.done())
            with self.assertRaises(paged.TimedOutError) as e:
                h.wait(timeout=0.05)
            self.assertIsInstance(e.exception, TimeoutError)
            with self.assertRaises(paged.TimedOutError):
                h.result(timeout=0)
            self.assertFalse(h.done())
        finally:
            self.d.proc.send_signal(signal.SIGCONT)
        h.wait(timeout=30)
        self.assertTrue(h.done())
        np.testing.assert_allclose(np.from_dlpack(h.result()), attention(self.q, self.k, self.v),
                                   rtol=RTOL, atol=ATOL)

    def test_wait_releases_the_gil(self):
        """another thread runs Python while wait() blocks on a stopped daemon"""
        started, stop, ticks = threading.Event(), threading.Event(), [0]

        def count():
            """Counts until told to stop (bounded)."""
            started.set()
            for _ in range(1 << 30):
                if stop.is_set():
                    break
                ticks[0] += 1

        self.d.proc.send_signal(signal.SIGSTOP)
        t = threading.Thread(target=count)
        try:
            h = self.p.decode(0, self.q, [self.s.blocks], [12], wait=False)
            t.start()
            self.assertTrue(started.wait(20))
            before = ticks[0]
            with self.assertRaises(paged.TimedOutError):
                h.wait(timeout=0.5)
            self.assertGreater(ticks[0], before)
        finally:
            stop.set()
            if t.is_alive():
                t.join(20)
            self.d.proc.send_signal(signal.SIGCONT)
        h.wait(timeout=30)

    def test_daemon_killed_in_flight(self):
        """a handle whose daemon is killed raises DisconnectedError (or ShutdownError) from wait(),
        and the client then closes"""
        self.d.proc.send_signal(signal.SIGSTOP)
        h = self.p.decode(0, self.q, [self.s.blocks], [12], wait=False)
        self.d.kill()
        with self.assertRaises((paged.DisconnectedError, paged.ShutdownError)):
            h.wait(timeout=20)
        self.c.close()
        with self.assertRaises(paged.ClosedError):
            h.wait()


if __name__ == "__main__":
    unittest.main()
