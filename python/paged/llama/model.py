# model.py: the Llama forward pass (RMSNorm, rotary, grouped-query attention, SwiGLU, tied embeddings).
# SPDX-License-Identifier: MIT
""":class:`Llama` runs a step of tokens of one or more sequences through the model and returns
the logits of the rows asked for. Attention is not computed here: each layer hands its queries,
keys and values (rotary applied) to an attention backend (:mod:`paged.llama.attention`), which
stores the keys and values and returns the attention output, through pagedd or in-process."""

import numpy as np


class Llama:
    """A Llama model's weights on one ops backend (:mod:`paged.llama.ops`) and its forward pass."""

    def __init__(self, config, weights, ops):
        """Takes the Config, the float32 numpy weights of weights.load_weights (converted to the
        ops' arrays: numpy shares them, torch on the host shares them too) and the ops."""
        self.config, self.ops = config, ops
        self.w = {name: ops.asarray(a) for name, a in weights.items()}
        self.head = self.w.get("head", self.w["embed"])   # tied embeddings unless the file has output.weight
        half = config.head_dim // 2
        inv = config.rope_base ** (-np.arange(half, dtype=np.float64) * 2.0 / config.head_dim)
        angles = np.arange(config.context, dtype=np.float64)[:, None] * inv[None, :]
        self.cos = ops.asarray(np.cos(angles))            # [context, head_dim / 2]
        self.sin = ops.asarray(np.sin(angles))
        self.scale = 1.0 / float(np.sqrt(config.head_dim))

    def rope(self, x, cos, sin):
        """Returns x [n, heads, head_dim] rotated by the rotary embedding of its rows' positions
        (cos and sin [n, 1, head_dim / 2]), in the Hugging Face convention: the first half of each
        head is rotated against the second."""
        half = self.config.head_dim // 2
        x1, x2 = x[..., :half], x[..., half:]
        return self.ops.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def forward(self, tokens, positions, attention, rows):
        """Returns the logits [len(rows), vocab] of the step's tokens at rows: tokens and positions
        (int64 arrays of the ops, [n]) are the step's new tokens of every sequence, concatenated,
        and attention(layer, q, k, v) the backend prepared for this step (its begin())."""
        c, ops, w = self.config, self.ops, self.w
        n = tokens.shape[0]
        hq, hkv, d = c.num_heads, c.num_kv_heads, c.head_dim
        cos, sin = self.cos[positions][:, None, :], self.sin[positions][:, None, :]
        x = w["embed"][tokens]
        for i in range(c.num_layers):
            h = ops.rms_norm(x, w["%d.attn_norm" % i], c.eps)
            qkv = h @ w["%d.qkv" % i].T
            q = self.rope(qkv[:, :hq * d].reshape(n, hq, d), cos, sin)
            k = self.rope(qkv[:, hq * d:(hq + hkv) * d].reshape(n, hkv, d), cos, sin)
            v = ops.contiguous(qkv[:, (hq + hkv) * d:].reshape(n, hkv, d))
            o = attention(i, q, k, v)
            x = x + o.reshape(n, hq * d) @ w["%d.o" % i].T
            h = ops.rms_norm(x, w["%d.ffn_norm" % i], c.eps)
            gu = h @ w["%d.gate_up" % i].T
            x = x + (ops.silu(gu[:, :c.ffn]) * gu[:, c.ffn:]) @ w["%d.down" % i].T
        return ops.rms_norm(x[rows], w["norm"], c.eps) @ self.head.T
