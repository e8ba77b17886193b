# test_client.py: paged.connect, the client as a context manager, pools, blocks and sequences.
# SPDX-License-Identifier: MIT
"""Every client, pool and sequence call of the package against a real pagedd."""

import os
import unittest

import numpy as np

import paged
from daemon import DaemonTest


class ClientTest(DaemonTest):
    """Calls on one daemon started for the class."""

    def connect(self, **kw):
        """Returns a new client of the daemon, closed at the end of the test."""
        c = paged.connect(self.daemon.socket, name="pytest", **kw)
        self.addCleanup(c.close)
        return c

    def pool(self, c, name, **kw):
        """Creates pool name (2 layers, 2 KV heads, D 64, B 16, f32, 32 blocks) and returns it,
        destroyed at the end of the test."""
        geometry = dict(num_layers=2, num_kv_heads=2, head_dim=64, block_size=16, dtype="f32", num_blocks=32)
        geometry.update(kw)
        p = c.create_pool(name, **geometry)
        self.addCleanup(lambda: c.closed or c.destroy_pool(name))
        return p

    def test_connect_context_manager(self):
        """connect() gives a client with an id and the cpu backend; nop round-trips; leaving the
        with block closes it"""
        with paged.connect(self.daemon.socket, name="pytest") as c:
            self.assertIsInstance(c, paged.Client)
            c.nop()
            self.assertGreater(c.id, 0)
            self.assertEqual(c.backend, "cpu")
            self.assertGreaterEqual(c.arena_size, 1 << 20)
            self.assertFalse(c.closed)
        self.assertTrue(c.closed)
        with self.assertRaisesRegex(paged.ClosedError, "client is closed"):
            c.nop()

    def test_connect_socket_from_environment(self):
        """connect() without a socket finds the daemon through $PAGED_SOCKET"""
        old = os.environ.get("PAGED_SOCKET")
        os.environ["PAGED_SOCKET"] = self.daemon.socket
        try:
            with paged.connect(name="env") as c:
                c.nop()
        finally:
            if old is None:
                del os.environ["PAGED_SOCKET"]
            else:
                os.environ["PAGED_SOCKET"] = old

    def test_pool_create_info_attach_destroy(self):
        """create_pool takes paged_pool_create's parameters, info() reports them, a second client
        attaches to the same pool, a taken name is ExistsError, destroy_pool removes the name"""
        c = self.connect()
        p = c.create_pool("py-life", num_layers=3, num_kv_heads=4, head_dim=128, block_size=8, dtype="f16",
                          num_blocks=20, mode=0o600)
        info = p.info()
        self.assertEqual((info["num_layers"], info["num_kv_heads"], info["head_dim"], info["block_size"],
                          info["num_blocks"], info["dtype"]), (3, 4, 128, 8, 20, "f16"))
        self.assertTrue(info["writable"])
        self.assertEqual(info["bytes"], 3 * 2 * 20 * 4 * 8 * 128 * 2)
        self.assertEqual(info["mode"] & 0o777, 0o600)
        with self.assertRaises(paged.ExistsError):
            c.create_pool("py-life", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16, dtype="f32",
                          num_blocks=4)
        c2 = self.connect()
        with c2.attach_pool("py-life") as p2:
            self.assertEqual(p2.info()["id"], info["id"])
        self.assertTrue(p2.detached)
        c.destroy_pool("py-life")
        with self.assertRaises(paged.NotFoundError) as e:
            c2.attach_pool("py-life")
        self.assertIn("py-life", e.exception.message)
        p.detach()
        self.assertTrue(p.detached)
        with self.assertRaisesRegex(paged.ClosedError, "pool is closed"):
            p.alloc(1)

    def test_alloc_free(self):
        """alloc takes distinct blocks in range, all or nothing; free takes lists and int32 arrays"""
        c = self.connect()
        p = self.pool(c, "py-blocks", num_blocks=12)
        ids = p.alloc(5)
        self.assertEqual(len(set(ids)), 5)
        self.assertTrue(all(0 <= i < 12 for i in ids))
        with self.assertRaises(paged.NoSpaceError):
            p.alloc(8)
        rest = p.alloc(7)
        self.assertEqual(sorted(ids + rest), list(range(12)))
        p.free(ids)
        p.free(np.array(rest, dtype=np.int32))
        self.assertEqual(len(p.alloc(12)), 12)

    def test_prefix_controls(self):
        """a pinned prefix survives an allocation of every other block and goes once unpinned;
        evict_prefix drops it; the pool's pin limit holds; set_pool_ttl names its pool"""
        c = self.connect()
        p = self.pool(c, "py-pins")
        tokens = list(range(700, 764))
        blocks = p.alloc(4)
        self.assertEqual(p.publish(tokens, blocks), 4)
        p.free(blocks)
        self.assertEqual(p.pin(tokens), 4)
        rest = p.alloc(28)
        with self.assertRaises(paged.NoSpaceError):
            p.alloc(1)
        p.free(rest)
        self.assertEqual(p.unpin(), 4)
        self.assertEqual(p.unpin(tokens), 4)
        self.assertEqual(p.evict_prefix(tokens), 4)
        self.assertEqual(p.lookup(tokens), [])
        self.assertEqual(p.pin(tokens), 0)
        long = list(range(1000, 1000 + 17 * 16))
        ids = p.alloc(17)
        self.assertEqual(p.publish(long, ids), 17)
        with self.assertRaises(paged.LimitError):
            p.pin(long)
        p.free(ids)
        with self.assertRaisesRegex(ValueError, "tokens: 5 tokens are not whole blocks"):
            p.pin([1, 2, 3, 4, 5])
        self.assertIsNone(c.set_pool_ttl("py-pins", 60000))
        with self.assertRaises(paged.NotFoundError):
            c.set_pool_ttl("no-such-pool", 1)

    def test_host_tier(self):
        """a pool created with host_tier_bytes keeps the prefix an allocation pushes out, and
        lookup brings it back with the same keys and values; too large a tier is LimitError"""
        c = self.connect()
        unit = 2 * 2 * 2 * 16 * 64 * 4
        p = self.pool(c, "py-tier", num_blocks=8, host_tier_bytes=4 * unit)
        tokens = list(range(300, 364))
        blocks = p.alloc(4)
        kv = np.random.default_rng(12).standard_normal((2, 2, 64, 2, 64), dtype=np.float32)
        slots = [blocks[t // 16] * 16 + t % 16 for t in range(64)]
        p.append(paged.ALL_LAYERS, kv[0], kv[1], slots)
        self.assertEqual(p.publish(tokens, blocks), 4)
        p.free(blocks)
        p.free(p.alloc(8))
        found = p.lookup(tokens)
        self.assertEqual(len(found), 4)
        for layer in range(2):
            k, v = (np.asarray(a) for a in p.layer(layer))
            for i, b in enumerate(found):
                np.testing.assert_array_equal(k[b], kv[0, layer, 16 * i:16 * i + 16].transpose(1, 0, 2))
                np.testing.assert_array_equal(v[b], kv[1, layer, 16 * i:16 * i + 16].transpose(1, 0, 2))
        p.free(found)
        stats = p.stats()
        self.assertEqual((stats["host_units"], stats["host_hit_tokens"], stats["reloads"]), (4, 64, 1))
        self.assertEqual(stats["offloaded_bytes"], 4 * unit)
        mine = c.prefix_stats()
        self.assertEqual((mine["lookups"], mine["lookup_tokens"], mine["host_hit_tokens"]), (1, 64, 64))
        self.assertEqual((mine["reloaded_bytes"], mine["offloaded_bytes"]), (4 * unit, 4 * unit))
        with self.assertRaisesRegex(paged.LimitError, "host-tier-max-mb"):
            self.pool(c, "py-tier-big", num_blocks=8, host_tier_bytes=1 << 40)

    def test_block_events(self):
        """Events(blocks=True) reports a published prefix's blocks stored, then offloaded to the
        host tier and reloaded, each with the hash hash_blocks gives"""
        c = self.connect()
        unit = 2 * 2 * 2 * 16 * 64 * 4
        with paged.Events(self.daemon.socket, blocks=True) as ev:
            p = self.pool(c, "py-events", num_blocks=4, host_tier_bytes=2 * unit)
            tokens = list(range(900, 932))
            hashes = paged.hash_blocks(tokens, 16)
            blocks = p.alloc(2)
            self.assertEqual(p.publish(tokens, blocks), 2)
            p.free(blocks)
            p.free(p.alloc(4))
            self.assertEqual(len(p.lookup(tokens)), 2)
            seen = []
            for _ in range(64):
                e = ev.next(timeout=10)
                self.assertIsNotNone(e, "no event within 10 s")
                if e["type"] == "blocks" and e["pool"] == "py-events":
                    seen += [(b["action"], b["tier"], b["hash"]) for b in e["blocks"]]
                if len(seen) >= 6:
                    break
            self.assertEqual(sorted(seen), sorted([(a, t, h) for a, t in (("stored", "pool"), ("offloaded", "host"),
                                                                      ("reloaded", "host")) for h in hashes]))
            self.assertIsInstance(ev.fileno(), int)
        with self.assertRaises(paged.ClosedError):
            ev.next(timeout=0)

    def test_fork_copy_publish_lookup(self):
        """copy duplicates a block's keys and values, in the pool or into another; fork adds a
        reference that one free leaves; publish and lookup share blocks under the hashes
        hash_blocks computes, per salt and parent"""
        c = self.connect()
        p = self.pool(c, "py-prefix")
        src, dst = p.alloc(2)
        kv = np.random.default_rng(9).standard_normal((2, 2, 16, 2, 64), dtype=np.float32)
        p.append(paged.ALL_LAYERS, kv[0], kv[1], [src * 16 + t for t in range(16)])
        p.copy([src], np.array([dst], dtype=np.int32))
        q = np.random.default_rng(10).standard_normal((1, 4, 64), dtype=np.float32)
        a = np.from_dlpack(p.decode(1, q, [[src]], [16]))
        np.testing.assert_array_equal(np.from_dlpack(p.decode(1, q, [[dst]], [16])), a)
        p.fork([src])
        p.free([src])
        np.testing.assert_array_equal(np.from_dlpack(p.decode(1, q, [[src]], [16])), a)
        p.free([src])
        with self.assertRaises(paged.NotHeldError):
            p.decode(1, q, [[src]], [16])
        with self.assertRaisesRegex(ValueError, "dst: 2 blocks for 1 in src"):
            p.copy([dst], [dst, dst])

        # Into another pool of the same geometry: the same keys and values, the same decode.
        other = self.pool(c, "py-prefix-other", num_blocks=8)
        (odst,) = other.alloc(1)
        p.copy([dst], [odst], to=other)
        np.testing.assert_array_equal(np.from_dlpack(other.decode(1, q, [[odst]], [16])), a)
        narrow = self.pool(c, "py-prefix-narrow", num_kv_heads=1, num_blocks=8)
        (ndst,) = narrow.alloc(1)
        with self.assertRaisesRegex(paged.GeometryError, "dst_pool"):
            p.copy([dst], [ndst], to=narrow)
        with self.assertRaisesRegex(TypeError, "to: a Pool"):
            p.copy([dst], [odst], to="py-prefix-other")

        tokens = list(range(500, 532))
        blocks = p.alloc(2)
        self.assertEqual(p.publish(tokens, blocks, salt=5), 2)
        self.assertEqual(p.publish(tokens, blocks, salt=5), 0)
        self.assertEqual(p.lookup(tokens, salt=5), blocks)
        self.assertEqual(p.lookup(tokens, salt=6), [])
        self.assertEqual(p.lookup(tokens[:16] + [0] * 16, salt=5), blocks[:1])
        hashes = paged.hash_blocks(tokens, 16, salt=5)
        self.assertEqual(len(hashes), 2)
        self.assertTrue(all(0 < h < 1 << 128 for h in hashes))
        self.assertEqual(paged.hash_blocks(tokens[16:], 16, salt=5, parent=hashes[0]), hashes[1:])
        self.assertNotEqual(paged.hash_blocks(tokens, 16, salt=6), hashes)
        self.assertEqual(paged.hash_blocks(tokens[:20], 16, salt=5), hashes[:1])
        self.assertEqual(p.lookup(tokens[16:], salt=5, parent=hashes[0]), blocks[1:])
        with self.assertRaisesRegex(ValueError, "tokens: 20 tokens are not whole blocks of 16"):
            p.lookup(tokens[:20])
        with self.assertRaisesRegex(ValueError, "ids: 1 blocks for 2 blocks of tokens"):
            p.publish(tokens, blocks[:1])
        with self.assertRaisesRegex(TypeError, "parent: a hash is an int"):
            p.lookup(tokens, parent="x")
        with self.assertRaisesRegex(ValueError, "parent: not a 128-bit"):
            paged.hash_blocks(tokens, 16, parent=-1)

    def test_layer_views(self):
        """layer() views a layer's keys and values in place, read-only, laid out [N, H, B, D];
        a view keeps a detached pool's memory; a sealed pool has none to view"""
        c = self.connect()
        p = self.pool(c, "py-view", num_blocks=8)
        blocks = p.alloc(2)
        kv = np.random.default_rng(11).standard_normal((2, 2, 16, 2, 64), dtype=np.float32)
        p.append(paged.ALL_LAYERS, kv[0], kv[1], [blocks[1] * 16 + t for t in range(16)])
        k1, v1 = p.layer(1)
        self.assertEqual((k1.shape, k1.dtype, k1.readonly), ((8, 2, 16, 64), "f32", True))
        np.testing.assert_array_equal(np.from_dlpack(k1)[blocks[1]], kv[0, 1].transpose(1, 0, 2))
        values = np.asarray(v1)
        self.assertFalse(values.flags.writeable)
        np.testing.assert_array_equal(values[blocks[1]], kv[1, 1].transpose(1, 0, 2))
        k0, _ = p.layer(0)
        np.testing.assert_array_equal(np.asarray(k0)[blocks[1]], kv[0, 0].transpose(1, 0, 2))
        self.assertEqual(k0.address + 2 * k0.nbytes, k1.address)
        with self.assertRaisesRegex(ValueError, "out: a pool layer's view is read-only"):
            p.decode(0, np.ones((1, 2, 64), np.float32), [[blocks[1]]], [16], out=k1)
        with self.assertRaisesRegex(ValueError, "layer: 2 is not a layer"):
            p.layer(2)
        p.detach()
        self.assertTrue(p.detached)
        with self.assertRaises(paged.ClosedError):
            p.alloc(1)
        np.testing.assert_array_equal(values[blocks[1]], kv[1, 1].transpose(1, 0, 2))
        del k1, v1, k0, values
        c.nop()
        sealed = self.pool(c, "py-sealed", mode=0o600 | paged.POOL_SEALED)
        with self.assertRaises(paged.PermissionDeniedError):
            sealed.layer(0)

    def test_sequences(self):
        """extend gives one slot per token in the sequence's blocks; fork shares them; a published
        prefix is adopted by another sequence; a closed sequence refuses calls"""
        c = self.connect()
        p = self.pool(c, "py-seq")
        s = p.sequence(salt=7)
        slots = s.extend(20)
        self.assertEqual(len(s), 20)
        self.assertEqual(len(s.blocks), 2)
        self.assertEqual([x // 16 for x in slots], [s.blocks[0]] * 16 + [s.blocks[1]] * 4)
        self.assertEqual(len(set(slots)), 20)
        f = s.fork()
        self.assertEqual((len(f), f.blocks), (20, s.blocks))
        f.close()
        tokens = list(range(100, 140))
        with p.sequence(salt=7) as a:
            a.extend(tokens=tokens)
            a.publish()
            with p.sequence(salt=7) as b:
                self.assertEqual(b.adopt_prefix(np.array(tokens + [1, 2], dtype=np.int32)), 32)
                self.assertEqual(b.blocks, a.blocks[:2])
                self.assertEqual(len(b), 32)
            with p.sequence(salt=8) as other:
                self.assertEqual(other.adopt_prefix(tokens), 0)
        with self.assertRaisesRegex(paged.ClosedError, "sequence is closed"):
            len(a)
        with self.assertRaisesRegex(ValueError, "n: 3, but tokens holds 2"):
            s.extend(3, tokens=[1, 2])
        with self.assertRaisesRegex(TypeError, "tokens: expected int32, got int64"):
            s.extend(tokens=np.array([1, 2], dtype=np.int64))

    def test_closed_client_refuses_every_call(self):
        """after close() every call on the client, its pools and sequences raises ClosedError"""
        c = paged.connect(self.daemon.socket, name="pytest")
        p = self.pool(c, "py-closed")
        s = p.sequence()
        c.close()
        c.close()
        calls = [c.nop, lambda: c.create_pool("x", num_layers=1, num_kv_heads=1, head_dim=64, block_size=16,
                                               dtype="f32", num_blocks=1),
                 lambda: c.attach_pool("py-closed"), lambda: c.destroy_pool("py-closed"), lambda: c.empty(4),
                 lambda: p.alloc(1), lambda: p.free([0]), p.sequence, lambda: s.extend(1),
                 lambda: p.decode(0, np.zeros((1, 2, 64), np.float32), [[0]], [1]),
                 lambda: p.append(0, np.zeros((1, 2, 64), np.float32), np.zeros((1, 2, 64), np.float32), [0])]
        for call in calls:
            with self.assertRaises(paged.ClosedError):
                call()
        with paged.connect(self.daemon.socket, name="cleanup") as d:
            d.destroy_pool("py-closed")

    def test_close_keeps_exported_memory(self):
        """an array still viewed after close() stays readable and writable; the client is closed"""
        c = paged.connect(self.daemon.socket, name="pytest")
        a = c.empty((4, 4))
        x = np.from_dlpack(a)
        np.asarray(a)[:] = 3.0
        del a
        c.close()
        self.assertTrue(c.closed)
        self.assertTrue((x == 3.0).all())
        with self.assertRaises(paged.ClosedError):
            c.empty(1)

    def test_stats_count_what_the_client_did(self):
        """stats() reports per-op counts of the daemon that grow by the requests the test made,
        errors included, with latencies"""
        c = self.connect()
        p = self.pool(c, "py-stats")
        before = c.stats()
        self.assertIn("decode", before)
        self.assertEqual(set(before["nop"]), {"requests", "errors", "tokens", "bytes", "latency_p50_ns",
                                              "latency_p99_ns"})
        rng = np.random.default_rng()
        n = int(rng.integers(3, 9))
        for _ in range(n):
            c.nop()
        blocks = p.alloc(1)
        kv = rng.standard_normal((2, 5, 2, 64)).astype(np.float32)
        p.append(0, kv[0], kv[1], [blocks[0] * 16 + t for t in range(5)])
        p.decode(0, rng.standard_normal((1, 4, 64)).astype(np.float32), [blocks], [5])
        with self.assertRaises(paged.Error):
            p.decode(0, np.ones((1, 4, 64), np.float32), [[31]], [5])
        after = c.stats()

        def grew(op, key):
            return after[op][key] - before[op][key]

        self.assertEqual(grew("nop", "requests"), n)
        self.assertEqual(grew("alloc", "requests"), 1)
        self.assertEqual(grew("append", "requests"), 1)
        self.assertEqual(grew("append", "tokens"), 5)
        self.assertEqual(grew("decode", "requests"), 2)
        self.assertEqual(grew("decode", "errors"), 1)
        self.assertEqual(grew("prefill", "requests"), 0)
        self.assertGreater(after["decode"]["latency_p99_ns"], 0)
        c.close()
        with self.assertRaises(paged.ClosedError):
            c.stats()


class StubTest(unittest.TestCase):
    """The type stubs against the module."""

    def test_stubs_name_what_the_module_has(self):
        """every class, method and property of paged._paged is in _paged.pyi, and nothing more"""
        import ast
        from paged import _paged
        path = os.path.join(os.environ.get("top_srcdir", "."), "python", "paged", "_paged.pyi")
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            declared = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            declared |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
            cls = getattr(_paged, node.name)
            actual = {name for name in vars(cls) if not name.startswith("__") or name in (
                "__dlpack__", "__dlpack_device__", "__enter__", "__exit__", "__len__", "__init__")}
            declared.discard("__init__")
            actual.discard("__init__")
            self.assertEqual(declared, actual, node.name)
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.assertEqual(functions, {n for n in vars(_paged) if callable(getattr(_paged, n))
                                     and not isinstance(getattr(_paged, n), type) and not n.startswith("__")})
