# ops.py: the few array operations the model needs, for numpy and for PyTorch behind one interface.
# SPDX-License-Identifier: MIT
"""The array-ops shim of :mod:`paged.llama`: :class:`NumpyOps` (numpy, cpu backend) and
:class:`TorchOps` (PyTorch tensors on a device, ``cpu`` or ``cuda``). The model and the
attention backends write ``x @ w.T``, ``x * y``, slicing and reshapes directly (both libraries
spell them alike) and call an ops object for everything the two spell differently."""

import numpy as np


class NumpyOps:
    """numpy float32 arrays on the host."""

    name = "numpy"
    device = "cpu"

    def asarray(self, a, dtype="f32"):
        """Returns a (numpy array, list, ...) as an array of this backend: dtype "f32" or "i64"."""
        return np.ascontiguousarray(a, dtype=np.float32 if dtype == "f32" else np.int64)

    def to_numpy(self, x):
        """Returns x as a numpy array (the same memory where it can)."""
        return np.asarray(x)

    def from_dlpack(self, a):
        """Returns the DLPack object a (an ArenaArray) as an array, sharing its memory."""
        return np.from_dlpack(a)

    def cast(self, x, dtype):
        """Returns x in the pool dtype named dtype ("f32" or "f16": numpy has no bfloat16),
        x itself when it already is; raises ValueError for "bf16"."""
        want = {"f32": np.float32, "f16": np.float16}.get(dtype)
        if want is None:
            raise ValueError("dtype: numpy arrays have no %s; run the model with torch ops for a %s pool"
                             % (dtype, dtype))
        return x if x.dtype == want else np.ascontiguousarray(x, dtype=want)

    def empty(self, shape):
        """Returns an uninitialized float32 array of shape."""
        return np.empty(shape, dtype=np.float32)

    def cat(self, xs, axis):
        """Returns the arrays xs joined along axis."""
        return np.concatenate(xs, axis=axis)

    def contiguous(self, x):
        """Returns x in C order (x itself when it already is)."""
        return np.ascontiguousarray(x)

    def rms_norm(self, x, w, eps):
        """Returns x / sqrt(mean(x^2, last axis) + eps) * w."""
        return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)) * w

    def silu(self, x):
        """Returns x * sigmoid(x)."""
        return x / (1.0 + np.exp(-x))

    def softmax(self, x):
        """Returns the softmax of x over its last axis (-inf entries get weight 0)."""
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def attention(self, q, k, v, scale):
        """Returns softmax(q k^T * scale) v for one sequence with causal rows at the end of the
        context: q [n, HQ, D], k and v [ctx, HKV, D] (HQ a multiple of HKV); out [n, HQ, D].
        Worked in float64 so that it serves as the reference of the paged path."""
        n, hq, d = q.shape
        ctx, hkv, _ = k.shape
        g = hq // hkv
        qd = q.astype(np.float64).reshape(n, hkv, g, d).transpose(1, 2, 0, 3)   # [hkv, g, n, d]
        kd = k.astype(np.float64).transpose(1, 2, 0)                              # [hkv, d, ctx]
        vd = v.astype(np.float64).transpose(1, 0, 2)                              # [hkv, ctx, d]
        s = (qd @ kd[:, None]) * scale                                            # [hkv, g, n, ctx]
        rows = np.arange(n)[:, None] + (ctx - n)
        s = np.where(np.arange(ctx)[None, :] <= rows, s, -np.inf)
        o = self.softmax(s) @ vd[:, None]                                         # [hkv, g, n, d]
        return o.transpose(2, 0, 1, 3).reshape(n, hq, d).astype(np.float32)

    def decode_attention(self, q, k, v, scale):
        """Returns the attention of a batch of single-token queries: q [B, HQ, D] over k and v
        [B, ctx, HKV, D] of one length; out [B, HQ, D]."""
        return np.concatenate([self.attention(q[i:i + 1], k[i], v[i], scale) for i in range(q.shape[0])])

    def argmax(self, x):
        """Returns the index of the largest entry of each row of x [rows, n], as a list of ints."""
        return [int(i) for i in np.argmax(x, axis=-1)]

    def synchronize(self):
        """Waits for queued device work (nothing to wait for on the host)."""


