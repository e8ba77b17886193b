# reference.py: attention over a sequence's tokens in numpy (float64), the oracle of the Python tests.
# SPDX-License-Identifier: MIT
"""softmax(q k^T * scale) v per query head, each query head reading the KV head of its GQA
group, over the tokens a query may see (causal: positions up to its own). The options follow
paged(7): logits soft-capped (cap * tanh(x / cap)), then ALiBi-biased (slope * (j - i)), and a
window keeps a query's last window positions."""

import numpy as np


def attention(q, k, v, scale=None, positions=None, soft_cap=0.0, alibi=None, window=0):
    """Returns the attention of q [nq, HQ, D] over k and v [n, H, D] as float64 [nq, HQ, D].

    positions gives each query's position in the sequence (None: all at n - 1, as decode's
    one token); a query sees the tokens at or before its position, the last window of them
    when window > 0. soft_cap > 0 caps the logits; alibi holds a slope per query head."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    nq, hq, d = q.shape
    n, h, _ = k.shape
    group = hq // h
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    if positions is None:
        positions = [n - 1] * nq
    out = np.zeros((nq, hq, d))
    for i in range(nq):
        seen = positions[i] + 1
        first = max(0, seen - window) if window > 0 else 0
        for head in range(hq):
            kv = head // group
            logits = k[first:seen, kv, :] @ q[i, head] * scale
            if soft_cap > 0:
                logits = soft_cap * np.tanh(logits / soft_cap)
            if alibi is not None:
                logits = logits + alibi[head] * (np.arange(first, seen) - positions[i])
            p = np.exp(logits - logits.max())
            out[i, head] = (p / p.sum()) @ v[first:seen, kv, :]
    return out
