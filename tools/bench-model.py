#!/usr/bin/env python3
# bench-model.py: greedy decoding speed of SmolLM2-135M with attention through pagedd against in-process attention.
# SPDX-License-Identifier: MIT
"""Tokens per second of greedy decoding of SmolLM2-135M-Instruct (paged.llama, float32) with
attention through pagedd (PagedAttention: per layer one APPEND and one DECODE of the whole
batch) against the same model attending in the process over contiguous keys and values
(LocalAttention: torch SDPA, or numpy), at each batch of --batches (one process decoding that
many sequences together) and with each count of --workers processes at batch 1, sharing one
daemon (or each attending alone). Every measurement runs in forked processes of a parent that
loaded the weights (numpy) and never touched torch or the daemon (a client of a cuda daemon
starts CUDA), so CUDA starts in the children; the processes of a measurement create or attach
to its pool, prefill, meet at a pipe barrier, then time --new-tokens steps.
Prints a table and, last, one JSON document (also written to --json).

From the build tree, with the build's pagedd and the staged package:
  make bench-model BENCH_MODEL_FLAGS='--device cuda'                 (a GPU machine)
  make bench-model BENCH_MODEL_FLAGS='--prompt-len 16 --new-tokens 4 --batches 1,2 --workers 2'
                                                                     (tiny, cpu backend, torch on the host)
"""

import argparse
import json
import os
import select
import sys
import time
import traceback

import numpy as np

import paged
import paged.llama as pl
from paged.daemon import Daemon

BARRIER_S = 600.0   # the longest a process waits for the others (model loading on a busy host)
WARMUP = 2          # decode steps before the timed ones


