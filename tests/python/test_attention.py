# test_attention.py: APPEND, DECODE and PREFILL through pagedd against attention computed in numpy.
# SPDX-License-Identifier: MIT
"""Fresh random f32 keys, values and queries; the daemon's outputs compared with
softmax(q k^T * scale) v over each sequence's tokens (GQA), within f32 tolerance."""

import unittest

import numpy as np

import paged
from daemon import DaemonTest
from reference import attention

L, H, D, B, HQ = 3, 2, 64, 16, 8   # GQA: 4 query heads per KV head
RTOL, ATOL = 1e-5, 2e-5


class AttentionTest(DaemonTest):
    """Requests on one daemon and an f32 pool."""

    def setUp(self):
        """Connects and creates the pool."""
        self.c = paged.connect(self.daemon.socket, name="attention")
        self.addCleanup(self.c.close)
        self.p = self.c.create_pool("py-attn", num_layers=L, num_kv_heads=H, head_dim=D, block_size=B,
                                    dtype="f32", num_blocks=64)
        self.addCleanup(lambda: self.c.destroy_pool("py-attn"))
        self.rng = np.random.default_rng(2026)

    def filled(self, n, per_layer=False):
        """Makes a sequence of n tokens with random keys and values in every layer, appended all
        layers at once (or layer by layer); returns it and the K and V [L, n, H, D]."""
        s = self.p.sequence()
        slots = s.extend(n)
        k = self.rng.standard_normal((L, n, H, D), dtype=np.float32)
        v = self.rng.standard_normal((L, n, H, D), dtype=np.float32)
        if per_layer:
            for layer in range(L):
                self.p.append(layer, k[layer], v[layer], np.array(slots, dtype=np.int32))
        else:
            self.p.append(paged.ALL_LAYERS, k, v, slots)
        return s, k, v

    def test_append_decode_matches_numpy(self):
        """a batch of three sequences (5, 17 and 40 tokens) decodes each layer as numpy computes it,
        with the default scale and with scale 0.3, into a new arena array and into a numpy out"""
        seqs = [self.filled(5), self.filled(17, per_layer=True), self.filled(40)]
        width = max(len(s.blocks) for s, _, _ in seqs)
        tables = [s.blocks + [0] * (width - len(s.blocks)) for s, _, _ in seqs]
        lens = np.array([len(s) for s, _, _ in seqs], dtype=np.int32)
        for layer in range(L):
            q = self.rng.standard_normal((3, HQ, D), dtype=np.float32)
            out = self.p.decode(layer, q, np.array(tables, dtype=np.int32), lens)
            self.assertIsInstance(out, paged.ArenaArray)
            self.assertEqual((out.shape, out.dtype), ((3, HQ, D), "f32"))
            got = np.from_dlpack(out)
            for i, (_, k, v) in enumerate(seqs):
                ref = attention(q[i:i + 1], k[layer], v[layer])
                np.testing.assert_allclose(got[i:i + 1], ref, rtol=RTOL, atol=ATOL,
                                           err_msg="layer %d sequence %d" % (layer, i))
            mine = np.full((3, HQ, D), np.nan, dtype=np.float32)
            self.assertIs(self.p.decode(layer, q, tables, lens, scale=0.3, out=mine), mine)
            for i, (_, k, v) in enumerate(seqs):
                np.testing.assert_allclose(mine[i:i + 1], attention(q[i:i + 1], k[layer], v[layer], scale=0.3),
                                           rtol=RTOL, atol=ATOL)
            self.assertGreater(np.abs(mine - got).max(), 1e-3)

    def test_prefill_matches_numpy(self):
        """prefill of 4 and 7 new tokens at the ends of 10- and 33-token contexts is causal
        attention as numpy computes it, for every layer"""
        (a, ka, va), (b, kb, vb) = self.filled(10), self.filled(33)
        new = [4, 7]
        indptr = np.array([0, 4, 11], dtype=np.int32)
        tables = [a.blocks + [0] * (len(b.blocks) - len(a.blocks)), b.blocks]
        lens = [len(a), len(b)]
        for layer in range(L):
            q = self.rng.standard_normal((11, HQ, D), dtype=np.float32)
            got = np.from_dlpack(self.p.prefill(layer, q, indptr, tables, lens))
            for (n, k, v, lo, m) in ((10, ka, va, 0, new[0]), (33, kb, vb, 4, new[1])):
                ref = attention(q[lo:lo + m], k[layer], v[layer], positions=list(range(n - m, n)))
                np.testing.assert_allclose(got[lo:lo + m], ref, rtol=RTOL, atol=ATOL, err_msg="layer %d" % layer)

    def test_decode_after_extend_sees_new_token(self):
        """a token appended after a decode changes the next decode as numpy says"""
        s, k, v = self.filled(16)
        q = self.rng.standard_normal((1, HQ, D), dtype=np.float32)
        before = np.from_dlpack(self.p.decode(2, q, [s.blocks], [len(s)])).copy()
        slot = s.extend(1)
        k1 = self.rng.standard_normal((L, 1, H, D), dtype=np.float32)
        v1 = self.rng.standard_normal((L, 1, H, D), dtype=np.float32)
        self.p.append(paged.ALL_LAYERS, k1, v1, slot)
        after = np.from_dlpack(self.p.decode(2, q, [s.blocks], [len(s)]))
        ref = attention(q, np.concatenate([k[2], k1[2]]), np.concatenate([v[2], v1[2]]))
        np.testing.assert_allclose(after, ref, rtol=RTOL, atol=ATOL)
        self.assertGreater(np.abs(after - before).max(), 1e-4)

    def test_options_match_numpy(self):
        """scale, soft cap, ALiBi slopes and a window reach the daemon: decode and prefill match
        numpy with each option alone and all together"""
        (a, ka, va), (b, kb, vb) = self.filled(12), self.filled(37)
        tables = [a.blocks + [0] * (len(b.blocks) - len(a.blocks)), b.blocks]
        slopes = np.linspace(0.05, 0.4, HQ).astype(np.float32)
        variants = [dict(scale=0.2), dict(soft_cap=1.5), dict(alibi_slopes=slopes), dict(window=7),
                    dict(scale=0.3, soft_cap=2.0, alibi_slopes=list(map(float, slopes)), window=5)]
        for opts in variants:
            ref_opts = dict(scale=opts.get("scale"), soft_cap=opts.get("soft_cap", 0.0),
                            alibi=None if "alibi_slopes" not in opts else np.asarray(opts["alibi_slopes"], np.float64),
                            window=opts.get("window", 0))
            q = self.rng.standard_normal((2, HQ, D), dtype=np.float32)
            got = np.from_dlpack(self.p.decode(1, q, tables, [12, 37], **opts))
            for i, (n, k, v) in enumerate(((12, ka, va), (37, kb, vb))):
                ref = attention(q[i:i + 1], k[1], v[1], **ref_opts)
                np.testing.assert_allclose(got[i:i + 1], ref, rtol=RTOL, atol=ATOL, err_msg="decode %s" % opts)
            q = self.rng.standard_normal((9, HQ, D), dtype=np.float32)
            got = np.from_dlpack(self.p.prefill(2, q, [0, 3, 9], tables, [12, 37], **opts))
            for (n, k, v, lo, m) in ((12, ka, va, 0, 3), (37, kb, vb, 3, 6)):
                ref = attention(q[lo:lo + m], k[2], v[2], positions=list(range(n - m, n)), **ref_opts)
                np.testing.assert_allclose(got[lo:lo + m], ref, rtol=RTOL, atol=ATOL, err_msg="prefill %s" % opts)
