# test_shards.py: a tensor-parallel pool of two shards worked by two ranks, against an unsharded pool.
# SPDX-License-Identifier: MIT
"""Two clients in one process are the two ranks of a group: shards 0 and 1 of a pool whose 4
KV heads are split 2 and 2. Rank 0 allocates, each rank appends its own heads of random keys
and values and decodes its own query heads; the outputs are the unsharded pool's decode of
the same data, and numpy's. A block is published only when both ranks have published it."""

import numpy as np

import paged
from daemon import DaemonTest
from reference import attention

L, H, HQ, D, B, N = 2, 4, 8, 64, 16, 32
SHARDS = 2
SH, SQ = H // SHARDS, HQ // SHARDS   # KV heads and query heads per rank
T, FULL = 40, 2                      # tokens of the sequence: 2 full blocks and a partial one
RTOL, ATOL = 1e-5, 2e-5


class ShardTest(DaemonTest):
    """A sharded pool and an unsharded one on one daemon."""

    def connect(self, name):
        """Returns a new client of the daemon, closed at the end of the test."""
        c = paged.connect(self.daemon.socket, name=name)
        self.addCleanup(c.close)
        return c

    def create(self, c, name, **kw):
        """Creates pool name (L layers of H KV heads, f32, N blocks, and kw) on c and returns it,
        its name destroyed at the end of the test."""
        geometry = dict(num_layers=L, num_kv_heads=H, head_dim=D, block_size=B, dtype="f32", num_blocks=N)
        geometry.update(kw)
        p = c.create_pool(name, **geometry)
        self.addCleanup(lambda: c.closed or c.destroy_pool(name))
        return p

    def test_creation_and_attachment_are_checked(self):
        """shards that do not divide the KV heads, more than 16 shards, a host tier or POOL_PEERS
        with shards, a shard past the pool's, a shard of an unsharded pool, a shard of a group
        twice, a group without a shard and a shard that is no int are refused"""
        c, c2 = self.connect("tp-owner"), self.connect("tp-other")
        with self.assertRaises(paged.GeometryError):
            self.create(c, "py-tp-bad", shards=3)
        with self.assertRaises(paged.InvalidArgumentError):
            self.create(c, "py-tp-bad", num_kv_heads=32, shards=17)
        with self.assertRaises(paged.InvalidArgumentError):
            self.create(c, "py-tp-bad", shards=SHARDS, host_tier_bytes=1 << 20)
        with self.assertRaises(paged.InvalidArgumentError):
            self.create(c, "py-tp-bad", shards=SHARDS, mode=0o600 | paged.POOL_PEERS)
        held = [self.create(c, "py-tp-plain"), self.create(c, "py-tp-checks", shards=SHARDS, group="model")]
        with self.assertRaises(paged.InvalidArgumentError):
            c2.attach_pool("py-tp-checks", shard=SHARDS, group="model")
        with self.assertRaises(paged.InvalidArgumentError):
            c2.attach_pool("py-tp-plain", shard=1)
        with self.assertRaises(paged.ExistsError):
            c2.attach_pool("py-tp-checks", shard=0, group="model")
        with self.assertRaisesRegex(ValueError, "group: a group is joined with a shard"):
            c2.attach_pool("py-tp-checks", group="model")
        with self.assertRaisesRegex(TypeError, "shard: an int or None"):
            c2.attach_pool("py-tp-checks", shard="1")
        with c2.attach_pool("py-tp-plain") as plain:
            info = plain.info()
            self.assertEqual((info["shards"], info["shard"], info["kv_head_offset"], info["num_kv_heads"]),
                             (1, 0, 0, H))
        with c2.attach_pool("py-tp-checks") as default:
            info = default.info()
            self.assertEqual((info["shards"], info["shard"], info["kv_head_offset"], info["num_kv_heads"]),
                             (SHARDS, 0, 0, SH))
            with self.assertRaises(paged.ExistsError):
                self.connect("tp-third").attach_pool("py-tp-checks", shard=0)
        self.assertEqual([p.info()["shards"] for p in held], [1, SHARDS])

    def test_two_ranks_decode_as_one_pool_and_publish_together(self):
        """ranks 0 and 1 of group 'model' see their shard's heads in info() and layer(); rank 0's
        blocks are rank 1's; each rank's decode of its query heads is the unsharded pool's and
        numpy's; rank 0's publish alone is found by no LOOKUP until rank 1 publishes too"""
        rng = np.random.default_rng(2027)
        k = rng.standard_normal((L, T, H, D), dtype=np.float32)
        v = rng.standard_normal((L, T, H, D), dtype=np.float32)
        q = rng.standard_normal((L, 1, HQ, D), dtype=np.float32)
        tokens = [int(t) for t in rng.integers(0, 50000, T)]

        owner = self.connect("tp-ref")
        ref = self.create(owner, "py-tp-ref")
        rblocks = ref.alloc(3)
        ref.append(paged.ALL_LAYERS, k, v, [rblocks[t // B] * B + t % B for t in range(T)])
        want = [np.from_dlpack(ref.decode(layer, q[layer], [rblocks], [T])).copy() for layer in range(L)]
        want32 = [np.from_dlpack(ref.decode(layer, q[layer], [rblocks], [FULL * B])).copy() for layer in range(L)]
        for layer in range(L):
            np.testing.assert_allclose(want[layer], attention(q[layer], k[layer], v[layer]), rtol=RTOL, atol=ATOL)

        c0, c1 = self.connect("tp-rank0"), self.connect("tp-rank1")
        ranks = [self.create(c0, "py-tp", shards=SHARDS, shard=0, group="model"),
                 c1.attach_pool("py-tp", shard=1, group="model")]
        self.addCleanup(ranks[1].detach)
        for r, p in enumerate(ranks):
            info = p.info()
            self.assertEqual((info["shards"], info["shard"], info["num_kv_heads"], info["kv_head_offset"]),
                             (SHARDS, r, SH, r * SH), "rank %d" % r)
            self.assertEqual(info["bytes"], ref.info()["bytes"] // SHARDS)
            self.assertEqual(info["id"], ranks[0].info()["id"])

        blocks = ranks[0].alloc(3)
        slots = [blocks[t // B] * B + t % B for t in range(T)]
        heads = [slice(r * SH, (r + 1) * SH) for r in range(SHARDS)]
        for r, p in enumerate(ranks):
            p.append(paged.ALL_LAYERS, np.ascontiguousarray(k[:, :, heads[r]]),
                     np.ascontiguousarray(v[:, :, heads[r]]), slots)
        for r, p in enumerate(ranks):
            for layer in range(L):
                kl, vl = p.layer(layer)
                self.assertEqual(kl.shape, (N, SH, B, D))
                for i, b in enumerate(blocks):
                    n = min(B, T - i * B)
                    np.testing.assert_array_equal(np.asarray(kl)[b, :, :n], k[layer, i * B:i * B + n, heads[r]]
                                                  .transpose(1, 0, 2), err_msg="rank %d layer %d" % (r, layer))
                    np.testing.assert_array_equal(np.asarray(vl)[b, :, :n], v[layer, i * B:i * B + n, heads[r]]
                                                  .transpose(1, 0, 2), err_msg="rank %d layer %d" % (r, layer))
                del kl, vl
        for r, p in enumerate(ranks):
            qh = slice(r * SQ, (r + 1) * SQ)
            for layer in range(L):
                got = np.from_dlpack(p.decode(layer, np.ascontiguousarray(q[layer][:, qh]), [blocks], [T]))
                self.assertEqual(got.shape, (1, SQ, D))
                np.testing.assert_allclose(got, want[layer][:, qh], rtol=RTOL, atol=ATOL,
                                           err_msg="rank %d layer %d" % (r, layer))

        probe = self.connect("tp-probe").attach_pool("py-tp", shard=0, group="probe")
        self.assertEqual(ranks[0].publish(tokens[:FULL * B], blocks[:FULL]), 0)
        self.assertEqual(probe.lookup(tokens[:FULL * B]), [])
        other = [t + 1 for t in tokens[:FULL * B]]
        with self.assertRaises(paged.InvalidArgumentError):
            ranks[1].publish(other, blocks[:FULL])
        self.assertEqual(probe.lookup(tokens[:FULL * B]), [])
        self.assertEqual(ranks[1].publish(tokens[:FULL * B], blocks[:FULL]), FULL)
        found = probe.lookup(tokens[:FULL * B])
        self.assertEqual(found, blocks[:FULL])
        for layer in range(L):
            got = np.from_dlpack(probe.decode(layer, np.ascontiguousarray(q[layer][:, :SQ]), [found], [FULL * B]))
            np.testing.assert_allclose(got, want32[layer][:, :SQ], rtol=RTOL, atol=ATOL, err_msg="layer %d" % layer)
        probe.free(found)
        with self.assertRaises(paged.NotHeldError):
            probe.append(0, np.zeros((1, SH, D), np.float32), np.zeros((1, SH, D), np.float32), [slots[T - 1] + 1])
