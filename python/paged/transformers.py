# transformers.py: a Hugging Face transformers attention function and Cache over a pagedd pool.
# SPDX-License-Identifier: MIT
"""Runs a transformers decoder's attention in pagedd, its keys and values in a shared pool.

Importing this module registers the attention implementation ``"paged"`` with transformers'
``AttentionInterface`` (and its padding-mask function with ``AttentionMaskInterface``). A
model loaded with ``attn_implementation="paged"`` (or switched with
``model.set_attn_implementation("paged")``) then needs a :class:`PagedCache` as its
``past_key_values``::

    import paged, paged.transformers
    with paged.connect() as client, paged.transformers.PagedCache(client, model.config) as cache:
        out = model.generate(**inputs, past_key_values=cache, max_new_tokens=32)

The cache holds one pagedd :class:`paged.Sequence` per batch row. Each forward step extends
every row's sequence by its new tokens that the attention mask marks (left padding and any
other padding never enter the pool: their slots are -1), appends every layer's keys and values
with :meth:`paged.Pool.append`, and runs the layer's attention in the daemon with
:meth:`paged.Pool.prefill` (several new tokens in a row) or :meth:`paged.Pool.decode` (one),
causal, with the module's scaling and any number of query heads per KV head. Outputs at padded
query positions are zeros.

Supported: decoder-only causal attention without sliding windows, soft caps, sinks, position
biases or dropout; float32, bfloat16 and float16 models, with a pool of their dtype or of
another of the three (``PagedCache(..., dtype=torch.bfloat16)`` keeps a float32 model's keys and
values in bfloat16: they, the queries and the outputs cross rounded to the pool's dtype); head
dims the pool takes (64, 80, 96, 128, 256); 2D padding masks; beam search (the chosen rows'
sequences forked, copy on write). Refused with an error naming why: anything else, cropping
and row selection, and a forward without a :class:`PagedCache`. Tensors live where the client's backend runs attention: the CPU for
the cpu backend, the CUDA device for the cuda backend (:func:`device`).
"""

import itertools
import os
import threading

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.masking_utils import AttentionMaskInterface

import paged

NAME = "paged"
"""The ``attn_implementation`` this module registers."""

DEFAULT_BYTE_BUDGET = 256 << 20
"""The pool size a :class:`PagedCache` made from a client gives its pool when neither
``num_blocks`` nor ``byte_budget`` is given."""

# torch's floating dtypes and the pool dtypes of the same element type, and back.
_DTYPES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}
_TORCH = {name: dtype for dtype, name in _DTYPES.items()}

# The cache whose update() ran last on this thread, the layer and the key tensor it returned,
# for the attention function that follows it in the module's forward.
_pending = threading.local()

_names = itertools.count()


def device(client):
    """Returns the torch device whose tensors ``client``'s daemon runs attention on: ``cuda``
    (torch's current CUDA device) for the cuda backend, else ``cpu``."""
    return torch.device("cuda") if client.backend == "cuda" else torch.device("cpu")


def pool_dtype(dtype):
    """Returns the pool dtype name ("f32", "bf16", "f16") of torch ``dtype``; raises
    ValueError for a dtype a pool cannot hold for a model."""
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise ValueError("dtype: %s has no pool dtype (the model must be float32, bfloat16 or float16)"
                         % dtype) from None


def _geometry(config):
    """Returns (num_layers, num_kv_heads, head_dim) of a transformers decoder ``config``;
    raises ValueError when it is not a plain causal decoder paged attention can serve."""
    config = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    for field in ("num_hidden_layers", "num_attention_heads", "hidden_size"):
        if not isinstance(getattr(config, field, None), int):
            raise ValueError("config: no %s; paged attention serves decoder configs such as Llama's" % field)
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise ValueError("config: sliding_window=%s; paged attention does not serve sliding-window layers"
                         % config.sliding_window)
    if getattr(config, "attn_logit_softcapping", None):
        raise ValueError("config: attn_logit_softcapping is set; paged attention does not serve soft caps")
    if not getattr(config, "is_causal", True) or getattr(config, "is_encoder_decoder", False):
        raise ValueError("config: not a causal decoder; paged attention serves causal decoders only")
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if config.num_attention_heads % kv_heads:
        raise ValueError("config: %d attention heads are not a multiple of %d KV heads"
                         % (config.num_attention_heads, kv_heads))
    return config.num_hidden_layers, kv_heads, head_dim


