# attention.py: the model's attention backends, through pagedd (PagedAttention) or in-process (LocalAttention).
# SPDX-License-Identifier: MIT
"""Both backends keep the keys and values of their sequences and answer one step at a time:
``begin(seqs, tokens)`` takes each sequence's new tokens and returns their positions, then the
model calls the backend once per layer with that layer's queries, keys and values of all the
step's tokens ([n, heads, head_dim], sequences concatenated in order) and gets the attention
output [n, query heads, head_dim] back. A step whose sequences each add one token is a decode,
any other a prefill (causal, the new rows at the end of each sequence's context).

:class:`PagedAttention` maps a step onto pagedd: the sequences are :class:`paged.Sequence`
objects of one pool whose slots ``Sequence.extend(tokens=...)`` gives (so the blocks can be
published by token ids); per layer one ``Pool.append`` of the step's keys and values and one
``Pool.decode`` or ``Pool.prefill`` of all its sequences, the append submitted without waiting
(the daemon keeps a client's requests in ring order) and checked after the attention returns.
:class:`LocalAttention` keeps contiguous keys and values per sequence in the process and
computes attention with the ops (numpy in float64, or torch's SDPA): the reference of the tests
and the yardstick of the benchmark."""

import numpy as np


def _plan(seqs_lens, tokens):
    """Returns (positions, qo_indptr, is_decode) of a step adding tokens[i] to sequence i, whose
    lengths before it are seqs_lens; raises ValueError when a sequence gets no token."""
    positions, indptr = [], [0]
    for start, toks in zip(seqs_lens, tokens):
        if len(toks) == 0:
            raise ValueError("tokens: every sequence of a step needs at least one new token")
        positions.extend(range(start, start + len(toks)))
        indptr.append(indptr[-1] + len(toks))
    return positions, indptr, all(len(t) == 1 for t in tokens)


class PagedAttention:
    """Attention through pagedd on the sequences of one pool (a :class:`paged.Pool`)."""

    def __init__(self, pool, ops, scale):
        """Takes the pool (its geometry the model's: layers, KV heads, head dim), the ops whose
        arrays the model passes, and the softmax scale. A pool of f16 or bf16 stores the keys and
        values rounded to its dtype; queries go in and outputs come back the same way."""
        self.pool, self.ops, self.scale = pool, ops, scale
        self.dtype = pool.info()["dtype"]

    def new_sequence(self):
        """Returns a new, empty sequence of the pool."""
        return self.pool.sequence()

    def adopt_prefix(self, seq, tokens):
        """Starts the empty seq with the longest published prefix of tokens (whole blocks);
        returns how many tokens it adopted, whose keys and values need no computing."""
        return seq.adopt_prefix(tokens)

    def publish(self, seq):
        """Publishes seq's full blocks, filed by their token ids, for other clients to adopt."""
        seq.publish()

    def length(self, seq):
        """Returns seq's number of tokens."""
        return len(seq)

    def close(self, seq):
        """Frees seq's block references."""
        seq.close()

    def begin(self, seqs, tokens):
        """Prepares a step adding tokens[i] (a list of token ids) to seqs[i]: takes their slots and
        blocks; returns the new tokens' positions (a list)."""
        positions, indptr, self.is_decode = _plan([len(s) for s in seqs], tokens)
        slots = []
        for s, toks in zip(seqs, tokens):
            slots.extend(s.extend(tokens=toks))
        width = max(len(s.blocks) for s in seqs)
        self.slots = np.array(slots, dtype=np.int32)
        self.tables = np.zeros((len(seqs), width), dtype=np.int32)
        for i, s in enumerate(seqs):
            self.tables[i, :len(s.blocks)] = s.blocks
        self.lens = np.array([len(s) for s in seqs], dtype=np.int32)
        self.indptr = np.array(indptr, dtype=np.int32)
        return positions

    def __call__(self, layer, q, k, v):
        """Appends the step's keys and values of layer and returns its attention output, computed
        by the daemon (decode or prefill): the output's memory, as an array of the ops."""
        if self.dtype != "f32":
            q, k, v = (self.ops.cast(x, self.dtype) for x in (q, k, v))
        pending = self.pool.append(layer, k, v, self.slots, wait=False)
        try:
            if self.is_decode:
                out = self.pool.decode(layer, q, self.tables, self.lens, scale=self.scale)
            else:
                out = self.pool.prefill(layer, q, self.indptr, self.tables, self.lens, scale=self.scale)
        finally:
            pending.wait()   # the append's own error, if any, explains the attention's
        out = self.ops.from_dlpack(out)
        return out if self.dtype == "f32" else self.ops.cast(out, "f32")


