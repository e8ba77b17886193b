# test_devices.py: clients and pools on the two devices of one daemon (two cpu devices), from Python.
# SPDX-License-Identifier: MIT
"""A daemon whose cpu backend serves two devices (PAGEDD_CPU_DEVICES=2): a client on each, pools
on each (by default the creator's device, or the one named), the refusals of a device the daemon
lacks and of a request on another device's pool, and the two devices' decodes of the same fresh
random keys and values equal to each other and to numpy's."""

import os

import numpy as np

import paged
from daemon import DaemonTest
from reference import attention

L, H, HQ, D, B, N = 2, 2, 4, 64, 16, 16
T = 40                               # tokens: 2 full blocks and a partial one


class DevicesTest(DaemonTest):
    """One daemon of two cpu devices."""

    @classmethod
    def setUpClass(cls):
        """Starts the daemon with two cpu devices (it inherits the environment)."""
        old = os.environ.get("PAGEDD_CPU_DEVICES")
        os.environ["PAGEDD_CPU_DEVICES"] = "2"
        try:
            super().setUpClass()
        finally:
            if old is None:
                del os.environ["PAGEDD_CPU_DEVICES"]
            else:
                os.environ["PAGEDD_CPU_DEVICES"] = old

    def connect(self, device):
        """Returns a new client on device, closed at the end of the test."""
        c = paged.connect(self.daemon.socket, name="py-dev%d" % device, device=device)
        self.addCleanup(c.close)
        return c

    def create(self, c, name, **kw):
        """Creates pool name (L layers of H KV heads, f32, N blocks, and kw) on c and returns it,
        its name destroyed at the end of the test."""
        p = c.create_pool(name, num_layers=L, num_kv_heads=H, head_dim=D, block_size=B, dtype="f32",
                          num_blocks=N, **kw)
        self.addCleanup(lambda: c.closed or c.destroy_pool(name))
        return p

    def test_clients_and_pools_name_their_devices(self):
        """clients connect on devices 0 and 1 of 2; pools go on the creator's device or the one
        named; device 2 is refused for a client and for a pool, a negative one by Python"""
        c0, c1 = self.connect(0), self.connect(1)
        self.assertEqual((c0.device, c1.device, c0.devices), (0, 1, 2))
        with self.assertRaisesRegex(paged.InvalidArgumentError, "device 2"):
            self.connect(2)
        p0, p1 = self.create(c0, "py-dev-p0"), self.create(c1, "py-dev-p1")
        x1 = self.create(c0, "py-dev-x1", device=1)
        self.assertEqual([p.info()["device"] for p in (p0, p1, x1)], [0, 1, 1])
        with self.assertRaisesRegex(paged.InvalidArgumentError, "no device 2"):
            self.create(c0, "py-dev-none", device=2)
        with self.assertRaisesRegex(ValueError, "device"):
            self.create(c0, "py-dev-neg", device=-1)

    def test_each_device_decodes_and_refuses_the_other(self):
        """the same fresh random keys and values appended on each device decode alike, as numpy
        does; an append into a pool of the other device raises OtherDeviceError"""
        rng = np.random.default_rng(2031)
        k = rng.standard_normal((L, T, H, D), dtype=np.float32)
        v = rng.standard_normal((L, T, H, D), dtype=np.float32)
        q = rng.standard_normal((L, 1, HQ, D), dtype=np.float32)
        c0, c1 = self.connect(0), self.connect(1)
        outs = []
        for c, name in ((c0, "py-dev-a"), (c1, "py-dev-b")):
            p = self.create(c, name)
            blocks = p.alloc(3)
            p.append(paged.ALL_LAYERS, k, v, [blocks[t // B] * B + t % B for t in range(T)])
            outs.append([np.from_dlpack(p.decode(layer, q[layer], [blocks], [T])).copy() for layer in range(L)])
        for layer in range(L):
            np.testing.assert_array_equal(outs[0][layer], outs[1][layer])
            np.testing.assert_allclose(outs[0][layer], attention(q[layer], k[layer], v[layer]), rtol=1e-5,
                                       atol=2e-5)
        other = self.create(c1, "py-dev-other")
        theirs = c0.attach_pool("py-dev-other")
        self.addCleanup(theirs.detach)
        blocks = theirs.alloc(3)
        with self.assertRaises(paged.OtherDeviceError) as e:
            theirs.append(paged.ALL_LAYERS, k, v, [blocks[t // B] * B + t % B for t in range(T)])
        self.assertEqual(e.exception.code, -30)
        self.assertEqual(other.info()["device"], 1)