def create_pool(client, name, config, dtype, *, block_size=16, num_blocks=0, byte_budget=0, mode=0o600,
                host_tier_bytes=0):
    """Creates pool ``name`` on ``client`` for a model of ``config`` and torch ``dtype``
    (``model.dtype``): a layer per hidden layer, the config's KV heads and head dim; returns the
    attached :class:`paged.Pool`. Both ``num_blocks`` and ``byte_budget`` 0 means
    :data:`DEFAULT_BYTE_BUDGET`; ``host_tier_bytes`` keeps the prefixes the pool evicts in host
    memory (paged(7), TIERS; 0: the daemon's default). Raises ValueError for a config or dtype the pool cannot serve,
    and the daemon's :class:`paged.GeometryError` for a geometry it refuses (such as head dim 32).
    """
    layers, kv_heads, head_dim = _geometry(config)
    if num_blocks == 0 and byte_budget == 0:
        byte_budget = DEFAULT_BYTE_BUDGET
    return client.create_pool(name, num_layers=layers, num_kv_heads=kv_heads, head_dim=head_dim,
                              block_size=block_size, dtype=pool_dtype(dtype), num_blocks=num_blocks,
                              byte_budget=byte_budget, mode=mode, host_tier_bytes=host_tier_bytes)


class PagedLayer(CacheLayerMixin):
    """One layer's view of a :class:`PagedCache`: how many token positions (padding included,
    as transformers counts them) the layer has seen. Its keys and values are in the pool, so
    ``keys`` and ``values`` stay None."""

    is_compileable = False
    is_croppable = False
    is_sliding = False

    def __init__(self):
        """Starts a layer that has seen no token."""
        super().__init__()
        self.seen = 0

    def lazy_initialization(self, key_states, value_states):
        """Marks the layer initialized; its memory is the pool's."""
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        """Refuses: a PagedCache is updated through PagedCache.update."""
        raise NotImplementedError("a PagedLayer is updated through its PagedCache")

    def get_mask_sizes(self, query_length):
        """Returns (kv_length, kv_offset) for a mask over the seen positions and query_length new ones."""
        return self.seen + query_length, 0

    def get_seq_length(self):
        """Returns the positions seen, padding included."""
        return self.seen

    def get_max_length(self):
        """Returns -1: the pool, not the layer, bounds the length."""
        return -1

    def reset(self):
        """Forgets the positions seen."""
        self.seen = 0
        self.is_initialized = False

    def reorder_cache(self, beam_idx):
        """Does nothing: PagedCache.reorder_cache reorders the sequences, which every layer shares."""

    def crop(self, tokens_to_remove):
        """Refuses: the pool's sequences only grow."""
        raise NotImplementedError("PagedCache cannot crop its sequences (assisted or speculative decoding)")

    def batch_repeat_interleave(self, repeats):
        """Refuses: rows cannot be repeated once filled."""
        raise NotImplementedError("PagedCache cannot repeat its rows")

    def batch_select_indices(self, indices):
        """Refuses: rows cannot be selected once filled."""
        raise NotImplementedError("PagedCache cannot select rows")


