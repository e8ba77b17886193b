# test_arrays.py: arena arrays, DLPack both ways with numpy, inputs of every kind, bad arguments.
# SPDX-License-Identifier: MIT
"""Zero copy in and out of the arena, the DLPack deleter rules, and every bad argument
answered by an exception naming it."""

import gc
import re
import sys
import unittest

import numpy as np

import paged
from daemon import DaemonTest


class DLPackOnly:
    """An object that offers a numpy array by DLPack alone (no buffer protocol), on a device
    it can pretend to be on."""

    def __init__(self, array, device=(1, 0)):
        """Wraps array, reporting device from __dlpack_device__."""
        self.array = array
        self.device = device

    def __dlpack__(self, stream=None):
        """Returns the array's capsule."""
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        """Returns the device given at creation."""
        return self.device


class ArrayTest(DaemonTest):
    """Arrays against one daemon, a pool of 2 layers, 2 KV heads, D 64, B 16 (f32)."""

    def setUp(self):
        """Connects, makes the pool and a 20-token sequence with random keys and values."""
        self.c = paged.connect(self.daemon.socket, name="arrays")
        self.addCleanup(self.c.close)
        self.p = self.c.create_pool("py-arrays", num_layers=2, num_kv_heads=2, head_dim=64, block_size=16,
                                    dtype="f32", num_blocks=64)
        self.addCleanup(lambda: self.c.closed or self.c.destroy_pool("py-arrays"))
        self.rng = np.random.default_rng(5)
        self.s = self.p.sequence()
        slots = self.s.extend(20)
        kv = self.rng.standard_normal((2, 2, 20, 2, 64), dtype=np.float32)
        self.p.append(paged.ALL_LAYERS, kv[0], kv[1], slots)
        self.q = self.rng.standard_normal((1, 4, 64), dtype=np.float32)

    def decode(self, q=None, **kw):
        """Decodes q (default: the test's) over the sequence at layer 0; returns the output."""
        return self.p.decode(0, self.q if q is None else q, [self.s.blocks], [len(self.s)], **kw)

    def test_empty(self):
        """empty() makes an array of the shape and dtype asked, 64-byte aligned in the arena"""
        a = self.c.empty((3, 5, 7), dtype="bf16")
        self.assertEqual((a.shape, a.dtype, a.nbytes), ((3, 5, 7), "bf16", 3 * 5 * 7 * 2))
        self.assertEqual(a.offset % 64, 0)
        self.assertEqual(self.c.empty(6, dtype="int32").shape, (6,))
        self.assertEqual(self.c.empty((2, 2)).dtype, "f32")

    def test_numpy_round_trip_shares_memory(self):
        """bytes written through numpy are what the module reads and DLPack shows, at the same
        address; what the daemon writes into an arena output appears in a view taken before"""
        a = self.c.empty((1, 4, 64))
        w = np.asarray(a)
        w[:] = self.q
        d = np.from_dlpack(a)
        self.assertEqual(w.ctypes.data, a.address)
        self.assertEqual(d.ctypes.data, a.address)
        self.assertEqual(d.tobytes(), self.q.tobytes())
        self.assertEqual(bytes(memoryview(a)), self.q.tobytes())
        out = self.c.empty((1, 4, 64))
        seen = np.from_dlpack(out)
        seen_before = seen.copy()
        r = self.decode(a, out=out)
        self.assertIs(r, out)
        self.assertFalse(np.array_equal(seen, seen_before) and not seen_before.any())
        np.testing.assert_array_equal(seen, self.decode(self.q.copy()))
        self.assertEqual(np.from_dlpack(r).ctypes.data, out.address)

    def test_dlpack_deleter(self):
        """an unconsumed capsule gives its reference back when dropped; a consumer's tensor keeps
        the array alive until it goes; inputs taken by DLPack have their deleter called"""
        a = self.c.empty((8,))
        base = sys.getrefcount(a)
        cap = a.__dlpack__()
        self.assertEqual(sys.getrefcount(a), base + 1)
        del cap
        gc.collect()
        self.assertEqual(sys.getrefcount(a), base)
        np.asarray(a)[:] = np.arange(8)
        view = np.from_dlpack(a)
        self.assertEqual(sys.getrefcount(a), base + 1)
        del a
        gc.collect()
        np.testing.assert_array_equal(view, np.arange(8, dtype=np.float32))
        q = self.q.copy()
        qbase = sys.getrefcount(q)
        expect = self.decode(q.copy())
        np.testing.assert_array_equal(np.from_dlpack(self.decode(DLPackOnly(q))), np.from_dlpack(expect))
        gc.collect()
        self.assertEqual(sys.getrefcount(q), qbase)

    def test_dlpack_protocol(self):
        """__dlpack_device__ is the cpu; a stream, copy=True or another device are refused"""
        a = self.c.empty(4)
        self.assertEqual(a.__dlpack_device__(), (1, 0))
        with self.assertRaises(BufferError):
            a.__dlpack__(stream=1)
        with self.assertRaises(BufferError):
            a.__dlpack__(copy=True)
        with self.assertRaises(BufferError):
            a.__dlpack__(dl_device=(2, 0))
        self.assertEqual(np.from_dlpack(a).shape, (4,))
        with self.assertRaises(TypeError):
            paged.ArenaArray()

    def test_inputs_in_the_arena_are_not_copied(self):
        """in a 1 MiB arena, 400 KiB queries and outputs in the arena decode; the same queries
        from numpy, which must be copied in, do not fit"""
        with paged.connect(self.daemon.socket, name="small", host_arena_size=1 << 20) as c:
            p = c.create_pool("py-small", num_layers=1, num_kv_heads=2, head_dim=64, block_size=16, dtype="f32",
                              num_blocks=4)
            self.addCleanup(lambda: self.c.destroy_pool("py-small"))
            s = p.sequence()
            slots = s.extend(20)
            kv = self.rng.standard_normal((2, 20, 2, 64), dtype=np.float32)
            p.append(0, kv[0], kv[1], slots)
            n = 400
            q = c.empty((n, 4, 64))
            np.asarray(q)[:] = np.broadcast_to(self.q, (n, 4, 64))
            out = c.empty((n, 4, 64))
            tables, lens = [s.blocks] * n, [len(s)] * n
            p.decode(0, q, tables, lens, out=out)
            np.testing.assert_allclose(np.asarray(out)[n - 1], np.asarray(out)[0])
            with self.assertRaises(paged.NoMemoryError) as e:
                p.decode(0, np.asarray(q).copy(), tables, lens, out=out)
            self.assertEqual(e.exception.field, "q")

    def test_bad_arguments_name_the_argument(self):
        """wrong dtypes, shapes, strides, non-contiguous arrays, devices and types raise TypeError
        or ValueError naming the argument"""
        q, bt, lens = self.q, [self.s.blocks], [len(self.s)]
        p = self.p
        cases = [
            (TypeError, "q: expected f32", lambda: p.decode(0, q.astype(np.float64), bt, lens)),
            (TypeError, "q: expected f32.*got f16", lambda: p.decode(0, q.astype(np.float16), bt, lens)),
            (ValueError, r"q: expected shape \(\*, \*, 64\)", lambda: p.decode(0, q[:, :, :32].copy(), bt, lens)),
            (ValueError, "q: expected shape", lambda: p.decode(0, q[0], bt, lens)),
            (ValueError, "q: not C-contiguous", lambda: p.decode(0, np.asfortranarray(
                np.repeat(q, 2, axis=0)), bt * 2, lens * 2)),
            (ValueError, "q: not C-contiguous", lambda: p.decode(0, np.repeat(q, 2, axis=2)[:, :, ::2], bt, lens)),
            (TypeError, "q: a tensor on device type 2", lambda: p.decode(0, DLPackOnly(q, (2, 0)), bt, lens)),
            (ValueError, "q: not C-contiguous", lambda: p.decode(0, DLPackOnly(np.repeat(q, 2, axis=2)[:, :, ::2]),
                                                                  bt, lens)),
            (TypeError, "q: expected an array", lambda: p.decode(0, 5, bt, lens)),
            (TypeError, "q: expected an array", lambda: p.decode(0, [[[1.0] * 64] * 4], bt, lens)),
            (ValueError, "q: 1 rows for 2 sequences", lambda: p.decode(0, q, bt * 2, lens * 2)),
            (TypeError, "block_tables: expected int32, got int64",
             lambda: p.decode(0, q, np.array(bt, dtype=np.int64), lens)),
            (ValueError, r"block_tables: expected shape \(1, \*\)", lambda: p.decode(0, q, bt[0], lens)),
            (ValueError, r"block_tables\[1\]: not an int32", lambda: p.decode(0, q, [[0, 2 ** 40]], lens)),
            (TypeError, "seq_lens: expected int32, got f32",
             lambda: p.decode(0, q, bt, np.array(lens, dtype=np.float32))),
            (ValueError, r"out: expected shape \(1, 4, 64\)",
             lambda: p.decode(0, q, bt, lens, out=np.empty((2, 4, 64), np.float32))),
            (TypeError, "out: expected f32", lambda: p.decode(0, q, bt, lens, out=np.empty((1, 4, 64)))),
            (ValueError, "out: not a writable array", lambda: p.decode(0, q, bt, lens, out=np.frombuffer(
                bytes(1024), np.float32).reshape(1, 4, 64))),
            (ValueError, r"alibi_slopes: expected shape \(4\)", lambda: p.decode(0, q, bt, lens, alibi_slopes=[1.0])),
            (ValueError, "qo_indptr: its last entry", lambda: p.prefill(0, q, [0, 2], bt, lens)),
            (ValueError, r"qo_indptr: expected shape \(2\)", lambda: p.prefill(0, q, [0, 0, 1], bt, lens)),
            (TypeError, "k: expected f32", lambda: p.append(0, q[:, :2].astype(np.float16), q[:, :2], [0])),
            (TypeError, "v: expected f32", lambda: p.append(0, q[:, :2], q[:, :2].astype(np.float64), [0])),
            (ValueError, r"v: expected shape \(1, 2, 64\)", lambda: p.append(0, q[:, :2], q[:, :1], [0])),
            (ValueError, r"slots: expected shape \(1\)", lambda: p.append(0, q[:, :2], q[:, :2], [0, 1])),
            (ValueError, r"slots\[0\]: not an int32", lambda: p.append(0, q[:, :2], q[:, :2], ["x"])),
            (ValueError, r"k: expected shape \(2, \*, 2, 64\)",
             lambda: p.append(paged.ALL_LAYERS, q[:, :2], q[:, :2], [0])),
            (TypeError, "ids: expected int32", lambda: p.free(np.zeros(2, dtype=np.int16))),
            (ValueError, "count: -1", lambda: p.alloc(-1)),
            (ValueError, "dtype: 'f64' is not a dtype", lambda: self.c.empty(3, dtype="f64")),
            (ValueError, "dtype: int32 is no cache dtype", lambda: self.c.create_pool(
                "x", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, dtype="int32", num_blocks=1)),
            (TypeError, "dtype is required", lambda: self.c.create_pool(
                "x", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, num_blocks=1)),
            (ValueError, "shape: dimension 1 is -2", lambda: self.c.empty((3, -2))),
            (ValueError, "shape: 1 to 4 dimensions", lambda: self.c.empty((1, 1, 1, 1, 1))),
            (TypeError, "shape: an int or a sequence", lambda: self.c.empty("abc")),
        ]
        wrong = []
        for kind, pattern, call in cases:
            try:
                call()
                wrong.append("%s: nothing raised" % pattern)
            except Exception as e:  # every kind is checked below
                if not isinstance(e, kind) or not re.search(pattern, str(e)):
                    wrong.append("%s: %s(%s)" % (pattern, type(e).__name__, e))
        self.assertEqual(wrong, [], "%d of %d bad arguments" % (len(wrong), len(cases)))
        # The client survives all of them.
        self.c.nop()
        np.testing.assert_allclose(np.from_dlpack(self.decode()), np.from_dlpack(self.decode(self.q.copy())))