class TorchOps:
    """PyTorch float32 tensors on device ("cpu" or "cuda", or a torch.device)."""

    name = "torch"

    def __init__(self, device="cpu"):
        """Imports torch and takes device; raises ImportError when torch is missing."""
        import torch
        import torch.nn.functional as functional
        self.torch = torch
        self.f = functional
        self.device = torch.device(device)

    def asarray(self, a, dtype="f32"):
        """Returns a (numpy array, list, tensor) as a tensor on the device: dtype "f32" or "i64"."""
        t = self.torch
        want = t.float32 if dtype == "f32" else t.int64
        if isinstance(a, np.ndarray):
            a = t.from_numpy(np.ascontiguousarray(a))
        return t.as_tensor(a, dtype=want, device=self.device).contiguous()

    def to_numpy(self, x):
        """Returns x as a numpy array (copied to the host if it is on a device)."""
        return x.detach().cpu().numpy()

    def from_dlpack(self, a):
        """Returns the DLPack object a (an ArenaArray, host or device memory) as a tensor sharing
        its memory."""
        return self.torch.from_dlpack(a)

    def cast(self, x, dtype):
        """Returns x in the pool dtype named dtype ("f32", "f16", "bf16"), x itself when it
        already is."""
        t = self.torch
        return x.to({"f32": t.float32, "f16": t.float16, "bf16": t.bfloat16}[dtype]).contiguous()

    def empty(self, shape):
        """Returns an uninitialized float32 tensor of shape on the device."""
        return self.torch.empty(shape, dtype=self.torch.float32, device=self.device)

    def cat(self, xs, axis):
        """Returns the tensors xs joined along axis."""
        return self.torch.cat(xs, dim=axis)

    def contiguous(self, x):
        """Returns x in C order (x itself when it already is)."""
        return x.contiguous()

    def rms_norm(self, x, w, eps):
        """Returns x / sqrt(mean(x^2, last dim) + eps) * w."""
        return x * self.torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w

    def silu(self, x):
        """Returns x * sigmoid(x)."""
        return self.f.silu(x)

    def softmax(self, x):
        """Returns the softmax of x over its last dim."""
        return self.torch.softmax(x, dim=-1)

    def attention(self, q, k, v, scale):
        """Returns softmax(q k^T * scale) v for one sequence with causal rows at the end of the
        context by torch's scaled_dot_product_attention: q [n, HQ, D], k and v [ctx, HKV, D]."""
        n, ctx = q.shape[0], k.shape[0]
        mask = None
        if n > 1:
            t = self.torch
            rows = t.arange(n, device=q.device)[:, None] + (ctx - n)
            mask = t.arange(ctx, device=q.device)[None, :] <= rows
        o = self.f.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                                attn_mask=mask, scale=scale, enable_gqa=True)
        return o.transpose(0, 1).contiguous()

    def decode_attention(self, q, k, v, scale):
        """Returns the attention of a batch of single-token queries by one SDPA call: q [B, HQ, D]
        over k and v [B, ctx, HKV, D] of one length; out [B, HQ, D]."""
        o = self.f.scaled_dot_product_attention(q[:, :, None], k.transpose(1, 2), v.transpose(1, 2),
                                                scale=scale, enable_gqa=True)
        return o[:, :, 0].contiguous()

    def argmax(self, x):
        """Returns the index of the largest entry of each row of x [rows, n], as a list of ints."""
        return [int(i) for i in self.torch.argmax(x, dim=-1).tolist()]

    def synchronize(self):
        """Waits for the device's queued work (CUDA); nothing on the host."""
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


def make_ops(kind="numpy", device="cpu"):
    """Returns the ops for kind "numpy" or "torch" (on device); raises ValueError for another kind."""
    if kind == "numpy":
        if str(device) != "cpu":
            raise ValueError("device: numpy runs on the cpu only, got %r" % (device,))
        return NumpyOps()
    if kind == "torch":
        return TorchOps(device)
    raise ValueError("kind: expected 'numpy' or 'torch', got %r" % (kind,))