class _Step:
    """One forward step's plan, made at its first layer and used by every layer: the new
    tokens' slots (-1 for padding), the rows that have new tokens with their block tables and
    lengths, where their queries are in the flattened batch, and decode or prefill."""

    def __init__(self, cache, mask, batch, length, dev):
        """Extends cache's sequences by the new tokens mask marks (None: all) of a [batch,
        length] step on device dev; raises ValueError when the mask disagrees with the history."""
        seqs = cache.sequences
        seen = cache.layers[0].seen
        if mask is None:
            new = [[True] * length for _ in range(batch)]
            if any(len(s) != seen for s in seqs):
                raise ValueError("attention_mask: None, but earlier steps had padding; pass the 2D attention_mask")
        else:
            if mask.dim() != 2 or mask.shape[0] != batch or mask.shape[1] != seen + length:
                raise ValueError("attention_mask: shape %s; paged attention takes a 2D padding mask of "
                                 "[%d, %d] (the seen positions and the new ones)"
                                 % (tuple(mask.shape), batch, seen + length))
            mask = mask.to(device="cpu", dtype=torch.bool)
            past = mask[:, :seen].sum(dim=1).tolist()
            for row, (count, s) in enumerate(zip(past, seqs)):
                if count != len(s):
                    raise ValueError("attention_mask: row %d marks %d earlier tokens, its sequence holds %d"
                                     % (row, count, len(s)))
            new = mask[:, seen:].tolist()
        self.slots = [-1] * (batch * length)
        self.rows, self.indptr, self.tables, self.lens, flat = [], [0], [], [], []
        for row, flags in enumerate(new):
            idx = [row * length + t for t, on in enumerate(flags) if on]
            if not idx:
                continue
            for i, slot in zip(idx, seqs[row].extend(len(idx))):
                self.slots[i] = slot
            flat += idx
            self.rows.append(row)
            self.indptr.append(len(flat))
            self.tables.append(seqs[row].blocks)
            self.lens.append(len(seqs[row]))
        self.length = length
        self.decode = all(n == 1 for n in self.lens_new())
        dense = len(flat) == batch * length
        self.index = None if dense else torch.tensor(flat, dtype=torch.long, device=dev)
        self.layers_done = set()

    def lens_new(self):
        """Returns the new tokens of each row that has any."""
        return [b - a for a, b in zip(self.indptr, self.indptr[1:])]


