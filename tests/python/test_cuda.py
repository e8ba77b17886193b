# test_cuda.py: the package on the cuda backend with torch: device arenas, stream ordering, pool views.
# SPDX-License-Identifier: MIT
"""CUDA tensors in and out of append, decode and prefill against torch's attention on fresh
random data, requests ordered on torch streams, pool layers viewed on the device, and the
errors of wrong devices and dtypes, against a real pagedd --backend=cuda. They run where torch
sees a CUDA device and $PAGED_TEST_BACKEND is cuda. The cpu backend's side of the stream
argument runs wherever torch is installed."""

import os
import unittest

import numpy as np

import paged
from daemon import DaemonTest

try:
    import torch
except ImportError:
    torch = None

L, H, D, B, HQ = 2, 2, 64, 16, 8     # layers, KV heads, head dim, block size, query heads
GROUP = HQ // H

# Absolute tolerances of the outputs (averages of values of unit scale) per dtype: the
# reference computes in float64 from the very values the daemon holds.
TOLERANCE = {"f32": 2e-3, "f16": 1e-2, "bf16": 5e-2}


def skip_reason():
    """Returns why the CUDA tests cannot run here, or None."""
    if torch is None:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA device"
    if os.environ.get("PAGED_TEST_BACKEND") != "cuda":
        return "PAGED_TEST_BACKEND is not cuda"
    return None