def parse(argv):
    """Returns the options of argv."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pagedd", default="pagedd", help="the pagedd program (default: pagedd on the PATH)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="where the model runs (default cpu)")
    p.add_argument("--backend", choices=["cpu", "cuda"], help="pagedd's backend (default: the device's)")
    p.add_argument("--ops", default="torch", choices=["torch", "numpy"], help="array library (default torch)")
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"], help="the pool's dtype (default f32)")
    p.add_argument("--prompt-len", type=int, default=128, help="prompt tokens per sequence (default 128)")
    p.add_argument("--new-tokens", type=int, default=128, help="timed decode steps (default 128)")
    p.add_argument("--batches", default="1,16", help="batch sizes of one process (default 1,16)")
    p.add_argument("--workers", default="4,16", help="worker process counts at batch 1 (default 4,16)")
    p.add_argument("--json", help="also write the JSON document to this file")
    a = p.parse_args(argv)
    a.backend = a.backend or a.device
    a.batches = [int(x) for x in a.batches.split(",") if x]
    a.workers = [int(x) for x in a.workers.split(",") if x]
    if a.ops == "numpy" and a.device != "cpu":
        p.error("--ops numpy runs on --device cpu only")
    if min(a.batches + a.workers + [a.prompt_len, a.new_tokens]) < 1:
        p.error("sizes must be at least 1")
    return a


def wait_byte(fd, what):
    """Reads one byte from fd within BARRIER_S; raises RuntimeError naming what when it does not come."""
    if not select.select([fd], [], [], BARRIER_S)[0]:
        raise RuntimeError("%s did not come within %g s" % (what, BARRIER_S))
    if not os.read(fd, 1):
        raise RuntimeError("%s will not come: the parent is gone" % what)


def measure(opts, bundle, socket, attention, index, batch, ctx):
    """One process of a measurement: batch sequences of random prompts (seeded by index), prefilled
    together, then WARMUP and opts.new_tokens greedy decode steps of the whole batch, timed after
    the barrier; reports {"ready"} then {"t0", "t1", "tokens"} as JSON lines. ctx holds the
    measurement's report and go pipes, its pool's name and size, and its process count."""
    ops = pl.make_ops(opts.ops, opts.device)
    if ops.name == "torch" and opts.device == "cpu":
        ops.torch.set_num_threads(max(1, (os.cpu_count() or 1) // ctx["procs"]))
    model = pl.model_from(bundle, ops)
    cap = opts.prompt_len + WARMUP + opts.new_tokens + 1
    client = None
    if attention == "pagedd":
        client = paged.connect(socket, name="bench-%d" % index)
        try:        # the first process creates the measurement's pool, the others attach
            pool = pl.create_pool(client, ctx["pool"], bundle.config, ctx["blocks"], 16, opts.dtype)
        except paged.ExistsError:
            pool = client.attach_pool(ctx["pool"])
        attn = pl.PagedAttention(pool, ops, model.scale)
    else:
        attn = pl.LocalAttention(ops, bundle.config, model.scale, max_seqs=batch, capacity=cap)
    gen = pl.Generator(model, attn)
    rng = np.random.default_rng(1000 + index)
    seqs = [attn.new_sequence() for _ in range(batch)]
    prompts = [[int(t) for t in rng.integers(100, bundle.config.vocab, opts.prompt_len)] for _ in seqs]
    logits = gen.step(seqs, prompts)

    def steps(n):
        """Runs n greedy decode steps of the batch; returns the last logits."""
        lg = logits
        for _ in range(n):
            lg = gen.step(seqs, [[t] for t in ops.argmax(lg)])
        return lg

    logits = steps(WARMUP)
    ops.synchronize()
    os.write(ctx["report"], (json.dumps({"ready": index}) + "\n").encode())
    wait_byte(ctx["go"], "the start")
    t0 = time.monotonic()
    steps(opts.new_tokens)
    ops.synchronize()
    t1 = time.monotonic()
    os.write(ctx["report"], (json.dumps({"t0": t0, "t1": t1, "tokens": batch * opts.new_tokens}) + "\n").encode())
    for s in seqs:
        attn.close(s)
    if client is not None:
        try:        # unlink semantics: the memory goes with the last process's detach
            client.destroy_pool(ctx["pool"])
        except paged.NotFoundError:
            pass
        client.close()


def run(opts, bundle, socket, attention, batch, procs):
    """Measures procs processes decoding batch sequences each with attention "pagedd" or
    "inproc"; returns the row of the table (a dict)."""
    pool = "bench-%s-%d-%d" % (attention, batch, procs)
    blocks = ((opts.prompt_len + WARMUP + opts.new_tokens + 1) // 16 + 2) * batch * procs + 8
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    pids = []
    for i in range(procs):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(report_r)
                os.close(go_w)
                measure(opts, bundle, socket, attention, i, batch,
                        {"report": report_w, "go": go_r, "pool": pool, "blocks": blocks, "procs": procs})
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(report_w)
    os.close(go_r)
    reports, buf = [], b""
    try:
        for phase, want in (("ready", procs), ("t0", procs)):
            got = [r for r in reports if phase in r]
            while len(got) < want:
                if not select.select([report_r], [], [], BARRIER_S)[0]:
                    raise RuntimeError("%s: the processes did not report within %g s" % (pool, BARRIER_S))
                chunk = os.read(report_r, 65536)
                if not chunk:
                    raise RuntimeError("%s: a process ended before it reported %s" % (pool, phase))
                buf += chunk
                *lines, buf = buf.split(b"\n")
                reports += [json.loads(line) for line in lines]
                got = [r for r in reports if phase in r]
            if phase == "ready":
                os.write(go_w, b"g" * procs)
    finally:
        os.close(go_w)
        os.close(report_r)
        statuses = [os.waitpid(pid, 0)[1] for pid in pids]
    if any(statuses):
        raise RuntimeError("%s: a process failed" % pool)
    done = [r for r in reports if "t0" in r]
    secs = max(r["t1"] for r in done) - min(r["t0"] for r in done)
    tokens = sum(r["tokens"] for r in done)
    return {"attention": attention, "batch": batch, "workers": procs, "tokens": tokens, "secs": secs,
            "tok_s": tokens / secs, "ms_per_step": 1000.0 * secs / opts.new_tokens}


def main(argv=None):
    """Runs every measurement; prints the table and the JSON; returns 0."""
    opts = parse(sys.argv[1:] if argv is None else argv)
    bundle = pl.load()
    plan = [(b, 1) for b in opts.batches] + [(1, w) for w in opts.workers]
    rows = []
    with Daemon(opts.pagedd, opts.backend) as daemon:
        for batch, procs in plan:
            for attention in ("inproc", "pagedd"):
                rows.append(run(opts, bundle, daemon.socket, attention, batch, procs))
                r = rows[-1]
                print("%-7s batch %3d  workers %3d  %9.1f tok/s  %8.2f ms/step" % (
                    attention, batch, procs, r["tok_s"], r["ms_per_step"]), file=sys.stderr, flush=True)
    print("\n%-8s %6s %8s %12s %12s %14s" % ("attention", "batch", "workers", "tok/s", "ms/step", "pagedd/inproc"))
    for r in rows:
        base = [x for x in rows
                if x["attention"] == "inproc" and (x["batch"], x["workers"]) == (r["batch"], r["workers"])]
        ratio = r["tok_s"] / base[0]["tok_s"] if base and r["attention"] == "pagedd" else None
        print("%-8s %6d %8d %12.1f %12.2f %14s" % (r["attention"], r["batch"], r["workers"], r["tok_s"],
                                                  r["ms_per_step"], "%.2f" % ratio if ratio else "-"))
    doc = {"model": "SmolLM2-135M-Instruct", "device": opts.device, "backend": opts.backend, "ops": opts.ops,
           "pool_dtype": opts.dtype, "model_dtype": "f32", "prompt_len": opts.prompt_len,
           "new_tokens": opts.new_tokens, "warmup": WARMUP, "rows": rows}
    text = json.dumps(doc, indent=1)
    print(text)
    if opts.json:
        with open(opts.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