class PagedCache(Cache):
    """A transformers ``Cache`` whose keys and values are in a pagedd pool: one
    :class:`paged.Sequence` per batch row. Pass it as ``past_key_values`` to a model loaded
    with ``attn_implementation="paged"``.

    ``source`` is a :class:`paged.Client`, and then the cache creates its own pool at the first
    forward (:func:`create_pool`, named ``name`` or a fresh name, of torch ``dtype`` (None:
    the model's), with ``block_size``, ``num_blocks``, ``byte_budget``) and destroys it at
    :meth:`close`; or a :class:`paged.Pool` this client is attached to, whose geometry must
    match ``config``. A pool of f32, bf16 or f16 serves a model of any of the three: keys,
    values and queries are rounded to the pool's dtype on their way in, and the outputs come
    back in the model's. ``batch_size`` (None: the first forward's) fixes the
    number of rows. The sequences are made at the first forward and freed by :meth:`close`,
    :meth:`reset`, or when the cache is garbage. A context manager: leaving it closes.
    """

    def __init__(self, source, config, batch_size=None, *, name=None, block_size=16, num_blocks=0,
                 byte_budget=0, dtype=None):
        """Makes an empty cache over source (a Client or a Pool) for a model of config."""
        if dtype is not None:
            pool_dtype(dtype)
        self.num_layers, self.num_kv_heads, self.head_dim = _geometry(config)
        super().__init__(layers=[PagedLayer() for _ in range(self.num_layers)])
        if isinstance(source, paged.Client):
            self.client, self.pool = source, None
            self.backend = source.backend
            self._pool_args = dict(name=name or "hf-%d-%d" % (os.getpid(), next(_names)), block_size=block_size,
                                   num_blocks=num_blocks, byte_budget=byte_budget, dtype=dtype)
        elif isinstance(source, paged.Pool):
            self.client, self.pool, self.backend, self._pool_args = None, source, None, None
            info = source.info()
            want = {"num_kv_heads": self.num_kv_heads, "head_dim": self.head_dim}
            for field, value in want.items():
                if info[field] != value:
                    raise ValueError("source: the pool's %s is %d, the config's %d" % (field, info[field], value))
            if info["num_layers"] < self.num_layers:
                raise ValueError("source: the pool has %d layers, the config %d"
                                 % (info["num_layers"], self.num_layers))
        else:
            raise TypeError("source: expected a paged.Client or paged.Pool, got %s" % type(source).__name__)
        self.config = config
        self.batch = batch_size
        self.sequences = None
        self.kv_dtype = None
        self.closed = False
        self._step = None

    def __enter__(self):
        """Returns the cache."""
        return self

    def __exit__(self, *exc):
        """Closes the cache."""
        self.close()
        return False

    def _free(self):
        """Closes the sequences (their blocks go back to the pool) and forgets the positions seen."""
        for s in self.sequences or ():
            s.close()
        self.sequences = None
        self._step = None
        for layer in self.layers:
            layer.reset()

    def close(self):
        """Frees the sequences and destroys a pool the cache created; later forwards raise
        :class:`paged.ClosedError`. Closing twice does nothing."""
        if self.closed:
            return
        self.closed = True
        try:
            self._free()
        finally:
            if self._pool_args is not None and self.pool is not None:
                pool, self.pool = self.pool, None
                pool.detach()
                self.client.destroy_pool(self._pool_args["name"])

    def reset(self):
        """Frees the sequences and forgets every position, for a new batch of prompts."""
        self._free()

    def reorder_cache(self, beam_idx):
        """Makes row i a copy of row beam_idx[i] (beam search): forks of the sequences, which
        share their blocks until one of them writes (copy on write); the old ones are closed."""
        if self.sequences is None:
            return
        picks = [int(i) for i in beam_idx.tolist()]
        if len(picks) != self.batch or not all(0 <= i < self.batch for i in picks):
            raise ValueError("beam_idx: %s does not pick %d rows of %d" % (picks, self.batch, self.batch))
        old = self.sequences
        self.sequences = [old[i].fork() for i in picks]
        for s in old:
            s.close()

    # crop, batch_repeat_interleave and batch_select_indices are transformers' Cache's, which
    # asks every layer: PagedLayer refuses them.

    @property
    def batch_size(self):
        """The number of rows, or -1 before the first forward when not given."""
        return self.batch if self.batch is not None else -1

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        """Hands layer ``layer_idx``'s new keys and values [batch, kv_heads, new, head_dim] to the
        paged attention function that the module calls next, which appends them to the pool;
        returns them unchanged."""
        if self.closed:
            raise paged.ClosedError("PagedCache: closed")
        if not 0 <= layer_idx < self.num_layers:
            raise ValueError("layer_idx: %d outside the cache's %d layers" % (layer_idx, self.num_layers))
        _pending.entry = (self, layer_idx, key_states)
        return key_states, value_states

    def _prepare(self, key):
        """Creates the pool and the sequences at the first forward, checking key's batch, dtype
        and device against them; raises ValueError or TypeError naming what disagrees."""
        pool_dtype(key.dtype)
        if self.backend is not None:
            want = "cuda" if self.backend == "cuda" else "cpu"
            if key.device.type != want:
                raise TypeError("the model runs on %s, the daemon's %s backend needs tensors on %s"
                                % (key.device.type, self.backend, want))
        if self.pool is None:
            a = self._pool_args
            self.pool = create_pool(self.client, a["name"], self.config, a["dtype"] or key.dtype,
                                    block_size=a["block_size"], num_blocks=a["num_blocks"],
                                    byte_budget=a["byte_budget"])
        have = self.pool.info()["dtype"]
        if have not in _TORCH:
            raise TypeError("the pool holds %s; a model's keys and values go in an f32, bf16 or f16 pool" % have)
        self.kv_dtype = _TORCH[have]
        if self.sequences is None:
            if self.batch is not None and key.shape[0] != self.batch:
                raise ValueError("batch: the cache has %d rows, the input %d" % (self.batch, key.shape[0]))
            self.batch = key.shape[0]
            self.sequences = [self.pool.sequence() for _ in range(self.batch)]
            for layer in self.layers:
                layer.is_initialized = True
        elif key.shape[0] != self.batch:
            raise ValueError("batch: the cache has %d rows, the input %d" % (self.batch, key.shape[0]))

    def _step_for(self, layer, mask, batch, length, dev):
        """Returns the step layer belongs to: the current one, or a new one when layer has done
        its part of it; raises RuntimeError when the last step stopped part of the way."""
        step = self._step
        if step is not None and layer not in step.layers_done and step.length == length:
            return step
        if step is not None and len(step.layers_done) != self.num_layers:
            raise RuntimeError("PagedCache: the previous forward stopped after %d of %d layers; reset() the cache"
                               % (len(step.layers_done), self.num_layers))
        if layer != 0:
            raise RuntimeError("PagedCache: a forward step began at layer %d, not 0" % layer)
        self._step = _Step(self, mask, batch, length, dev)
        return self._step

    def attend(self, layer, query, key, value, mask, scaling):
        """Appends layer's new keys and values [batch, kv_heads, new, head_dim] to the pool and
        runs its attention for query [batch, q_heads, new, head_dim] in the daemon; returns the
        output [batch, new, q_heads, head_dim] (zeros at padded positions)."""
        if self.closed:
            raise paged.ClosedError("PagedCache: closed")
        self._prepare(key)
        batch, q_heads, length, head_dim = query.shape
        step = self._step_for(layer, mask, batch, length, query.device)
        kv = self.kv_dtype
        k = key.transpose(1, 2).reshape(batch * length, self.num_kv_heads, head_dim).to(kv).contiguous()
        v = value.transpose(1, 2).reshape(batch * length, self.num_kv_heads, head_dim).to(kv).contiguous()
        self.pool.append(layer, k, v, step.slots)
        step.layers_done.add(layer)
        self.layers[layer].seen += length
        q = query.transpose(1, 2).reshape(batch * length, q_heads, head_dim)
        q = (q if step.index is None else q.index_select(0, step.index)).to(kv).contiguous()
        if not step.rows:
            return torch.zeros(batch, length, q_heads, head_dim, dtype=query.dtype, device=query.device)
        if step.decode:
            out = self.pool.decode(layer, q, step.tables, step.lens, scale=scaling)
        else:
            out = self.pool.prefill(layer, q, step.indptr, step.tables, step.lens, scale=scaling)
        # The output is the client's arena memory, a heap extent of its own that lives as long as
        # the tensor viewing it: nothing reuses it, so it needs no copy.
        out = torch.from_dlpack(out).to(query.dtype)
        if step.index is not None:
            full = torch.zeros(batch * length, q_heads, head_dim, dtype=out.dtype, device=out.device)
            out = full.index_copy_(0, step.index, out)
        return out.view(batch, length, q_heads, head_dim)