class LocalSequence:
    """A sequence of a LocalAttention: its row in the caches and its length."""

    def __init__(self, row):
        """Starts empty at cache row row."""
        self.row, self.length = row, 0


class LocalAttention:
    """Attention in the process over contiguous keys and values: per layer a cache
    [max_seqs, capacity, kv_heads, head_dim] of the ops' arrays, a row per open sequence."""

    def __init__(self, ops, config, scale, max_seqs=1, capacity=512):
        """Takes the ops, the model's Config, the softmax scale, and how many sequences of how many
        tokens the caches hold."""
        self.ops, self.scale, self.capacity = ops, scale, capacity
        shape = (max_seqs, capacity, config.num_kv_heads, config.head_dim)
        self.k = [ops.empty(shape) for _ in range(config.num_layers)]
        self.v = [ops.empty(shape) for _ in range(config.num_layers)]
        self.free_rows = list(range(max_seqs - 1, -1, -1))

    def new_sequence(self):
        """Returns a new, empty sequence; raises RuntimeError when every row is taken."""
        if not self.free_rows:
            raise RuntimeError("LocalAttention: all %d sequences are open" % len(self.k[0]))
        return LocalSequence(self.free_rows.pop())

    def adopt_prefix(self, seq, tokens):
        """Adopts nothing (there is no prefix cache in the process); returns 0."""
        return 0

    def publish(self, seq):
        """Publishes nothing (there is no prefix cache in the process)."""

    def length(self, seq):
        """Returns seq's number of tokens."""
        return seq.length

    def close(self, seq):
        """Gives seq's row back."""
        self.free_rows.append(seq.row)
        seq.row = None

    def begin(self, seqs, tokens):
        """Prepares a step adding tokens[i] to seqs[i]; returns the new tokens' positions (a list);
        raises ValueError past the caches' capacity."""
        positions, self.indptr, self.is_decode = _plan([s.length for s in seqs], tokens)
        self.spans = []
        for s, toks in zip(seqs, tokens):
            if s.length + len(toks) > self.capacity:
                raise ValueError("tokens: %d past the capacity of %d tokens"
                                 % (s.length + len(toks), self.capacity))
            self.spans.append((s.row, s.length, s.length + len(toks)))
            s.length += len(toks)
        rows = [r for r, _, _ in self.spans]
        ends = {e for _, _, e in self.spans}
        # Sequences in consecutive rows with one length decode as one batch.
        self.batched = (self.is_decode and len(ends) == 1
                        and rows == list(range(rows[0], rows[0] + len(rows))))
        return positions

    def __call__(self, layer, q, k, v):
        """Stores the step's keys and values of layer and returns its attention output."""
        kc, vc, ops = self.k[layer], self.v[layer], self.ops
        for i, (row, start, end) in enumerate(self.spans):
            kc[row, start:end] = k[self.indptr[i]:self.indptr[i + 1]]
            vc[row, start:end] = v[self.indptr[i]:self.indptr[i + 1]]
        if self.batched:
            r0, _, end = self.spans[0]
            r1 = r0 + len(self.spans)
            return ops.decode_attention(q, kc[r0:r1, :end], vc[r0:r1, :end], self.scale)
        outs = [ops.attention(q[self.indptr[i]:self.indptr[i + 1]], kc[row, :end], vc[row, :end], self.scale)
                for i, (row, _, end) in enumerate(self.spans)]
        return outs[0] if len(outs) == 1 else ops.cat(outs, 0)
