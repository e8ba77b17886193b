# reference.py: attention over a sequence's tokens in numpy (float64), the oracle of the Python tests.
# SPDX-License-Identifier: MIT
"""softmax(q k^T * scale) v per query head, each query head reading the KV head of its GQA
group, over the tokens a query may see (causal: positions up to its own)."""

import numpy as np


def attention(q, k, v, scale=None, positions=None):
    """Returns the attention of q [nq, HQ, D] over k and v [n, H, D] as float64 [nq, HQ, D].

    positions gives each query's position in the sequence (None: all at n - 1, as decode's
    one token); a query sees the tokens at or before its position."""
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
        for head in range(hq):
            kv = head // group
            logits = k[:seen, kv, :] @ q[i, head] * scale
            p = np.exp(logits - logits.max())
            out[i, head] = (p / p.sum()) @ v[:seen, kv, :]
    return out