try:
    import torch
except ImportError:
    torch = None


@unittest.skipUnless(torch is not None, "torch is not installed")
class TorchTest(DaemonTest):
    """DLPack with torch's CPU tensors, where torch is installed."""

    def test_torch_round_trip_and_bf16(self):
        """torch.from_dlpack views an arena array in place; torch tensors (DLPack only) go in as
        k, v and q of a bf16 pool, and the output matches numpy's attention within bf16 rounding"""
        from reference import attention
        with paged.connect(self.daemon.socket, name="torch") as c:
            a = c.empty((2, 3))
            t = torch.from_dlpack(a)
            self.assertEqual(t.data_ptr(), a.address)
            t.copy_(torch.arange(6, dtype=torch.float32).reshape(2, 3))
            self.assertEqual(np.asarray(a).tolist(), [[0, 1, 2], [3, 4, 5]])
            p = c.create_pool("py-torch", num_layers=1, num_kv_heads=2, head_dim=64, block_size=16, dtype="bf16",
                              num_blocks=8)
            try:
                s = p.sequence()
                slots = s.extend(24)
                g = torch.Generator().manual_seed(4)
                k = torch.randn(24, 2, 64, generator=g).to(torch.bfloat16)
                v = torch.randn(24, 2, 64, generator=g).to(torch.bfloat16)
                p.append(0, k, v, torch.tensor(slots, dtype=torch.int32))
                q = torch.randn(1, 4, 64, generator=g).to(torch.bfloat16)
                out = p.decode(0, q, [s.blocks], [len(s)])
                self.assertEqual(out.dtype, "bf16")
                got = torch.from_dlpack(out).float().numpy()
                ref = attention(q.float().numpy(), k.float().numpy(), v.float().numpy())
                np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)
                with self.assertRaisesRegex(TypeError, "q: expected bf16"):
                    p.decode(0, q.float(), [s.blocks], [len(s)])
                with self.assertRaisesRegex(ValueError, "q: not C-contiguous"):
                    p.decode(0, torch.randn(1, 64, 4).to(torch.bfloat16).transpose(1, 2), [s.blocks], [len(s)])
                s.close()
                p.detach()
            finally:
                c.destroy_pool("py-torch")