def torch_dtype(name):
    """Returns the torch dtype of a paged dtype name."""
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def attention(q, k, v, causal_from=None):
    """Reference attention in float64 on the cpu: q [n, HQ, D], k and v [ctx, H, D]; query row
    i sees positions up to causal_from + i (None: all). Returns [n, HQ, D]."""
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    out = torch.empty(q.shape, dtype=torch.float64)
    for i in range(q.shape[0]):
        end = k.shape[0] if causal_from is None else causal_from + i + 1
        for h in range(HQ):
            logits = k[:end, h // GROUP] @ q[i, h] / D ** 0.5
            out[i, h] = torch.softmax(logits, 0) @ v[:end, h // GROUP]
    return out


@unittest.skipIf(skip_reason() is not None, skip_reason() or "")
class CudaTest(DaemonTest):
    """The cuda path on one daemon of the cuda backend started for the class."""

    backend = "cuda"

    def setUp(self):
        """Connects a client, closed at the end of the test, and notes the arena's device."""
        self.c = paged.connect(self.daemon.socket, name="cuda-test")
        self.addCleanup(self.c.close)
        self.assertEqual(self.c.backend, "cuda")
        self.dev = self.c.empty(1).__dlpack_device__()[1]
        self.cuda = torch.device("cuda", self.dev)
        self.g = torch.Generator(device=self.cuda).manual_seed(int.from_bytes(os.urandom(4), "little"))

    def pool(self, name, dtype="f32", layers=L, mode=0o600):
        """Creates pool name of the geometry above, destroyed at the end of the test."""
        p = self.c.create_pool(name, num_layers=layers, num_kv_heads=H, head_dim=D, block_size=B, dtype=dtype,
                               num_blocks=64, mode=mode)
        self.addCleanup(lambda: self.c.closed or self.c.destroy_pool(name))
        self.addCleanup(p.detach)
        return p

    def randn(self, *shape, dtype=None):
        """Returns a fresh random CUDA tensor on the arena's device, float32 unless dtype says
        otherwise (no torch default here: the class is defined where torch is missing too)."""
        t = torch.randn(*shape, generator=self.g, device=self.cuda)
        return t if dtype is None else t.to(dtype)

    def fill(self, p, lengths, dtype, layers=L):
        """Appends fresh random keys and values of every layer to new sequences of lengths
        (CUDA tensors outside the arena); returns the sequences and their [layers, n, H, D]
        keys and values."""
        seqs, kv = [], []
        for n in lengths:
            s = p.sequence()
            self.addCleanup(s.close)
            slots = s.extend(n)
            k, v = self.randn(layers, n, H, D, dtype=dtype), self.randn(layers, n, H, D, dtype=dtype)
            p.append(paged.ALL_LAYERS, k, v, slots)
            seqs.append(s)
            kv.append((k, v))
        return seqs, kv

    def test_arena_arrays_are_device_memory(self):
        """empty() is CUDA memory of the daemon's device that torch views in place;
        numpy.from_dlpack and the buffer protocol refuse it; host=True gives host memory"""
        a = self.c.empty((3, 5), "f16")
        self.assertEqual(a.__dlpack_device__(), (2, self.dev))
        t = torch.from_dlpack(a)
        self.assertEqual((t.device, t.dtype, tuple(t.shape)), (self.cuda, torch.float16, (3, 5)))
        self.assertEqual(t.data_ptr(), a.address)
        x = self.randn(3, 5, dtype=torch.float16)
        t.copy_(x)
        self.assertTrue(torch.equal(torch.from_dlpack(a), x))
        with self.assertRaisesRegex(BufferError, "CUDA device"):
            memoryview(a)
        with self.assertRaises((BufferError, RuntimeError, TypeError, ValueError)):
            np.from_dlpack(a)
        with self.assertRaisesRegex(BufferError, "dl_device"):
            a.__dlpack__(dl_device=(1, 0))
        h = self.c.empty(4, "int32", host=True)
        self.assertEqual(h.__dlpack_device__(), (1, 0))
        np.asarray(h)[:] = [1, 2, 3, 4]
        self.assertEqual(list(np.from_dlpack(h)), [1, 2, 3, 4])

    def test_append_decode_prefill_every_dtype(self):
        """bf16, f16 and f32 pools: CUDA keys and values appended, decode and prefill of CUDA
        queries outside the arena, in it, and into a CUDA out tensor, match float64 attention"""
        for dtype in ("f32", "f16", "bf16"):
            with self.subTest(dtype=dtype):
                td, tol = torch_dtype(dtype), TOLERANCE[dtype]
                p = self.pool("py-cuda-" + dtype, dtype)
                lengths = [5, 17, 40]
                seqs, kv = self.fill(p, lengths, td)
                tables = [s.blocks for s in seqs]
                for layer in range(L):
                    q = self.randn(len(seqs), HQ, D, dtype=td)
                    want = torch.cat([attention(q[i:i + 1], kv[i][0][layer], kv[i][1][layer])
                                      for i in range(len(seqs))])
                    out = p.decode(layer, q, tables, lengths)
                    self.assertEqual(out.__dlpack_device__(), (2, self.dev))
                    got = torch.from_dlpack(out)
                    self.assertEqual(got.dtype, td)
                    torch.testing.assert_close(got.double().cpu(), want, atol=tol, rtol=0)
                    qa = torch.from_dlpack(self.c.empty(tuple(q.shape), dtype))
                    qa.copy_(q)
                    o = torch.empty_like(q)
                    self.assertIs(p.decode(layer, qa, tables, lengths, out=o), o)
                    torch.testing.assert_close(o.double().cpu(), want, atol=tol, rtol=0)
                    # Prefill of the last 3 and 7 positions of the first two sequences.
                    nq = [3, 7]
                    qp = self.randn(sum(nq), HQ, D, dtype=td)
                    want = torch.cat([attention(qp[:3], kv[0][0][layer], kv[0][1][layer], lengths[0] - 3),
                                      attention(qp[3:], kv[1][0][layer], kv[1][1][layer], lengths[1] - 7)])
                    got = torch.from_dlpack(p.prefill(layer, qp, [0, 3, 10], tables[:2], lengths[:2]))
                    torch.testing.assert_close(got.double().cpu(), want, atol=tol, rtol=0)

    def test_in_arena_keys_and_values(self):
        """keys and values already in the data arena are appended in place and read back through
        layer views"""
        p = self.pool("py-cuda-inplace", "bf16", mode=0o600 | paged.POOL_EXPORTED)
        s = p.sequence()
        self.addCleanup(s.close)
        slots = s.extend(20)
        k = torch.from_dlpack(self.c.empty((20, H, D), "bf16"))
        v = torch.from_dlpack(self.c.empty((20, H, D), "bf16"))
        kk, vv = self.randn(20, H, D, dtype=torch.bfloat16), self.randn(20, H, D, dtype=torch.bfloat16)
        k.copy_(kk)
        v.copy_(vv)
        p.append(1, k, v, slots)
        views = p.layer(1)
        self.assertTrue(all(x.readonly for x in views))
        self.assertEqual(views[0].__dlpack_device__(), (2, self.dev))
        kl, vl = (torch.from_dlpack(x) for x in views)
        self.assertEqual(tuple(kl.shape), (64, H, B, D))
        for t, slot in enumerate(slots):
            block, at = divmod(slot, B)
            self.assertTrue(torch.equal(kl[block, :, at], kk[t]), "key of token %d" % t)
            self.assertTrue(torch.equal(vl[block, :, at], vv[t]), "value of token %d" % t)
        self.assertFalse(torch.equal(torch.from_dlpack(p.layer(0)[0])[s.blocks[0], :, 0], kk[0]))

    def test_sealed_pool_has_no_layer_views(self):
        """layer() of a sealed pool raises libpaged's PermissionDeniedError"""
        p = self.pool("py-cuda-sealed", "f16", mode=0o600 | paged.POOL_SEALED)
        with self.assertRaises(paged.PermissionDeniedError):
            p.layer(0)

    def test_stream_orders_producer_request_and_consumer(self):
        """a query written on a side stream right after a long kernel, decoded with wait=False on
        that stream, and its output read there at once: the consumer sees the attention of the new
        query, with no host wait in between"""
        p = self.pool("py-cuda-stream", "f16")
        lengths = [33]
        seqs, kv = self.fill(p, lengths, torch.float16)
        qa = torch.from_dlpack(self.c.empty((1, HQ, D), "f16"))
        qa.fill_(7.0)   # stale: a request that does not wait for the stream reads this
        out = torch.from_dlpack(self.c.empty((1, HQ, D), "f16"))
        out.fill_(0.0)
        torch.cuda.synchronize(self.cuda)
        fresh = self.randn(1, HQ, D, dtype=torch.float16)
        big, w = self.randn(4096, 4096), self.randn(4096, 4096) / 64.0
        side = torch.cuda.Stream(self.cuda)
        side.wait_stream(torch.cuda.current_stream(self.cuda))
        with torch.cuda.stream(side):
            for _ in range(8):      # some milliseconds of work the query depends on (bounded values)
                big = torch.tanh(big @ w)
            qa.copy_(fresh + big[0, 0] * 0)
            r = p.decode(0, qa, [seqs[0].blocks], lengths, out=out, wait=False)
            got = out.clone()
            qa.fill_(-7.0)  # after the request on the stream: it must not see this either
        r.wait()
        side.synchronize()
        want = attention(fresh, kv[0][0][0], kv[0][1][0])
        torch.testing.assert_close(got.double().cpu(), want, atol=TOLERANCE["f16"], rtol=0)
        torch.testing.assert_close(out.double().cpu(), want, atol=TOLERANCE["f16"], rtol=0)

    def test_explicit_stream_argument(self):
        """stream= takes a torch.cuda.Stream, its int handle and the CUDA stream protocol; a wrong
        type raises TypeError naming stream"""
        p = self.pool("py-cuda-streamarg", "f32")
        lengths = [9]
        seqs, kv = self.fill(p, lengths, torch.float32)
        want = attention(q := self.randn(1, HQ, D), kv[0][0][1], kv[0][1][1])
        side = torch.cuda.Stream(self.cuda)
        side.wait_stream(torch.cuda.current_stream(self.cuda))

        class Protocol:
            """An object of the CUDA stream protocol."""

            def __cuda_stream__(self):
                """Returns (0, the side stream's handle)."""
                return (0, side.cuda_stream)

        for stream in (side, side.cuda_stream, Protocol()):
            out = p.decode(1, q, [seqs[0].blocks], lengths, stream=stream)
            with torch.cuda.stream(side):
                got = torch.from_dlpack(out).double().cpu()
            torch.testing.assert_close(got, want, atol=TOLERANCE["f32"], rtol=0)
        with self.assertRaisesRegex(TypeError, "^stream: "):
            p.decode(1, q, [seqs[0].blocks], lengths, stream="side")

    def test_chain_of_layers_without_host_waits(self):
        """twelve layers queued on one stream with wait=False and no host wait between them, each
        query made on the stream from the previous layer's output (arena out tensors): every
        output matches the reference chain"""
        N = 12
        p = self.pool("py-cuda-chain", "f32", layers=N)
        lengths = [21]
        seqs, kv = self.fill(p, lengths, torch.float32, layers=N)
        bias = self.randn(N, 1, HQ, D)
        outs = [torch.from_dlpack(self.c.empty((1, HQ, D))) for _ in range(N)]
        s = torch.cuda.Stream(self.cuda)
        s.wait_stream(torch.cuda.current_stream(self.cuda))
        handles = []
        with torch.cuda.stream(s):
            q = bias[0].clone()
            for layer in range(N):
                handles.append(p.decode(layer, q, [seqs[0].blocks], lengths, out=outs[layer], wait=False))
                # Queued after the request on the stream: it reads the output once it is there.
                q = bias[(layer + 1) % N] + 0.5 * outs[layer]
        for r in handles:
            r.wait()
        s.synchronize()
        q = bias[0].double().cpu()
        for layer in range(N):
            want = attention(q, kv[0][0][layer], kv[0][1][layer])
            torch.testing.assert_close(outs[layer].double().cpu(), want, atol=1e-3, rtol=0,
                                       msg="layer %d" % layer)
            q = bias[(layer + 1) % N].double().cpu() + 0.5 * want

    def test_wrong_arguments_name_the_argument(self):
        """CPU tensors, numpy arrays, another device, a wrong dtype and device metadata raise
        TypeError naming the argument"""
        p = self.pool("py-cuda-errors", "f16")
        seqs, kv = self.fill(p, [4], torch.float16)
        bt, sl = [seqs[0].blocks], [4]
        q = self.randn(1, HQ, D, dtype=torch.float16)
        with self.assertRaisesRegex(TypeError, r"^q: a tensor in host memory .*cuda backend"):
            p.decode(0, q.cpu(), bt, sl)
        with self.assertRaisesRegex(TypeError, r"^k: host memory"):
            p.append(0, np.zeros((1, H, D), np.float16), q[:, :H], seqs[0].extend(1))
        with self.assertRaisesRegex(TypeError, r"^q: expected f16 \(the pool's dtype\), got f32"):
            p.decode(0, q.float(), bt, sl)
        with self.assertRaisesRegex(TypeError, r"^out: a tensor in host memory"):
            p.decode(0, q, bt, sl, out=torch.empty(1, HQ, D, dtype=torch.float16))
        with self.assertRaisesRegex(TypeError, r"^block_tables: an array in device memory"):
            p.decode(0, q, self.c.empty((1, 1), "int32"), sl)
        with self.assertRaisesRegex(TypeError, r"^q: an array in host memory"):
            p.decode(0, self.c.empty((1, HQ, D), "f16", host=True), bt, sl)
        if torch.cuda.device_count() > 1:
            other = (self.dev + 1) % torch.cuda.device_count()
            with self.assertRaisesRegex(TypeError, r"^q: a tensor on CUDA device %d" % other):
                p.decode(0, q.to(torch.device("cuda", other)), bt, sl)

    def test_failed_request_releases_its_stream(self):
        """a decode the daemon refuses raises from result(), and the stream it was ordered on goes
        on: work queued after it runs"""
        p = self.pool("py-cuda-fail", "f32")
        q = self.randn(1, HQ, D)
        s = torch.cuda.Stream(self.cuda)
        s.wait_stream(torch.cuda.current_stream(self.cuda))
        with torch.cuda.stream(s):
            r = p.decode(0, q, [[63]], [5], wait=False)
            after = q * 2
        with self.assertRaises(paged.NotHeldError):
            r.result()
        s.synchronize()
        torch.testing.assert_close(after, q * 2)

    def test_stats_count_the_requests(self):
        """Client.stats() grows by the appends and decodes the test made"""
        p = self.pool("py-cuda-stats", "f32")
        before = self.c.stats()
        seqs, kv = self.fill(p, [6, 3], torch.float32)
        n = 3
        for _ in range(n):
            p.decode(0, self.randn(2, HQ, D), [s.blocks for s in seqs], [6, 3])
        after = self.c.stats()
        self.assertEqual(after["append"]["requests"] - before["append"]["requests"], 2)
        self.assertEqual(after["append"]["tokens"] - before["append"]["tokens"], 9)
        self.assertEqual(after["decode"]["requests"] - before["decode"]["requests"], n)
        self.assertEqual(after["decode"]["errors"] - before["decode"]["errors"], 0)


@unittest.skipIf(torch is None, "torch is not installed")
class CpuStreamTest(DaemonTest):
    """The stream argument and host arrays on the cpu backend."""

    def test_stream_must_be_none_on_cpu(self):
        """on the cpu backend stream=None is the only stream; another raises TypeError naming
        stream; torch CPU tensors and host=True arrays go in"""
        with paged.connect(self.daemon.socket, name="cpu-stream") as c:
            p = c.create_pool("py-cpu-stream", num_layers=1, num_kv_heads=H, head_dim=D, block_size=B,
                              dtype="f32", num_blocks=4)
            try:
                s = p.sequence()
                slots = s.extend(3)
                k, v = torch.randn(3, H, D), torch.randn(3, H, D)
                p.append(0, k, v, slots, stream=None)
                q = torch.randn(1, HQ, D)
                bt = c.empty((1, 1), "int32", host=True)
                np.asarray(bt)[:] = s.blocks[0]
                got = torch.from_dlpack(p.decode(0, q, bt, [3], stream=None))
                torch.testing.assert_close(got.double(), attention(q, k, v), atol=1e-4, rtol=0)
                with self.assertRaisesRegex(TypeError, "^stream: the cpu backend"):
                    p.decode(0, q, bt, [3], stream=0)
                s.close()
            finally:
                p.detach()
                c.destroy_pool("py-cpu-stream")