def attention_forward(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention function for ``attn_implementation="paged"``: query [batch,
    q_heads, new, head_dim], key and value [batch, kv_heads, new, head_dim] (the new tokens,
    as :meth:`PagedCache.update` returned them), attention_mask the 2D padding mask or None;
    returns (output [batch, new, q_heads, head_dim], None). Raises ValueError or
    NotImplementedError for what paged attention does not serve, and RuntimeError when the
    forward has no :class:`PagedCache`."""
    entry = getattr(_pending, "entry", None)
    _pending.entry = None
    if entry is None or entry[2] is not key:
        raise RuntimeError("attn_implementation=%r keeps keys and values in a pagedd pool: pass "
                           "past_key_values=paged.transformers.PagedCache(...) (and use_cache=True)" % NAME)
    cache, layer, _ = entry
    if getattr(module, "layer_idx", layer) != layer:
        raise RuntimeError("PagedCache: update was for layer %d, the attention is layer %s's"
                           % (layer, module.layer_idx))
    if dropout:
        raise NotImplementedError("dropout=%s: paged attention is for inference (model.eval())" % dropout)
    if kwargs.get("is_causal", getattr(module, "is_causal", True)) is False:
        raise NotImplementedError("is_causal=False: paged attention is causal only")
    for arg in ("sliding_window", "softcap", "s_aux", "position_bias"):
        if kwargs.get(arg) is not None:
            raise NotImplementedError("%s: paged attention does not serve it" % arg)
    if attention_mask is not None and attention_mask.dim() != 2:
        raise NotImplementedError("attention_mask: a %d-D mask; paged attention takes 2D padding masks"
                                  % attention_mask.dim())
    if scaling is None:
        scaling = getattr(module, "scaling", None) or query.shape[-1] ** -0.5
    return cache.attend(layer, query, key, value, attention_mask, float(scaling)), None


def padding_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                 attention_mask=None, **kwargs):
    """transformers' mask function for ``"paged"``: returns the 2D boolean padding mask over
    the last kv_length positions, or None when nothing is padded (causality is the daemon's)."""
    if attention_mask is None:
        return None
    attention_mask = attention_mask[:, -kv_length:]
    if attention_mask.shape[1] == kv_length and bool(attention_mask.all()):
        return None
    return attention_mask


AttentionInterface.register(NAME, attention_forward)
AttentionMaskInterface.register(NAME, padding_mask)
